//! Host side of kernels/add_norm.cu: `layer_norm(x + bias + residual)` forward (one kernel a
//! step: the adds, the statistics and the affine map) and backward (the normalized input's
//! gradient, written also in x's dtype, then the weight, LayerNorm-bias and bias gradients as
//! column sums: row slices over many blocks, folded in slice order by a second pass), for
//! `ops::nn::add_layer_norm`.

use super::kern::{elem_ptr, kfunc, KFile};
use super::launch::{launch, Args};
use super::ops::{cast, contiguous, empty};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Device, Result};

/// The kernels' run-time dtype code of a float dtype (None: no kernel reads it).
fn code(dt: DType) -> Option<i32> {
    match dt {
        DType::F32 => Some(0),
        DType::BF16 => Some(1),
        DType::F16 => Some(2),
        DType::F64 => Some(3),
        _ => None,
    }
}

fn cont(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() { Ok(t.clone()) } else { contiguous(t) }
}

fn ptr(op: &str, t: &Option<Tensor>) -> Result<u64> {
    Ok(match t {
        Some(t) => elem_ptr(op, t)?.0,
        None => 0,
    })
}

/// The forward's results: `y` and `h` (the normalized input `x + bias + residual`) shaped like
/// `x` in dtype `out`, per-row `mean` and `rstd` (`[rows]`, dtype `out`).
pub struct AddNormOut {
    pub y: Tensor,
    pub h: Tensor,
    pub mean: Tensor,
    pub rstd: Tensor,
}

/// The dtypes of one call: `xb` the dtype `x + bias` is held in, `h` the dtype of
/// `x + bias + residual`, `out` the dtype it is normalized in (that of `y`, `w`, `lnb`).
#[derive(Clone, Copy, Debug)]
pub struct AddNormTypes {
    pub xb: DType,
    pub h: DType,
    pub out: DType,
}

/// `layer_norm(x + bias + residual)` over rows of `n` elements: `x` and `residual` of one shape,
/// `bias` (any float dtype), `w` and `lnb` (dtype `ty.out`) of `n` elements. None when the
/// kernel does not take these inputs (the caller runs the composite).
#[allow(clippy::too_many_arguments)]
pub fn forward(x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, w: Option<&Tensor>, lnb: Option<&Tensor>, n: usize, eps: f64, ty: AddNormTypes) -> Result<Option<AddNormOut>> {
    let op = "add_layer_norm";
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    let (Some(cx), Some(cr), Some(cxb), Some(ch), Some(_)) = (code(x.dtype()), code(residual.dtype()), code(ty.xb), code(ty.h), code(ty.out)) else {
        return Ok(None);
    };
    let cb = match bias {
        Some(b) => match code(b.dtype()) {
            Some(c) => c,
            None => return Ok(None),
        },
        None => 0,
    };
    if n == 0 || residual.shape() != x.shape() || residual.device() != x.device() || !x.numel().is_multiple_of(n) {
        return Ok(None);
    }
    if bias.is_some_and(|b| b.numel() != n || b.device() != x.device()) {
        return Ok(None);
    }
    if [w, lnb].into_iter().flatten().any(|p| p.numel() != n || p.dtype() != ty.out || p.device() != x.device()) {
        return Ok(None);
    }
    let (x, residual) = (cont(x)?, cont(residual)?);
    let (bias, w, lnb) = (bias.map(cont).transpose()?, w.map(cont).transpose()?, lnb.map(cont).transpose()?);
    let rows = x.numel() / n;
    let y = empty(op, ord, ty.out, x.shape())?;
    let h = empty(op, ord, ty.out, x.shape())?;
    let mean = empty(op, ord, ty.out, &[rows])?;
    let rstd = empty(op, ord, ty.out, &[rows])?;
    if rows > 0 {
        let (xp, dev) = elem_ptr(op, &x)?;
        let vec = vec4_applies(op, &x, &residual, bias.as_ref(), [w.as_ref(), lnb.as_ref(), Some(&h), Some(&y)], n, ty.out)?;
        let f = kfunc(&dev, KFile::AddNorm, ty.out, if vec { "add_ln_fwd_v4" } else { "add_ln_fwd" })?;
        let threads = if vec { vec4_threads(n) } else { row_threads(n) };
        let mut a = Args::new();
        a.push(xp).push(cx).push(elem_ptr(op, &residual)?.0).push(cr).push(ptr(op, &bias)?).push(cb).push(cxb).push(ch);
        a.push(ptr(op, &w)?).push(ptr(op, &lnb)?).push(elem_ptr(op, &h)?.0).push(elem_ptr(op, &y)?.0);
        a.push(elem_ptr(op, &mean)?.0).push(elem_ptr(op, &rstd)?.0).push(n as i64).push(eps);
        launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    }
    Ok(Some(AddNormOut { y, h, mean, rstd }))
}

/// The gradients of [`forward`]'s inputs; each is Some only where it was asked for.
#[derive(Default)]
pub struct AddNormGrads {
    pub x: Option<Tensor>,
    pub residual: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub w: Option<Tensor>,
    pub lnb: Option<Tensor>,
}

/// What [`backward`] computes: the dtype of each gradient wanted (x, residual, bias), and
/// whether the LayerNorm's weight and bias gradients are wanted (`w`, `lnb`).
#[derive(Clone, Copy, Default)]
pub struct AddNormNeeds {
    pub x: Option<DType>,
    pub residual: Option<DType>,
    pub bias: Option<DType>,
    pub w: bool,
    pub lnb: bool,
}

/// Most rows for the kernels' column sums (longer columns: the norm_bwd kernels and a sum).
/// GPT-2's 8192 rows (batch 8 x 1024) take the sliced sums.
const COLS_MAX_ROWS: usize = 16384;

/// Elements a thread holds in registers in the row kernels (`AL_MAXK` in add_norm.cu).
const ROW_MAXK: usize = 4;

/// Threads of a row kernel's block: enough for [`ROW_MAXK`] elements a thread (the register
/// path), at most 1024 (longer rows take the loop path).
fn row_threads(n: usize) -> u32 {
    (n.div_ceil(ROW_MAXK).div_ceil(32) * 32).clamp(32, 1024) as u32
}

/// Chunks of 4 elements a thread holds in `add_ln_fwd_v4` (`AL_VK` in add_norm.cu).
const VEC_CHUNKS: usize = 2;

/// Threads a row in `add_ln_fwd_v4`: `VEC_CHUNKS` chunks of 4 elements each, whole warps.
fn vec4_threads(n: usize) -> u32 {
    ((n / 4).div_ceil(VEC_CHUNKS).div_ceil(32) * 32).clamp(32, 1024) as u32
}

/// Whether `add_ln_fwd_v4` takes this call: rows of a multiple of 4 elements held in registers,
/// every operand aligned to 4 of its elements, no float64, and the residual and the bias in the
/// output dtype or float32 (the mixes the kernel is instantiated for).
fn vec4_applies(op: &str, x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, out_ops: [Option<&Tensor>; 4], n: usize, out: DType) -> Result<bool> {
    let half_or_f32 = |d: DType| matches!(d, DType::F32 | DType::BF16 | DType::F16);
    let in_t_or_f32 = |d: DType| d == out || d == DType::F32;
    if !n.is_multiple_of(4) || n > 4 * VEC_CHUNKS * 1024 || !half_or_f32(out) || !half_or_f32(x.dtype()) || !in_t_or_f32(residual.dtype()) {
        return Ok(false);
    }
    if bias.is_some_and(|b| !in_t_or_f32(b.dtype())) {
        return Ok(false);
    }
    for t in [Some(x), Some(residual), bias].into_iter().chain(out_ops).flatten() {
        if !elem_ptr(op, t)?.0.is_multiple_of(4 * t.dtype().size() as u64) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// How many row slices the column sums split into: about two blocks per SM over `bx` column
/// blocks, each slice at least 32 rows (two a warp), so that more loads are in flight than the
/// column blocks alone hold; 1 for short columns (then no second pass).
fn col_slices(rows: usize, bx: usize, sms: usize) -> usize {
    // and at most 512 rows a slice (32 a thread), so long columns are not one long chain
    (2 * sms.max(1)).div_ceil(bx.max(1)).max(rows.div_ceil(512)).min(rows.div_ceil(32)).max(1)
}

/// The backward of [`forward`] from its saved `h`, `mean`, `rstd` and the output gradient `g`
/// (dtype of `h`). `gh`: a gradient of `h` itself where `h` is an output too (the residual
/// stream of a pre-LayerNorm block), added to the norm's gradient. None when there is no kernel
/// for these inputs.
#[allow(clippy::too_many_arguments)]
pub fn backward(g: &Tensor, gh: Option<&Tensor>, h: &Tensor, mean: &Tensor, rstd: &Tensor, w: Option<&Tensor>, n: usize, need: AddNormNeeds) -> Result<Option<AddNormGrads>> {
    let op = "add_layer_norm_backward";
    let dt = h.dtype();
    let Device::Cuda(ord) = h.device() else { return Ok(None) };
    if code(dt).is_none() || n == 0 || g.shape() != h.shape() || g.dtype() != dt || g.device() != h.device() {
        return Ok(None);
    }
    if gh.is_some_and(|t| t.shape() != h.shape() || t.dtype() != dt || t.device() != h.device()) {
        return Ok(None);
    }
    let gh = gh.map(cont).transpose()?;
    let rows = h.numel() / n;
    if rows == 0 || mean.numel() != rows || rstd.numel() != rows {
        return Ok(None);
    }
    for c in [need.x, need.residual, need.bias].into_iter().flatten() {
        if code(c).is_none() {
            return Ok(None);
        }
    }
    let (g, h, mean, rstd, w) = (cont(g)?, cont(h)?, cont(mean)?, cont(rstd)?, w.map(cont).transpose()?);
    let (gp, dev) = elem_ptr(op, &g)?;
    let (hp, mp, rp) = (elem_ptr(op, &h)?.0, elem_ptr(op, &mean)?.0, elem_ptr(op, &rstd)?.0);
    let mut out = AddNormGrads::default();
    // dh in h's dtype (for the residual and the bias sums), and x's gradient in its own dtype
    // from the same pass when that differs
    let need_dh = need.residual.is_some() || need.bias.is_some() || need.x == Some(dt);
    let dh = if need_dh { Some(empty(op, ord, dt, h.shape())?) } else { None };
    let dx_other = match need.x {
        Some(xd) if xd != dt => Some(empty(op, ord, xd, h.shape())?),
        _ => None,
    };
    if dh.is_some() || dx_other.is_some() {
        let f = kfunc(&dev, KFile::AddNorm, dt, "add_ln_bwd_dx")?;
        let threads = row_threads(n);
        let cdx = dx_other.as_ref().and_then(|t| code(t.dtype())).unwrap_or(0);
        let mut a = Args::new();
        a.push(gp).push(hp).push(mp).push(rp).push(ptr(op, &w)?).push(ptr(op, &gh)?).push(ptr(op, &dh)?).push(ptr(op, &dx_other)?).push(cdx).push(n as i64);
        launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    }
    if need.w || need.lnb || need.bias.is_some() {
        if rows <= COLS_MAX_ROWS {
            let dw = if need.w { Some(empty(op, ord, dt, &[n])?) } else { None };
            let dlnb = if need.lnb { Some(empty(op, ord, dt, &[n])?) } else { None };
            let dbias = match need.bias {
                Some(bd) => Some(empty(op, ord, bd, &[n])?),
                None => None,
            };
            let f = kfunc(&dev, KFile::AddNorm, dt, "add_ln_bwd_cols")?;
            let cb = dbias.as_ref().and_then(|t| code(t.dtype())).unwrap_or(0);
            let bx = n.div_ceil(32);
            let slices = col_slices(rows, bx, dev.sm_count as usize);
            let chunk = rows.div_ceil(slices);
            let slices = rows.div_ceil(chunk);
            // the slices' partial sums in the kernels' accumulator dtype (f64 for double, else f32)
            let part = if slices > 1 { Some(empty(op, ord, if dt == DType::F64 { DType::F64 } else { DType::F32 }, &[slices * 3 * n])?) } else { None };
            let (dwp, dlnbp, dbp) = (ptr(op, &dw)?, ptr(op, &dlnb)?, ptr(op, &dbias)?);
            let mut a = Args::new();
            a.push(gp).push(hp).push(mp).push(rp).push(if dbias.is_some() { ptr(op, &dh)? } else { 0 });
            a.push(dwp).push(dlnbp).push(dbp).push(cb).push(rows as i64).push(n as i64).push(ptr(op, &part)?).push(chunk as i64);
            launch(&dev, op, f, (bx as u32, slices as u32, 1), (32, 16, 1), 0, &mut a)?;
            if let Some(pt) = &part {
                let f = kfunc(&dev, KFile::AddNorm, dt, "add_ln_bwd_fin")?;
                let mut a = Args::new();
                a.push(elem_ptr(op, pt)?.0).push(slices as i64).push(dwp).push(dlnbp).push(dbp).push(cb).push(n as i64);
                launch(&dev, op, f, ((3 * n).div_ceil(256) as u32, 1, 1), (256, 1, 1), 0, &mut a)?;
            }
            (out.w, out.lnb, out.bias) = (dw, dlnb, dbias);
        } else {
            if need.w || need.lnb {
                let Some((_, dw, dlnb)) = super::norm_bwd::layer_norm_backward(&g, &h, &mean, &rstd, w.as_ref(), n, false, true)? else { return Ok(None) };
                out.w = if need.w { dw } else { None };
                out.lnb = if need.lnb { dlnb } else { None };
            }
            if let (Some(bd), Some(dh)) = (need.bias, &dh) {
                let s = dh.reshape(&[rows as i64, n as i64])?.sum_dims(Some(&[0]), false, None)?;
                out.bias = Some(if bd == dt { s } else { cast(&s, bd)? });
            }
        }
    }
    if let Some(rd) = need.residual {
        if let Some(dh) = &dh {
            out.residual = Some(if rd == dt { dh.clone() } else { cast(dh, rd)? });
        }
    }
    if need.x.is_some() {
        out.x = dx_other.or_else(|| dh.clone());
    }
    Ok(Some(out))
}

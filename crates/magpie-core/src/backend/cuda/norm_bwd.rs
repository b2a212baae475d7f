//! Host side of kernels/norm_bwd.cu: layer_norm's backward on CUDA from the forward kernel's
//! per-row statistics: dx (a block per row) and the weight / bias gradients (column sums).

use super::kern::{elem_ptr, kfunc, KFile};
use super::launch::{launch, Args};
use super::ops::{contiguous, empty};
use super::softmax::supported;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Device, Result};

/// Most rows summed by one slice of `ln_bwd_wb` (BERT's 512 tokens a step).
const ONE_SLICE_ROWS: usize = 1024;

fn cont(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() { Ok(t.clone()) } else { contiguous(t) }
}

/// `(dx, dw, db)` of layer norm over rows of `n` elements: `g` and `x` shaped alike, `mean` and
/// `rstd` with one value per row (any shape), `w` of `n` elements or None. `dx` when `need_x`,
/// `dw` and `db` (shaped `[n]`) when `need_wb`. None when there is no kernel for these inputs.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward(
    g: &Tensor,
    x: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    w: Option<&Tensor>,
    n: usize,
    need_x: bool,
    need_wb: bool,
) -> Result<Option<(Option<Tensor>, Option<Tensor>, Option<Tensor>)>> {
    let op = "layer_norm_backward";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !supported(dt) || n == 0 || g.shape() != x.shape() {
        return Ok(None);
    }
    let rows = x.numel() / n;
    for t in [Some(g), Some(mean), Some(rstd), w].into_iter().flatten() {
        if t.device() != x.device() || t.dtype() != dt {
            return Ok(None);
        }
    }
    if mean.numel() != rows || rstd.numel() != rows || w.is_some_and(|w| w.numel() != n) {
        return Ok(None);
    }
    let (g, x, mean, rstd) = (cont(g)?, cont(x)?, cont(mean)?, cont(rstd)?);
    let w = w.map(cont).transpose()?;
    let (gp, dev) = elem_ptr(op, &g)?;
    let (xp, mp, rp) = (elem_ptr(op, &x)?.0, elem_ptr(op, &mean)?.0, elem_ptr(op, &rstd)?.0);
    let dx = if need_x {
        let dx = empty(op, ord, dt, x.shape())?;
        if rows > 0 {
            let f = kfunc(&dev, KFile::NormBwd, dt, "ln_bwd_dx")?;
            let wp = match &w {
                Some(w) => elem_ptr(op, w)?.0,
                None => 0,
            };
            let threads = (n.div_ceil(4).div_ceil(32) * 32).clamp(32, 1024) as u32;
            let mut a = Args::new();
            a.push(gp).push(xp).push(mp).push(rp).push(wp).push(elem_ptr(op, &dx)?.0).push(n as i64);
            launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
        }
        Some(dx)
    } else {
        None
    };
    let (dw, db) = if need_wb {
        let dw = empty(op, ord, dt, &[n])?;
        let db = empty(op, ord, dt, &[n])?;
        if rows == 0 {
            super::ops::fill(&dw, crate::Scalar::Float(0.0))?;
            super::ops::fill(&db, crate::Scalar::Float(0.0))?;
        } else {
            let f = kfunc(&dev, KFile::NormBwd, dt, "ln_bwd_wb")?;
            let cols = n.div_ceil(32);
            // enough row slices to give every SM a few blocks, each slice at least 64 rows; up to
            // ONE_SLICE_ROWS rows one slice (no partial sums, so one launch instead of three)
            let slices = if rows <= ONE_SLICE_ROWS { 1 } else { (dev.sm_count as usize * 4).div_ceil(cols).min(rows.div_ceil(64)).clamp(1, 65535) };
            let per = rows.div_ceil(slices);
            let slices = rows.div_ceil(per);
            let acc = if dt == DType::F64 { DType::F64 } else { DType::F32 };
            let (pw, pb) = if slices > 1 { (Some(empty(op, ord, acc, &[slices, n])?), Some(empty(op, ord, acc, &[slices, n])?)) } else { (None, None) };
            let ptr = |t: &Option<Tensor>| -> Result<u64> { Ok(if let Some(t) = t { elem_ptr(op, t)?.0 } else { 0 }) };
            let mut a = Args::new();
            a.push(gp).push(xp).push(mp).push(rp).push(elem_ptr(op, &dw)?.0).push(elem_ptr(op, &db)?.0);
            a.push(ptr(&pw)?).push(ptr(&pb)?).push(rows as i64).push(n as i64).push(per as i64);
            launch(&dev, op, f, (cols as u32, slices as u32, 1), (32, 16, 1), 0, &mut a)?;
            if let (Some(pw), Some(pb)) = (pw, pb) {
                let sum = |p: &Tensor, out: &Tensor| -> Result<()> {
                    let s = super::reduce::reduce(p, &[0], super::reduce::RedOp::Sum, 1.0, &[n])?
                        .ok_or_else(|| crate::Error::unsupported(op, "no CUDA sum for the partial sums"))?;
                    super::ops::copy_into(out, &s)
                };
                sum(&pw, &dw)?;
                sum(&pb, &db)?;
            }
        }
        (Some(dw), Some(db))
    } else {
        (None, None)
    };
    Ok(Some((dx, dw, db)))
}

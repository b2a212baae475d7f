//! Host side of the reduction kernels (kernels/reduce.cu): folds the input's dims into kept
//! (output) dims and reduced dims, picks the row kernel (reduced elements contiguous) or the
//! general one (column reductions, strided views), and splits long reductions over several
//! blocks with a deterministic second pass when there are too few outputs to fill the GPU.

use super::kern::{coalesce, elem_ptr, kfunc, KDims, KFile};
use super::launch::{launch, Args};
use super::ops::{contiguous, empty, full};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Device, Result};

pub use crate::ops::reduce::RedOp;

/// The (row, general, second pass) kernels of an operation.
fn names(op: RedOp) -> (&'static str, &'static str, &'static str) {
    match op {
        RedOp::Sum => ("rrow_sum", "rgen_sum", "rfin_sum"),
        RedOp::Prod => ("rrow_prod", "rgen_prod", "rfin_prod"),
        RedOp::Max => ("rrow_max", "rgen_max", "rfin_max"),
        RedOp::Min => ("rrow_min", "rgen_min", "rfin_min"),
    }
}

/// True for the dtypes the reduction kernels are built for.
pub fn supported(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8 | DType::Bool)
}

/// The dtype partial results are kept in (`Ty<T>::acc`).
fn acc_dtype(d: DType) -> DType {
    match d {
        DType::F64 => DType::F64,
        d if d.is_float() => DType::F32,
        _ => DType::I64,
    }
}

/// How a reduction walks its input.
struct Plan {
    kept: Vec<(usize, usize)>,
    red: Vec<(usize, usize)>,
    outer: usize,
    inner: usize,
}

fn plan(t: &Tensor, dims: &[usize]) -> Plan {
    let (sh, st) = (t.shape(), t.strides());
    let kept: Vec<(usize, usize)> = (0..t.ndim()).filter(|d| !dims.contains(d)).map(|d| (sh[d], st[d])).collect();
    let red: Vec<(usize, usize)> = (0..t.ndim()).filter(|d| dims.contains(d)).map(|d| (sh[d], st[d])).collect();
    let outer = kept.iter().map(|p| p.0).product();
    let inner = red.iter().map(|p| p.0).product();
    Plan { kept: coalesce(&kept), red: coalesce(&red), outer, inner }
}

/// `op` over `dims` of the CUDA tensor `t`, each result times `scale` (means) and stored as
/// `t`'s dtype in a new contiguous tensor of `out_shape`. None when the dtype has no kernel.
/// Empty reductions give the identity (the caller rejects max / min of empty dims first).
pub fn reduce(t: &Tensor, dims: &[usize], op: RedOp, scale: f64, out_shape: &[usize]) -> Result<Option<Tensor>> {
    reduce_into(t, dims, op, scale, out_shape, false)
}

/// The sum (or another `op`) over `dims` like [`reduce`] without a scale, stored in the
/// accumulation dtype (float32 for f16/bf16/f32 inputs, float64 for f64, int64 for integers)
/// instead of being rounded to `t`'s dtype: one pass for what `reduce` and a cast up do in two
/// (a 16-bit bias gradient kept in float32). None when the dtype has no kernel.
///
/// ```no_run
/// use magpie_core::backend::cuda::reduce::{reduce_acc, RedOp};
/// use magpie_core::{DType, Device, Tensor};
/// let g = Tensor::from_vec(vec![1f32; 6], &[2, 3])?.to_dtype(DType::BF16)?.to_device(Device::Cuda(0))?;
/// if let Some(col) = reduce_acc(&g, &[0], RedOp::Sum, &[3])? {
///     assert_eq!(col.dtype(), DType::F32);
/// }
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn reduce_acc(t: &Tensor, dims: &[usize], op: RedOp, out_shape: &[usize]) -> Result<Option<Tensor>> {
    // the single-pass kernels store the accumulator unscaled: only a scale of 1 is offered
    reduce_into(t, dims, op, 1.0, out_shape, true)
}

fn reduce_into(t: &Tensor, dims: &[usize], op: RedOp, scale: f64, out_shape: &[usize], acc_out: bool) -> Result<Option<Tensor>> {
    let name = "reduce";
    let dt = t.dtype();
    // the dtype the results are stored in, and the kernels' flag for "store the accumulator"
    let odt = if acc_out { acc_dtype(dt) } else { dt };
    let to_acc_out = acc_out as i32;
    let Device::Cuda(ord) = t.device() else { return Ok(None) };
    if !supported(dt) {
        return Ok(None);
    }
    let mut p = plan(t, dims);
    if p.outer == 0 {
        return Ok(Some(empty(name, ord, odt, out_shape)?));
    }
    if p.inner == 0 {
        let id = match op {
            RedOp::Prod => Scalar::Int(1),
            _ => Scalar::Int(0),
        };
        return Ok(Some(full(ord, out_shape, id, odt)?));
    }
    let mut src = t.clone();
    if p.kept.len() > KDims::MAXN || p.red.len() > KDims::MAXN {
        src = contiguous(t)?;
        p = plan(&src, dims);
        if p.kept.len() > KDims::MAXN || p.red.len() > KDims::MAXN {
            return Ok(None);
        }
    }
    let (ptr, dev) = elem_ptr(name, &src)?;
    let out = empty(name, ord, odt, out_shape)?;
    let (optr, _) = elem_ptr(name, &out)?;
    let (krow, kgen, kfin) = names(op);
    let sms = dev.sm_count as usize;
    let kept = KDims::new(&p.kept).unwrap_or_else(KDims::empty);
    let row = p.red.len() == 1 && p.red[0].1 == 1;
    if row {
        let n = p.inner;
        let vsz = 16 / dt.size();
        let vec = ptr % 16 == 0 && n % vsz == 0 && p.kept.iter().all(|&(_, s)| s % vsz == 0);
        // a warp per row up to 32 KB rows: enough loads in flight, no block barriers
        let warp = n * dt.size() <= 32768;
        // split long rows over blocks when there are too few rows to fill the GPU
        let split = if warp { 1 } else { (4 * sms).div_ceil(p.outer).min(n / 4096).clamp(1, 1024) };
        let f = kfunc(&dev, KFile::Reduce, dt, krow)?;
        let part = if split > 1 { Some(empty(name, ord, acc_dtype(dt), &[split * p.outer])?) } else { None };
        let dst = match &part {
            Some(pt) => elem_ptr(name, pt)?.0,
            None => optr,
        };
        let mut a = Args::new();
        a.push(ptr).push(dst).push(kept).push(p.outer as i64).push(n as i64).push(if warp { 0i32 } else { 1 }).push(vec as i32).push((part.is_some() as i32) | to_acc_out).push(scale);
        let grid = if warp { (p.outer.div_ceil(8) as u32, 1, 1) } else { (p.outer as u32, split as u32, 1) };
        launch(&dev, name, f, grid, (256, 1, 1), 0, &mut a)?;
        if let Some(pt) = &part {
            finish(&dev, odt, kfin, pt, optr, p.outer, split, scale)?;
        }
        return Ok(Some(out));
    }
    let vsz = 16 / dt.size();
    let col = p.red.len() == 1 && p.kept.len() == 1 && p.kept[0].1 == 1;
    if col && acc_out && op == RedOp::Sum && dt.size() == 2 && dt.is_float() && p.outer.is_multiple_of(2) && ptr.is_multiple_of(4) && p.red[0].1.is_multiple_of(2) && (p.inner <= 2048 || p.outer.div_ceil(64) >= 2 * sms) {
        // a 16-bit column sum kept in float32 (a bias gradient): one launch, all rows a block
        let f = kfunc(&dev, KFile::Reduce, dt, "rcol1_sum")?;
        let mut a = Args::new();
        a.push(ptr).push(optr).push(p.red[0].1 as i64).push(p.outer as i64).push(p.inner as i64);
        launch(&dev, name, f, (p.outer.div_ceil(64) as u32, 1, 1), (512, 1, 1), 0, &mut a)?;
        return Ok(Some(out));
    }
    if col && p.outer.is_multiple_of(vsz) && ptr.is_multiple_of(16) && p.red[0].1.is_multiple_of(vsz) {
        // column reduction over contiguous outputs: 16-byte loads across the outputs
        let (krow, _, _) = names(op);
        let kcol = match krow {
            "rrow_sum" => "rcol_sum",
            "rrow_prod" => "rcol_prod",
            "rrow_max" => "rcol_max",
            _ => "rcol_min",
        };
        let bx = p.outer.div_ceil(32 * vsz);
        let split = if bx >= 2 * sms { 1 } else { (4 * sms).div_ceil(bx).min(p.inner / 128).clamp(1, 65535) };
        let f = kfunc(&dev, KFile::Reduce, dt, kcol)?;
        let part = if split > 1 { Some(empty(name, ord, acc_dtype(dt), &[split * p.outer])?) } else { None };
        let dst = match &part {
            Some(pt) => elem_ptr(name, pt)?.0,
            None => optr,
        };
        let mut a = Args::new();
        a.push(ptr).push(dst).push(p.red[0].1 as i64).push(p.outer as i64).push(p.inner as i64).push((part.is_some() as i32) | to_acc_out).push(scale);
        launch(&dev, name, f, (bx as u32, split as u32, 1), (256, 1, 1), 0, &mut a)?;
        if let Some(pt) = &part {
            finish(&dev, odt, kfin, pt, optr, p.outer, split, scale)?;
        }
        return Ok(Some(out));
    }
    let red = KDims::new(&p.red).unwrap_or_else(KDims::empty);
    let bx = p.outer.div_ceil(32);
    let split = if bx >= 2 * sms { 1 } else { (4 * sms).div_ceil(bx).min(p.inner.div_ceil(8 * 32)).clamp(1, 65535) };
    let f = kfunc(&dev, KFile::Reduce, dt, kgen)?;
    let part = if split > 1 { Some(empty(name, ord, acc_dtype(dt), &[split * p.outer])?) } else { None };
    let dst = match &part {
        Some(pt) => elem_ptr(name, pt)?.0,
        None => optr,
    };
    let mut a = Args::new();
    a.push(ptr).push(dst).push(kept).push(red).push(p.outer as i64).push(p.inner as i64).push((part.is_some() as i32) | to_acc_out).push(scale);
    launch(&dev, name, f, (bx as u32, split as u32, 1), (256, 1, 1), 0, &mut a)?;
    if let Some(pt) = &part {
        finish(&dev, odt, kfin, pt, optr, p.outer, split, scale)?;
    }
    Ok(Some(out))
}

/// The second pass: folds `split` partials per output, stored as `dt` (the kernel of the
/// accumulation dtype itself stores the partials' dtype unrounded).
#[allow(clippy::too_many_arguments)]
fn finish(dev: &super::device::CudaDevice, dt: DType, kfin: &'static str, part: &Tensor, optr: u64, outer: usize, split: usize, scale: f64) -> Result<()> {
    let f = kfunc(dev, KFile::Reduce, dt, kfin)?;
    let mut a = Args::new();
    a.push(elem_ptr("reduce", part)?.0).push(optr).push(outer as i64).push(split as i32).push(scale);
    launch(dev, "reduce", f, (outer.div_ceil(256) as u32, 1, 1), (256, 1, 1), 0, &mut a)
}

/// argmax (`max` true) or argmin over `dims` of a CUDA tensor: the index within the reduced
/// elements (row-major over `dims`; the flat index when all dims are reduced), as i64, and the
/// values when `values` is set. First index wins ties; NaN is the extreme. None when the
/// dtype has no kernel. The caller rejects empty reductions.
pub fn arg_reduce(t: &Tensor, dims: &[usize], max: bool, out_shape: &[usize], values: bool) -> Result<Option<(Option<Tensor>, Tensor)>> {
    let name = if max { "argmax" } else { "argmin" };
    let dt = t.dtype();
    let Device::Cuda(ord) = t.device() else { return Ok(None) };
    if !supported(dt) {
        return Ok(None);
    }
    let mut p = plan(t, dims);
    let idx = empty(name, ord, DType::I64, out_shape)?;
    let vals = if values { Some(empty(name, ord, dt, out_shape)?) } else { None };
    if p.outer == 0 {
        return Ok(Some((vals, idx)));
    }
    let mut src = t.clone();
    if p.kept.len() > KDims::MAXN || p.red.len() > KDims::MAXN {
        src = contiguous(t)?;
        p = plan(&src, dims);
        if p.kept.len() > KDims::MAXN || p.red.len() > KDims::MAXN {
            return Ok(None);
        }
    }
    let (ptr, dev) = elem_ptr(name, &src)?;
    let iptr = elem_ptr(name, &idx)?.0;
    let vptr = match &vals {
        Some(v) => elem_ptr(name, v)?.0,
        None => 0u64,
    };
    let kept = KDims::new(&p.kept).unwrap_or_else(KDims::empty);
    let row = p.red.len() <= 1 && p.red.first().is_none_or(|r| r.1 == 1);
    let mut a = Args::new();
    if row {
        let warp = p.inner <= 1024;
        let f = kfunc(&dev, KFile::Reduce, dt, if max { "arow_max" } else { "arow_min" })?;
        a.push(ptr).push(vptr).push(iptr).push(kept).push(p.outer as i64).push(p.inner as i64).push(if warp { 0i32 } else { 1 });
        let grid = if warp { p.outer.div_ceil(8) as u32 } else { p.outer as u32 };
        launch(&dev, name, f, (grid, 1, 1), (256, 1, 1), 0, &mut a)?;
    } else {
        let red = KDims::new(&p.red).unwrap_or_else(KDims::empty);
        let f = kfunc(&dev, KFile::Reduce, dt, if max { "agen_max" } else { "agen_min" })?;
        a.push(ptr).push(vptr).push(iptr).push(kept).push(red).push(p.outer as i64).push(p.inner as i64);
        launch(&dev, name, f, (p.outer.div_ceil(32) as u32, 1, 1), (256, 1, 1), 0, &mut a)?;
    }
    Ok(Some((vals, idx)))
}

//! Host side of kernels/norm.cu: layer_norm and rms_norm forward over the trailing `n`
//! elements of each row of a CUDA tensor, a block per row, statistics in f32 (f64 for double).

use super::kern::{elem_ptr, kfunc, KFile};
use super::launch::{launch, Args};
use super::ops::{contiguous, empty};
use super::softmax::{row_launch, supported};
use crate::tensor::Tensor;
use crate::{Device, Result};

/// The outputs of [`forward`]: `y` shaped like `x`, and per-row mean and rstd (`[rows]`, in
/// `x`'s dtype; the mean is 0 for rms_norm).
pub struct NormOut {
    pub y: Tensor,
    pub mean: Tensor,
    pub rstd: Tensor,
}

/// layer_norm (`rms` false: `(x - mean) * rstd * w + b`) or rms_norm (`x * rstd * w`) over rows of
/// `n` elements. `w` and `b` must have `n` elements and `x`'s dtype. None when there is no
/// kernel for these inputs (the caller takes the composite path).
pub fn forward(x: &Tensor, n: usize, w: Option<&Tensor>, b: Option<&Tensor>, eps: f64, rms: bool) -> Result<Option<NormOut>> {
    let op = if rms { "rms_norm" } else { "layer_norm" };
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !supported(dt) || n == 0 {
        return Ok(None);
    }
    for p in [w, b].into_iter().flatten() {
        if p.dtype() != dt || p.numel() != n || p.device() != x.device() {
            return Ok(None);
        }
    }
    let x = if x.is_contiguous() { x.clone() } else { contiguous(x)? };
    let cont = |t: Option<&Tensor>| -> Result<Option<Tensor>> {
        Ok(match t {
            Some(t) if t.is_contiguous() => Some(t.clone()),
            Some(t) => Some(contiguous(t)?),
            None => None,
        })
    };
    let (w, b) = (cont(w)?, cont(b)?);
    let rows = x.numel() / n;
    let y = empty(op, ord, dt, x.shape())?;
    let mean = empty(op, ord, dt, &[rows])?;
    let rstd = empty(op, ord, dt, &[rows])?;
    if rows == 0 {
        return Ok(Some(NormOut { y, mean, rstd }));
    }
    let (xp, dev) = elem_ptr(op, &x)?;
    let ptr = |t: &Option<Tensor>| -> Result<u64> {
        Ok(match t {
            Some(t) => elem_ptr(op, t)?.0,
            None => 0,
        })
    };
    let (wp, bp) = (ptr(&w)?, ptr(&b)?);
    // the 16-byte path needs w and b aligned too
    let (mut variant, threads) = row_launch(xp, n, dt);
    if variant == "vec" && (wp % 16 != 0 || bp % 16 != 0) {
        variant = if row_launch(1, n, dt).0 == "loop" { "loop" } else { "reg" };
    }
    let kname = match variant {
        "vec" => "norm_fwd_vec",
        "reg" => "norm_fwd_reg",
        _ => "norm_fwd_loop",
    };
    // the scalar register path holds MAXV elements per thread: recompute its block size
    let threads = if variant == "reg" { row_launch(1, n, dt).1 } else { threads };
    let f = kfunc(&dev, KFile::Norm, dt, kname)?;
    let mut a = Args::new();
    a.push(xp).push(wp).push(bp).push(elem_ptr(op, &y)?.0).push(elem_ptr(op, &mean)?.0).push(elem_ptr(op, &rstd)?.0).push(n as i64).push(eps).push(rms as i32);
    launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    Ok(Some(NormOut { y, mean, rstd }))
}

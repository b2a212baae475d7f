//! Host side of kernels/loss.cu: cross_entropy with class-index targets on CUDA logits
//! `[rows, c]`, forward (per-row loss, log-sum-exp and the count of rows that are not ignored)
//! and backward (`softmax(x) - onehot(t)` scaled), without host synchronization.

use super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile};
use super::launch::{launch, Args};
use super::ops::{cast, contiguous, empty};
use super::softmax::supported;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Device, Result};

/// The forward's outputs, each `[rows]` in the logits' dtype.
pub struct CeForward {
    /// `logsumexp(x[r]) - x[r, t[r]]`; 0 on ignored rows, NaN for an out-of-range target.
    pub loss: Tensor,
    /// `logsumexp(x[r])` (the backward's input).
    pub lse: Tensor,
    /// 1 for rows that count, 0 for ignored ones.
    pub valid: Tensor,
}

fn cont(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() { Ok(t.clone()) } else { contiguous(t) }
}

/// Targets as contiguous i64 on `x`'s device, or None when they are elsewhere.
fn targets(x: &Tensor, t: &Tensor) -> Result<Option<Tensor>> {
    if t.device() != x.device() || !t.dtype().is_int() || t.ndim() != 1 || t.shape()[0] != x.shape()[0] {
        return Ok(None);
    }
    let t = if t.dtype() != DType::I64 { cast(t, DType::I64)? } else { t.clone() };
    Ok(Some(cont(&t)?))
}

/// The forward over `x [rows, c]` (CUDA, float) and targets `t [rows]` (integer, same device);
/// None when there is no kernel for these inputs.
pub fn cross_entropy_forward(x: &Tensor, t: &Tensor, ignore_index: i64) -> Result<Option<CeForward>> {
    let op = "cross_entropy";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !supported(dt) || x.ndim() != 2 || x.shape()[1] == 0 {
        return Ok(None);
    }
    let Some(t) = targets(x, t)? else { return Ok(None) };
    let (rows, c) = (x.shape()[0], x.shape()[1]);
    let x = cont(x)?;
    let loss = empty(op, ord, dt, &[rows])?;
    let lse = empty(op, ord, dt, &[rows])?;
    let valid = empty(op, ord, dt, &[rows])?;
    if rows > 0 {
        let (xp, dev) = elem_ptr(op, &x)?;
        let f = kfunc(&dev, KFile::Loss, dt, "ce_fwd")?;
        let threads = (c.div_ceil(4).div_ceil(32) * 32).clamp(32, 1024) as u32;
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &t)?.0).push(elem_ptr(op, &loss)?.0).push(elem_ptr(op, &lse)?.0).push(elem_ptr(op, &valid)?.0);
        a.push(c as i64).push(ignore_index);
        launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    }
    Ok(Some(CeForward { loss, lse, valid }))
}

/// The gradient for `x`: `(softmax(x) - onehot(t)) * g[r] / count` per row, 0 on ignored rows.
/// `g` is the upstream gradient (0-d, or `[rows]` for reduction 'none'); `count` (0-d) divides
/// for reduction 'mean'. None when there is no kernel for these inputs.
pub fn cross_entropy_backward(x: &Tensor, t: &Tensor, lse: &Tensor, g: &Tensor, count: Option<&Tensor>, ignore_index: i64) -> Result<Option<Tensor>> {
    let op = "cross_entropy_backward";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !supported(dt) || x.ndim() != 2 {
        return Ok(None);
    }
    let (rows, c) = (x.shape()[0], x.shape()[1]);
    let gstride = match g.numel() {
        1 if g.ndim() == 0 => 0i64,
        n if n == rows && g.ndim() == 1 => 1,
        _ => return Ok(None),
    };
    for u in [Some(lse), Some(g), count].into_iter().flatten() {
        if u.device() != x.device() {
            return Ok(None);
        }
    }
    let Some(t) = targets(x, t)? else { return Ok(None) };
    let as_dt = |u: &Tensor| -> Result<Tensor> { cont(&if u.dtype() != dt { cast(u, dt)? } else { u.clone() }) };
    let (x, lse, g) = (cont(x)?, as_dt(lse)?, as_dt(g)?);
    let count = count.map(as_dt).transpose()?;
    let dx = empty(op, ord, dt, &[rows, c])?;
    let total = rows * c;
    if total > 0 {
        let (xp, dev) = elem_ptr(op, &x)?;
        let f = kfunc(&dev, KFile::Loss, dt, "ce_bwd")?;
        let cp = match &count {
            Some(u) => elem_ptr(op, u)?.0,
            None => 0,
        };
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &t)?.0).push(elem_ptr(op, &lse)?.0).push(elem_ptr(op, &g)?.0).push(gstride).push(cp);
        a.push(elem_ptr(op, &dx)?.0).push(rows as i64).push(c as i64).push(ignore_index);
        launch(&dev, op, f, (grid_stride_blocks(&dev, total), 1, 1), (256, 1, 1), 0, &mut a)?;
    }
    Ok(Some(dx))
}

/// [`cross_entropy_forward`] for f16/bf16 logits with float32 outputs: the loss of the logits cast
/// to float32 (what autocast runs), computed without that cast's `[rows, c]` float32 copy. None
/// for other inputs.
pub fn cross_entropy_forward_f32(x: &Tensor, t: &Tensor, ignore_index: i64) -> Result<Option<CeForward>> {
    let op = "cross_entropy";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !matches!(dt, DType::F16 | DType::BF16) || x.ndim() != 2 || x.shape()[1] == 0 {
        return Ok(None);
    }
    let Some(t) = targets(x, t)? else { return Ok(None) };
    let (rows, c) = (x.shape()[0], x.shape()[1]);
    let x = cont(x)?;
    let loss = empty(op, ord, DType::F32, &[rows])?;
    let lse = empty(op, ord, DType::F32, &[rows])?;
    let valid = empty(op, ord, DType::F32, &[rows])?;
    if rows > 0 {
        let (xp, dev) = elem_ptr(op, &x)?;
        let f = kfunc(&dev, KFile::Loss, dt, "ce_fwd_f32")?;
        let threads = (c.div_ceil(4).div_ceil(32) * 32).clamp(32, 1024) as u32;
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &t)?.0).push(elem_ptr(op, &loss)?.0).push(elem_ptr(op, &lse)?.0).push(elem_ptr(op, &valid)?.0);
        a.push(c as i64).push(ignore_index);
        launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    }
    Ok(Some(CeForward { loss, lse, valid }))
}

/// The gradient for the f16/bf16 logits of [`cross_entropy_forward_f32`] (float32 `lse`, `g`,
/// `count`), in the logits' dtype: the float32 gradient rounded once, as autocast's cast back
/// gives it, without the float32 `[rows, c]` gradient in between. None for other inputs.
pub fn cross_entropy_backward_f32(x: &Tensor, t: &Tensor, lse: &Tensor, g: &Tensor, count: Option<&Tensor>, ignore_index: i64) -> Result<Option<Tensor>> {
    let op = "cross_entropy_backward";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !matches!(dt, DType::F16 | DType::BF16) || x.ndim() != 2 {
        return Ok(None);
    }
    let (rows, c) = (x.shape()[0], x.shape()[1]);
    let gstride = match g.numel() {
        1 if g.ndim() == 0 => 0i64,
        n if n == rows && g.ndim() == 1 => 1,
        _ => return Ok(None),
    };
    for u in [Some(lse), Some(g), count].into_iter().flatten() {
        if u.device() != x.device() {
            return Ok(None);
        }
    }
    let Some(t) = targets(x, t)? else { return Ok(None) };
    let as_f32 = |u: &Tensor| -> Result<Tensor> { cont(&if u.dtype() != DType::F32 { cast(u, DType::F32)? } else { u.clone() }) };
    let (x, lse, g) = (cont(x)?, as_f32(lse)?, as_f32(g)?);
    let count = count.map(as_f32).transpose()?;
    let dx = empty(op, ord, dt, &[rows, c])?;
    if rows > 0 && c > 0 {
        let (xp, dev) = elem_ptr(op, &x)?;
        let f = kfunc(&dev, KFile::Loss, dt, "ce_bwd_f32")?;
        let cp = match &count {
            Some(u) => elem_ptr(op, u)?.0,
            None => 0,
        };
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &t)?.0).push(elem_ptr(op, &lse)?.0).push(elem_ptr(op, &g)?.0).push(gstride).push(cp);
        a.push(elem_ptr(op, &dx)?.0).push(rows as i64).push(c as i64).push(ignore_index);
        // columns of a row over blockIdx.x (at least 4 elements a thread), rows over blockIdx.y
        let xblocks = c.div_ceil(256 * 4).max(1);
        let yblocks = rows.min(65535).min((dev.sm_count as usize * 32).div_ceil(xblocks).max(1));
        launch(&dev, op, f, (xblocks as u32, yblocks.max(1) as u32, 1), (256, 1, 1), 0, &mut a)?;
    }
    Ok(Some(dx))
}

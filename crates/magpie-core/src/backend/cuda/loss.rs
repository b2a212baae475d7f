//! Host side of kernels/loss.cu: cross_entropy with class-index targets on CUDA logits
//! `[rows, c]`, forward (per-row loss, log-sum-exp and the count of rows that are not ignored)
//! and backward (`softmax(x) - onehot(t)` scaled), without host synchronization. The logits may
//! be a row-strided view (a padded product's first `c` columns); the backward can write its
//! gradient into rows padded with zeros ([`cross_entropy_backward_padded`]).

use super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile};
use super::launch::{launch, Args};
use super::ops::{cast, contiguous, empty};
use super::softmax::supported;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Device, Result};

/// The forward's outputs, each `[rows]`, in the logits' dtype (float32 for
/// [`Precision::F32Of16`]).
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

/// 2-d logits as the kernels read them: `x` itself when its classes are contiguous and its rows
/// do not overlap (row stride `ld >= c`), else a contiguous copy; with the row stride.
fn rows_of(x: &Tensor) -> Result<(Tensor, usize)> {
    let (c, st) = (x.shape()[1], x.strides());
    if (st[1] == 1 || c == 1) && st[0] >= c && x.shape()[0] > 0 {
        return Ok((x.clone(), st[0]));
    }
    Ok((cont(x)?, c))
}

/// Targets as contiguous i64 on `x`'s device, or None when they are elsewhere.
fn targets(x: &Tensor, t: &Tensor) -> Result<Option<Tensor>> {
    if t.device() != x.device() || !t.dtype().is_int() || t.ndim() != 1 || t.shape()[0] != x.shape()[0] {
        return Ok(None);
    }
    let t = if t.dtype() != DType::I64 { cast(t, DType::I64)? } else { t.clone() };
    Ok(Some(cont(&t)?))
}

/// Which kernels run: the logits' own precision throughout, or f16/bf16 logits with float32
/// outputs and gradients computed in float32 (what autocast's float32 policy asks for, without the
/// `[rows, c]` float32 copy of the logits or of their gradient).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Precision {
    /// Loss, log-sum-exp and gradient in the logits' dtype (any float dtype the softmax takes).
    Own,
    /// f16/bf16 logits; loss and log-sum-exp in float32, the float32 gradient rounded once to the
    /// logits' dtype (as autocast's cast back gives it).
    F32Of16,
}

impl Precision {
    /// Whether there is a kernel for logits of `dt`.
    fn takes(self, dt: DType) -> bool {
        match self {
            Precision::Own => supported(dt),
            Precision::F32Of16 => matches!(dt, DType::F16 | DType::BF16),
        }
    }
    /// The dtype of the forward's outputs and of the backward's `lse`, `g` and `count`.
    fn acc(self, dt: DType) -> DType {
        match self {
            Precision::Own => dt,
            Precision::F32Of16 => DType::F32,
        }
    }
    /// The kernel names of `kernels/loss.cu`: (forward, backward).
    fn kernels(self) -> (&'static str, &'static str) {
        match self {
            Precision::Own => ("ce_fwd", "ce_bwd"),
            Precision::F32Of16 => ("ce_fwd_f32", "ce_bwd_f32"),
        }
    }
}

/// The forward over `x [rows, c]` (CUDA, float) and targets `t [rows]` (integer, same device);
/// None when there is no kernel for these inputs.
pub fn cross_entropy_forward(x: &Tensor, t: &Tensor, ignore_index: i64, p: Precision) -> Result<Option<CeForward>> {
    let op = "cross_entropy";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !p.takes(dt) || x.ndim() != 2 || x.shape()[1] == 0 {
        return Ok(None);
    }
    let Some(t) = targets(x, t)? else { return Ok(None) };
    let (rows, c) = (x.shape()[0], x.shape()[1]);
    let (x, ld) = rows_of(x)?;
    let acc = p.acc(dt);
    let loss = empty(op, ord, acc, &[rows])?;
    let lse = empty(op, ord, acc, &[rows])?;
    let valid = empty(op, ord, acc, &[rows])?;
    if rows > 0 {
        let (xp, dev) = elem_ptr(op, &x)?;
        let f = kfunc(&dev, KFile::Loss, dt, p.kernels().0)?;
        let threads = (c.div_ceil(4).div_ceil(32) * 32).clamp(32, 1024) as u32;
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &t)?.0).push(elem_ptr(op, &loss)?.0).push(elem_ptr(op, &lse)?.0).push(elem_ptr(op, &valid)?.0);
        a.push(c as i64).push(ld as i64).push(ignore_index);
        if p == Precision::F32Of16 {
            // 16-byte loads where every row starts aligned
            a.push((xp.is_multiple_of(16) && ld.is_multiple_of(8)) as i32);
        }
        launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    }
    Ok(Some(CeForward { loss, lse, valid }))
}

/// The gradient for `x`: `(softmax(x) - onehot(t)) * g[r] / count` per row, 0 on ignored rows,
/// in `x`'s dtype. `g` is the upstream gradient (0-d, or `[rows]` for reduction 'none'); `count`
/// (0-d) divides for reduction 'mean'; `lse` is the forward's. None when there is no kernel for
/// these inputs.
pub fn cross_entropy_backward(x: &Tensor, t: &Tensor, lse: &Tensor, g: &Tensor, count: Option<&Tensor>, ignore_index: i64, p: Precision) -> Result<Option<Tensor>> {
    if x.ndim() != 2 {
        return Ok(None);
    }
    cross_entropy_backward_padded(x, t, lse, g, count, ignore_index, p, x.shape()[1])
}

/// [`cross_entropy_backward`] into a new contiguous `[rows, row_len]` gradient (`row_len >= c`)
/// whose columns from `c` on are zeros: the gradient of a padded product's first `c` columns,
/// which the product's backward GEMMs then read at the aligned row length without a copy.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_backward_padded(x: &Tensor, t: &Tensor, lse: &Tensor, g: &Tensor, count: Option<&Tensor>, ignore_index: i64, p: Precision, row_len: usize) -> Result<Option<Tensor>> {
    let op = "cross_entropy_backward";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !p.takes(dt) || x.ndim() != 2 || row_len < x.shape()[1] {
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
    let acc = p.acc(dt);
    let as_acc = |u: &Tensor| -> Result<Tensor> { cont(&if u.dtype() != acc { cast(u, acc)? } else { u.clone() }) };
    let ((x, ld), lse, g) = (rows_of(x)?, as_acc(lse)?, as_acc(g)?);
    let count = count.map(as_acc).transpose()?;
    let dx = empty(op, ord, dt, &[rows, row_len])?;
    if rows > 0 && row_len > 0 {
        let (xp, dev) = elem_ptr(op, &x)?;
        let f = kfunc(&dev, KFile::Loss, dt, p.kernels().1)?;
        let cp = match &count {
            Some(u) => elem_ptr(op, u)?.0,
            None => 0,
        };
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &t)?.0).push(elem_ptr(op, &lse)?.0).push(elem_ptr(op, &g)?.0).push(gstride).push(cp);
        let dp = elem_ptr(op, &dx)?.0;
        a.push(dp).push(rows as i64).push(c as i64).push(ld as i64).push(row_len as i64).push(ignore_index);
        // 16-byte loads and stores where every row of x and dx starts aligned (x's row is read up
        // to row_len: only when its stride holds that many)
        let held = x.storage().read().len() >= x.storage_offset() + (rows - 1) * ld + row_len;
        let vec = p == Precision::F32Of16 && xp.is_multiple_of(16) && dp.is_multiple_of(16) && ld.is_multiple_of(8) && row_len.is_multiple_of(8) && ld >= row_len && held;
        if p == Precision::F32Of16 {
            a.push(vec as i32);
        }
        let (grid, block) = match p {
            Precision::Own => ((grid_stride_blocks(&dev, rows * row_len), 1, 1), (256, 1, 1)),
            Precision::F32Of16 => {
                // columns of a row over blockIdx.x (at least 4 elements a thread, 8 with `vec`),
                // rows over blockIdx.y
                let xblocks = row_len.div_ceil(256 * if vec { 8 } else { 4 }).max(1);
                let yblocks = rows.min(65535).min((dev.sm_count as usize * 32).div_ceil(xblocks).max(1));
                ((xblocks as u32, yblocks.max(1) as u32, 1), (256, 1, 1))
            }
        };
        launch(&dev, op, f, grid, block, 0, &mut a)?;
    }
    Ok(Some(dx))
}

//! PyTorch's `acc_type`: ops that PyTorch computes for bfloat16 / float16 inputs in float32,
//! rounding once at the end, run here on float32 copies of their inputs too.
//!
//! The composites of this crate (norm layers, pooling, `add*` products, backward rules) are
//! chains of ops; in a half dtype each op of the chain would round, and the error grows with
//! the chain. Running the chain on float32 copies and casting the results back rounds once, as
//! PyTorch's kernels do (on the CPU and on CUDA alike). The casts are differentiable, so
//! gradients flow through unchanged and the input gradients round once too.
//!
//! [`half_acc`] picks tensors of both devices: on CUDA the casts and the float32 chain are native
//! kernels. Callers with a fused CUDA kernel that loads half values and computes in float32
//! (layer / RMS norm, softmax backward, flash attention) try that kernel first. [`half_cpu`] is
//! for the backward rules of elementwise ops and statistics, which stay in the half dtype on
//! CUDA (their kernels run inside the training step, where extra casts would cost time).

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Result;

/// The half dtype (`bfloat16` / `float16`) of `ts` when every tensor is a CPU tensor of that one
/// half dtype; None otherwise (mixed dtypes keep their own rules: promotion or an error).
pub(crate) fn half_cpu(ts: &[&Tensor]) -> Option<DType> {
    let d = ts.first()?.dtype();
    (matches!(d, DType::BF16 | DType::F16) && ts.iter().all(|t| t.dtype() == d && !t.device().is_cuda())).then_some(d)
}

/// The half dtype (`bfloat16` / `float16`) of `ts` when every tensor has that one half dtype and
/// all sit on one device (CPU or CUDA); None otherwise (mixed dtypes or devices keep their own
/// rules: promotion or an error).
pub(crate) fn half_acc(ts: &[&Tensor]) -> Option<DType> {
    let first = ts.first()?;
    let (d, dev) = (first.dtype(), first.device());
    (matches!(d, DType::BF16 | DType::F16) && ts.iter().all(|t| t.dtype() == d && t.device() == dev)).then_some(d)
}

/// [`half_acc`] over optional tensors (absent ones are ignored; `x` must be present).
pub(crate) fn half_acc_opt(x: &Tensor, ts: &[Option<&Tensor>]) -> Option<DType> {
    let mut all = vec![x];
    all.extend(ts.iter().flatten().copied());
    half_acc(&all)
}

/// `t` as float32 when it has a half dtype, else `t` itself.
pub(crate) fn up(t: &Tensor) -> Result<Tensor> {
    if matches!(t.dtype(), DType::BF16 | DType::F16) {
        t.to_dtype(DType::F32)
    } else {
        Ok(t.clone())
    }
}

/// [`up`] over an optional tensor.
pub(crate) fn up_opt(t: Option<&Tensor>) -> Result<Option<Tensor>> {
    t.map(up).transpose()
}

/// A float32 result back in the half dtype `d` (integer and bool results, such as indices, stay).
pub(crate) fn down(t: Tensor, d: DType) -> Result<Tensor> {
    if t.dtype() == DType::F32 {
        t.to_dtype(d)
    } else {
        Ok(t)
    }
}

//! PyTorch's `acc_type` on the CPU: ops that PyTorch computes for bfloat16 / float16 inputs in
//! float32, rounding once at the end, run here on float32 copies of their inputs too.
//!
//! The composites of this crate (norm layers, pooling, `add*` products, backward rules) are
//! chains of ops; in a half dtype each op of the chain would round, and the error grows with
//! the chain. Running the chain on float32 copies and casting the results back rounds once, as
//! PyTorch's kernels do. The casts are differentiable, so gradients flow through unchanged and
//! the input gradients round once too. This is for CPU tensors only: CUDA tensors keep their own
//! paths, whose fused kernels compute in float32 inside but whose composites still round after
//! every step (74 bfloat16/float16 conformance cases pass on the CPU only; README "CUDA").

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Result;

/// The half dtype (`bfloat16` / `float16`) of `ts` when every tensor is a CPU tensor of that one
/// half dtype; None otherwise (mixed dtypes keep their own rules: promotion or an error).
pub(crate) fn half_cpu(ts: &[&Tensor]) -> Option<DType> {
    let d = ts.first()?.dtype();
    (matches!(d, DType::BF16 | DType::F16) && ts.iter().all(|t| t.dtype() == d && !t.device().is_cuda())).then_some(d)
}

/// [`half_cpu`] over optional tensors (absent ones are ignored; `x` must be present).
pub(crate) fn half_cpu_opt(x: &Tensor, ts: &[Option<&Tensor>]) -> Option<DType> {
    let mut all = vec![x];
    all.extend(ts.iter().flatten().copied());
    half_cpu(&all)
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

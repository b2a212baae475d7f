//! `torch.renorm`: rescale each slice along a dim whose p-norm exceeds `maxnorm` down to it.

use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.renorm(input, p, dim, maxnorm)`: every sub-tensor `input.select(dim, i)` with a
/// p-norm above `maxnorm` is scaled by `maxnorm / (norm + 1e-7)`; the others are kept.
/// Differentiable through the norm, as PyTorch's backward is.
///
/// ```
/// use magpie_core::{ops::renorm::renorm, Tensor};
/// let x = Tensor::from_vec(vec![3f32, 4., 0.3, 0.4], &[2, 2])?;
/// let r = renorm(&x, 2.0, 0, 1.0)?.to_vec::<f32>()?;
/// assert!((r[0] - 0.6).abs() < 1e-6 && (r[2] - 0.3).abs() < 1e-7);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn renorm(input: &Tensor, p: f64, dim: i64, maxnorm: f64) -> Result<Tensor> {
    const OP: &str = "renorm";
    if input.ndim() < 2 {
        return Err(Error::shape(OP, format!("renorm: input needs at least 2 dimensions, got {} dimensions", input.ndim())));
    }
    if p <= 0.0 {
        return Err(Error::value(OP, "renorm: non-positive-norm not supported"));
    }
    if maxnorm < 0.0 {
        return Err(Error::value(OP, format!("renorm: expected maxnorm to be >= 0 but got {maxnorm}")));
    }
    if !input.dtype().is_float() && !input.dtype().is_complex() {
        return Err(Error::dtype(OP, format!("renorm: expected a floating point or complex tensor as input. Got {}", input.dtype().name())));
    }
    let d = crate::shape::wrap_dim(OP, dim, input.ndim())?;
    let others: Vec<i64> = (0..input.ndim() as i64).filter(|&i| i != d as i64).collect();
    let norm = crate::ops::linalg::vector_norm(input, p, Some(&others), true, None)?;
    let scale = Tensor::scalar_tensor(maxnorm, norm.dtype(), norm.device())?.div(&norm.add_scalar(1e-7)?)?;
    let one = norm.ones_like()?;
    let factor = crate::ops::ternary::where_cond(&norm.gt_scalar(maxnorm)?, &scale, &one)?;
    input.mul(&factor)
}

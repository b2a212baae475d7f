//! Dropout family: identity when not training or `p == 0`; otherwise a random mask (per element,
//! or per channel for the 2d/3d and feature variants), applied by multiplication so the gradient
//! is the same mask.

use crate::tensor::Tensor;
use crate::{Error, Result};
/// `n` uniform numbers in [0, 1) from the default generator, so `manual_seed` fixes dropout
/// masks and a checkpoint of the generator's state resumes them exactly.
fn uniform(n: usize) -> Vec<f64> {
    crate::ops::random::with_default_generator(|g| g.uniform(n))
}

/// The shape a mask is drawn in: the whole tensor, or `[N, C, 1, ...]` for feature dropout.
fn mask_shape(x: &Tensor, feature: bool) -> Vec<usize> {
    if !feature || x.ndim() < 2 {
        return x.shape().to_vec();
    }
    let mut s = x.shape()[..2].to_vec();
    s.extend(std::iter::repeat_n(1, x.ndim() - 2));
    s
}

fn check_p(op: &str, p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::value(op, format!("dropout probability has to be between 0 and 1, but got {p}")));
    }
    Ok(())
}

/// `dropout(input, p, training)` and the channel-wise `dropout1d/2d/3d` (`feature` true).
pub fn dropout(x: &Tensor, p: f64, training: bool, feature: bool) -> Result<Tensor> {
    let _prof = crate::profiler::op("dropout", &[x]);
    check_p("dropout", p)?;
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul(&x.zeros_like()?);
    }
    #[cfg(feature = "cuda")]
    if !feature && x.device().is_cuda() && x.dtype().is_float() {
        use crate::backend::cuda::rng;
        let (out, st) = rng::dropout(x, p, None)?;
        crate::autograd::record("Dropout", &[x], &[out.clone()], move |_, g| {
            // the same mask, replayed from the forward's random state
            let gx = if crate::autograd::is_grad_enabled() {
                g[0].mul(&rng::dropout(&g[0].ones_like()?, p, Some(st))?.0)?
            } else {
                rng::dropout(&g[0], p, Some(st))?.0
            };
            Ok(vec![Some(gx)])
        });
        return Ok(out);
    }
    let ms = mask_shape(x, feature);
    let keep: Vec<f64> = uniform(crate::shape::numel(&ms)).iter().map(|&u| if u >= p { 1.0 / (1.0 - p) } else { 0.0 }).collect();
    let m = Tensor::from_vec(keep, &ms)?.to_device(x.device())?.to_dtype(x.dtype())?;
    x.mul(&m)
}

/// `alpha_dropout` / `feature_alpha_dropout(input, p, training)`: keeps SELU's mean and variance.
pub fn alpha_dropout(x: &Tensor, p: f64, training: bool, feature: bool) -> Result<Tensor> {
    check_p("alpha_dropout", p)?;
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul(&x.zeros_like()?);
    }
    let alpha = 1.7580993408473766;
    let a = 1.0 / ((alpha * alpha * p + 1.0) * (1.0 - p)).sqrt();
    let b_drop = alpha * a; // value of a dropped element: a * (-alpha' ...) with alpha' = -alpha
    let ms = mask_shape(x, feature);
    let u = uniform(crate::shape::numel(&ms));
    let keep: Vec<f64> = u.iter().map(|&v| if v >= p { 1.0 } else { 0.0 }).collect();
    let km = Tensor::from_vec(keep, &ms)?.to_device(x.device())?.to_dtype(x.dtype())?;
    // out = keep ? a*x + c : a*(-alpha) + c, with c = alpha * a * p; written as x*(a*keep) + b
    let c = b_drop * p;
    let bias = km.neg()?.add_scalar(1.0)?.mul_scalar(-alpha * a)?.add_scalar(c)?;
    x.mul(&km.mul_scalar(a)?)?.add(&bias)
}

/// `torch.ops.aten.native_dropout_backward(grad_output, mask, scale)`: `grad_output * mask *
/// scale`, the gradient of `native_dropout` given the mask it drew (a bool tensor broadcastable
/// to `grad_output`). Integer gradients promote to the default float type with the float scale.
///
/// ```
/// # use magpie_core::Tensor;
/// let g = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
/// let m = Tensor::from_vec(vec![1i64, 0, 1], &[3])?.to_dtype(magpie_core::DType::Bool)?;
/// let r = magpie_core::ops::nn::native_dropout_backward(&g, &m, 2.0)?;
/// assert_eq!(r.to_vec::<f32>()?, vec![2.0, 0.0, 6.0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn native_dropout_backward(grad_output: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    let op = "native_dropout_backward";
    if !mask.dtype().is_bool() {
        return Err(Error::dtype(op, format!("Mask should be Bool Scalar Type {}", mask.dtype())));
    }
    grad_output.mul(mask)?.mul_scalar(scale)
}

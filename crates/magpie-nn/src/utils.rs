//! `torch.nn.utils`: gradient clipping and flattening parameters into one vector.

use magpie_core::autograd::no_grad;
use magpie_core::{Error, Result, Tensor};

/// `clip_grad_norm_(parameters, max_norm, norm_type)`: scales all gradients together so that
/// their joint `norm_type`-norm is at most `max_norm`; returns the norm before clipping (f32 0-d
/// tensor of the gradients' dtype). `norm_type = f64::INFINITY` uses the max-abs norm.
/// With `error_if_nonfinite`, a NaN/Inf total norm is an error and nothing is changed.
pub fn clip_grad_norm_(params: &[Tensor], max_norm: f64, norm_type: f64, error_if_nonfinite: bool) -> Result<Tensor> {
    let _g = no_grad();
    let grads: Vec<Tensor> = params.iter().filter_map(|p| p.grad()).collect();
    if grads.is_empty() {
        return Tensor::full(&[], 0.0);
    }
    // CUDA gradients, 2-norm: multi-tensor sum-of-squares launches into a device accumulator
    // (f64), then the scaling reads the total on the device: no host synchronisation (as
    // PyTorch's foreach path), unless error_if_nonfinite needs the value on the host
    if norm_type == 2.0 && grads.iter().all(|g| g.device().is_cuda()) {
        if let Some(ss) = magpie_core::backend::cuda::optim::sum_of_squares(&grads)? {
            let total = ss.sqrt()?.to_dtype(grads[0].dtype())?;
            if !error_if_nonfinite && magpie_core::backend::cuda::optim::clip_scale_multi(&grads, &ss, max_norm)? {
                return Ok(total);
            }
            scale_to_norm(&grads, ss.item()?.to_f64().sqrt(), max_norm, norm_type, error_if_nonfinite)?;
            return Ok(total);
        }
    }
    let norms = grads
        .iter()
        .map(|g| g.norm_p(norm_type, None, false, None))
        .collect::<Result<Vec<_>>>()?;
    let stacked = magpie_core::ops::shape_ops::stack(&norms, 0)?;
    let total = stacked.norm_p(norm_type, None, false, None)?;
    scale_to_norm(&grads, total.item()?.to_f64(), max_norm, norm_type, error_if_nonfinite)?;
    Ok(total)
}

/// The end of `clip_grad_norm_` once the total norm `tv` is known: the non-finite check, then
/// every gradient scaled by PyTorch's `clip_coef = max_norm / (total + 1e-6)` clamped to at
/// most 1 (multiplied in always).
fn scale_to_norm(grads: &[Tensor], tv: f64, max_norm: f64, norm_type: f64, error_if_nonfinite: bool) -> Result<()> {
    if error_if_nonfinite && !tv.is_finite() {
        return Err(Error::value(
            "clip_grad_norm_",
            format!("The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be clipped."),
        ));
    }
    let coef = (max_norm / (tv + 1e-6)).min(1.0);
    for g in grads {
        g.mul_scalar_(coef)?;
    }
    Ok(())
}

/// `clip_grad_value_(parameters, clip_value)`: clamps every gradient element to ±clip_value.
pub fn clip_grad_value_(params: &[Tensor], clip_value: f64) -> Result<()> {
    let _g = no_grad();
    for g in params.iter().filter_map(|p| p.grad()) {
        g.clamp_(Some(-clip_value), Some(clip_value))?;
    }
    Ok(())
}

/// `parameters_to_vector(parameters)`: all parameters flattened and concatenated.
pub fn parameters_to_vector(params: &[Tensor]) -> Result<Tensor> {
    let flat = params.iter().map(|p| p.reshape(&[-1])).collect::<Result<Vec<_>>>()?;
    magpie_core::ops::shape_ops::cat(&flat, 0)
}

/// `vector_to_parameters(vec, parameters)`: copies consecutive slices of `vec` into the parameters.
pub fn vector_to_parameters(vec: &Tensor, params: &[Tensor]) -> Result<()> {
    let total: usize = params.iter().map(|p| p.numel()).sum();
    if vec.ndim() != 1 || vec.numel() != total {
        return Err(Error::shape(
            "vector_to_parameters",
            format!("expected a 1-D vector of {total} elements, got shape {:?}", vec.shape()),
        ));
    }
    let _g = no_grad();
    let mut off = 0;
    for p in params {
        let n = p.numel();
        p.copy_(&vec.narrow(0, off as i64, n as i64)?.reshape_to(p.shape())?)?;
        off += n;
    }
    Ok(())
}

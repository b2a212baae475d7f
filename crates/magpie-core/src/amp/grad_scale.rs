//! The two in-place primitives of dynamic loss scaling, PyTorch's
//! `_amp_foreach_non_finite_check_and_unscale_` and `_amp_update_scale_`: on CUDA each is a kernel
//! over device scalars (no host synchronization), on the CPU a loop.

use crate::autograd::no_grad;
use crate::backend::cuda;
use crate::{DType, Device, Error, Result, Tensor};

fn scalar(op: &str, what: &str, t: &Tensor, dt: DType, device: Device) -> Result<()> {
    if t.dtype() != dt || t.numel() != 1 || t.device() != device {
        return Err(Error::value(
            op,
            format!("{what} must be a one-element {dt} tensor on {device}, got {} {:?} on {}", t.dtype(), t.shape(), t.device()),
        ));
    }
    Ok(())
}

/// `torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)`: multiplies
/// every gradient by `inv_scale` in place and sets `found_inf` to 1 when any element of any of
/// them is inf or NaN (it is never reset to 0 here). `found_inf` and `inv_scale` are one-element
/// float32 tensors on the gradients' device; gradients are float16, bfloat16, float32 or float64.
///
/// ```
/// use magpie_core::{amp, DType, Device, Tensor};
/// let g = Tensor::from_vec(vec![2f32, 4.], &[2])?;
/// let found_inf = Tensor::scalar_tensor(0.0, DType::F32, Device::Cpu)?;
/// let inv = Tensor::scalar_tensor(0.5, DType::F32, Device::Cpu)?;
/// amp::non_finite_check_and_unscale_(&[g.clone()], &found_inf, &inv)?;
/// assert_eq!(g.to_vec::<f32>()?, vec![1., 2.]);
/// assert_eq!(found_inf.item()?.to_f64(), 0.0);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn non_finite_check_and_unscale_(grads: &[Tensor], found_inf: &Tensor, inv_scale: &Tensor) -> Result<()> {
    let op = "_amp_foreach_non_finite_check_and_unscale_";
    let Some(first) = grads.first() else { return Ok(()) };
    let device = first.device();
    scalar(op, "found_inf", found_inf, DType::F32, device)?;
    scalar(op, "inv_scale", inv_scale, DType::F32, device)?;
    if found_inf.shares_storage(inv_scale) {
        return Err(Error::value(op, "found_inf and inv_scale must not share storage"));
    }
    for g in grads {
        if g.device() != device {
            return Err(Error::device(op, format!("all gradients must be on one device, got {device} and {}", g.device())));
        }
        if !matches!(g.dtype(), DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
            return Err(Error::dtype(op, format!("gradients must be floating point, got {}", g.dtype())));
        }
        if g.shares_storage(found_inf) || g.shares_storage(inv_scale) {
            return Err(Error::value(op, "a gradient shares storage with found_inf or inv_scale"));
        }
    }
    let _ng = no_grad();
    if device.is_cuda() {
        for g in grads {
            // the kernel walks contiguous elements: a strided gradient is unscaled in a copy
            let work = if g.is_contiguous() { g.clone() } else { g.contiguous()? };
            {
                let (gs, fs, is) = (work.storage().write(), found_inf.storage().write(), inv_scale.storage().read());
                cuda::amp::non_finite_check_and_unscale(
                    (&gs, work.layout(), work.dtype()),
                    (&fs, found_inf.layout(), DType::F32),
                    (&is, inv_scale.layout(), DType::F32),
                )?;
            }
            if !work.is_same(g) {
                g.copy_(&work)?;
            }
        }
        return Ok(());
    }
    let inv = inv_scale.item()?.to_f64() as f32;
    let mut bad = false;
    for g in grads {
        let out = if g.dtype() == DType::F64 {
            let v = g.to_vec::<f64>()?;
            bad |= v.iter().any(|x| !x.is_finite());
            let inv = inv as f64;
            Tensor::from_vec(v.into_iter().map(|x| if inv == 1.0 { x } else { x * inv }).collect(), g.shape())?
        } else {
            // float32 arithmetic for the 16-bit types too, rounded once into their dtype (PyTorch's opmath)
            let v = g.to_vec::<f32>()?;
            bad |= v.iter().any(|x| !x.is_finite());
            Tensor::from_vec(v.into_iter().map(|x| if inv == 1.0 { x } else { x * inv }).collect(), g.shape())?
        };
        g.copy_(&out)?;
    }
    if bad {
        found_inf.fill_(1.0)?;
    }
    Ok(())
}

/// `torch._amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
/// growth_interval)`: after an overflow (`found_inf` not 0) the scale is multiplied by
/// `backoff_factor` and the tracker reset; otherwise the tracker counts the step and, reaching
/// `growth_interval`, the scale grows by `growth_factor` (if still finite) and the tracker restarts.
/// `scale` and `found_inf` are one-element float32 tensors, `growth_tracker` an int32 one, all
/// on one device.
///
/// ```
/// use magpie_core::{amp, DType, Device, Tensor};
/// let scale = Tensor::scalar_tensor(1024.0, DType::F32, Device::Cpu)?;
/// let tracker = Tensor::scalar_tensor(1, DType::I32, Device::Cpu)?;
/// let found_inf = Tensor::scalar_tensor(0.0, DType::F32, Device::Cpu)?;
/// amp::update_scale_(&scale, &tracker, &found_inf, 2.0, 0.5, 2)?;
/// assert_eq!((scale.item()?.to_f64(), tracker.item()?.to_i64()), (2048.0, 0));
/// found_inf.fill_(1.0)?;
/// amp::update_scale_(&scale, &tracker, &found_inf, 2.0, 0.5, 2)?;
/// assert_eq!(scale.item()?.to_f64(), 1024.0);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn update_scale_(scale: &Tensor, growth_tracker: &Tensor, found_inf: &Tensor, growth_factor: f64, backoff_factor: f64, growth_interval: i64) -> Result<()> {
    let op = "_amp_update_scale_";
    let device = scale.device();
    scalar(op, "scale", scale, DType::F32, device)?;
    scalar(op, "growth_tracker", growth_tracker, DType::I32, device)?;
    scalar(op, "found_inf", found_inf, DType::F32, device)?;
    if scale.shares_storage(growth_tracker) || scale.shares_storage(found_inf) || growth_tracker.shares_storage(found_inf) {
        return Err(Error::value(op, "scale, growth_tracker and found_inf must not share storage"));
    }
    let _ng = no_grad();
    if device.is_cuda() {
        let (ss, ts, fs) = (scale.storage().write(), growth_tracker.storage().write(), found_inf.storage().read());
        return cuda::amp::update_scale(
            (&ss, scale.layout(), DType::F32),
            (&ts, growth_tracker.layout(), DType::I32),
            (&fs, found_inf.layout(), DType::F32),
            growth_factor,
            backoff_factor,
            growth_interval,
        );
    }
    let s = scale.item()?.to_f64() as f32;
    if found_inf.item()?.to_f64() != 0.0 {
        scale.fill_((s as f64 * backoff_factor) as f32 as f64)?;
        growth_tracker.fill_(0i64)?;
    } else {
        let successful = growth_tracker.item()?.to_i64() + 1;
        if successful == growth_interval {
            let grown = (s as f64 * growth_factor) as f32;
            if grown.is_finite() {
                scale.fill_(grown as f64)?;
            }
            growth_tracker.fill_(0i64)?;
        } else {
            growth_tracker.fill_(successful)?;
        }
    }
    Ok(())
}

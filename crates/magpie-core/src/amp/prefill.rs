//! Filling autocast's weight-cast cache for many leaves at once (one multi-tensor launch on CUDA
//! instead of one cast kernel per weight at its first use).

use super::state::{self, active_bits, DeviceKind};
use crate::{DType, Result, Tensor};

/// Casts the float32 CUDA leaves of `tensors` that autocast would cache (contiguous, requiring
/// grad, not views) to the current CUDA autocast dtype and puts the casts in the region's cache,
/// so that the lower-precision ops of the region find them there instead of casting each weight
/// at its first use: one kernel launch per 48 tensors, where a model's forward launches one per
/// weight. Each cast is differentiable as `tensor.to(dtype)` is (its gradient flows back to the
/// leaf in float32) and its bits are those of that cast. Returns how many casts were added; 0
/// outside a CUDA autocast region, with the cache disabled, or for tensors already cached or not
/// eligible (those are cast at first use as before). A cast that no op of the region uses costs
/// its memory until the region ends.
///
/// ```no_run
/// use magpie_core::{amp, DType, Device, Tensor};
/// let w = Tensor::from_vec(vec![1f32; 6], &[2, 3])?.to_device(Device::Cuda(0))?.with_requires_grad()?;
/// let _ac = amp::autocast(Device::Cuda(0), Some(DType::BF16), true)?;
/// assert_eq!(amp::cache_casts(&[w.clone()])?, 1);
/// assert_eq!(amp::autocast_cache_len(), 1);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn cache_casts(tensors: &[Tensor]) -> Result<usize> {
    if active_bits() & DeviceKind::Cuda.bit() == 0 || !state::is_autocast_cache_enabled() {
        return Ok(0);
    }
    let to = state::get_autocast_dtype(crate::Device::Cuda(0));
    let mut seen = std::collections::HashSet::new();
    let todo: Vec<&Tensor> = tensors
        .iter()
        .filter(|t| {
            t.device().is_cuda()
                && t.dtype() == DType::F32
                && t.requires_grad()
                && t.is_leaf()
                && t.base().is_none()
                && t.is_contiguous()
                && state::cache_get(t.id(), to).is_none()
                && seen.insert(t.id())
        })
        .collect();
    fill(&todo, to)
}

#[cfg(feature = "cuda")]
fn fill(todo: &[&Tensor], to: DType) -> Result<usize> {
    use crate::backend::cuda::{amp::cast_multi, kern::elem_ptr, ops::empty};
    use crate::Device;
    // one launch list per device
    let mut ords: Vec<usize> = todo.iter().filter_map(|t| if let Device::Cuda(n) = t.device() { Some(n) } else { None }).collect();
    ords.sort_unstable();
    ords.dedup();
    let mut added = 0;
    for ord in ords {
        let mine: Vec<&Tensor> = todo.iter().copied().filter(|t| t.device() == Device::Cuda(ord)).collect();
        let outs = mine.iter().map(|t| empty("to", ord, to, t.shape())).collect::<Result<Vec<_>>>()?;
        let mut items = Vec::with_capacity(mine.len());
        let mut dev = None;
        for (t, c) in mine.iter().zip(&outs) {
            let (s, d) = elem_ptr("to", t)?;
            items.push((s, elem_ptr("to", c)?.0, t.numel()));
            dev = Some(d);
        }
        let Some(dev) = dev else { continue };
        cast_multi(&dev, to, &items)?;
        for (t, c) in mine.iter().zip(outs) {
            // the gradient of `t.to(to)`, as `to_dtype` records it
            crate::autograd::record("ToCopy", &[t], std::slice::from_ref(&c), |_, g| Ok(vec![Some(g[0].to_dtype(DType::F32)?)]));
            state::cache_put(t, to, &c);
            added += 1;
        }
    }
    Ok(added)
}

#[cfg(not(feature = "cuda"))]
fn fill(_todo: &[&Tensor], _to: DType) -> Result<usize> {
    // without CUDA there are no CUDA leaves to cast
    Ok(0)
}

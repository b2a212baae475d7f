//! Automatic mixed precision: `autocast` regions (PyTorch's `torch.autocast`), in which the ops
//! of PyTorch's per-device lists run in a lower precision (GEMMs, convolutions, attention) or in
//! float32 (reductions, norms, losses, ...), and in which the casts of float32 leaves that require
//! grad (the weights) are cached so that a weight used twice is cast once. Also the two in-place
//! primitives of dynamic loss scaling that `magpie_optim::GradScaler` is built on.
//!
//! ```
//! use magpie_core::{amp, DType, Device, Tensor};
//! let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2])?;
//! let w = Tensor::from_vec(vec![1f32, 0., 0., 1.], &[2, 2])?.with_requires_grad()?;
//! {
//!     let _ac = amp::autocast(Device::Cpu, Some(DType::BF16), true)?;
//!     assert!(amp::is_autocast_enabled(Device::Cpu));
//!     let y = x.matmul(&w)?;                // a lower-precision op: runs in bfloat16
//!     assert_eq!(y.dtype(), DType::BF16);
//!     y.to_dtype(DType::F32)?.sum()?.backward()?;
//! }
//! assert!(!amp::is_autocast_enabled(Device::Cpu));
//! assert_eq!(w.grad().unwrap().dtype(), DType::F32); // the cast is differentiable
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod cast;
mod grad_scale;
mod lists;
mod prefill;
mod state;

pub(crate) use cast::{opt_dtype, optional, tensors};
#[cfg(feature = "cuda")]
pub(crate) use cast::cuda_cached_cast;
pub use grad_scale::{non_finite_check_and_unscale_, update_scale_};
pub use lists::{policy, Policy};
pub use prefill::cache_casts;
pub use state::{
    autocast, autocast_cache_len, clear_autocast_cache, get_autocast_dtype, is_autocast_cache_enabled, is_autocast_enabled,
    set_autocast_cache_enabled, AutocastGuard, DeviceKind,
};
#[cfg(feature = "cuda")]
pub(crate) use state::{act_cast_get, act_cast_put};
pub(crate) use state::{any_active, cpu_as_cuda, suspend_all};

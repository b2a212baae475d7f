//! Optimizers, learning-rate schedulers and the mixed-precision `GradScaler`, with PyTorch's
//! names, defaults and arithmetic.
//!
//! ```
//! use magpie_core::Tensor;
//! use magpie_optim::{Optimizer, Sgd, SgdConfig};
//! let w = Tensor::from_vec(vec![1f32, 2.], &[2])?.with_requires_grad()?;
//! let mut opt = Sgd::new(vec![w.clone()], SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() })?;
//! w.mul(&w)?.sum()?.backward()?;      // grad = 2w
//! opt.step()?;
//! assert_eq!(w.to_vec::<f32>()?, vec![0.8, 1.6]);
//! opt.zero_grad();
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod core;
mod grad_scaler;
mod optimizers;
pub mod scheduler;

pub use crate::core::{host_round_trips, Buf, Hyper, Optimizer, OptimizerState, ParamGroup, ParamState};
pub use grad_scaler::{GradScaler, GradScalerConfig, GradScalerState};
pub use optimizers::*;

/// The examples of `docs/sparse.md` (sparse tensors, `Embedding(sparse=True)` with `SparseAdam`)
/// run as doctests of this crate, the highest one they use.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/sparse.md")]
pub struct SparseDocs;

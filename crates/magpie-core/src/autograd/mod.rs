//! Reverse-mode autograd: the graph lives on tensors (each result of a differentiable op points
//! at the [`Node`] that made it), and [`backward`] walks it in dependency order.
//!
//! Backward rules are closures written with tensor ops, so they run on every device and can be
//! differentiated again (`create_graph`). See `docs/autograd.md` for a tour.
//!
//! - [`backward`] / [`grad`] (`torch.autograd.backward` / `torch.autograd.grad`), and the
//!   tensor methods `backward`, `backward_with`, `grad`, `retain_grad`, `register_hook`, `detach`.
//! - [`no_grad`], [`enable_grad`], [`set_grad_enabled`], [`inference_mode`]: thread-local guards.
//! - [`Function`] and [`apply`]: user-defined functions with their own backward.
//! - [`functional`]: `jacobian`, `hessian`, `vjp`, `jvp`, `hvp`, `vhp`.
//! - [`gradcheck`] / [`gradgradcheck`]: analytical against finite-difference gradients in f64.
//! - [`detect_anomaly`]: NaN/Inf gradients become errors naming the forward op.
//! - [`saved_tensors_hooks`]: pack / unpack the tensors saved for backward (offloading, compression).
//! - In-place writes into views of tensors with history (PyTorch's `CopySlices`); views see
//!   their base's new history after in-place writes (`view`, `inplace` modules).
//!
//! ```
//! use magpie_core::{autograd, Tensor};
//! let x = Tensor::from_vec(vec![1f64, 2.], &[2])?.with_requires_grad()?;
//! let y = x.exp()?.sum()?;
//! y.backward()?;
//! let e: Vec<f64> = x.to_vec::<f64>()?.iter().map(|v| v.exp()).collect();
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, e);
//! {
//!     let _ng = autograd::no_grad();
//!     assert!(!x.exp()?.requires_grad());
//! }
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod anomaly;
mod engine;
mod function;
pub mod functional;
mod gradcheck;
mod grad_mode;
pub(crate) mod inplace;
mod node;
mod saved_hooks;
pub(crate) mod view;

pub use anomaly::{detect_anomaly, is_anomaly_enabled, set_detect_anomaly, AnomalyGuard};
pub use engine::{backward, grad};
pub use function::{apply, Function, FunctionCtx};
pub use gradcheck::{gradcheck, gradgradcheck, GradcheckOptions, GradcheckReport};
pub use grad_mode::{enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard};
pub use node::{record, BackwardCtx, BackwardFn, Node, Saved};
pub use saved_hooks::{disable_saved_tensors_hooks, saved_tensors_hooks, SavedTensorsHooksGuard};

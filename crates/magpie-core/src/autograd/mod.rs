//! Reverse-mode autograd: the graph lives on tensors (each result of a differentiable op points
//! at the [`Node`] that made it), and [`backward`] walks it in dependency order.
//!
//! Backward rules are closures written with tensor ops, so they run on every device and can be
//! differentiated again (`create_graph`).

mod engine;
mod grad_mode;
mod node;

pub use engine::{backward, grad};
pub use grad_mode::{enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled, GradModeGuard};
pub use node::{record, BackwardCtx, Node, Saved};

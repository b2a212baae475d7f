//! torch-magpie's `torch.nn`: the [`Module`] trait, layers, losses, `functional`, `init` and
//! `utils`, with PyTorch's parameter names so state dicts move between the two.
//!
//! ```
//! use magpie_nn::{Linear, Module, ModuleExt};
//! use magpie_core::Tensor;
//! let fc = Linear::new(4, 2, true)?;
//! let y = fc.forward(&Tensor::ones(&[3, 4])?)?;
//! assert_eq!(y.shape(), &[3, 2]);
//! let names: Vec<String> = fc.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["weight", "bias"]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

pub mod functional;
pub mod init;
pub mod layers;
mod module;
pub mod utils;

pub use layers::*;
pub use module::{LoadReport, Module, ModuleExt, StateDict};

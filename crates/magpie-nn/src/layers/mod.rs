//! The layers of `torch.nn`, one file per kind.

mod container;
mod dropout;
mod embedding;
mod linear;
mod norm;

pub use container::{ModuleDict, ModuleList, Sequential};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use linear::{Identity, Linear};
pub use norm::{LayerNorm, RMSNorm};

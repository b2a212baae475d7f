//! `torch.nn.functional` ops that are not plain elementwise activations: convolution,
//! pooling, interpolation, normalization, losses, embeddings, dropout and attention.
//! Raw kernels (conv, pooling windows, resampling, gathers) record their own backward rules
//! written with the same kernels, so they are differentiable to any order; the rest are
//! composites of existing ops.

pub(crate) mod gather;
pub mod interpolate;
pub mod pool;
pub(crate) mod resample;
pub(crate) mod util;

pub use interpolate::interpolate;
pub use pool::{adaptive_avg_pool, adaptive_max_pool, avg_pool, max_pool, max_unpool};

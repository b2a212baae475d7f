//! CPU kernels: the reference backend. Kernels read any strided layout; results are contiguous.

mod access;
pub mod activations;
pub mod attention;
mod elementwise;
pub mod simd;
pub mod vmath;
pub mod fft;
pub mod gemm;
pub mod norm;
pub mod quant;
pub mod rows;

pub use access::{gather, read, scatter_into, to_vec, write};
pub use elementwise::{map_binary, map_binary_block, map_unary, map_unary_block, map_unary_into, par_map};

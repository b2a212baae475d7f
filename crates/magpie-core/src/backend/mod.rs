//! Backends: the CPU reference kernels and the CUDA backend (a stub until the CUDA issue lands).

pub mod cpu;
pub mod cuda;

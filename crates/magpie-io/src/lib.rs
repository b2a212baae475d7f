//! Tensor file formats: safetensors today (validating reader, atomic writer); GGUF and PyTorch
//! `.pt` state dicts later.

pub mod atomic;
pub mod safetensors;

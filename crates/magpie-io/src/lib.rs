//! Tensor file formats: safetensors today (validating reader, atomic writer); GGUF and PyTorch
//! `.pt` state dicts later. Training checkpoints are folders of such files written atomically
//! ([`checkpoint`]).

pub mod atomic;
pub mod checkpoint;
pub mod safetensors;

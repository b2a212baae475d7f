//! Tensor file formats: safetensors (validating reader, atomic writer), GGUF (validating reader,
//! dequantizers, writer); PyTorch `.pt` state dicts later. Training checkpoints are folders of
//! such files written atomically ([`checkpoint`]).

pub mod atomic;
pub mod checkpoint;
pub mod gguf;
pub mod safetensors;

//! Tensor file formats: safetensors (validating reader, atomic writer), GGUF (validating reader,
//! dequantizers, writer), PyTorch `.pt` checkpoints (weights-only reader, state-dict writer). Training checkpoints are folders of
//! such files written atomically ([`checkpoint`]).

pub mod atomic;
pub mod checkpoint;
pub mod gguf;
mod mapped;
pub mod pt;
pub mod safetensors;

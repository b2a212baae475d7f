//! Parts shared by every architecture: attention (with the KV cache), MLPs, norms, rotary embeddings.

pub mod kv_cache;

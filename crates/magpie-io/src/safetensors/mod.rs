//! The safetensors format: an 8-byte little-endian header length, a JSON header naming each
//! tensor's dtype, shape and byte range, then the bytes. Compatible both ways with Python's
//! `safetensors` package. Every malformed input is an `Err` naming what is wrong.
//!
//! ```
//! use magpie_core::Tensor;
//! use magpie_io::safetensors::{deserialize, serialize};
//! let t = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?;
//! let bytes = serialize(&[("w".to_string(), t)], None)?;
//! let back = deserialize(&bytes)?;
//! assert_eq!(back.tensors[0].0, "w");
//! assert_eq!(back.tensors[0].1.to_vec::<f32>()?, vec![1., 2., 3.]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod dtype;
mod read;
mod write;

pub use dtype::{decode as tensor_from_le_bytes, encode as tensor_to_le_bytes};
pub use read::{deserialize, load, Loaded, MappedFile};
pub use write::{save, serialize};

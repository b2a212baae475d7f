//! GGUF, llama.cpp's model format: a validating reader (versions 2 and 3, every count, length,
//! type, shape and offset checked against the file before use), bit-exact dequantization of the
//! float, legacy and K-quant types to f32, and a v3 writer with Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1
//! quantizers (rounding as gguf-py does) and a simple Q4_K quantizer.
//!
//! ```
//! use magpie_core::Tensor;
//! use magpie_io::gguf::{GgmlType, GgufFile, GgufWriter, Value};
//! let mut w = GgufWriter::new();
//! w.add("general.name", "demo")?;
//! w.add("demo.count", 3u32)?;
//! w.add_tensor("w", &Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2])?, GgmlType::F32)?;
//! let f = GgufFile::from_bytes(w.to_bytes()?)?;
//! assert_eq!(f.get("demo.count"), Some(&Value::U32(3)));
//! assert_eq!(f.tensor_f32("w")?.to_vec::<f32>()?, vec![1., 2., 3., 4.]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod cursor;
mod dequant;
mod dequant_k;
mod dequant_legacy;
mod quant;
mod read;
mod types;
mod value;
mod write;

pub use dequant::{dequantize, dequantize_into};
pub use dequant_legacy::IQ4_NL_VALUES;
pub use quant::{f32_to_bf16_bits, quantize, quantize_q4_0, quantize_q4_1, quantize_q4_k, quantize_q5_0, quantize_q5_1, quantize_q8_0};
pub use read::{parse_header, GgufFile, Header, TensorInfo, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS};
pub use types::{GgmlType, QK_K};
pub use value::{Array, Value, ValueType};
pub use write::{array_of, GgufWriter};

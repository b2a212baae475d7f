//! `torch.ao.quantization` for torch-magpie: quantized tensors (`quantize_per_tensor`,
//! `quantize_per_channel`, `dequantize`, `int_repr`), the observers dynamic quantization uses
//! (`MinMaxObserver`, `PerChannelMinMaxObserver`), an int8 GEMM for the CPU (u8 x i8 with i32
//! accumulation: AVX-512 VNNI, AVX2, scalar reference) and dynamic int8 quantization of `Linear`
//! layers (`quantize_dynamic`, `DynamicQuantizedLinear`), each to PyTorch's x86 (fbgemm) arithmetic.
//!
//! ```
//! use magpie_core::Tensor;
//! use magpie_quant::{quantize_per_tensor, QDType};
//!
//! let x = Tensor::from_vec(vec![-1.0f32, 0.25, 0.5, 2.0], &[4])?;
//! let q = quantize_per_tensor(&x, 0.5, 2, QDType::QUInt8)?;
//! assert_eq!(q.int_repr()?.to_vec::<u8>()?, vec![0, 2, 3, 6]); // 0.25 / 0.5 = 0.5 rounds to even 0
//! assert_eq!(q.dequantize()?.to_vec::<f32>()?, vec![-1.0, 0.0, 0.5, 2.0]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod data;
pub mod dynamic_linear;
pub mod gemm;
pub mod observer;
pub mod qparams;
pub mod qtype;
pub mod quantize_dynamic;
pub mod rounding;
mod simd;
pub mod tensor;

pub use dynamic_linear::DynamicQuantizedLinear;
pub use observer::{MinMaxObserver, ObserverOptions, PerChannelMinMaxObserver};
pub use qparams::{choose_quantization_params, TensorQuantizationParams};
pub use qtype::{QDType, QScheme};
pub use quantize_dynamic::{quantize_dynamic, DynamicQConfig, QuantizeReport};
pub use tensor::{quantize_per_channel, quantize_per_tensor, QuantizedTensor, Quantizer};

/// The examples of `docs/quantization.md` run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/quantization.md")]
pub struct QuantizationDocs;

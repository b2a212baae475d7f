//! torch-magpie's tensor core: dtypes, layouts, storage, tensors, ops and autograd.
//!
//! ```
//! use magpie_core::Tensor;
//! let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2])?.with_requires_grad()?;
//! let y = a.mul(&a)?.sum()?;
//! y.backward()?;
//! assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![2., 4., 6., 8.]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

pub mod amp;
pub mod autograd;
pub mod backend;
pub mod cuda_graph;
pub mod device;
pub mod dtype;
pub mod element;
mod error;
pub mod float8;
pub mod format;
pub mod layout;
pub mod ops;
pub mod profiler;
pub mod quant;
pub mod registry;
pub mod scalar;
pub mod shape;
pub mod storage;
mod tensor;
pub mod threads;

pub use device::Device;
pub use dtype::DType;
pub use element::Element;
pub use error::{Error, Result};
pub use layout::Layout;
pub use scalar::Scalar;
pub use tensor::{GradHook, PostAccumulateGradHook, Tensor};

/// The examples of `docs/autograd.md` (custom function, gradient penalty, HVP, views and
/// in-place ops) run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/autograd.md")]
pub struct AutogradDocs;

/// The example of `docs/fft.md` runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/fft.md")]
pub struct FftDocs;

#[doc(hidden)]
pub use half;
#[doc(hidden)]
pub use num_complex;

use std::sync::atomic::{AtomicU8, Ordering};

static DEFAULT_DTYPE: AtomicU8 = AtomicU8::new(0);

/// `torch.get_default_dtype()`: the dtype of Python-float-like values (float32 unless changed).
pub fn default_dtype() -> DType {
    match DEFAULT_DTYPE.load(Ordering::Relaxed) {
        1 => DType::F64,
        2 => DType::F16,
        3 => DType::BF16,
        _ => DType::F32,
    }
}

/// `torch.set_default_dtype(d)`: one of float32, float64, float16, bfloat16.
pub fn set_default_dtype(d: DType) -> Result<()> {
    let code = match d {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::BF16 => 3,
        _ => return Err(Error::dtype("set_default_dtype", format!("only floating-point types are supported as the default type, got {d}"))),
    };
    DEFAULT_DTYPE.store(code, Ordering::Relaxed);
    Ok(())
}

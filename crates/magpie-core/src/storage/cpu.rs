//! `CpuStorage`: one typed vector per dtype, elements borrowed from mapped bytes, or page-locked memory.

use crate::backend::cuda::PinnedBuf;
use crate::dtype::DType;
use crate::element::Element;
use crate::float8::{F8E4M3, F8E5M2};
use super::MappedStorage;
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

/// Host memory of one dtype: a vector, elements borrowed from a mapped file, or page-locked memory
/// (`Tensor::pin_memory`) that copies
/// to and from CUDA devices can run asynchronously on. Kernels reach both through
/// [`Element::slice`], so they work on pinned tensors unchanged.
#[derive(Debug)]
pub enum CpuStorage {
    Bool(Vec<bool>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    C64(Vec<Complex32>),
    C128(Vec<Complex64>),
    F8E4M3(Vec<F8E4M3>),
    F8E5M2(Vec<F8E5M2>),
    /// Elements of any dtype but bool borrowed from read-only bytes (a memory-mapped file);
    /// copied into the matching vector on the first mutable access.
    Mapped(MappedStorage),
    /// Page-locked host memory of any dtype.
    Pinned(PinnedBuf),
}

/// A clone of pinned memory is ordinary (pageable) memory, as PyTorch's `clone()` of a pinned
/// tensor; a clone of mapped bytes borrows the same bytes (copy-on-write keeps them apart).
impl Clone for CpuStorage {
    fn clone(&self) -> Self {
        if let CpuStorage::Mapped(m) = self {
            return CpuStorage::Mapped(m.clone());
        }
        crate::with_dtype!(self.dtype(), T, {
            // a pinned buffer whose copy failed on the device reads as zeros (the device reports
            // the error on its next use)
            T::into_storage(T::slice(self).map_or_else(|| vec![T::default(); self.len()], <[T]>::to_vec))
        })
    }
}

impl CpuStorage {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::Bool(_) => DType::Bool,
            CpuStorage::U8(_) => DType::U8,
            CpuStorage::I8(_) => DType::I8,
            CpuStorage::I16(_) => DType::I16,
            CpuStorage::I32(_) => DType::I32,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::C64(_) => DType::C64,
            CpuStorage::C128(_) => DType::C128,
            CpuStorage::F8E4M3(_) => DType::F8E4M3,
            CpuStorage::F8E5M2(_) => DType::F8E5M2,
            CpuStorage::Mapped(m) => m.dtype(),
            CpuStorage::Pinned(p) => p.dtype(),
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        if let CpuStorage::Pinned(p) = self {
            return p.len();
        }
        crate::with_dtype!(self.dtype(), T, { T::slice(self).map_or(0, |s| s.len()) })
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `n` zeros of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> CpuStorage {
        crate::with_dtype!(dtype, T, { T::into_storage(vec![T::default(); n]) })
    }
    /// Borrows the elements as `T` (None if the dtype differs).
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice(self)
    }
    /// True for page-locked memory.
    pub fn is_pinned(&self) -> bool {
        matches!(self, CpuStorage::Pinned(_))
    }
    /// Mutably borrows the elements as `T` (a mapped storage is copied first).
    pub fn as_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        T::slice_mut(self)
    }
    /// True when the elements are borrowed from mapped bytes (not yet written to).
    pub fn is_mapped(&self) -> bool {
        matches!(self, CpuStorage::Mapped(_))
    }
    /// Copy-on-write: a storage borrowing mapped bytes takes its own copy of them, so the
    /// write that follows reaches neither the file nor other storages over the same bytes.
    /// Every mutable access ([`Element::slice_mut`]) calls this first.
    #[inline]
    pub fn make_owned(&mut self) {
        if let CpuStorage::Mapped(m) = self {
            let owned = crate::with_dtype!(m.dtype(), T, { T::into_storage(m.typed::<T>().map_or_else(Vec::new, <[T]>::to_vec)) });
            *self = owned;
        }
    }
}

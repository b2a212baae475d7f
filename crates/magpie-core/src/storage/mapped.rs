//! `MappedStorage`: a CPU storage whose elements are borrowed, without a copy, from read-only
//! bytes owned elsewhere (a memory-mapped checkpoint), as `torch.load(mmap=True)` and
//! safetensors' `load_file` give storages over the mapped file.
//!
//! The storage holds its owner (an `Arc`), so the bytes outlive every tensor that views them.
//! Reads borrow the bytes in place; the first mutable access copies them into an owned vector
//! (copy-on-write, [`super::CpuStorage::make_owned`]), so writes never reach the owner, and
//! other storages over the same bytes keep seeing the original values.

use crate::dtype::DType;
use crate::element::Element;
use std::sync::Arc;

/// Bytes that stay at one address and are never written while the owner lives: a read-only
/// memory map of a file, or a buffer no one holds mutably.
///
/// # Safety
///
/// `bytes()` must return the same slice (address and length) on every call for the owner's
/// whole life, and this process must not write to that memory while the owner exists. (Another
/// process changing a mapped file under the map is the caveat every mmap-based loader shares;
/// storages never hold `bool`, whose bytes must be 0 or 1, so any byte values stay valid values.)
///
/// ```
/// use magpie_core::storage::{CpuStorage, MappedStorage};
/// use magpie_core::{DType, Tensor};
/// use std::sync::Arc;
/// let bytes: Vec<u8> = [1.5f32, 2.5].iter().flat_map(|v| v.to_le_bytes()).collect();
/// // a Vec<u8> may be misaligned for f32: then `new` says None and the caller copies instead
/// if let Some(m) = MappedStorage::new(Arc::new(bytes), 0, 2, DType::F32) {
///     let t = Tensor::from_cpu_storage(CpuStorage::Mapped(m), &[2])?;
///     assert_eq!(t.to_vec::<f32>()?, vec![1.5, 2.5]);
/// }
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub unsafe trait StableBytes: Send + Sync + 'static {
    /// The bytes (the same slice on every call).
    fn bytes(&self) -> &[u8];
}

// SAFETY: a Vec behind an `Arc<dyn StableBytes>` cannot be reached mutably (the trait object has
// no mutable access), so its buffer neither moves nor changes.
unsafe impl StableBytes for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// `numel` elements of `dtype` borrowed from `owner`'s bytes at `offset` (little-endian).
#[derive(Clone)]
pub struct MappedStorage {
    owner: Arc<dyn StableBytes>,
    offset: usize,
    numel: usize,
    dtype: DType,
}

impl std::fmt::Debug for MappedStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedStorage({} x {} at byte {})", self.numel, self.dtype, self.offset)
    }
}

impl MappedStorage {
    /// A view of `numel` elements of `dtype` at byte `offset` of `owner`, or `None` when those
    /// bytes cannot be used in place: `bool` (its bytes would need checking), a big-endian
    /// host, an offset not aligned for the dtype, or a range past the end. Callers copy then.
    pub fn new(owner: Arc<dyn StableBytes>, offset: usize, numel: usize, dtype: DType) -> Option<MappedStorage> {
        if dtype == DType::Bool || cfg!(target_endian = "big") {
            return None;
        }
        let end = numel.checked_mul(dtype.size()).and_then(|n| n.checked_add(offset))?;
        let bytes = owner.bytes().get(offset..end)?;
        let align = crate::with_dtype!(dtype, T, { std::mem::align_of::<T>() });
        if (bytes.as_ptr() as usize) % align != 0 {
            return None;
        }
        Some(MappedStorage { owner, offset, numel, dtype })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.numel
    }

    /// True when it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.numel == 0
    }

    /// The elements as `T` (None when `T` is not the dtype).
    #[inline]
    pub fn typed<T: Element>(&self) -> Option<&[T]> {
        if T::DTYPE != self.dtype || std::mem::size_of::<T>() != self.dtype.size() {
            return None;
        }
        let bytes = self.owner.bytes().get(self.offset..self.offset + self.numel * std::mem::size_of::<T>())?;
        if (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return None;
        }
        // SAFETY: in bounds and aligned for T (checked just above); T is a numeric element type
        // for which every bit pattern is a value (bool is refused by `new`); the owner, kept alive
        // by `self`, neither moves nor writes the bytes (the `StableBytes` contract).
        Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), self.numel) })
    }
}

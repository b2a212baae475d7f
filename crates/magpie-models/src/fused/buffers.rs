//! Device buffers owned by the engines, raw addresses of tensors, and copies to and from them.

use magpie_core::backend::cuda::device::CudaDevice;
use magpie_core::backend::cuda::elementwise::storage_of;
use magpie_core::backend::cuda::memcpy;
use magpie_core::backend::cuda::CudaStorage;
use magpie_core::{DType, Error, Result, Tensor};
use std::sync::Arc;

/// One device buffer and its address.
pub(crate) struct Buf {
    _st: CudaStorage,
    pub ptr: u64,
}

impl Buf {
    /// `len` elements of `dtype` (at least one), an error naming `what` when memory runs out.
    pub fn new(dev: &Arc<CudaDevice>, dtype: DType, len: usize, what: &str) -> Result<Buf> {
        let st = CudaStorage::alloc(dev, dtype, len.max(1)).map_err(|e| Error::device("fused", format!("allocating the {what} ({} bytes): {e}", len * dtype.size())))?;
        let ptr = st.ptr();
        Ok(Buf { _st: st, ptr })
    }
    /// The address of element `elem`.
    pub fn at(&self, elem: usize, dtype: DType) -> u64 {
        self.ptr + (elem * dtype.size()) as u64
    }
}

/// The device address of a CUDA tensor's first element.
pub(crate) fn ptr(t: &Tensor) -> Result<u64> {
    let (p, _) = storage_of("fused", t)?;
    Ok(p + (t.storage_offset() * t.dtype().size()) as u64)
}

/// [`ptr`] of an optional tensor (0 when absent).
pub(crate) fn opt_ptr(t: &Option<Tensor>) -> Result<u64> {
    t.as_ref().map_or(Ok(0), ptr)
}

/// Host values to one of the engine's buffers (queued on the stream).
pub(crate) fn upload<T: Copy>(dev: &CudaDevice, dst: u64, v: &[T]) -> Result<()> {
    // SAFETY: every caller passes one of the engine's buffers at an in-range offset.
    unsafe { memcpy::htod(dev, dst, v) }
}

/// `n` values from one of the engine's buffers (waits for the stream).
pub(crate) fn download<T: Copy + Default>(dev: &CudaDevice, src: u64, n: usize) -> Result<Vec<T>> {
    // SAFETY: every caller reads an in-range prefix of one of the engine's i32 / f32 buffers.
    unsafe { memcpy::dtoh(dev, src, n) }
}

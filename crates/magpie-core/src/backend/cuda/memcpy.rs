//! Copies between host slices and raw device addresses, for engines that own their buffers
//! (tensors copy through `CudaStorage::upload` / `download`).

use super::device::{drv, CudaDevice};
use crate::Result;
use cudarc::driver::result;

/// Queues a copy of `v` to device address `dst` on `dev`'s stream. Pageable host memory is staged
/// before the call returns, so `v` may be dropped at once.
///
/// # Safety
/// `dst` must address at least `size_of_val(v)` bytes of live device memory of `dev`.
pub unsafe fn htod<T: Copy>(dev: &CudaDevice, dst: u64, v: &[T]) -> Result<()> {
    if v.is_empty() {
        return Ok(());
    }
    dev.bind()?;
    // SAFETY: the caller guarantees the destination range.
    unsafe { result::memcpy_htod_async(dst, v, dev.cu_stream()) }.map_err(|e| drv("memcpy", e))
}

/// Reads `n` values of `T` from device address `src`, after the work queued before (waits).
///
/// # Safety
/// `src` must address at least `n * size_of::<T>()` bytes of live device memory of `dev`, holding
/// valid values of `T`.
pub unsafe fn dtoh<T: Copy + Default>(dev: &CudaDevice, src: u64, n: usize) -> Result<Vec<T>> {
    let mut v = vec![T::default(); n];
    if n == 0 {
        return Ok(v);
    }
    super::alloc::forbid_in_capture(dev, "memcpy", "a device-to-host copy")?;
    dev.bind()?;
    // SAFETY: the caller guarantees the source range; the stream is synchronized before `v` is used.
    unsafe { result::memcpy_dtoh_async(&mut v, src, dev.cu_stream()) }.map_err(|e| drv("memcpy", e))?;
    dev.synchronize()?;
    Ok(v)
}

/// Queues a copy of `bytes` bytes from device address `src` to `dst` on `dev`'s stream.
///
/// # Safety
/// Both ranges must be live device memory of `dev`, `bytes` long.
pub unsafe fn dtod(dev: &CudaDevice, dst: u64, src: u64, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    dev.bind()?;
    // SAFETY: the caller guarantees both ranges.
    unsafe { result::memcpy_dtod_async(dst, src, bytes, dev.cu_stream()) }.map_err(|e| drv("memcpy", e))
}

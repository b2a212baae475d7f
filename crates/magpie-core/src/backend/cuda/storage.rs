//! `CudaStorage`: the device memory behind CUDA tensors (one caching-allocator block), and the
//! host <-> device copies.

use super::alloc::{self, Block};
use super::device::{self, drv, CudaDevice};
use crate::dtype::DType;
use crate::element::Element;
use crate::storage::CpuStorage;
use crate::{Device, Error, Result};
use cudarc::driver::result;
use std::sync::Arc;

/// Elements of one dtype in device memory.
#[derive(Debug)]
pub struct CudaStorage {
    /// Shared by storages that reinterpret the same bytes (bit-pattern copies).
    block: Arc<Block>,
    dtype: DType,
    len: usize,
}

impl CudaStorage {
    /// Uninitialized device memory for `len` elements of `dtype` on `dev`.
    pub fn alloc(dev: &Arc<CudaDevice>, dtype: DType, len: usize) -> Result<CudaStorage> {
        let bytes = len.checked_mul(dtype.size()).ok_or_else(|| Error::value("empty", format!("{len} elements of {dtype} overflow the address space")))?;
        Ok(CudaStorage { block: Arc::new(alloc::alloc(dev, bytes)?), dtype, len })
    }
    /// The same bytes seen as `len` elements of `dtype` (which must fit in the block).
    pub(crate) fn alias(&self, dtype: DType, len: usize) -> Result<CudaStorage> {
        if len * dtype.size() > self.len * self.dtype.size() {
            return Err(Error::value("alias", "reinterpreted storage is larger than the original"));
        }
        Ok(CudaStorage { block: self.block.clone(), dtype, len })
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device as a [`Device`] value.
    pub fn device(&self) -> Device {
        Device::Cuda(self.block.device().ordinal)
    }
    /// The owning device.
    pub fn cuda_device(&self) -> &Arc<CudaDevice> {
        self.block.device()
    }
    /// The device address of element 0.
    pub fn ptr(&self) -> u64 {
        self.block.ptr()
    }
    /// Copies a host storage to a new device storage on `cuda:ordinal` (queued on its stream).
    pub fn upload(ordinal: usize, src: &CpuStorage) -> Result<CudaStorage> {
        let dev = device::device("to", ordinal)?;
        // a captured copy would read the host buffer again at every replay, after it was freed
        super::alloc::forbid_in_capture(&dev, "to", "a copy of host data to the GPU (copy into a static input tensor before replaying instead)")?;
        let st = CudaStorage::alloc(&dev, src.dtype(), src.len())?;
        if !st.is_empty() {
            crate::with_dtype!(src.dtype(), T, {
                let v = T::slice(src).ok_or_else(|| Error::dtype("to", "storage dtype mismatch"))?;
                // SAFETY: the block holds len * size_of::<T>() bytes; pageable host memory is copied
                // out before the call returns, so `v` need not outlive the copy.
                unsafe { result::memcpy_htod_async(st.ptr(), v, dev.cu_stream()) }.map_err(|e| drv("to", e))?;
            });
        }
        Ok(st)
    }
    /// Reads elements `start..start + n` back to the host (waits for the stream).
    pub fn download(&self, start: usize, n: usize) -> Result<CpuStorage> {
        if start.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(Error::index("to", format!("elements {start}..{} of a storage of {}", start.saturating_add(n), self.len)));
        }
        let dev = self.cuda_device();
        super::alloc::forbid_in_capture(dev, "to", "a host read of CUDA values (item(), tolist(), .to(\"cpu\") or an op that reads its inputs on the host)")?;
        dev.bind()?;
        Ok(crate::with_dtype!(self.dtype, T, {
            let mut v = vec![T::default(); n];
            if n > 0 {
                let src = self.ptr() + (start * std::mem::size_of::<T>()) as u64;
                // SAFETY: the range is inside the block (checked above); the stream is synchronized
                // before `v` is used.
                unsafe { result::memcpy_dtoh_async(&mut v, src, dev.cu_stream()) }.map_err(|e| drv("to", e))?;
                dev.synchronize()?;
            }
            T::into_storage(v)
        }))
    }
}

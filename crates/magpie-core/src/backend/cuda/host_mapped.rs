//! Page-locked host memory that kernels write directly (mapped into the device's address space),
//! and events: together they let a host read a small result of step `i` (a token id) while step
//! `i + 1` already runs, with no copy queued behind it.

use super::device::{drv, CudaDevice};
use crate::{Error, Result};
use cudarc::driver::{result, sys};
use std::sync::Arc;

/// `len` i32 values in mapped page-locked host memory.
pub struct MappedI32 {
    host: *mut i32,
    dev_ptr: u64,
    len: usize,
    dev: Arc<CudaDevice>,
}

// SAFETY: the buffer is plain memory owned by this value; reads are volatile and callers order
// them after the device's writes with an event.
unsafe impl Send for MappedI32 {}

impl MappedI32 {
    /// Zeroed mapped memory for `len` values.
    pub fn new(dev: &Arc<CudaDevice>, len: usize) -> Result<MappedI32> {
        let op = "host_mapped";
        dev.bind()?;
        let bytes = len.max(1).checked_mul(4).ok_or_else(|| Error::value(op, "size overflows"))?;
        // SAFETY: a plain allocation; freed in Drop.
        let host = unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP) }.map_err(|e| drv(op, format!("cuMemHostAlloc of {bytes} bytes: {e}")))? as *mut i32;
        // SAFETY: `host` is a fresh allocation of `bytes` bytes.
        unsafe { std::ptr::write_bytes(host, 0, len.max(1)) };
        let mut dp: sys::CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP in the current context.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dp, host as *mut std::ffi::c_void, 0) };
        if r != sys::CUresult::CUDA_SUCCESS {
            // SAFETY: allocated above, not shared.
            unsafe { result::free_host(host as *mut std::ffi::c_void) }.ok();
            return Err(drv(op, format!("cuMemHostGetDevicePointer: {r:?}")));
        }
        Ok(MappedI32 { host, dev_ptr: dp, len, dev: dev.clone() })
    }
    /// The address kernels write to.
    pub fn device_ptr(&self) -> u64 {
        self.dev_ptr
    }
    /// Value `i` as the host sees it now (order it after the writing kernel with an [`Event`]).
    pub fn get(&self, i: usize) -> Option<i32> {
        // SAFETY: in bounds; volatile because the device writes it behind the compiler's back.
        (i < self.len).then(|| unsafe { std::ptr::read_volatile(self.host.add(i)) })
    }
}

impl Drop for MappedI32 {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            // Work still queued may write here: wait for it before freeing.
            let _ = self.dev.synchronize();
            // SAFETY: allocated by cuMemHostAlloc in `new`, freed once.
            unsafe { result::free_host(self.host as *mut std::ffi::c_void) }.ok();
        }
    }
}

/// A CUDA event (timing off) on a device's stream.
pub struct Event {
    ev: sys::CUevent,
    dev: Arc<CudaDevice>,
}

// SAFETY: an event handle may be used from any thread with its context current.
unsafe impl Send for Event {}

impl Event {
    /// A new event.
    pub fn new(dev: &Arc<CudaDevice>) -> Result<Event> {
        dev.bind()?;
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(|e| drv("event", e))?;
        Ok(Event { ev, dev: dev.clone() })
    }
    /// Marks the point after all work queued so far on the device's stream.
    pub fn record(&self) -> Result<()> {
        self.dev.bind()?;
        // SAFETY: a live event and the device's live stream.
        unsafe { result::event::record(self.ev, self.dev.cu_stream()) }.map_err(|e| drv("event", e))
    }
    /// True when the work before the last `record` has finished (does not wait).
    pub fn query(&self) -> Result<bool> {
        self.dev.bind()?;
        // SAFETY: a live event.
        match unsafe { result::event::query(self.ev) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(drv("event", e)),
        }
    }
    /// Waits until the work before the last `record` has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.dev.bind()?;
        // SAFETY: a live event.
        unsafe { result::event::synchronize(self.ev) }.map_err(|e| drv("event", e))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            // SAFETY: created in `new`, destroyed once.
            unsafe { result::event::destroy(self.ev) }.ok();
        }
    }
}

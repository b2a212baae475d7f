//! Page-locked (pinned) host memory for CPU tensors (`Tensor::pin_memory`): a caching allocator
//! of `cuMemHostAlloc` blocks, as PyTorch's `CachingHostAllocator`, and the copies between such a
//! buffer and device memory that run asynchronously on a device's stream.
//!
//! A copy records an event on the buffer. Host reads wait for a copy into the buffer, host writes
//! and the buffer's release wait for every copy (reads by the device) still running, so no copy
//! can touch memory that was reused or written meanwhile, even when the tensor is dropped right
//! after a `non_blocking` copy: its block goes back to the cache only once the events complete.

use super::device::{self, drv, CudaDevice};
use super::host_mapped::Event;
use crate::dtype::DType;
use crate::element::Element;
use crate::{Error, Result};
use cudarc::driver::{result, sys};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Counters of the pinned host allocator (bytes are of rounded block sizes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PinnedStats {
    /// Bytes in blocks held by pinned storages now.
    pub allocated: usize,
    /// Bytes of blocks released by their storages whose copies may still run.
    pub pending: usize,
    /// Bytes held from the driver: allocated, pending and cached.
    pub reserved: usize,
    /// Driver allocations (`cuMemHostAlloc`) so far.
    pub driver_allocs: u64,
    /// Driver frees (`cuMemFreeHost`) so far.
    pub driver_frees: u64,
    /// Allocations served from the cache.
    pub cache_hits: u64,
}

/// One `cuMemHostAlloc` block of `size` bytes (a power of two).
struct Block {
    ptr: *mut u8,
    size: usize,
    /// The device whose context allocated it (bound to free it).
    dev: Arc<CudaDevice>,
}

// SAFETY: the block is plain host memory owned by whoever holds this value; access to its bytes
// goes through `PinnedBuf`, which orders it after the device's copies with events.
unsafe impl Send for Block {}

struct Cache {
    free: BTreeMap<usize, Vec<Block>>,
    /// Blocks whose storage was dropped while copies from or into them were queued.
    deferred: Vec<(Block, Vec<Event>)>,
    stats: PinnedStats,
}

fn cache() -> MutexGuard<'static, Cache> {
    static CACHE: Mutex<Cache> = Mutex::new(Cache {
        free: BTreeMap::new(),
        deferred: Vec::new(),
        stats: PinnedStats { allocated: 0, pending: 0, reserved: 0, driver_allocs: 0, driver_frees: 0, cache_hits: 0 },
    });
    // a poisoned lock only means a panic elsewhere while holding it; the lists stay consistent
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when every event has completed (an event whose query fails counts as still running, so
/// a block is never reused after a device error).
fn all_done(events: &[Event]) -> bool {
    events.iter().all(|e| e.query().unwrap_or(false))
}

impl Cache {
    /// Moves deferred blocks whose copies have finished to the free lists.
    fn collect(&mut self) {
        let mut i = 0;
        while i < self.deferred.len() {
            if all_done(&self.deferred[i].1) {
                let (b, _) = self.deferred.swap_remove(i);
                self.stats.pending -= b.size;
                self.free.entry(b.size).or_default().push(b);
            } else {
                i += 1;
            }
        }
    }
    /// Frees every cached block.
    fn release_free(&mut self) {
        for (_, blocks) in std::mem::take(&mut self.free) {
            for b in blocks {
                if b.dev.bind().is_ok() {
                    // SAFETY: allocated by cuMemHostAlloc, in no storage and no copy, freed once.
                    if unsafe { result::free_host(b.ptr as *mut std::ffi::c_void) }.is_ok() {
                        self.stats.reserved -= b.size;
                        self.stats.driver_frees += 1;
                    }
                }
            }
        }
    }
}

/// The block size that serves `bytes` (powers of two from 4 KiB, as PyTorch's host allocator).
fn size_class(bytes: usize) -> Option<usize> {
    bytes.max(4096).checked_next_power_of_two()
}

/// The error of an op that needs page-locked memory where CUDA cannot be used, in PyTorch's words.
pub fn no_accelerator(op: &str) -> Error {
    let why = device::unavailable_reason().unwrap_or_default();
    let msg = if why.contains("libcuda") {
        "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx".to_string()
    } else if why.contains("no CUDA GPU") {
        "No CUDA GPUs are available".to_string()
    } else {
        format!("CUDA is not available: {why}")
    };
    Error::device(op, msg)
}

fn take_block(op: &str, bytes: usize) -> Result<Block> {
    if !device::is_available() {
        return Err(no_accelerator(op));
    }
    let size = size_class(bytes).ok_or_else(|| Error::value(op, format!("{bytes} bytes of pinned memory overflow the address space")))?;
    let mut c = cache();
    c.collect();
    if let Some(b) = c.free.get_mut(&size).and_then(Vec::pop) {
        c.stats.cache_hits += 1;
        c.stats.allocated += size;
        return Ok(b);
    }
    // the memory is portable (usable from every device's context); the first GPU's context makes it
    let dev = device::device(op, 0)?;
    let alloc = || {
        // SAFETY: a plain allocation of `size` bytes, freed by `release_free` only.
        unsafe { result::malloc_host(size, sys::CU_MEMHOSTALLOC_PORTABLE) }
    };
    let ptr = match alloc() {
        Ok(p) => p,
        Err(_) => {
            // out of page-locked memory: give the cached blocks back and try once more
            c.release_free();
            alloc().map_err(|e| drv(op, format!("cuMemHostAlloc of {size} bytes: {e}")))?
        }
    };
    c.stats.driver_allocs += 1;
    c.stats.reserved += size;
    c.stats.allocated += size;
    Ok(Block { ptr: ptr as *mut u8, size, dev })
}

/// The pinned allocator's counters.
pub fn pinned_stats() -> PinnedStats {
    let mut c = cache();
    c.collect();
    c.stats
}

/// Frees the cached pinned blocks (after moving those whose copies finished to the cache);
/// blocks held by storages or by copies still running stay.
pub fn empty_pinned_cache() {
    let mut c = cache();
    c.collect();
    c.release_free();
}

/// `len` elements of `dtype` in page-locked host memory: the storage of a pinned CPU tensor.
/// Its slices wait for the copies queued on it (see the module docs).
pub struct PinnedBuf {
    block: Option<Block>,
    dtype: DType,
    len: usize,
    /// A device-to-host copy into the buffer that may still run (host reads wait for it).
    filling: Mutex<Option<Event>>,
    /// Host-to-device copies from the buffer that may still run (host writes wait for them).
    reading: Mutex<Vec<Event>>,
}

// SAFETY: the bytes are owned by this value; the events are behind locks, and every host access
// to the bytes waits for the device's copies first.
unsafe impl Sync for PinnedBuf {}

impl std::fmt::Debug for PinnedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuf({} x {})", self.len, self.dtype)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PinnedBuf {
    /// Page-locked memory for `len` elements of `dtype`, zeroed (a cached block when one fits).
    pub fn zeros(op: &str, dtype: DType, len: usize) -> Result<PinnedBuf> {
        let b = Self::uninit(op, dtype, len)?;
        if let Some(blk) = &b.block {
            // SAFETY: the block holds at least len * size bytes and nothing else uses it yet.
            unsafe { std::ptr::write_bytes(blk.ptr, 0, b.bytes()) };
        }
        Ok(b)
    }
    /// A buffer whose bytes are written by the caller before any slice of it is made.
    fn uninit(op: &str, dtype: DType, len: usize) -> Result<PinnedBuf> {
        let bytes = len.checked_mul(dtype.size()).ok_or_else(|| Error::value(op, format!("{len} elements of {dtype} overflow the address space")))?;
        let block = take_block(op, bytes)?;
        Ok(PinnedBuf { block: Some(block), dtype, len, filling: Mutex::new(None), reading: Mutex::new(Vec::new()) })
    }
    /// A pinned copy of `v`.
    pub fn from_slice<T: Element>(op: &str, v: &[T]) -> Result<PinnedBuf> {
        let b = Self::uninit(op, T::DTYPE, v.len())?;
        if let Some(blk) = &b.block {
            // SAFETY: the block holds at least size_of_val(v) bytes, is page-aligned and unused.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, blk.ptr, std::mem::size_of_val(v)) };
        }
        Ok(b)
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
    fn bytes(&self) -> usize {
        self.len * self.dtype.size()
    }
    fn ptr(&self) -> *mut u8 {
        self.block.as_ref().map_or(std::ptr::null_mut(), |b| b.ptr)
    }
    /// Waits for a copy into the buffer; false if the device reported an error.
    fn wait_filled(&self) -> bool {
        let mut f = lock(&self.filling);
        match f.as_ref().map(Event::synchronize) {
            Some(Err(_)) => false,
            _ => {
                *f = None;
                true
            }
        }
    }
    /// Waits for every copy from the buffer; false if the device reported an error.
    fn wait_read(&self) -> bool {
        let mut r = lock(&self.reading);
        let ok = r.iter().all(|e| e.synchronize().is_ok());
        if ok {
            r.clear();
        }
        ok
    }
    /// The elements as `T` once a copy into them has finished (None for another dtype or after a
    /// device error).
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        if T::DTYPE != self.dtype || self.ptr().is_null() || !self.wait_filled() {
            return None;
        }
        // SAFETY: the block holds `len` initialized values of T (zeroed, copied in, or written by a
        // finished copy), is page-aligned, and lives as long as `self`.
        Some(unsafe { std::slice::from_raw_parts(self.ptr() as *const T, self.len) })
    }
    /// The elements as `T` for writing, once every copy from or into them has finished.
    pub fn as_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        if T::DTYPE != self.dtype || self.ptr().is_null() || !self.wait_filled() || !self.wait_read() {
            return None;
        }
        // SAFETY: as in `as_slice`; `&mut self` excludes other host access, and no copy runs.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr() as *mut T, self.len) })
    }

    /// Queues a copy of elements `start..start + n` to device address `dst` on `dev`'s stream
    /// and returns at once; the buffer stays allocated and unwritten until the copy has run.
    ///
    /// # Safety
    /// `dst` must address at least `n * dtype.size()` bytes of live device memory of `dev`.
    pub unsafe fn copy_to_device(&self, op: &str, dev: &Arc<CudaDevice>, dst: u64, start: usize, n: usize) -> Result<()> {
        if start.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(Error::index(op, format!("elements {start}..{} of a pinned storage of {}", start.saturating_add(n), self.len)));
        }
        if n == 0 {
            return Ok(());
        }
        // a copy into this buffer queued on another device's stream must land first
        if !self.wait_filled() {
            return Err(Error::device(op, "CUDA error: a copy into this pinned tensor failed"));
        }
        dev.bind()?;
        let sz = self.dtype.size();
        // SAFETY: the source range is inside the block (checked above); the caller guarantees the
        // destination. The block outlives the copy: the event recorded next is waited for before
        // any write and before the block is reused.
        let r = unsafe { sys::cuMemcpyHtoDAsync_v2(dst, self.ptr().add(start * sz) as *const std::ffi::c_void, n * sz, dev.cu_stream()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(drv(op, format!("cuMemcpyHtoDAsync: {r:?}")));
        }
        let ev = Event::new(dev)?;
        ev.record()?;
        let mut reading = lock(&self.reading);
        // forget finished copies so the list stays short
        reading.retain(|e| !e.query().unwrap_or(false));
        reading.push(ev);
        Ok(())
    }

    /// A new buffer of `n` elements of `dtype` filled from device address `src` by a copy queued on
    /// `dev`'s stream; returns at once, and host reads of the buffer wait for the copy.
    ///
    /// # Safety
    /// `src` must address at least `n * dtype.size()` bytes of live device memory of `dev` holding
    /// valid values of `dtype`.
    pub unsafe fn from_device(op: &str, dev: &Arc<CudaDevice>, src: u64, dtype: DType, n: usize) -> Result<PinnedBuf> {
        let b = Self::uninit(op, dtype, n)?;
        if n == 0 {
            return Ok(b);
        }
        dev.bind()?;
        // SAFETY: the block holds n * size bytes; the caller guarantees the source. No slice of the
        // buffer exists until `filling` has completed.
        let r = unsafe { sys::cuMemcpyDtoHAsync_v2(b.ptr() as *mut std::ffi::c_void, src, b.bytes(), dev.cu_stream()) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(drv(op, format!("cuMemcpyDtoHAsync: {r:?}")));
        }
        let ev = Event::new(dev)?;
        ev.record()?;
        *lock(&b.filling) = Some(ev);
        Ok(b)
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        let Some(b) = self.block.take() else { return };
        let mut events = std::mem::take(self.reading.get_mut().unwrap_or_else(|e| e.into_inner()));
        events.extend(self.filling.get_mut().unwrap_or_else(|e| e.into_inner()).take());
        let mut c = cache();
        c.stats.allocated -= b.size;
        if all_done(&events) {
            c.free.entry(b.size).or_default().push(b);
        } else {
            // copies may still read or write the block: reuse it only after they finish
            c.stats.pending += b.size;
            c.deferred.push((b, events));
        }
    }
}

//! The caching allocator: freed device blocks go to per-size-class free lists of their device and
//! are handed out again without a driver call. All work of a device runs on its one stream, so a
//! block freed by the host can be reused by the next op at once: the stream orders the old
//! reader before the new writer (stream-ordered reuse, as PyTorch's caching allocator does).

use super::device::{drv, CudaDevice};
use crate::Result;
use cudarc::driver::result;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Counters of one device's allocator (bytes are of rounded block sizes, as PyTorch reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in blocks held by tensors now (`torch.cuda.memory_allocated`).
    pub allocated: usize,
    /// Highest `allocated` since start or the last reset (`max_memory_allocated`).
    pub peak_allocated: usize,
    /// Bytes held from the driver: allocated plus cached (`memory_reserved`).
    pub reserved: usize,
    /// Driver allocations (`cuMemAlloc`) so far.
    pub driver_allocs: u64,
    /// Driver frees (`cuMemFree`) so far.
    pub driver_frees: u64,
    /// Allocations served from the cache.
    pub cache_hits: u64,
}

/// Free lists by size class: block addresses.
type FreeLists = BTreeMap<usize, Vec<u64>>;

/// Per-device allocator state.
#[derive(Default)]
pub struct Allocator {
    free: Mutex<FreeLists>,
    /// The pool of the capture under way on this device, if any.
    capture: Mutex<Option<Arc<PoolInner>>>,
    allocated: AtomicUsize,
    peak: AtomicUsize,
    reserved: AtomicUsize,
    driver_allocs: AtomicU64,
    driver_frees: AtomicU64,
    cache_hits: AtomicU64,
}

/// The size class of a request: multiples of 512 bytes up to 4 KiB, then 8 steps per power of
/// two (at most 12.5% waste), so that blocks of similar sizes are shared.
pub fn size_class(bytes: usize) -> usize {
    if bytes <= 4096 {
        return bytes.div_ceil(512).max(1) * 512;
    }
    // steps of 1/8 of the largest power of two not above the request: the rounding adds less
    // than one step, i.e. less than 12.5% of the request
    let floor_pow2 = 1usize << (usize::BITS - 1 - bytes.leading_zeros());
    let step = floor_pow2 / 8;
    bytes.div_ceil(step) * step
}

/// The blocks of a graph's private memory pool (`torch.cuda.graph_pool_handle()`).
pub struct PoolInner {
    free: Mutex<FreeLists>,
    dev: Arc<CudaDevice>,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // no graph and no block of the pool is left: its cached blocks serve everyone again
        let mine = std::mem::take(&mut *self.free.lock().unwrap_or_else(|e| e.into_inner()));
        let mut f = self.dev.alloc.free.lock().unwrap_or_else(|e| e.into_inner());
        for (s, ps) in mine {
            f.entry(s).or_default().extend(ps);
        }
    }
}

/// A private memory pool for CUDA graphs of one device. Clones share the pool (PyTorch's
/// `pool=` argument of `torch.cuda.graph`): graphs captured into one pool may reuse each other's
/// freed blocks, so they must be replayed in the order they were captured.
#[derive(Clone)]
pub struct MemPool(pub(crate) Arc<PoolInner>);

impl std::fmt::Debug for MemPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MemPool(cuda:{}, {} cached bytes)", self.0.dev.ordinal, self.cached_bytes())
    }
}

impl MemPool {
    /// A new, empty pool on `dev`.
    pub fn new(dev: &Arc<CudaDevice>) -> MemPool {
        MemPool(Arc::new(PoolInner { free: Mutex::new(BTreeMap::new()), dev: dev.clone() }))
    }
    /// The pool's device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.0.dev
    }
    /// Bytes of free blocks the pool keeps for its graphs.
    pub fn cached_bytes(&self) -> usize {
        self.0.free.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(s, v)| s * v.len()).sum()
    }
    /// True when both handles name the same pool.
    pub fn same(&self, other: &MemPool) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Routes `dev`'s allocations and frees to `pool` until [`end_capture`] (one capture per device
/// at a time).
pub(crate) fn begin_capture(dev: &CudaDevice, pool: &MemPool, op: &str) -> Result<()> {
    let mut c = dev.alloc.capture.lock().unwrap_or_else(|e| e.into_inner());
    if c.is_some() {
        return Err(crate::Error::device(op, format!("a CUDA graph is already being captured on cuda:{}", dev.ordinal)));
    }
    *c = Some(pool.0.clone());
    Ok(())
}

/// Ends the routing of [`begin_capture`].
pub(crate) fn end_capture(dev: &CudaDevice) {
    *dev.alloc.capture.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// True while a CUDA graph is being captured on `dev`.
pub fn is_capturing(dev: &CudaDevice) -> bool {
    dev.alloc.capture.lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// An error naming `op` when a graph is being captured on `dev`: `what` (a host read, a
/// synchronization, a CPU fallback) cannot be recorded into a graph, whose replay runs no host code.
pub fn forbid_in_capture(dev: &CudaDevice, op: &str, what: &str) -> Result<()> {
    if is_capturing(dev) {
        return Err(crate::Error::device(
            op,
            format!("{what} cannot be captured into a CUDA graph (capture under way on cuda:{}): a replay runs only the queued GPU work; move it out of the captured region", dev.ordinal),
        ));
    }
    Ok(())
}

/// A block of device memory owned by one storage; back to its device's cache (or its graph
/// pool) on drop.
pub struct Block {
    ptr: u64,
    size: usize,
    dev: Arc<CudaDevice>,
    pool: Option<Arc<PoolInner>>,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({:#x}, {} bytes, cuda:{})", self.ptr, self.size, self.dev.ordinal)
    }
}

impl Block {
    /// The device address (0 for an empty block).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// The block's (rounded) size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }
    /// The device that owns it.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if self.size == 0 {
            return;
        }
        let a = &self.dev.alloc;
        a.allocated.fetch_sub(self.size, Ordering::Relaxed);
        // a block freed during a capture may still be read by captured kernels: it joins the
        // capture's pool (reusable only by that pool's captures) instead of the shared cache
        let pool = self.pool.take().or_else(|| a.capture.lock().unwrap_or_else(|e| e.into_inner()).clone());
        match pool {
            Some(p) => p.free.lock().unwrap_or_else(|e| e.into_inner()).entry(self.size).or_default().push(self.ptr),
            None => a.free.lock().unwrap_or_else(|e| e.into_inner()).entry(self.size).or_default().push(self.ptr),
        }
    }
}

/// This thread's stream-capture mode set to relaxed until dropped (then restored).
struct RelaxedCapture(cudarc::driver::sys::CUstreamCaptureMode);

impl RelaxedCapture {
    fn new() -> RelaxedCapture {
        let mut m = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: swaps a thread-local setting of the driver through a valid pointer.
        unsafe { cudarc::driver::sys::cuThreadExchangeStreamCaptureMode(&mut m) };
        RelaxedCapture(m)
    }
}

impl Drop for RelaxedCapture {
    fn drop(&mut self) {
        let mut m = self.0;
        // SAFETY: as in `new`; restores the mode saved there.
        unsafe { cudarc::driver::sys::cuThreadExchangeStreamCaptureMode(&mut m) };
    }
}

/// A block of at least `bytes` bytes on `dev`: from the cache when one of its size class is free,
/// else from the driver (emptying the cache and retrying once when the driver is out of memory).
pub fn alloc(dev: &Arc<CudaDevice>, bytes: usize) -> Result<Block> {
    if bytes == 0 {
        return Ok(Block { ptr: 0, size: 0, dev: dev.clone(), pool: None });
    }
    let size = size_class(bytes);
    let a = &dev.alloc;
    let pool = a.capture.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let cached = match &pool {
        Some(p) => p.free.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&size).and_then(|v| v.pop()),
        None => a.free.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&size).and_then(|v| v.pop()),
    };
    let ptr = match cached {
        Some(p) => {
            a.cache_hits.fetch_add(1, Ordering::Relaxed);
            p
        }
        None => {
            dev.bind()?;
            // During a capture, cuMemAlloc counts as a call that invalidates it unless this
            // thread's capture mode is relaxed (the allocation is not part of the graph: the
            // pool keeps the block for every replay), as PyTorch's allocator does.
            let _relaxed = pool.as_ref().map(|_| RelaxedCapture::new());
            // SAFETY: plain device allocation in the current context.
            let p = match unsafe { result::malloc_sync(size) } {
                Ok(p) => p,
                Err(_) if pool.is_none() => {
                    empty_cache(dev)?;
                    unsafe { result::malloc_sync(size) }.map_err(|e| {
                        drv("alloc", format!("{e} (out of memory allocating {size} bytes; {} bytes allocated)", a.allocated.load(Ordering::Relaxed)))
                    })?
                }
                // during a capture the cache cannot be emptied (that synchronizes)
                Err(e) => return Err(drv("alloc", format!("{e} (out of memory allocating {size} bytes during CUDA graph capture)"))),
            };
            a.driver_allocs.fetch_add(1, Ordering::Relaxed);
            a.reserved.fetch_add(size, Ordering::Relaxed);
            p
        }
    };
    let now = a.allocated.fetch_add(size, Ordering::Relaxed) + size;
    a.peak.fetch_max(now, Ordering::Relaxed);
    Ok(Block { ptr, size, dev: dev.clone(), pool })
}

/// Returns every cached (free) block of `dev` to the driver, after the stream has finished with them.
pub fn empty_cache(dev: &CudaDevice) -> Result<()> {
    forbid_in_capture(dev, "empty_cache", "emptying the allocator's cache (a synchronization)")?;
    let blocks: Vec<(usize, u64)> = {
        let mut f = dev.alloc.free.lock().unwrap_or_else(|e| e.into_inner());
        let v = f.iter().flat_map(|(s, ps)| ps.iter().map(move |p| (*s, *p))).collect();
        f.clear();
        v
    };
    if blocks.is_empty() {
        return Ok(());
    }
    dev.synchronize()?;
    for (s, p) in blocks {
        // SAFETY: the block is no longer referenced by any storage and the stream is idle.
        unsafe { result::free_sync(p) }.map_err(|e| drv("empty_cache", e))?;
        dev.alloc.reserved.fetch_sub(s, Ordering::Relaxed);
        dev.alloc.driver_frees.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// The counters of `dev`'s allocator.
pub fn stats(dev: &CudaDevice) -> MemoryStats {
    let a = &dev.alloc;
    MemoryStats {
        allocated: a.allocated.load(Ordering::Relaxed),
        peak_allocated: a.peak.load(Ordering::Relaxed),
        reserved: a.reserved.load(Ordering::Relaxed),
        driver_allocs: a.driver_allocs.load(Ordering::Relaxed),
        driver_frees: a.driver_frees.load(Ordering::Relaxed),
        cache_hits: a.cache_hits.load(Ordering::Relaxed),
    }
}

/// Sets the peak to the current allocation (`reset_peak_memory_stats`).
pub fn reset_peak(dev: &CudaDevice) {
    let a = &dev.alloc;
    a.peak.store(a.allocated.load(Ordering::Relaxed), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::size_class;
    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 4608);
        assert_eq!(size_class(8192), 8192);
        for n in [4097usize, 8191, 10_000, 1 << 20, (1 << 20) + 1, (1 << 21) - 1, 123_456_789] {
            let c = size_class(n);
            assert!(c >= n && (c - n) * 8 < n, "{n} -> {c}");
        }
    }
}

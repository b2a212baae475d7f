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

/// Per-device allocator state.
#[derive(Default)]
pub struct Allocator {
    free: Mutex<BTreeMap<usize, Vec<u64>>>,
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

/// A block of device memory owned by one storage; back to its device's cache on drop.
pub struct Block {
    ptr: u64,
    size: usize,
    dev: Arc<CudaDevice>,
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
        a.free.lock().unwrap_or_else(|e| e.into_inner()).entry(self.size).or_default().push(self.ptr);
    }
}

/// A block of at least `bytes` bytes on `dev`: from the cache when one of its size class is free,
/// else from the driver (emptying the cache and retrying once when the driver is out of memory).
pub fn alloc(dev: &Arc<CudaDevice>, bytes: usize) -> Result<Block> {
    if bytes == 0 {
        return Ok(Block { ptr: 0, size: 0, dev: dev.clone() });
    }
    let size = size_class(bytes);
    let a = &dev.alloc;
    let cached = a.free.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&size).and_then(|v| v.pop());
    let ptr = match cached {
        Some(p) => {
            a.cache_hits.fetch_add(1, Ordering::Relaxed);
            p
        }
        None => {
            dev.bind()?;
            // SAFETY: plain device allocation in the current context.
            let p = match unsafe { result::malloc_sync(size) } {
                Ok(p) => p,
                Err(_) => {
                    empty_cache(dev)?;
                    unsafe { result::malloc_sync(size) }.map_err(|e| {
                        drv("alloc", format!("{e} (out of memory allocating {size} bytes; {} bytes allocated)", a.allocated.load(Ordering::Relaxed)))
                    })?
                }
            };
            a.driver_allocs.fetch_add(1, Ordering::Relaxed);
            a.reserved.fetch_add(size, Ordering::Relaxed);
            p
        }
    };
    let now = a.allocated.fetch_add(size, Ordering::Relaxed) + size;
    a.peak.fetch_max(now, Ordering::Relaxed);
    Ok(Block { ptr, size, dev: dev.clone() })
}

/// Returns every cached (free) block of `dev` to the driver, after the stream has finished with them.
pub fn empty_cache(dev: &CudaDevice) -> Result<()> {
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

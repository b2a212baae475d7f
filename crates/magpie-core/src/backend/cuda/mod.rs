//! The CUDA backend (feature `cuda`, on by default). cudarc loads the driver and NVRTC at run
//! time, so the same binary runs without CUDA: [`is_available`] is then false and every CUDA
//! request is a clean `Err` naming the op. See `README.md` in this folder for the design and for
//! how to add a kernel.
//!
//! Without the feature, a stub keeps the same API with an uninhabited [`CudaStorage`].

pub mod amp;
#[cfg(feature = "cuda")]
pub mod adv_index;
pub mod add_norm;
#[cfg(feature = "cuda")]
pub mod alloc;
#[cfg(feature = "cuda")]
pub mod attention;
#[cfg(feature = "cuda")]
pub mod attention_bwd;
#[cfg(feature = "cuda")]
pub mod attention_f32;
#[cfg(feature = "cuda")]
pub mod attention_sm90;
#[cfg(feature = "cuda")]
pub mod compile;
#[cfg(feature = "cuda")]
pub mod device;
#[cfg(feature = "cuda")]
pub mod elementwise;
#[cfg(feature = "cuda")]
pub mod fft;
#[cfg(feature = "cuda")]
pub mod exprs;
#[cfg(feature = "cuda")]
pub mod launch;
#[cfg(feature = "cuda")]
pub mod ops;
#[cfg(feature = "cuda")]
mod storage;
#[cfg(feature = "cuda")]
pub mod blas;
#[cfg(feature = "cuda")]
pub mod blas_pad;
#[cfg(feature = "cuda")]
pub mod graph;
#[cfg(feature = "cuda")]
pub mod host_mapped;
#[cfg(feature = "cuda")]
pub mod index;
#[cfg(feature = "cuda")]
pub mod memcpy;
#[cfg(feature = "cuda")]
pub mod kern;
#[cfg(feature = "cuda")]
pub mod norm;
#[cfg(feature = "cuda")]
pub mod norm_bwd;
#[cfg(feature = "cuda")]
pub mod linalg;
#[cfg(feature = "cuda")]
pub mod linalg_perm;
#[cfg(feature = "cuda")]
pub mod linalg_trsm;
#[cfg(feature = "cuda")]
pub mod loss;
pub mod optim;
#[cfg(feature = "cuda")]
pub mod pinned;
#[cfg(feature = "cuda")]
pub mod quant;
#[cfg(feature = "cuda")]
pub mod reduce;
#[cfg(feature = "cuda")]
pub mod rng;
pub mod rows;
#[cfg(feature = "cuda")]
pub mod scan;
#[cfg(feature = "cuda")]
pub mod sort;
#[cfg(feature = "cuda")]
pub mod softmax;
#[cfg(feature = "cuda")]
pub mod strided;

#[cfg(feature = "cuda")]
pub use alloc::MemoryStats;
#[cfg(feature = "cuda")]
pub use compile::{kernel_cache_stats, KernelCacheStats};
#[cfg(feature = "cuda")]
pub use device::{device_count, is_available, CudaDevice};
#[cfg(feature = "cuda")]
pub use pinned::{empty_pinned_cache, no_accelerator, pinned_stats, PinnedBuf, PinnedStats};
#[cfg(feature = "cuda")]
pub use storage::CudaStorage;

#[cfg(not(feature = "cuda"))]
mod stub;
#[cfg(not(feature = "cuda"))]
pub use stub::*;

mod fallback;
pub use fallback::{fallback_counts, host_result, or_on_cpu, reset_fallback_counts};
pub(crate) use fallback::{is_cpu_only_error, note_fallback, cpu_only};

use crate::{Device, Error, Result};

/// An error naming `op` when a CUDA graph is being captured on `dev` (a GPU): `what` runs host
/// code on device values (a host read, a CPU fallback), which a graph cannot replay.
pub fn forbid_in_capture(op: &str, dev: Device, what: &str) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(n) = dev {
        if let Some(d) = device::opened().into_iter().find(|d| d.ordinal == n) {
            return alloc::forbid_in_capture(&d, op, what);
        }
    }
    let _ = (op, dev, what);
    Ok(())
}

/// The error every CUDA request returns where CUDA cannot be used.
pub fn unavailable(op: &str) -> Error {
    #[cfg(feature = "cuda")]
    let why = device::unavailable_reason().unwrap_or_else(|| "unknown reason".into());
    #[cfg(not(feature = "cuda"))]
    let why = "this build has no CUDA backend (feature `cuda` is off)".to_string();
    Error::device(op, format!("CUDA is not available: {why}"))
}

/// Fails unless CUDA can be used.
pub fn require(op: &str) -> Result<()> {
    if is_available() {
        Ok(())
    } else {
        Err(unavailable(op))
    }
}

fn ordinals(dev: Option<Device>) -> Vec<usize> {
    match dev {
        Some(Device::Cuda(n)) => vec![n],
        Some(Device::Cpu) => vec![],
        None => (0..device_count()).collect(),
    }
}

/// `torch.cuda.synchronize()`: waits for all queued work of `dev` (every GPU opened so far when None).
pub fn synchronize(dev: Option<Device>) -> Result<()> {
    #[cfg(feature = "cuda")]
    {
        if dev.is_none() {
            for d in device::opened() {
                d.synchronize()?;
            }
            return Ok(());
        }
        for n in ordinals(dev) {
            device::device("synchronize", n)?.synchronize()?;
        }
        Ok(())
    }
    #[cfg(not(feature = "cuda"))]
    {
        match ordinals(dev).first() {
            Some(_) => Err(unavailable("synchronize")),
            None => Ok(()),
        }
    }
}

/// The allocator counters of `cuda:n` (all zero where CUDA is not available).
pub fn memory_stats(n: usize) -> MemoryStats {
    #[cfg(feature = "cuda")]
    {
        match device::device("memory_stats", n) {
            Ok(d) => alloc::stats(&d),
            Err(_) => MemoryStats::default(),
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = n;
        MemoryStats::default()
    }
}

/// `torch.cuda.memory_allocated(n)`: bytes held by tensors on `cuda:n`.
pub fn memory_allocated(n: usize) -> usize {
    memory_stats(n).allocated
}

/// `torch.cuda.max_memory_allocated(n)`: the peak of [`memory_allocated`].
pub fn max_memory_allocated(n: usize) -> usize {
    memory_stats(n).peak_allocated
}

/// `torch.cuda.memory_reserved(n)`: bytes held from the driver (allocated plus cached).
pub fn memory_reserved(n: usize) -> usize {
    memory_stats(n).reserved
}

/// `torch.cuda.reset_peak_memory_stats(n)`.
pub fn reset_peak_memory_stats(n: usize) {
    #[cfg(feature = "cuda")]
    if let Ok(d) = device::device("reset_peak_memory_stats", n) {
        alloc::reset_peak(&d);
    }
    #[cfg(not(feature = "cuda"))]
    let _ = n;
}

/// `torch.cuda.empty_cache()`: returns the cached free blocks of every opened GPU to the driver.
pub fn empty_cache() -> Result<()> {
    #[cfg(feature = "cuda")]
    for d in device::opened() {
        alloc::empty_cache(&d)?;
    }
    Ok(())
}

//! `Storage`: the memory behind tensors, shared by views, with the version counter autograd checks.

mod cpu;
mod heap;
pub(crate) use heap::advise_huge_pages;
mod mapped;

pub use cpu::CpuStorage;
pub use mapped::{MappedStorage, StableBytes};

use crate::backend::cuda::CudaStorage;
use crate::device::Device;
use crate::dtype::DType;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Elements on one device.
#[derive(Debug)]
pub enum Storage {
    Cpu(CpuStorage),
    Cuda(CudaStorage),
}

impl Storage {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Cpu(c) => c.dtype(),
            Storage::Cuda(c) => c.dtype(),
        }
    }
    /// The device.
    pub fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(c) => c.device(),
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Storage::Cpu(c) => c.len(),
            Storage::Cuda(c) => c.len(),
        }
    }
    /// True when it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A storage shared between a tensor and its views. Every in-place write bumps `version`,
/// so autograd can tell that a tensor it saved for backward was modified.
#[derive(Debug)]
pub struct StorageCell {
    data: RwLock<Storage>,
    version: AtomicU64,
}

impl StorageCell {
    /// Wraps a storage at version 0.
    pub fn new(s: Storage) -> Self {
        if matches!(s, Storage::Cpu(_)) {
            heap::keep_freed_memory();
            crate::threads::adopt_main_thread();
        }
        crate::profiler::memory::track(&s, 1);
        StorageCell { data: RwLock::new(s), version: AtomicU64::new(0) }
    }
    /// Shared access for reading.
    pub fn read(&self) -> RwLockReadGuard<'_, Storage> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }
    /// Exclusive access for an in-place write; bumps the version.
    pub fn write(&self) -> RwLockWriteGuard<'_, Storage> {
        self.version.fetch_add(1, Ordering::SeqCst);
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }
    /// The number of in-place writes so far.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }
}

impl Drop for StorageCell {
    fn drop(&mut self) {
        // the profiler's memory counters (one flag check when not profiling memory)
        if let Ok(s) = self.data.get_mut() {
            crate::profiler::memory::track(s, -1);
        }
    }
}

//! The CUDA API of a build without the `cuda` feature: nothing is available, no CUDA tensor can
//! exist ([`CudaStorage`] is uninhabited), and every request is an error.

use crate::dtype::DType;
use crate::Device;

/// Device memory of one CUDA tensor: uninhabited in a build without CUDA.
#[derive(Debug)]
pub enum CudaStorage {}

impl CudaStorage {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match *self {}
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        match *self {}
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        match *self {}
    }
    /// The device.
    pub fn device(&self) -> Device {
        match *self {}
    }
}

/// Page-locked host memory: uninhabited in a build without CUDA.
#[derive(Debug)]
pub enum PinnedBuf {}

impl PinnedBuf {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match *self {}
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        match *self {}
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        match *self {}
    }
    /// Always the error of a build without an accelerator.
    pub fn from_slice<T: crate::Element>(op: &str, _v: &[T]) -> crate::Result<PinnedBuf> {
        Err(no_accelerator(op))
    }
    /// The elements as `T`.
    pub fn as_slice<T: crate::Element>(&self) -> Option<&[T]> {
        match *self {}
    }
    /// The elements as `T` for writing.
    pub fn as_mut_slice<T: crate::Element>(&mut self) -> Option<&mut [T]> {
        match *self {}
    }
}

/// Pinned host allocator counters (all zero without CUDA).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PinnedStats {
    pub allocated: usize,
    pub pending: usize,
    pub reserved: usize,
    pub driver_allocs: u64,
    pub driver_frees: u64,
    pub cache_hits: u64,
}

/// Always zero.
pub fn pinned_stats() -> PinnedStats {
    PinnedStats::default()
}

/// Nothing to free.
pub fn empty_pinned_cache() {}

/// The error of an op that needs page-locked memory, in PyTorch's words for a build without an
/// accelerator.
pub fn no_accelerator(op: &str) -> crate::Error {
    crate::Error::device(op, "Cannot access accelerator device when none is available.")
}

/// Allocator counters (all zero without CUDA).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    pub allocated: usize,
    pub peak_allocated: usize,
    pub reserved: usize,
    pub driver_allocs: u64,
    pub driver_frees: u64,
    pub cache_hits: u64,
}

/// Kernel cache counters (all zero without CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelCacheStats {
    pub compiles: u64,
    pub disk_hits: u64,
}

/// Always zero.
pub fn kernel_cache_stats() -> KernelCacheStats {
    KernelCacheStats { compiles: 0, disk_hits: 0 }
}

/// Always false.
pub fn is_available() -> bool {
    false
}

/// Always 0.
pub fn device_count() -> usize {
    0
}

/// The tensor-level paths: each is an error (no CUDA tensor can reach them).
pub mod ops {
    use super::super::unavailable;
    use crate::dtype::DType;
    use crate::ops::binary::BinarySpec;
    use crate::ops::unary::UnarySpec;
    use crate::scalar::Scalar;
    use crate::tensor::Tensor;
    use crate::Result;

    pub fn empty(op: &str, _ordinal: usize, _dtype: DType, _shape: &[usize]) -> Result<Tensor> {
        Err(unavailable(op))
    }
    pub fn to_cuda(_t: &Tensor, _ordinal: usize) -> Result<Tensor> {
        Err(unavailable("to"))
    }
    pub fn to_cpu(_t: &Tensor) -> Result<Tensor> {
        Err(unavailable("to"))
    }
    pub fn to_cuda_with(_t: &Tensor, _ordinal: usize, _non_blocking: bool) -> Result<Tensor> {
        Err(unavailable("to"))
    }
    pub fn to_cpu_with(_t: &Tensor, _non_blocking: bool) -> Result<Tensor> {
        Err(unavailable("to"))
    }
    pub fn contiguous(_t: &Tensor) -> Result<Tensor> {
        Err(unavailable("contiguous"))
    }
    pub fn cast(_t: &Tensor, _dtype: DType) -> Result<Tensor> {
        Err(unavailable("to"))
    }
    pub fn copy_into(_dst: &Tensor, _src: &Tensor) -> Result<()> {
        Err(unavailable("copy_"))
    }
    pub fn full(_ordinal: usize, _shape: &[usize], _value: Scalar, _dtype: DType) -> Result<Tensor> {
        Err(unavailable("full"))
    }
    pub fn fill(_dst: &Tensor, _value: Scalar) -> Result<()> {
        Err(unavailable("fill_"))
    }
    pub fn unary(spec: &UnarySpec, _x: &Tensor) -> Result<Option<Tensor>> {
        Err(unavailable(spec.name))
    }
    pub fn binary(spec: &BinarySpec, _a: &Tensor, _b: &Tensor, _compute: DType, _out_dt: DType) -> Result<Option<Tensor>> {
        Err(unavailable(spec.name))
    }
    pub fn where_(_cond: &Tensor, _a: &Tensor, _b: &Tensor, _dtype: DType, _shape: &[usize]) -> Result<Option<Tensor>> {
        Err(unavailable("where"))
    }
    pub fn upload_new(_host: &Tensor, _ordinal: usize) -> Result<Tensor> {
        Err(unavailable("to"))
    }
}

//! The thread-local autocast state: which device kinds autocast, to which dtype, how deeply
//! regions nest, and the cache of weight casts that lives until the outermost region ends.

use crate::{DType, Device, Error, Result, Tensor};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;

/// The device types autocast tells apart (PyTorch's `device_type` argument): every CUDA device
/// shares one state, as in PyTorch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// `"cpu"`: lower precision bfloat16 by default.
    Cpu,
    /// `"cuda"`: lower precision float16 by default.
    Cuda,
}

impl DeviceKind {
    /// The kind of `device`.
    pub fn of(device: Device) -> DeviceKind {
        if device.is_cuda() {
            DeviceKind::Cuda
        } else {
            DeviceKind::Cpu
        }
    }
    pub(crate) fn bit(self) -> u8 {
        match self {
            DeviceKind::Cpu => 1,
            DeviceKind::Cuda => 2,
        }
    }
    fn index(self) -> usize {
        match self {
            DeviceKind::Cpu => 0,
            DeviceKind::Cuda => 1,
        }
    }
}

thread_local! {
    /// One bit per device kind that autocasts now. Zero is the common case, and the only thing
    /// an op reads when autocast is off.
    static ACTIVE: Cell<u8> = const { Cell::new(0) };
    /// The lower-precision dtype per kind (PyTorch's defaults: bfloat16 on CPU, float16 on CUDA).
    static DTYPES: Cell<[DType; 2]> = const { Cell::new([DType::BF16, DType::F16]) };
    static NESTING: Cell<u32> = const { Cell::new(0) };
    static CACHE_ENABLED: Cell<bool> = const { Cell::new(true) };
    /// Set while the registry reruns a CUDA op on CPU copies (an op without a CUDA kernel): the
    /// copies then count as CUDA tensors for autocast, so the op still follows the CUDA lists.
    static CPU_AS_CUDA: Cell<bool> = const { Cell::new(false) };
    /// source id -> (source, cast). Holding the source keeps its id from being reused while
    /// the entry lives (ids are never reused anyway; this mirrors PyTorch's weak reference).
    static CACHE: RefCell<HashMap<(usize, DType), (Tensor, Tensor)>> = RefCell::new(HashMap::new());
    /// The last activation cast by CUDA autocast's fused `linear` (id, version, dtype, cast): the
    /// query, key and value projections of one input share it. Not a weight cast: not counted by
    /// `autocast_cache_len`; cleared with the cache.
    static ACT: RefCell<Option<(usize, u64, DType, Tensor)>> = const { RefCell::new(None) };
}

/// True when any kind autocasts now: the one check an op makes when autocast is off.
#[inline]
pub(crate) fn any_active() -> bool {
    active_bits() != 0
}

#[inline]
pub(crate) fn active_bits() -> u8 {
    ACTIVE.with(|a| a.get())
}

/// `torch.is_autocast_enabled(device_type)`: whether ops on `device`'s kind autocast now.
pub fn is_autocast_enabled(device: Device) -> bool {
    active_bits() & DeviceKind::of(device).bit() != 0
}

/// `torch.get_autocast_dtype(device_type)`: the lower-precision dtype of `device`'s kind
/// (also outside a region: the dtype the next region without a dtype would use).
pub fn get_autocast_dtype(device: Device) -> DType {
    DTYPES.with(|d| d.get()[DeviceKind::of(device).index()])
}

/// `torch.is_autocast_cache_enabled()`.
pub fn is_autocast_cache_enabled() -> bool {
    CACHE_ENABLED.with(|c| c.get())
}

/// `torch.set_autocast_cache_enabled(flag)`: whether weight casts are cached in later regions.
pub fn set_autocast_cache_enabled(flag: bool) {
    CACHE_ENABLED.with(|c| c.set(flag));
}

/// `torch.clear_autocast_cache()`: drops the cached weight casts (done when the outermost
/// region ends).
pub fn clear_autocast_cache() {
    // take the map out first: dropping tensors must not run while the cell is borrowed
    let old = CACHE.with(|c| std::mem::take(&mut *c.borrow_mut()));
    drop(old);
    let act = ACT.with(|c| c.borrow_mut().take());
    drop(act);
}

/// The cast of activation `id` at storage version `version` to `to`, if it is the last one made.
#[cfg(feature = "cuda")]
pub(crate) fn act_cast_get(id: usize, version: u64, to: DType) -> Option<Tensor> {
    ACT.with(|c| c.borrow().as_ref().filter(|e| e.0 == id && e.1 == version && e.2 == to).map(|e| e.3.clone()))
}

/// Keeps `cast` as the last activation cast (of tensor `id` at `version`) until the next one or
/// the end of the outermost region.
#[cfg(feature = "cuda")]
pub(crate) fn act_cast_put(id: usize, version: u64, to: DType, cast: &Tensor) {
    let old = ACT.with(|c| c.borrow_mut().replace((id, version, to, cast.clone())));
    drop(old);
}

/// The number of cached weight casts (for tests: one per leaf and dtype within a region).
pub fn autocast_cache_len() -> usize {
    CACHE.with(|c| c.borrow().len())
}

pub(crate) fn cache_get(id: usize, to: DType) -> Option<Tensor> {
    CACHE.with(|c| c.borrow().get(&(id, to)).map(|(_, cast)| cast.clone()))
}

pub(crate) fn cache_put(src: &Tensor, to: DType, cast: &Tensor) {
    CACHE.with(|c| c.borrow_mut().insert((src.id(), to), (src.clone(), cast.clone())));
}

/// An autocast region; dropping it restores the state before it (as leaving
/// `with torch.autocast(...)` does) and, when it was the outermost region, clears the weight-cast cache.
#[must_use = "autocast applies until the guard is dropped"]
pub struct AutocastGuard {
    kind: DeviceKind,
    prev_bits: u8,
    prev_dtype: DType,
    // the state is per thread: the guard must be dropped on the thread that made it
    _not_send: PhantomData<*const ()>,
}

/// `torch.autocast(device_type, dtype=None, enabled=True)` as a guard: until it is dropped, ops on
/// `device`'s kind (every CUDA device, or the CPU) follow PyTorch's autocast lists with `dtype`
/// (None keeps the kind's current dtype: bfloat16 on CPU and float16 on CUDA unless a region
/// changed it) as the lower precision. `enabled = false` turns autocast off inside (regions nest).
///
/// PyTorch only warns and disables the region for a dtype other than float16 or bfloat16;
/// here that is an error.
///
/// ```
/// use magpie_core::{amp, DType, Device};
/// let outer = amp::autocast(Device::Cuda(0), Some(DType::BF16), true)?;
/// {
///     let _inner = amp::autocast(Device::Cuda(0), None, false)?;
///     assert!(!amp::is_autocast_enabled(Device::Cuda(0)));
/// }
/// assert!(amp::is_autocast_enabled(Device::Cuda(0)));
/// assert_eq!(amp::get_autocast_dtype(Device::Cuda(0)), DType::BF16);
/// drop(outer);
/// assert_eq!(amp::get_autocast_dtype(Device::Cuda(0)), DType::F16);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn autocast(device: Device, dtype: Option<DType>, enabled: bool) -> Result<AutocastGuard> {
    let kind = DeviceKind::of(device);
    if let Some(d) = dtype {
        if !matches!(d, DType::BF16 | DType::F16) {
            let dev = if kind == DeviceKind::Cuda { "CUDA" } else { "CPU" };
            return Err(Error::dtype(
                "autocast",
                format!("{dev} autocast only supports dtypes of bfloat16 and float16, got {d}"),
            ));
        }
    }
    let prev_bits = active_bits();
    let prev_dtype = DTYPES.with(|d| d.get()[kind.index()]);
    if let Some(d) = dtype {
        DTYPES.with(|c| {
            let mut v = c.get();
            v[kind.index()] = d;
            c.set(v);
        });
    }
    let bits = if enabled { prev_bits | kind.bit() } else { prev_bits & !kind.bit() };
    ACTIVE.with(|a| a.set(bits));
    NESTING.with(|n| n.set(n.get() + 1));
    Ok(AutocastGuard { kind, prev_bits, prev_dtype, _not_send: PhantomData })
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.set(self.prev_bits));
        let k = self.kind.index();
        DTYPES.with(|c| {
            let mut v = c.get();
            v[k] = self.prev_dtype;
            c.set(v);
        });
        let depth = NESTING.with(|n| {
            let d = n.get().saturating_sub(1);
            n.set(d);
            d
        });
        if depth == 0 {
            clear_autocast_cache();
        }
    }
}

/// Turns autocast off for some kinds while alive: what an op wrapper holds while the op runs on
/// its cast inputs (PyTorch's `ExcludeDispatchKeyGuard`), and what the backward engine holds.
pub(crate) struct Suspend {
    prev: u8,
}

impl Suspend {
    pub(crate) fn new(mask: u8) -> Suspend {
        let prev = active_bits();
        ACTIVE.with(|a| a.set(prev & !mask));
        Suspend { prev }
    }
}

impl Drop for Suspend {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.set(self.prev));
    }
}

/// Whether CPU tensors stand for CUDA ones now (see [`cpu_as_cuda`]).
#[inline]
pub(crate) fn is_cpu_as_cuda() -> bool {
    CPU_AS_CUDA.with(|c| c.get())
}

/// Restores the previous `cpu_as_cuda` flag when dropped.
pub(crate) struct CpuAsCuda {
    prev: bool,
}

impl Drop for CpuAsCuda {
    fn drop(&mut self) {
        CPU_AS_CUDA.with(|c| c.set(self.prev));
    }
}

/// While the guard lives, autocast treats CPU tensors as CUDA ones: the registry's CPU fallback
/// of a CUDA call runs under it, so CUDA autocast still applies to the op's host copies.
pub(crate) fn cpu_as_cuda() -> CpuAsCuda {
    CpuAsCuda { prev: CPU_AS_CUDA.with(|c| c.replace(true)) }
}

/// Autocast off for every kind while the guard lives. The backward engine runs under it: the
/// backward rules are tensor-op compositions (kernels in PyTorch), so they must run in the dtypes
/// the forward chose rather than be autocast again.
pub(crate) fn suspend_all() -> Option<Suspend> {
    if active_bits() == 0 {
        None
    } else {
        Some(Suspend::new(0xff))
    }
}

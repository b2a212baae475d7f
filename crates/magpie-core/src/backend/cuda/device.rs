//! CUDA devices: loading the driver once (without panicking where it is missing), and one
//! context, one stream, one caching allocator and one kernel cache per GPU.

use super::alloc::Allocator;
use crate::{Error, Result};
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A loaded kernel: a `CUfunction` of a module that stays loaded for the life of the process.
#[derive(Clone, Copy)]
pub struct Func(pub(crate) sys::CUfunction);
// SAFETY: a CUfunction is a driver handle, valid in any thread once its context is current.
unsafe impl Send for Func {}
unsafe impl Sync for Func {}

/// One GPU: its context, its one stream (all work is queued there, so work and memory reuse are
/// ordered without events), its allocator and its compiled kernels.
pub struct CudaDevice {
    /// The CUDA ordinal (`cuda:N`).
    pub ordinal: usize,
    /// The device's primary context.
    pub ctx: Arc<CudaContext>,
    /// The one stream every op of this device runs on (cuBLAS and other libraries use it too).
    pub stream: Arc<CudaStream>,
    /// Compute capability (major, minor): kernels are compiled for `sm_{major}{minor}`.
    pub arch: (i32, i32),
    /// Number of multiprocessors (sizes grids of grid-stride kernels).
    pub sm_count: u32,
    pub(crate) alloc: Allocator,
    pub(crate) funcs: Mutex<HashMap<String, Func>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice(cuda:{}, sm_{}{})", self.ordinal, self.arch.0, self.arch.1)
    }
}

impl CudaDevice {
    /// The raw stream handle, for launches and library calls.
    pub fn cu_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }
    /// Makes this device's context current on the calling thread (cheap when it already is).
    pub fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| drv("cuda", e))
    }
    /// Waits until all work queued on this device has finished.
    pub fn synchronize(&self) -> Result<()> {
        super::alloc::forbid_in_capture(self, "synchronize", "waiting for the GPU (a synchronization)")?;
        self.bind()?;
        self.stream.synchronize().map_err(|e| drv("synchronize", e))
    }
}

/// A driver error as an [`Error::Device`] naming `op`.
pub(crate) fn drv(op: &str, e: impl std::fmt::Display) -> Error {
    Error::device(op, format!("CUDA error: {e}"))
}

struct Runtime {
    /// Why CUDA cannot be used, if it cannot (no driver library, no GPU, init failed).
    error: Option<String>,
    devices: Vec<OnceLock<std::result::Result<Arc<CudaDevice>, String>>>,
}

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // cudarc panics when a library or symbol is missing: check first, and catch what is left.
        let probe = std::panic::catch_unwind(|| -> std::result::Result<usize, String> {
            if std::env::var_os("MAGPIE_DISABLE_CUDA").is_some() {
                return Err("disabled by MAGPIE_DISABLE_CUDA".into());
            }
            // SAFETY: only tries to open the library.
            if !unsafe { sys::is_culib_present() } {
                return Err("the CUDA driver library (libcuda) was not found".into());
            }
            result::init().map_err(|e| format!("cuInit failed: {e}"))?;
            let n = result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e}"))?;
            Ok(n.max(0) as usize)
        });
        let (error, n) = match probe {
            Ok(Ok(0)) => (Some("no CUDA GPU was found".to_string()), 0),
            Ok(Ok(n)) => (None, n),
            Ok(Err(e)) => (Some(e), 0),
            Err(_) => (Some("loading the CUDA driver failed".to_string()), 0),
        };
        Runtime { error, devices: (0..n).map(|_| OnceLock::new()).collect() }
    })
}

fn open(ordinal: usize) -> std::result::Result<Arc<CudaDevice>, String> {
    let r = std::panic::catch_unwind(|| -> std::result::Result<Arc<CudaDevice>, String> {
        let ctx = CudaContext::new(ordinal).map_err(|e| e.to_string())?;
        // One stream per device: cudarc's per-buffer event tracking is not needed.
        // SAFETY: no cudarc buffer is shared between streams here.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| e.to_string())?;
        let arch = ctx.compute_capability().map_err(|e| e.to_string())?;
        let sm = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(CudaDevice {
            ordinal,
            ctx,
            stream,
            arch,
            sm_count: sm.max(1) as u32,
            alloc: Allocator::default(),
            funcs: Mutex::new(HashMap::new()),
        }))
    });
    r.unwrap_or_else(|_| Err("creating the CUDA context panicked".into()))
}

/// The device `cuda:ordinal`, with its context current on this thread.
pub fn device(op: &str, ordinal: usize) -> Result<Arc<CudaDevice>> {
    let rt = runtime();
    if let Some(e) = &rt.error {
        return Err(Error::device(op, format!("CUDA is not available: {e}")));
    }
    let slot = rt.devices.get(ordinal).ok_or_else(|| {
        Error::device(op, format!("CUDA error: invalid device ordinal {ordinal} ({} CUDA devices)", rt.devices.len()))
    })?;
    let d = slot.get_or_init(|| open(ordinal)).clone().map_err(|e| Error::device(op, format!("CUDA device {ordinal}: {e}")))?;
    d.bind()?;
    Ok(d)
}

/// True when the driver loads and at least one GPU is present.
pub fn is_available() -> bool {
    runtime().error.is_none()
}

/// Number of CUDA GPUs (0 where CUDA is not available).
pub fn device_count() -> usize {
    runtime().devices.len()
}

/// Why CUDA is not available (None when it is).
pub fn unavailable_reason() -> Option<String> {
    runtime().error.clone()
}

/// The devices opened so far.
pub(crate) fn opened() -> Vec<Arc<CudaDevice>> {
    let rt = runtime();
    rt.devices.iter().filter_map(|s| s.get().and_then(|r| r.as_ref().ok()).cloned()).collect()
}

//! CUDA-event timing shared by the CUDA examples (included with `#[path]`; not an example itself).

use cudarc::driver::{result as cu, sys};
use magpie_core::backend::cuda::device::CudaDevice;
use magpie_core::{Error, Result};

/// A driver error as the examples report it.
pub fn drv(e: impl std::fmt::Debug) -> Error {
    Error::device("bench", format!("{e:?}"))
}

/// Milliseconds per call of `f`, from CUDA events around `iters` calls after a warm-up.
pub fn time(dev: &CudaDevice, iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    let (a, b) = (cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(drv)?, cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(drv)?);
    // SAFETY: live events recorded on the device's live stream, read after synchronizing.
    unsafe { cu::event::record(a, dev.cu_stream()) }.map_err(drv)?;
    for _ in 0..iters {
        f()?;
    }
    unsafe { cu::event::record(b, dev.cu_stream()) }.map_err(drv)?;
    unsafe { cu::event::synchronize(b) }.map_err(drv)?;
    let ms = unsafe { cu::event::elapsed(a, b) }.map_err(drv)? as f64 / iters as f64;
    unsafe {
        cu::event::destroy(a).ok();
        cu::event::destroy(b).ok();
    }
    Ok(ms)
}

//! A CUDA event recorded on any stream (the device module's `Event` records only on the compute
//! stream): how the communication stream and the compute stream order themselves.

use cudarc::driver::{result, sys};
use magpie_core::backend::cuda::CudaDevice;
use magpie_core::{Error, Result};
use std::sync::Arc;

/// One event (timing off) of a device.
pub(crate) struct StreamEvent {
    ev: sys::CUevent,
    dev: Arc<CudaDevice>,
}

// SAFETY: an event handle may be used from any thread with its context current (every method
// binds the device's context first).
unsafe impl Send for StreamEvent {}
unsafe impl Sync for StreamEvent {}

fn drv(op: &str, e: impl std::fmt::Display) -> Error {
    Error::device(op, format!("CUDA error: {e}"))
}

/// Whether an event's work is done.
pub(crate) enum Status {
    Done,
    Pending,
    /// The device reported an error (a sticky error: the context is unusable).
    Failed(String),
}

impl StreamEvent {
    pub(crate) fn new(dev: &Arc<CudaDevice>) -> Result<StreamEvent> {
        dev.bind()?;
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(|e| drv("event", e))?;
        Ok(StreamEvent { ev, dev: dev.clone() })
    }
    /// Marks the point after the work queued so far on `stream`.
    pub(crate) fn record(&self, stream: sys::CUstream) -> Result<()> {
        self.dev.bind()?;
        // SAFETY: a live event; `stream` is a live stream of the same context.
        unsafe { result::event::record(self.ev, stream) }.map_err(|e| drv("event", e))
    }
    /// Makes `stream` wait (on the device, not the host) for the work before the last record.
    pub(crate) fn block(&self, stream: sys::CUstream) -> Result<()> {
        self.dev.bind()?;
        // SAFETY: a live event and stream of the same context.
        unsafe { result::stream::wait_event(stream, self.ev, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }.map_err(|e| drv("event", e))
    }
    /// Polls the event without blocking.
    pub(crate) fn status(&self) -> Status {
        if let Err(e) = self.dev.bind() {
            return Status::Failed(e.to_string());
        }
        // SAFETY: a live event.
        match unsafe { result::event::query(self.ev) } {
            Ok(()) => Status::Done,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Status::Pending,
            Err(e) => Status::Failed(format!("CUDA error: {e}")),
        }
    }
}

impl Drop for StreamEvent {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            // SAFETY: created in `new`, destroyed once; the driver defers the release until the
            // event's recorded work has completed.
            unsafe { result::event::destroy(self.ev) }.ok();
        }
    }
}

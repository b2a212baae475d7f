//! CUDA time of an op: an event recorded on the device's stream at the op's entry and one at its
//! exit; the time between them is read after the profile stops (a synchronize then, none while
//! recording).

#[cfg(feature = "cuda")]
mod imp {
    use crate::backend::cuda::device::{device, CudaDevice};
    use cudarc::driver::{result, sys};
    use std::sync::Arc;

    /// A timing event recorded on a device's stream.
    pub(crate) struct Mark {
        ev: sys::CUevent,
        dev: Arc<CudaDevice>,
    }

    // SAFETY: an event handle may be used from any thread with its context current (bound before each use).
    unsafe impl Send for Mark {}

    impl Mark {
        /// An event recorded now on `cuda:ord`'s stream (None if CUDA fails: the op then has no CUDA time).
        pub(crate) fn record(ord: usize) -> Option<Mark> {
            let dev = device("profiler", ord).ok()?;
            let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).ok()?;
            let m = Mark { ev, dev };
            // SAFETY: a live event and the device's live stream.
            unsafe { result::event::record(m.ev, m.dev.cu_stream()) }.ok()?;
            Some(m)
        }
        /// The reference event of a device: recorded after the stream drained, so its time is
        /// the host's time of recording.
        pub(crate) fn base(ord: usize) -> Option<Mark> {
            device("profiler", ord).ok()?.synchronize().ok()?;
            Mark::record(ord)
        }
        /// Milliseconds from `self` to `later` (waits for `later`).
        pub(crate) fn elapsed_ms(&self, later: &Mark) -> Option<f32> {
            later.dev.bind().ok()?;
            // SAFETY: live events, both recorded.
            unsafe {
                result::event::synchronize(later.ev).ok()?;
                result::event::elapsed(self.ev, later.ev).ok()
            }
        }
    }

    impl Drop for Mark {
        fn drop(&mut self) {
            if self.dev.bind().is_ok() {
                // SAFETY: created in `record`, destroyed once.
                unsafe { result::event::destroy(self.ev) }.ok();
            }
        }
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    /// Without the CUDA backend no op has CUDA time.
    pub(crate) enum Mark {}

    impl Mark {
        pub(crate) fn record(_ord: usize) -> Option<Mark> {
            None
        }
        pub(crate) fn base(_ord: usize) -> Option<Mark> {
            None
        }
        pub(crate) fn elapsed_ms(&self, _later: &Mark) -> Option<f32> {
            match *self {}
        }
    }
}

pub(crate) use imp::Mark;

//! CUDA graphs: the work a closure queues on a device's stream, captured once and replayed with one
//! launch (`torch.cuda.CUDAGraph`). The closure must not allocate device memory through the driver
//! (preallocate its buffers; the caching allocator's hits are fine but its blocks must stay alive
//! while the graph exists) and must not synchronize; kernels inside take their varying values
//! (positions, lengths, token ids) from device memory so that one capture serves every replay.

use super::device::{drv, CudaDevice};
use crate::Result;
use cudarc::driver::sys;
use std::sync::Arc;

/// A captured and instantiated graph of one device's stream.
pub struct CudaGraph {
    graph: cudarc::driver::CudaGraph,
    dev: Arc<CudaDevice>,
}

impl std::fmt::Debug for CudaGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaGraph(cuda:{})", self.dev.ordinal)
    }
}

/// Captures what `body` queues on `dev`'s stream (nothing runs during capture). An error from
/// `body` or from the driver (an operation that capture forbids, such as a device allocation or a
/// synchronization) ends the capture and is returned; the stream is usable afterwards.
pub fn capture(dev: &Arc<CudaDevice>, body: impl FnOnce() -> Result<()>) -> Result<CudaGraph> {
    let op = "cuda_graph";
    dev.bind()?;
    dev.stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(|e| drv(op, format!("cannot begin capture: {e}")))?;
    let r = body();
    // Always end the capture, also when `body` failed, so that the stream leaves capture mode.
    let ended = dev.stream.end_capture(sys::CUgraphInstantiate_flags(0));
    r?;
    let graph = ended.map_err(|e| drv(op, format!("capture failed (an operation not allowed in a CUDA graph was queued?): {e}")))?;
    let graph = graph.ok_or_else(|| drv(op, "the capture recorded no work"))?;
    graph.upload().map_err(|e| drv(op, e))?;
    Ok(CudaGraph { graph, dev: dev.clone() })
}

impl CudaGraph {
    /// Queues one replay of the captured work on the device's stream (asynchronous).
    pub fn replay(&self) -> Result<()> {
        self.dev.bind()?;
        self.graph.launch().map_err(|e| drv("cuda_graph", format!("replay failed: {e}")))
    }
    /// The device the graph runs on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

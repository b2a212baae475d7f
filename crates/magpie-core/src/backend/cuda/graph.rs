//! CUDA graphs: the work a closure queues on a device's stream, captured once and replayed with one
//! launch (`torch.cuda.CUDAGraph`). The closure must not allocate device memory through the driver
//! (preallocate its buffers; the caching allocator's hits are fine but its blocks must stay alive
//! while the graph exists) and must not synchronize; kernels inside take their varying values
//! (positions, lengths, token ids) from device memory so that one capture serves every replay.
//!
//! During a capture the device's allocations come from the graph's private [`MemPool`] (see
//! `alloc.rs`), and host reads, synchronizations and CPU fallbacks are errors naming the op.

pub use super::alloc::MemPool;
use super::alloc;
use super::device::{drv, CudaDevice};
use crate::Result;
use cudarc::driver::sys;
use std::sync::Arc;

/// A captured and instantiated graph of one device's stream.
pub struct CudaGraph {
    graph: cudarc::driver::CudaGraph,
    dev: Arc<CudaDevice>,
    // dropped after `graph`: the pool's blocks are reusable by others only once the graph is gone
    pool: MemPool,
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
    capture_in(dev, &MemPool::new(dev), body)
}

/// [`capture`] with the graph's allocations taken from `pool` (shared with other graphs, as
/// `torch.cuda.graph(g, pool=...)`). Blocks allocated or freed during the capture stay in the
/// pool until the pool's last graph and last tensor are dropped.
pub fn capture_in(dev: &Arc<CudaDevice>, pool: &MemPool, body: impl FnOnce() -> Result<()>) -> Result<CudaGraph> {
    let op = "cuda_graph";
    if pool.device().ordinal != dev.ordinal {
        return Err(crate::Error::device(op, format!("the memory pool belongs to cuda:{}, the capture to cuda:{}", pool.device().ordinal, dev.ordinal)));
    }
    dev.bind()?;
    alloc::begin_capture(dev, pool, op)?;
    if let Err(e) = dev.stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) {
        alloc::end_capture(dev);
        return Err(drv(op, format!("cannot begin capture: {e}")));
    }
    // a panic in `body` must not leave the allocator routing to the pool
    struct EndRouting<'a>(&'a CudaDevice);
    impl Drop for EndRouting<'_> {
        fn drop(&mut self) {
            alloc::end_capture(self.0);
        }
    }
    let routing = EndRouting(dev);
    let r = body();
    // Always end the capture, also when `body` failed, so that the stream leaves capture mode.
    let ended = dev.stream.end_capture(sys::CUgraphInstantiate_flags(0));
    drop(routing);
    r?;
    let graph = ended.map_err(|e| drv(op, format!("capture failed (an operation not allowed in a CUDA graph was queued?): {e}")))?;
    let graph = graph.ok_or_else(|| drv(op, "the capture recorded no work"))?;
    graph.upload().map_err(|e| drv(op, e))?;
    Ok(CudaGraph { graph, dev: dev.clone(), pool: pool.clone() })
}

impl CudaGraph {
    /// Queues one replay of the captured work on the device's stream (asynchronous).
    pub fn replay(&self) -> Result<()> {
        self.dev.bind()?;
        self.graph.launch().map_err(|e| drv("cuda_graph", format!("replay failed: {e}")))
    }
    /// The graph's memory pool (to capture another graph into it).
    pub fn pool(&self) -> &MemPool {
        &self.pool
    }
    /// The device the graph runs on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

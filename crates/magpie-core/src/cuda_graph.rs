//! CUDA graphs over tensors: `torch.cuda.CUDAGraph`, `torch.cuda.graph(g, pool=...)`,
//! `graph_pool_handle()` and a forward-only `make_graphed_callables`. The backend part (stream
//! capture, private memory pools) is `backend::cuda::graph`; this module is what tensor code uses.
//!
//! A capture records the GPU work a closure queues; nothing runs until [`CUDAGraph::replay`]. The
//! graph keeps the device addresses it saw, so inputs are *static* tensors whose contents the
//! caller overwrites (`copy_`) before each replay, and outputs are tensors allocated during the
//! capture, rewritten by each replay. Run the work eagerly a few times first ([`warmup`]): the
//! first run of a kernel compiles and loads it, and lazily created state (optimizer moments,
//! workspaces) must exist before the capture. Host reads (`item()`, `to_vec`, `.to(cpu)`),
//! synchronizations and CPU fallbacks inside a capture are errors naming the op.

use crate::{Device, Error, Result, Tensor};

/// A graph memory pool (`torch.cuda.graph_pool_handle()`): pass it to several captures so that
/// their graphs share memory (they must then be replayed in capture order).
#[derive(Clone, Debug)]
pub struct MemPoolHandle {
    #[cfg(feature = "cuda")]
    pool: crate::backend::cuda::graph::MemPool,
}

#[cfg(feature = "cuda")]
fn cuda_device(op: &str, device: Device) -> Result<std::sync::Arc<crate::backend::cuda::CudaDevice>> {
    match device {
        Device::Cuda(n) => crate::backend::cuda::device::device(op, n),
        Device::Cpu => Err(Error::device(op, "CUDA graphs capture CUDA work; got device cpu")),
    }
}

/// `torch.cuda.graph_pool_handle()` for `device` (a new, empty pool).
pub fn graph_pool_handle(device: Device) -> Result<MemPoolHandle> {
    #[cfg(feature = "cuda")]
    {
        let dev = cuda_device("graph_pool_handle", device)?;
        Ok(MemPoolHandle { pool: crate::backend::cuda::graph::MemPool::new(&dev) })
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        Err(crate::backend::cuda::unavailable("graph_pool_handle"))
    }
}

/// `torch.cuda.is_current_stream_capturing()` for `device`'s stream.
pub fn is_current_stream_capturing(device: Device) -> bool {
    crate::backend::cuda::forbid_in_capture("is_current_stream_capturing", device, "").is_err()
}

/// Runs `f` `iters` times eagerly and waits for the device: the warm-up before a capture
/// (kernel compilation, lazily created state and workspaces happen outside the graph).
pub fn warmup(device: Device, iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<()> {
    for _ in 0..iters {
        f()?;
    }
    crate::backend::cuda::synchronize(Some(device))
}

/// A captured CUDA graph (`torch.cuda.CUDAGraph`).
///
/// ```no_run
/// use magpie_core::cuda_graph::{warmup, CUDAGraph};
/// use magpie_core::{Device, Tensor};
/// # fn main() -> magpie_core::Result<()> {
/// let dev = Device::Cuda(0);
/// let x = Tensor::zeros_on(&[4], magpie_core::DType::F32, dev)?; // static input
/// warmup(dev, 2, || x.mul_scalar(2.0).map(|_| ()))?;
/// let mut g = CUDAGraph::new();
/// let mut y = None;
/// g.capture(dev, None, || {
///     y = Some(x.mul_scalar(2.0)?.add_scalar(1.0)?); // static output
///     Ok(())
/// })?;
/// x.copy_(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4])?)?;
/// g.replay()?;
/// # let _ = y;
/// # Ok(())
/// # }
/// ```
#[derive(Default)]
pub struct CUDAGraph {
    #[cfg(feature = "cuda")]
    graph: Option<crate::backend::cuda::graph::CudaGraph>,
}

impl std::fmt::Debug for CUDAGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CUDAGraph(captured: {})", self.is_captured())
    }
}

impl CUDAGraph {
    /// An empty graph.
    pub fn new() -> CUDAGraph {
        CUDAGraph::default()
    }

    /// `with torch.cuda.graph(g, pool=pool): body()`: captures the work `body` queues on
    /// `device` into this graph (replacing a previous capture). Allocations during the capture
    /// come from `pool` (a new private pool when None) and stay reserved for the graph while it
    /// lives. Waits for the device first, as PyTorch does. An error inside `body` (a host read,
    /// a CPU fallback, an operation capture forbids) ends the capture and is returned, naming
    /// the op; the graph is then empty.
    pub fn capture(&mut self, device: Device, pool: Option<&MemPoolHandle>, body: impl FnOnce() -> Result<()>) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let op = "CUDAGraph.capture";
            let dev = cuda_device(op, device)?;
            self.graph = None;
            dev.synchronize()?;
            let pool = match pool {
                Some(p) => p.pool.clone(),
                None => crate::backend::cuda::graph::MemPool::new(&dev),
            };
            let g = crate::backend::cuda::graph::capture_in(&dev, &pool, body).map_err(|e| match e {
                Error::Device { op: inner, msg } if inner != "cuda_graph" => Error::device(inner, format!("{msg} (while capturing a CUDA graph)")),
                e => e,
            })?;
            self.graph = Some(g);
            Ok(())
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (device, pool, body);
            Err(crate::backend::cuda::unavailable("CUDAGraph.capture"))
        }
    }

    /// Queues one replay of the captured work (asynchronous, like every CUDA op).
    pub fn replay(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            match &self.graph {
                Some(g) => g.replay(),
                None => Err(Error::value("CUDAGraph.replay", "the graph has not been captured (capture it first)")),
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(crate::backend::cuda::unavailable("CUDAGraph.replay"))
        }
    }

    /// True once a capture succeeded (until [`CUDAGraph::reset`]).
    pub fn is_captured(&self) -> bool {
        #[cfg(feature = "cuda")]
        {
            self.graph.is_some()
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
    }

    /// `g.reset()`: drops the captured graph; its pool's blocks return to the device's cache once
    /// no other graph and no tensor still uses the pool.
    pub fn reset(&mut self) {
        #[cfg(feature = "cuda")]
        {
            self.graph = None;
        }
    }

    /// `g.pool()`: the graph's memory pool, to capture another graph into it.
    pub fn pool(&self) -> Option<MemPoolHandle> {
        #[cfg(feature = "cuda")]
        {
            self.graph.as_ref().map(|g| MemPoolHandle { pool: g.pool().clone() })
        }
        #[cfg(not(feature = "cuda"))]
        {
            None
        }
    }
}

/// A callable replayed from a CUDA graph (forward only; PyTorch's `make_graphed_callables` also
/// graphs the backward): [`GraphedCallable::call`] copies its arguments into the static inputs,
/// replays, and returns the static outputs (overwritten by the next call: clone what you keep).
#[derive(Debug)]
pub struct GraphedCallable {
    graph: CUDAGraph,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
}

/// `make_graphed_callables(f, sample_args)` for a forward-only callable on one device: runs `f`
/// on copies of `sample_inputs` `warmup_iters` times (at least once), then captures one call
/// under `no_grad`. The inputs' shapes, dtypes and device are fixed from then on.
pub fn make_graphed_callable(sample_inputs: &[Tensor], warmup_iters: usize, mut f: impl FnMut(&[Tensor]) -> Result<Vec<Tensor>>) -> Result<GraphedCallable> {
    let op = "make_graphed_callables";
    let Some(device) = sample_inputs.first().map(|t| t.device()) else { return Err(Error::value(op, "needs at least one sample input")) };
    if sample_inputs.iter().any(|t| t.device() != device) || !device.is_cuda() {
        return Err(Error::device(op, "sample inputs must all be on one CUDA device"));
    }
    let _ng = crate::autograd::no_grad();
    let inputs = sample_inputs.iter().map(|t| t.detach().contiguous()?.copy()).collect::<Result<Vec<_>>>()?;
    warmup(device, warmup_iters.max(1), || f(&inputs).map(|_| ()))?;
    let mut graph = CUDAGraph::new();
    let mut outputs = Vec::new();
    graph.capture(device, None, || {
        outputs = f(&inputs)?;
        Ok(())
    })?;
    Ok(GraphedCallable { graph, inputs, outputs })
}

impl GraphedCallable {
    /// Copies `args` into the static inputs (same shapes), replays, returns the static outputs.
    pub fn call(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        let op = "make_graphed_callables";
        if args.len() != self.inputs.len() {
            return Err(Error::value(op, format!("the graphed callable takes {} inputs, got {}", self.inputs.len(), args.len())));
        }
        let _ng = crate::autograd::no_grad();
        for (s, a) in self.inputs.iter().zip(args) {
            if s.shape() != a.shape() {
                return Err(Error::shape(op, format!("input of shape {:?} where the capture used {:?}", a.shape(), s.shape())));
            }
            s.copy_(a)?;
        }
        self.graph.replay()?;
        Ok(self.outputs.clone())
    }
    /// The static input tensors (write into them and call [`GraphedCallable::replay`] to skip the copies).
    pub fn static_inputs(&self) -> &[Tensor] {
        &self.inputs
    }
    /// The static output tensors.
    pub fn static_outputs(&self) -> &[Tensor] {
        &self.outputs
    }
    /// Replays without copying inputs.
    pub fn replay(&self) -> Result<()> {
        self.graph.replay()
    }
}

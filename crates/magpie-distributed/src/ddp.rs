//! `DistributedDataParallel`: keeps a module's replicas identical across ranks by averaging
//! gradients. Parameters are broadcast from rank 0 at construction; during backward each
//! parameter's gradient is copied into a flat bucket (~25 MB) as soon as autograd has
//! accumulated it (a post-accumulate-grad hook), and a full bucket's all-reduce (average) starts
//! on the communication stream at once, overlapping the rest of backward. Buckets hold parameters
//! in reverse registration order (roughly the order backward produces them) and are launched in
//! index order on every rank, as NCCL needs. After backward, [`DistributedDataParallel::finish_gradient_sync`]
//! launches what is left, orders the compute stream after every bucket and points each `.grad`
//! at its slice of the averaged bucket (PyTorch's `gradient_as_bucket_view=True`).

use crate::group::{address, mark_written, ProcessGroup, Work};
use crate::nccl::ReduceOp;
use magpie_core::autograd::no_grad;
use magpie_core::backend::cuda::{self, CudaDevice};
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_nn::{Module, ModuleExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// PyTorch's default `bucket_cap_mb`.
pub const DEFAULT_BUCKET_BYTES: usize = 25 * 1024 * 1024;

/// How [`DistributedDataParallel`] groups gradients.
#[derive(Clone, Debug)]
pub struct DdpConfig {
    /// Largest bucket in bytes (a parameter larger than this gets a bucket of its own).
    pub bucket_cap_bytes: usize,
    /// Broadcast the module's buffers from rank 0 at construction too.
    pub broadcast_buffers: bool,
}

impl Default for DdpConfig {
    fn default() -> Self {
        DdpConfig { bucket_cap_bytes: DEFAULT_BUCKET_BYTES, broadcast_buffers: true }
    }
}

struct Member {
    param: Tensor,
    name: String,
    /// The parameter's slice of the bucket, shaped like the parameter.
    view: Tensor,
    /// The device address of that slice (the bucket lives as long as the member).
    addr: u64,
}

impl Member {
    /// Copies the parameter's gradient into its bucket slice on the compute stream. A contiguous
    /// gradient of the bucket's dtype (the usual case) is one device-to-device memcpy: `copy_`'s
    /// generic path costs several microseconds of host time per parameter, which a launch-bound
    /// backward pays in full.
    fn fill(&self, g: &Tensor, dev: &CudaDevice) -> Result<()> {
        if g.is_contiguous() && g.dtype() == self.view.dtype() && g.device() == self.view.device() && g.numel() == self.view.numel() {
            let src = address("DistributedDataParallel", g, dev)?;
            mark_written(&self.view);
            // SAFETY: both ranges hold numel elements of the same dtype on `dev` (checked above;
            // the slice's address was taken from the live bucket), ordered on its compute stream.
            return unsafe { cuda::memcpy::dtod(dev, self.addr, src, g.numel() * g.dtype().size()) };
        }
        self.view.copy_(g).map(|_| ())
    }
}

struct Bucket {
    buffer: Tensor,
    members: Vec<Member>,
    ready: Vec<bool>,
    n_ready: usize,
    work: Option<Work>,
}

struct Reducer {
    pg: ProcessGroup,
    buckets: Vec<Bucket>,
    /// Buckets below this index have been launched in this pass.
    next_launch: usize,
    /// A hook has fired since the last sync.
    active: bool,
}

impl Reducer {
    /// Launches, in index order, every bucket from `next_launch` on that is complete.
    fn launch_ready(&mut self) -> Result<()> {
        while let Some(b) = self.buckets.get_mut(self.next_launch) {
            if b.n_ready < b.members.len() {
                break;
            }
            b.work = Some(self.pg.all_reduce(&b.buffer, ReduceOp::Avg)?);
            self.next_launch += 1;
        }
        Ok(())
    }

    fn on_grad(&mut self, bucket: usize, k: usize) -> Result<()> {
        self.active = true;
        let b = &mut self.buckets[bucket];
        let m = &b.members[k];
        if b.ready[k] {
            return Err(Error::autograd(
                "DistributedDataParallel",
                format!("the gradient of parameter {} was produced twice before finish_gradient_sync (call it after each backward that should be synchronized, or use no_sync)", m.name),
            ));
        }
        let g = m.param.grad().ok_or_else(|| Error::autograd("DistributedDataParallel", format!("parameter {} has no gradient in its hook", m.name)))?;
        m.fill(&g, self.pg.cuda_device())?;
        b.ready[k] = true;
        b.n_ready += 1;
        if b.n_ready == b.members.len() {
            self.launch_ready()?;
        }
        Ok(())
    }
}

/// Data parallelism over a [`ProcessGroup`] for one module (the module stays the caller's: this
/// keeps handles to its parameters, so create it after moving the module to its device).
pub struct DistributedDataParallel {
    pg: ProcessGroup,
    reducer: Arc<Mutex<Reducer>>,
    sync: Arc<AtomicBool>,
}

impl std::fmt::Debug for DistributedDataParallel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.reducer.lock().unwrap_or_else(|e| e.into_inner());
        write!(f, "DistributedDataParallel({:?}, {} buckets)", self.pg, r.buckets.len())
    }
}

/// Gradient synchronization is off while this lives (see [`DistributedDataParallel::no_sync`]).
pub struct NoSyncGuard {
    sync: Arc<AtomicBool>,
    prev: bool,
}

impl Drop for NoSyncGuard {
    fn drop(&mut self) {
        self.sync.store(self.prev, Ordering::SeqCst);
    }
}

impl DistributedDataParallel {
    /// Wraps `module` with the default config (25 MB buckets, buffers broadcast).
    pub fn new<M: Module>(module: &M, pg: &ProcessGroup) -> Result<DistributedDataParallel> {
        DistributedDataParallel::with_config(module, pg, DdpConfig::default())
    }

    /// Broadcasts `module`'s parameters (and buffers) from rank 0, builds the buckets and
    /// registers the gradient hooks. Every parameter must be a contiguous tensor on the group's GPU.
    pub fn with_config<M: Module>(module: &M, pg: &ProcessGroup, cfg: DdpConfig) -> Result<DistributedDataParallel> {
        let op = "DistributedDataParallel";
        let dev = pg.device();
        let Device::Cuda(ordinal) = dev else { return Err(Error::device(op, "the process group has no GPU")) };
        let params = module.named_parameters();
        for (n, p) in &params {
            if p.device() != dev {
                return Err(Error::device(op, format!("parameter {n} is on {}, but this rank's GPU is {dev}: move the module first", p.device())));
            }
            if !p.is_contiguous() {
                return Err(Error::value(op, format!("parameter {n} is not contiguous")));
            }
        }
        // rank 0's values everywhere
        {
            let _ng = no_grad();
            let mut works = Vec::new();
            for (_, p) in &params {
                works.push(pg.broadcast(&p.detach(), 0)?);
            }
            if cfg.broadcast_buffers {
                for (n, b) in module.named_buffers() {
                    if b.device() != dev || !b.is_contiguous() {
                        return Err(Error::device(op, format!("buffer {n} must be a contiguous tensor on {dev}")));
                    }
                    works.push(pg.broadcast(&b, 0)?);
                }
            }
            for w in works {
                w.wait()?;
            }
        }
        // buckets over the trainable parameters in reverse order, one dtype per bucket
        let trainable: Vec<(String, Tensor)> = params.into_iter().filter(|(_, p)| p.requires_grad()).rev().collect();
        let mut groups: Vec<Vec<(String, Tensor)>> = Vec::new();
        let (mut bytes, mut dtype): (usize, Option<DType>) = (0, None);
        for (n, p) in trainable {
            let sz = p.numel() * p.dtype().size();
            let fits = dtype == Some(p.dtype()) && bytes + sz <= cfg.bucket_cap_bytes.max(1);
            if !fits || groups.is_empty() {
                groups.push(Vec::new());
                bytes = 0;
                dtype = Some(p.dtype());
            }
            bytes += sz;
            if let Some(g) = groups.last_mut() {
                g.push((n, p));
            }
        }
        let mut buckets = Vec::with_capacity(groups.len());
        for g in groups {
            let dt = g[0].1.dtype();
            let total: usize = g.iter().map(|(_, p)| p.numel()).sum();
            let buffer = cuda::ops::empty(op, ordinal, dt, &[total])?;
            buffer.zero_()?;
            let mut members = Vec::with_capacity(g.len());
            let mut off = 0usize;
            for (name, param) in g {
                let n = param.numel();
                let shape: Vec<i64> = param.shape().iter().map(|&d| d as i64).collect();
                let view = buffer.narrow(0, off as i64, n as i64)?.view(&shape)?;
                let addr = address(op, &view, pg.cuda_device())?;
                off += n;
                members.push(Member { param, name, view, addr });
            }
            let k = members.len();
            buckets.push(Bucket { buffer, members, ready: vec![false; k], n_ready: 0, work: None });
        }
        let reducer = Arc::new(Mutex::new(Reducer { pg: pg.clone(), buckets, next_launch: 0, active: false }));
        let sync = Arc::new(AtomicBool::new(true));
        {
            let r = reducer.lock().unwrap_or_else(|e| e.into_inner());
            for (bi, b) in r.buckets.iter().enumerate() {
                for (k, m) in b.members.iter().enumerate() {
                    let weak: Weak<Mutex<Reducer>> = Arc::downgrade(&reducer);
                    let sync = sync.clone();
                    m.param.register_post_accumulate_grad_hook(move |_| {
                        if !sync.load(Ordering::SeqCst) {
                            return Ok(());
                        }
                        // a dropped DistributedDataParallel leaves its hooks inert
                        let Some(r) = weak.upgrade() else { return Ok(()) };
                        let mut r = r.lock().unwrap_or_else(|e| e.into_inner());
                        r.on_grad(bi, k)
                    })?;
                }
            }
        }
        Ok(DistributedDataParallel { pg: pg.clone(), reducer, sync })
    }

    /// The process group.
    pub fn process_group(&self) -> &ProcessGroup {
        &self.pg
    }

    /// Number of gradient buckets.
    pub fn num_buckets(&self) -> usize {
        self.reducer.lock().unwrap_or_else(|e| e.into_inner()).buckets.len()
    }

    /// `with ddp.no_sync():` — backward passes while the guard lives only accumulate local
    /// gradients; the first synchronized backward after it averages the accumulated sums.
    pub fn no_sync(&self) -> NoSyncGuard {
        let prev = self.sync.swap(false, Ordering::SeqCst);
        NoSyncGuard { sync: self.sync.clone(), prev }
    }

    /// `loss.backward()` followed by [`DistributedDataParallel::finish_gradient_sync`].
    pub fn backward(&self, loss: &Tensor) -> Result<()> {
        loss.backward()?;
        self.finish_gradient_sync()
    }

    /// Completes the gradient averaging of the last backward pass: launches the buckets still
    /// waiting (a parameter that got no gradient on this rank contributes its current `.grad`, or
    /// zeros), orders the compute stream after every all-reduce and sets each parameter's
    /// `.grad` to its averaged slice. Does nothing inside `no_sync` or when no hook fired.
    pub fn finish_gradient_sync(&self) -> Result<()> {
        if !self.sync.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut r = self.reducer.lock().unwrap_or_else(|e| e.into_inner());
        if !r.active {
            return Ok(());
        }
        let _ng = no_grad();
        for bi in r.next_launch..r.buckets.len() {
            let b = &mut r.buckets[bi];
            for k in 0..b.members.len() {
                if !b.ready[k] {
                    let m = &b.members[k];
                    match m.param.grad() {
                        Some(g) => m.fill(&g, self.pg.cuda_device())?,
                        None => {
                            m.view.zero_()?;
                        }
                    }
                    b.ready[k] = true;
                    b.n_ready += 1;
                }
            }
        }
        r.launch_ready()?;
        for b in r.buckets.iter_mut() {
            if let Some(w) = b.work.take() {
                w.wait()?;
            }
            for m in &b.members {
                m.param.set_grad(Some(m.view.clone()));
            }
            b.ready.iter_mut().for_each(|x| *x = false);
            b.n_ready = 0;
        }
        r.next_launch = 0;
        r.active = false;
        Ok(())
    }
}

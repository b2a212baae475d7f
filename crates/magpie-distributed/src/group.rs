//! `ProcessGroup`: one rank of an NCCL job (PyTorch's `init_process_group("nccl")`), its
//! collectives on CUDA tensors and the [`Work`] handles they return.
//!
//! Collectives run on a communication stream of their own: each first waits (on the device) for
//! the work queued so far on the compute stream, so it sees its inputs, and records an event when
//! done; [`Work::wait`] makes the compute stream wait for that event, so compute that does not
//! need the result overlaps the transfer. Tensors handed to a collective stay alive in its
//! `Work` until the compute stream has been ordered after it (the caching allocator reuses memory
//! in compute-stream order).

use crate::env::DistEnv;
use crate::event::{Status, StreamEvent};
use crate::nccl::{self, Comm, ReduceOp};
use crate::rendezvous::{Liveness, Rendezvous};
use crate::watchdog::{self, Pending, Shared};
use cudarc::driver::{sys::CUstream, CudaStream};
use magpie_core::backend::cuda::{self, CudaDevice};
use magpie_core::storage::Storage;
use magpie_core::{DType, Device, Error, Result, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Inner {
    rank: usize,
    world_size: usize,
    device: Arc<CudaDevice>,
    comm: Comm,
    comm_stream: Arc<CudaStream>,
    /// Recorded on the compute stream before each collective, waited on by the comm stream.
    ready: StreamEvent,
    /// One collective is enqueued at a time (NCCL needs the same order on every rank).
    enqueue: Mutex<()>,
    seq: AtomicU64,
    shared: Arc<Shared>,
    liveness: Mutex<Option<Liveness>>,
    watchdog: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// One rank's membership of a job: its rank, the world size, its GPU and the NCCL communicator.
/// Cheap to clone (a handle).
#[derive(Clone)]
pub struct ProcessGroup {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProcessGroup(rank {} of {}, cuda:{})", self.inner.rank, self.inner.world_size, self.inner.device.ordinal)
    }
}

/// The handle of a collective in flight (PyTorch's `Work`, from `async_op=True`).
#[must_use = "a collective's result may only be read after `wait()`"]
pub struct Work {
    inner: Arc<Inner>,
    done: Arc<StreamEvent>,
    what: String,
    /// The tensors the collective reads or writes, alive until the compute stream is ordered after it.
    keep: Vec<Tensor>,
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Work({})", self.what)
    }
}

impl Work {
    /// Orders the compute stream after the collective (the host does not block): work queued
    /// from now on sees its result. PyTorch's `work.wait()`.
    pub fn wait(mut self) -> Result<()> {
        self.order_compute()
    }

    fn order_compute(&mut self) -> Result<()> {
        self.inner.shared.park_if_fired();
        self.done.block(self.inner.device.cu_stream())?;
        self.keep.clear();
        Ok(())
    }

    /// True when the collective has finished on the device.
    pub fn is_completed(&self) -> bool {
        matches!(self.done.status(), Status::Done)
    }

    /// Blocks the host until the collective has finished (the watchdog ends the process if it
    /// outlives the timeout), then orders the compute stream after it.
    pub fn synchronize(mut self) -> Result<()> {
        host_wait(&self.inner, &self.done, &self.what)?;
        self.order_compute()
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if !self.keep.is_empty() {
            // dropped without wait(): still order the compute stream, so freed inputs are not
            // reused while the collective reads them
            let _ = self.order_compute();
        }
    }
}

fn host_wait(inner: &Inner, ev: &StreamEvent, what: &str) -> Result<()> {
    let t0 = Instant::now();
    loop {
        inner.shared.park_if_fired();
        match ev.status() {
            Status::Done => return Ok(()),
            Status::Failed(e) => return Err(Error::device(what, e)),
            Status::Pending => {}
        }
        // the watchdog ends the process first; this is the backstop if it could not run
        if t0.elapsed() > inner.shared.timeout + Duration::from_secs(30) {
            return Err(Error::device(what, format!("timed out after {:.0} s", t0.elapsed().as_secs_f64())));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// A CUDA tensor's device address, checked: on `dev`, contiguous, a dtype NCCL takes.
pub(crate) fn address(op: &str, t: &Tensor, dev: &CudaDevice) -> Result<u64> {
    match t.device() {
        Device::Cuda(n) if n == dev.ordinal => {}
        d => return Err(Error::device(op, format!("this rank's collectives take tensors on cuda:{}, got one on {d}", dev.ordinal))),
    }
    if !t.is_contiguous() {
        return Err(Error::value(op, "the tensor must be contiguous"));
    }
    nccl::nccl_dtype(op, t.dtype())?;
    let g = t.storage().read();
    match &*g {
        Storage::Cuda(c) => Ok(c.ptr() + (t.storage_offset() * t.dtype().size()) as u64),
        Storage::Cpu(_) => Err(Error::device(op, "expected a CUDA tensor")),
    }
}

/// Marks an in-place write by a collective (bumps the version counter autograd checks).
pub(crate) fn mark_written(t: &Tensor) {
    drop(t.storage().write());
}

impl ProcessGroup {
    /// `init_process_group("nccl", init_method="env://")`: reads [`DistEnv::from_env`] and joins.
    pub fn init_from_env() -> Result<ProcessGroup> {
        ProcessGroup::init(&DistEnv::from_env()?)
    }

    /// Joins the job `env` describes: opens `cuda:LOCAL_RANK`, forms the job through the TCP
    /// rendezvous (rank 0 makes the NCCL unique id), creates the communicator, and starts the
    /// watchdog and the liveness watchers.
    pub fn init(env: &DistEnv) -> Result<ProcessGroup> {
        let op = "init_process_group";
        cuda::require(op)?;
        if !nccl::is_available() {
            return Err(Error::device(op, nccl::unavailable_message()));
        }
        let device = cuda::device::device(op, env.local_rank).map_err(|e| {
            Error::device(op, format!("rank {} uses cuda:{} (LOCAL_RANK): {e}", env.rank, env.local_rank))
        })?;
        let (rdzv, id) = Rendezvous::join(env, nccl::unique_id)?;
        let shared = Shared::new(env.rank, env.timeout);
        let watchdog = watchdog::spawn(shared.clone(), device.clone()).map_err(|e| Error::device(op, format!("cannot start the watchdog thread: {e}")))?;
        let on_lost: Arc<dyn Fn(String) + Send + Sync> = {
            let shared = shared.clone();
            Arc::new(move |m: String| shared.fatal(&m))
        };
        let liveness = rdzv.watch(on_lost);
        // communicator creation blocks until every rank calls it: watched like a collective
        shared.push(Pending { seq: 0, what: "NCCL communicator creation".into(), started: Instant::now(), event: None });
        device.bind()?;
        let comm = Comm::init(env.world_size, &id, env.rank);
        shared.remove(0);
        let comm = comm?;
        shared.comm.store(comm.raw() as usize, Ordering::SeqCst);
        let comm_stream = device.ctx.new_stream().map_err(|e| Error::device(op, format!("CUDA error creating the communication stream: {e}")))?;
        let ready = StreamEvent::new(&device)?;
        Ok(ProcessGroup {
            inner: Arc::new(Inner {
                rank: env.rank,
                world_size: env.world_size,
                device,
                comm,
                comm_stream,
                ready,
                enqueue: Mutex::new(()),
                seq: AtomicU64::new(1),
                shared,
                liveness: Mutex::new(Some(liveness)),
                watchdog: Mutex::new(Some(watchdog)),
            }),
        })
    }

    /// This process's rank (`dist.get_rank()`).
    pub fn rank(&self) -> usize {
        self.inner.rank
    }
    /// Number of ranks (`dist.get_world_size()`).
    pub fn world_size(&self) -> usize {
        self.inner.world_size
    }
    /// This rank's GPU.
    pub fn device(&self) -> Device {
        Device::Cuda(self.inner.device.ordinal)
    }
    /// This rank's CUDA device.
    pub(crate) fn cuda_device(&self) -> &Arc<CudaDevice> {
        &self.inner.device
    }
    /// The collective timeout.
    pub fn timeout(&self) -> Duration {
        self.inner.shared.timeout
    }

    /// Enqueues one collective on the communication stream after the compute stream's work.
    fn launch(&self, what: &str, keep: Vec<Tensor>, f: impl FnOnce(&Comm, CUstream) -> Result<()>) -> Result<Work> {
        let inner = &self.inner;
        let _g = inner.enqueue.lock().unwrap_or_else(|e| e.into_inner());
        inner.shared.park_if_fired();
        if inner.shared.comm.load(Ordering::SeqCst) == 0 {
            return Err(Error::value(what, "the process group has been shut down"));
        }
        inner.device.bind()?;
        let cs = inner.comm_stream.cu_stream();
        inner.ready.record(inner.device.cu_stream())?;
        inner.ready.block(cs)?;
        f(&inner.comm, cs)?;
        let done = Arc::new(StreamEvent::new(&inner.device)?);
        done.record(cs)?;
        let seq = inner.seq.fetch_add(1, Ordering::Relaxed);
        inner.shared.push(Pending { seq, what: what.to_string(), started: Instant::now(), event: Some(done.clone()) });
        Ok(Work { inner: inner.clone(), done, what: what.to_string(), keep })
    }

    /// `dist.all_reduce(t, op, async_op=True)`: reduces `t` over all ranks, in place.
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Result<Work> {
        let what = format!("all_reduce({op:?}) of {} {} elements", t.numel(), t.dtype());
        let p = address("all_reduce", t, &self.inner.device)?;
        mark_written(t);
        let (n, dt) = (t.numel(), t.dtype());
        // SAFETY: `p` addresses `n` contiguous elements of `t`, kept alive by the Work.
        self.launch(&what, vec![t.clone()], |c, s| unsafe { c.all_reduce(p, p, n, dt, op, s) })
    }

    /// `dist.broadcast(t, src, async_op=True)`: every rank's `t` becomes rank `src`'s.
    pub fn broadcast(&self, t: &Tensor, src: usize) -> Result<Work> {
        if src >= self.world_size() {
            return Err(Error::value("broadcast", format!("source rank {src} is not below the world size {}", self.world_size())));
        }
        let what = format!("broadcast from rank {src} of {} {} elements", t.numel(), t.dtype());
        let p = address("broadcast", t, &self.inner.device)?;
        mark_written(t);
        let (n, dt) = (t.numel(), t.dtype());
        // SAFETY: as in all_reduce.
        self.launch(&what, vec![t.clone()], |c, s| unsafe { c.broadcast(p, p, n, dt, src, s) })
    }

    /// `dist.all_gather_into_tensor(out, input, async_op=True)`: `out` (world × input's
    /// elements, same dtype) receives every rank's `input`, in rank order.
    pub fn all_gather_into_tensor(&self, out: &Tensor, input: &Tensor) -> Result<Work> {
        let op = "all_gather_into_tensor";
        if out.dtype() != input.dtype() || out.numel() != input.numel() * self.world_size() {
            return Err(Error::value(
                op,
                format!("the output must hold world size ({}) x the input's {} {} elements, got {} {}", self.world_size(), input.numel(), input.dtype(), out.numel(), out.dtype()),
            ));
        }
        let what = format!("all_gather of {} {} elements", input.numel(), input.dtype());
        let (po, pi) = (address(op, out, &self.inner.device)?, address(op, input, &self.inner.device)?);
        mark_written(out);
        let (n, dt) = (input.numel(), input.dtype());
        // SAFETY: `pi` holds n elements, `po` world * n (checked); both kept alive by the Work.
        self.launch(&what, vec![out.clone(), input.clone()], |c, s| unsafe { c.all_gather(pi, po, n, dt, s) })
    }

    /// `dist.all_gather(list, input)`: every rank's `input`, in rank order (the compute stream is
    /// ordered after the collective).
    pub fn all_gather(&self, input: &Tensor) -> Result<Vec<Tensor>> {
        let input = input.contiguous()?;
        let mut shape = vec![self.world_size()];
        shape.extend_from_slice(input.shape());
        let out = cuda::ops::empty("all_gather", self.inner.device.ordinal, input.dtype(), &shape)?;
        self.all_gather_into_tensor(&out, &input)?.wait()?;
        (0..self.world_size()).map(|r| out.select(0, r as i64)).collect()
    }

    /// `dist.reduce_scatter_tensor(out, input, op, async_op=True)`: reduces `input` (world ×
    /// out's elements) over all ranks and leaves block `rank` in `out`.
    pub fn reduce_scatter_tensor(&self, out: &Tensor, input: &Tensor, op: ReduceOp) -> Result<Work> {
        let name = "reduce_scatter_tensor";
        if out.dtype() != input.dtype() || input.numel() != out.numel() * self.world_size() {
            return Err(Error::value(
                name,
                format!("the input must hold world size ({}) x the output's {} {} elements, got {} {}", self.world_size(), out.numel(), out.dtype(), input.numel(), input.dtype()),
            ));
        }
        let what = format!("reduce_scatter({op:?}) into {} {} elements", out.numel(), out.dtype());
        let (po, pi) = (address(name, out, &self.inner.device)?, address(name, input, &self.inner.device)?);
        mark_written(out);
        let (n, dt) = (out.numel(), out.dtype());
        // SAFETY: `po` holds n elements, `pi` world * n (checked); both kept alive by the Work.
        self.launch(&what, vec![out.clone(), input.clone()], |c, s| unsafe { c.reduce_scatter(pi, po, n, dt, op, s) })
    }

    /// `dist.barrier()`: returns once every rank has reached it (a one-element all-reduce the
    /// host waits for).
    pub fn barrier(&self) -> Result<()> {
        let t = Tensor::zeros_on(&[1], DType::I32, self.device())?;
        let w = self.all_reduce(&t, ReduceOp::Sum)?;
        let what = w.what.clone();
        host_wait(&self.inner, &w.done, &what)?;
        w.wait()
    }

    /// Waits for every collective in flight, then leaves the job cleanly: tells the other ranks
    /// this one is done (so its exit is not taken for a crash) and releases the communicator.
    /// PyTorch's `destroy_process_group()`. Call it before the process exits.
    pub fn shutdown(&self) -> Result<()> {
        let inner = &self.inner;
        let _g = inner.enqueue.lock().unwrap_or_else(|e| e.into_inner());
        // everything queued on the comm stream so far
        let last = StreamEvent::new(&inner.device)?;
        last.record(inner.comm_stream.cu_stream())?;
        host_wait(inner, &last, "shutdown")?;
        inner.shared.stop.store(true, Ordering::SeqCst);
        if let Some(h) = inner.watchdog.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        let comm = inner.shared.comm.swap(0, Ordering::SeqCst);
        if comm != 0 {
            // all work has finished: abort only frees the communicator, without the handshake of
            // ncclCommDestroy (which would wait on ranks that may already have gone)
            // SAFETY: no collective is in flight or will be enqueued (the comm pointer is cleared).
            unsafe { nccl::abort(comm as cudarc::nccl::sys::ncclComm_t) };
        }
        if let Some(mut l) = inner.liveness.lock().unwrap_or_else(|e| e.into_inner()).take() {
            l.goodbye();
        }
        Ok(())
    }
}

//! The fault handling of a process group: a thread that watches every collective in flight and
//! NCCL's asynchronous error state, and ends the process with a clear message when a collective
//! outlives the timeout, NCCL reports an error, or a peer's rendezvous connection drops (PyTorch's
//! NCCL watchdog with `TORCH_NCCL_ASYNC_ERROR_HANDLING=1`). A dead or hung rank then ends the
//! others within the timeout instead of leaving them spinning in NCCL kernels forever.

use crate::event::{Status, StreamEvent};
use cudarc::nccl::sys::ncclComm_t;
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Exit status of a rank ended by the watchdog.
pub const FAULT_EXIT_CODE: i32 = 75;

/// One piece of work in flight: done when its event is (None: until it is removed by hand).
pub(crate) struct Pending {
    pub(crate) seq: u64,
    pub(crate) what: String,
    pub(crate) started: Instant,
    pub(crate) event: Option<Arc<StreamEvent>>,
}

/// State shared by a process group, its watchdog thread and its liveness watchers.
pub(crate) struct Shared {
    pub(crate) rank: usize,
    pub(crate) timeout: Duration,
    pub(crate) pending: Mutex<VecDeque<Pending>>,
    /// The communicator to abort (0 until it exists).
    pub(crate) comm: AtomicUsize,
    pub(crate) stop: AtomicBool,
    fired: AtomicBool,
}

impl Shared {
    pub(crate) fn new(rank: usize, timeout: Duration) -> Arc<Shared> {
        Arc::new(Shared { rank, timeout, pending: Mutex::new(VecDeque::new()), comm: AtomicUsize::new(0), stop: AtomicBool::new(false), fired: AtomicBool::new(false) })
    }

    /// True once [`Shared::fatal`] has started ending the process.
    pub(crate) fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Called on the paths that would hand results to the program (a collective, a wait): once
    /// the watchdog has aborted the communicator, results are garbage and the process is about to
    /// end with the watchdog's message and status, so the caller waits for that instead.
    pub(crate) fn park_if_fired(&self) {
        while self.fired() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn push(&self, p: Pending) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).push_back(p);
    }

    pub(crate) fn remove(&self, seq: u64) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| p.seq != seq);
    }

    /// Ends this process: prints `msg` naming the rank, aborts the communicator (so its kernels
    /// stop and peers blocked on it see an error), and exits with [`FAULT_EXIT_CODE`]. Runs once.
    pub(crate) fn fatal(&self, msg: &str) {
        if self.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = writeln!(
            std::io::stderr(),
            "[rank {}] magpie-distributed: {msg}. Aborting the NCCL communicator and ending this rank (exit status {FAULT_EXIT_CODE}).",
            self.rank
        );
        let comm = self.comm.swap(0, Ordering::SeqCst);
        if comm != 0 {
            // abort in a helper thread: if NCCL itself is wedged, exit anyway after a while
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let _ = std::thread::Builder::new().name("magpie-nccl-abort".into()).spawn(move || {
                // SAFETY: the communicator was live and is not used after this (the process ends).
                unsafe { crate::nccl::abort(comm as ncclComm_t) };
                let _ = tx.send(());
            });
            let _ = rx.recv_timeout(Duration::from_secs(10));
        }
        let _ = std::io::stderr().flush();
        let _ = std::io::stdout().flush();
        // _exit: no atexit handlers, which could block on the CUDA context of a wedged device
        // SAFETY: ends the process.
        unsafe { libc::_exit(FAULT_EXIT_CODE) };
    }

    /// One pass of the watchdog: drops finished work; fails on a timeout, a device error or an
    /// NCCL asynchronous error.
    fn poll(&self) {
        let mut late: Option<String> = None;
        {
            let mut q = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let mut i = 0;
            while i < q.len() {
                let p = &q[i];
                let status = p.event.as_ref().map_or(Status::Pending, |e| e.status());
                match status {
                    Status::Done => {
                        q.remove(i);
                        continue;
                    }
                    Status::Failed(e) => {
                        late = Some(format!("{} (collective #{}) failed on the device: {e}", p.what, p.seq));
                        break;
                    }
                    Status::Pending => {
                        if p.started.elapsed() > self.timeout {
                            late = Some(format!(
                                "{} (collective #{}) did not finish within the timeout of {:.0} s: another rank is dead, hung, or not calling the same collectives in the same order",
                                p.what,
                                p.seq,
                                self.timeout.as_secs_f64()
                            ));
                            break;
                        }
                    }
                }
                i += 1;
            }
        }
        if let Some(m) = late {
            self.fatal(&m);
        }
        let comm = self.comm.load(Ordering::SeqCst);
        if comm != 0 {
            if let Some(e) = crate::nccl::async_error(comm as ncclComm_t) {
                self.fatal(&format!("NCCL reported an asynchronous error: {e}"));
            }
        }
    }
}

/// Starts the watchdog thread of `shared`; it runs until `shared.stop` is set.
pub(crate) fn spawn(shared: Arc<Shared>, dev: Arc<magpie_core::backend::cuda::CudaDevice>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name(format!("magpie-nccl-watchdog-{}", shared.rank)).spawn(move || {
        let _ = dev.bind();
        while !shared.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            shared.poll();
        }
    })
}

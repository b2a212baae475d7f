//! The recording state: the global on/off bits every op hook reads, the events collected so far,
//! and each thread's stack of open ranges (which gives nesting and self times).

use super::cuda_time::Mark;
use super::memory;
use crate::{Device, Tensor};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// Recording is on.
pub(crate) const ON: u8 = 1;
/// Input shapes are recorded (`record_shapes`).
pub(crate) const SHAPES: u8 = 2;
/// Allocations and frees are counted (`profile_memory`).
pub(crate) const MEMORY: u8 = 4;
/// CUDA ops are timed with events on their stream (`ProfilerActivity::Cuda`).
pub(crate) const CUDA: u8 = 8;

/// The bits above; 0 when nothing records (the one check each op makes).
static FLAGS: AtomicU8 = AtomicU8::new(0);
/// Bumped at every start and stop, so a range left open across them is dropped, not misfiled.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// The current flag bits.
#[inline(always)]
pub(crate) fn flags() -> u8 {
    FLAGS.load(Ordering::Relaxed)
}

/// What kind of range an event is (its Chrome trace category).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// An op (`aten::mm`).
    Op,
    /// A `record_function` scope or a `ProfilerStep#N`.
    UserAnnotation,
    /// A node run by the autograd engine (`autograd::engine::evaluate_function: MmBackward0`, `MmBackward0`).
    Backward,
}

impl EventKind {
    /// The `cat` field PyTorch's Chrome traces use for this kind.
    pub fn category(self) -> &'static str {
        match self {
            EventKind::Op | EventKind::Backward => "cpu_op",
            EventKind::UserAnnotation => "user_annotation",
        }
    }
}

/// The GPU side of an event: when its work ran on the device's stream.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaSpan {
    /// The device ordinal.
    pub device: usize,
    /// Start on the trace's clock, in nanoseconds since the profile began (aligned at the
    /// device's first timed op, after a synchronize).
    pub start_ns: f64,
    /// Time between the events recorded at the op's entry and exit, in nanoseconds.
    pub dur_ns: f64,
}

/// One recorded range: an op, a user scope or a backward node.
#[derive(Clone, Debug)]
pub struct Event {
    pub name: String,
    pub kind: EventKind,
    /// Unique within the process.
    pub id: u64,
    /// The innermost range open on the same thread when this one began.
    pub parent: Option<u64>,
    /// A small per-thread number (the trace's `tid`).
    pub thread: u64,
    /// Nanoseconds since the profile began.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Input shapes (with `record_shapes`; empty otherwise).
    pub input_shapes: Vec<Vec<usize>>,
    /// Input dtypes, PyTorch's names (with `record_shapes`).
    pub input_types: Vec<&'static str>,
    /// Bytes allocated minus bytes freed on this thread while the range was open, children
    /// included (with `profile_memory`).
    pub cpu_memory: i64,
    pub cuda_memory: i64,
    /// Device time (for ops on CUDA tensors, with `ProfilerActivity::Cuda`).
    pub cuda: Option<CudaSpan>,
}

impl Event {
    /// Wall time on the host in nanoseconds.
    pub fn cpu_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// A finished range whose CUDA events are not read yet.
pub(crate) struct Raw {
    pub(crate) event: Event,
    /// (device, entry event, exit event) of a CUDA op.
    pub(crate) marks: Option<(usize, Mark, Mark)>,
}

/// The per-device reference point of GPU times: an event recorded after a synchronize, and the
/// host time it was recorded at.
pub(crate) struct Base {
    pub(crate) device: usize,
    pub(crate) mark: Mark,
    pub(crate) host_ns: u64,
}

/// What a profile collects between start and stop.
pub(crate) struct Collector {
    pub(crate) t0: Instant,
    pub(crate) events: Vec<Raw>,
    pub(crate) bases: Vec<Base>,
}

fn collector() -> MutexGuard<'static, Option<Collector>> {
    static C: OnceLock<Mutex<Option<Collector>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(None)).lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts collecting with `bits` (ON is added). Returns false if a profile is already running.
pub(crate) fn start(bits: u8) -> bool {
    let mut c = collector();
    if c.is_some() {
        return false;
    }
    *c = Some(Collector { t0: Instant::now(), events: Vec::new(), bases: Vec::new() });
    GENERATION.fetch_add(1, Ordering::SeqCst);
    FLAGS.store(bits | ON, Ordering::SeqCst);
    true
}

/// Stops collecting and hands over what was collected.
pub(crate) fn stop() -> Option<Collector> {
    FLAGS.store(0, Ordering::SeqCst);
    GENERATION.fetch_add(1, Ordering::SeqCst);
    collector().take()
}

/// Drops what was collected so far but keeps recording (the end of a warm-up).
pub(crate) fn clear() {
    if let Some(c) = collector().as_mut() {
        c.events.clear();
    }
}

/// An open range on this thread.
struct Open {
    id: u64,
    name: Cow<'static, str>,
}

thread_local! {
    static STACK: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

fn thread_id() -> u64 {
    THREAD.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// An open range; it is recorded when dropped.
#[must_use = "the range ends when this guard is dropped"]
pub struct RangeGuard {
    event: Event,
    generation: u64,
    mem0: (i64, i64),
    start: Instant,
    marks: Option<(usize, Mark)>,
}

/// Opens a range unless recording is off or (for ops) the innermost open range has the same name:
/// an op that re-runs itself on converted inputs (autocast, integer promotion) records once.
pub(crate) fn open(name: Cow<'static, str>, kind: EventKind, inputs: &[&Tensor], device: Option<Device>) -> Option<RangeGuard> {
    let bits = flags();
    if bits & ON == 0 {
        return None;
    }
    let dup = kind != EventKind::UserAnnotation && STACK.with(|s| s.borrow().last().is_some_and(|o| o.name == name));
    if dup {
        return None;
    }
    let t0 = collector().as_ref().map(|c| c.t0)?;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let parent = STACK.with(|s| {
        let mut s = s.borrow_mut();
        let p = s.last().map(|o| o.id);
        s.push(Open { id, name: name.clone() });
        p
    });
    let (input_shapes, input_types) = if bits & SHAPES != 0 {
        (inputs.iter().map(|t| t.shape().to_vec()).collect(), inputs.iter().map(|t| t.dtype().name()).collect())
    } else {
        (Vec::new(), Vec::new())
    };
    let cuda_dev = device.or_else(|| inputs.iter().map(|t| t.device()).find(|d| d.is_cuda()));
    let marks = match cuda_dev {
        Some(Device::Cuda(ord)) if bits & CUDA != 0 => {
            ensure_base(ord, t0);
            Mark::record(ord).map(|m| (ord, m))
        }
        _ => None,
    };
    let start = Instant::now();
    let event = Event {
        name: name.into_owned(),
        kind,
        id,
        parent,
        thread: thread_id(),
        start_ns: start.duration_since(t0).as_nanos() as u64,
        end_ns: 0,
        input_shapes,
        input_types,
        cpu_memory: 0,
        cuda_memory: 0,
        cuda: None,
    };
    Some(RangeGuard { event, generation: GENERATION.load(Ordering::SeqCst), mem0: memory::net(), start, marks })
}

/// Records the base event of `ord` on its first timed op.
fn ensure_base(ord: usize, t0: Instant) {
    let have = collector().as_ref().is_some_and(|c| c.bases.iter().any(|b| b.device == ord));
    if have {
        return;
    }
    if let Some(mark) = Mark::base(ord) {
        let host_ns = Instant::now().duration_since(t0).as_nanos() as u64;
        if let Some(c) = collector().as_mut() {
            if !c.bases.iter().any(|b| b.device == ord) {
                c.bases.push(Base { device: ord, mark, host_ns });
            }
        }
    }
}

impl Drop for RangeGuard {
    fn drop(&mut self) {
        let id = self.event.id;
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|o| o.id == id) {
                s.remove(i);
            }
        });
        if GENERATION.load(Ordering::SeqCst) != self.generation {
            return;
        }
        let marks = match self.marks.take() {
            Some((ord, start)) => Mark::record(ord).map(|end| (ord, start, end)),
            None => None,
        };
        let mem1 = memory::net();
        let mut event = std::mem::replace(&mut self.event, Event { name: String::new(), kind: EventKind::Op, id, parent: None, thread: 0, start_ns: 0, end_ns: 0, input_shapes: Vec::new(), input_types: Vec::new(), cpu_memory: 0, cuda_memory: 0, cuda: None });
        event.end_ns = event.start_ns + self.start.elapsed().as_nanos() as u64;
        event.cpu_memory = mem1.0 - self.mem0.0;
        event.cuda_memory = mem1.1 - self.mem0.1;
        if let Some(c) = collector().as_mut() {
            c.events.push(Raw { event, marks });
        }
    }
}

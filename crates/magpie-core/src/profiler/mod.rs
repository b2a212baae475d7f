//! `torch.profiler`: a [`profile`] records every op (`aten::add`, `aten::mm`, ...) with its input
//! shapes, host time, CUDA time (events on the stream), memory, the `record_function` scopes
//! around them and the autograd engine's nodes; the [`Trace`] exports a Chrome trace
//! (`chrome://tracing`, Perfetto) and a `key_averages()` table.
//!
//! Off, recording costs one atomic load per op: the hooks (`op`, the autograd engine's node
//! runner, the registry's `call`, storage allocation) check one flag word and return.
//!
//! ```
//! use magpie_core::profiler::{profile, record_function, ProfileConfig};
//! use magpie_core::Tensor;
//! let prof = profile(ProfileConfig { record_shapes: true, profile_memory: true, ..ProfileConfig::default() })?;
//! let a = Tensor::randn(&[64, 64])?.with_requires_grad()?;
//! {
//!     let _scope = record_function("my_block");
//!     a.matmul(&a)?.relu()?.sum()?.backward()?;
//! }
//! let trace = prof.stop()?;
//! assert!(trace.events().iter().any(|e| e.name == "aten::matmul"));
//! println!("{}", trace.key_averages().table("self_cpu_time_total", 10)?);
//! let json = trace.chrome_trace_json();
//! assert!(json.contains("\"traceEvents\""));
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod chrome;
mod cuda_time;
pub(crate) mod memory;
mod schedule;
mod state;
mod table;

pub use schedule::{profile, ProfileConfig, Profiler, ProfilerAction, ProfilerActivity, Schedule};
pub use state::{CudaSpan, Event, EventKind, RangeGuard};
pub use table::{FunctionEventAvg, KeyAverages};

use crate::{Device, Result, Tensor};
use std::borrow::Cow;

/// True while a profile records (one relaxed atomic load).
#[inline(always)]
pub fn is_enabled() -> bool {
    state::flags() != 0
}

/// The hook at an op's entry: records `aten::<name>` over `inputs` until the guard drops.
/// `None` (after one atomic load) when no profile records.
#[inline(always)]
pub fn op(name: &'static str, inputs: &[&Tensor]) -> Option<RangeGuard> {
    if !is_enabled() {
        return None;
    }
    op_slow(name, inputs)
}

#[cold]
fn op_slow(name: &'static str, inputs: &[&Tensor]) -> Option<RangeGuard> {
    state::open(Cow::Owned(format!("aten::{name}")), EventKind::Op, inputs, None)
}

/// [`op`] for ops whose tensor arguments may be absent (a bias).
#[inline(always)]
pub fn op_opt(name: &'static str, inputs: &[Option<&Tensor>]) -> Option<RangeGuard> {
    if !is_enabled() {
        return None;
    }
    let ts: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
    op_slow(name, &ts)
}

/// [`op`] with a name that is only formatted when recording (the registry's names).
#[inline(always)]
pub fn op_named(name: impl FnOnce() -> String, inputs: &[&Tensor]) -> Option<RangeGuard> {
    if !is_enabled() {
        return None;
    }
    state::open(Cow::Owned(format!("aten::{}", name())), EventKind::Op, inputs, None)
}

/// The two ranges PyTorch records around an autograd node; the inner one closes first (fields
/// drop in declaration order).
pub struct NodeRanges {
    _inner: Option<RangeGuard>,
    _outer: RangeGuard,
}

/// The autograd engine's hook around one node: the two ranges PyTorch records
/// (`autograd::engine::evaluate_function: MmBackward0` around `MmBackward0`), timed on `device`.
#[inline(always)]
pub fn backward_node(node: &str, grads: &[&Tensor], device: Option<Device>) -> Option<NodeRanges> {
    if !is_enabled() {
        return None;
    }
    let outer = state::open(Cow::Owned(format!("autograd::engine::evaluate_function: {node}")), EventKind::Backward, grads, device)?;
    let inner = state::open(Cow::Owned(node.to_string()), EventKind::Backward, grads, device);
    Some(NodeRanges { _inner: inner, _outer: outer })
}

/// `torch.profiler.record_function(name)`: a user scope in the trace, open until the guard drops.
/// Costs one atomic load (and nothing else) when no profile records.
///
/// ```
/// let _scope = magpie_core::profiler::record_function("data_loading");
/// ```
#[inline]
pub fn record_function(name: impl Into<Cow<'static, str>>) -> Option<RangeGuard> {
    if !is_enabled() {
        return None;
    }
    state::open(name.into(), EventKind::UserAnnotation, &[], None)
}

/// [`record_function`] with a name made only when recording (`format!` costs nothing when off).
#[inline]
pub fn record_function_with(name: impl FnOnce() -> String) -> Option<RangeGuard> {
    if !is_enabled() {
        return None;
    }
    state::open(Cow::Owned(name()), EventKind::UserAnnotation, &[], None)
}

/// What a profile recorded: the events (ops, scopes, backward nodes), with exporters.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    events: Vec<Event>,
}

impl Trace {
    /// A trace of the given events (for tools that merge or filter traces).
    pub fn from_events(events: Vec<Event>) -> Trace {
        Trace { events }
    }
    /// The events, in the order they ended.
    pub fn events(&self) -> &[Event] {
        &self.events
    }
    /// `prof.key_averages()`: events grouped by name.
    pub fn key_averages(&self) -> KeyAverages {
        KeyAverages::new(&self.events, false)
    }
    /// `prof.key_averages(group_by_input_shape=True)`: grouped by name and input shapes.
    pub fn key_averages_by_input_shape(&self) -> KeyAverages {
        KeyAverages::new(&self.events, true)
    }
    /// The Chrome trace JSON (`traceEvents` of `"ph": "X"` events, times in µs).
    pub fn chrome_trace_json(&self) -> String {
        chrome::to_json(&self.events)
    }
    /// `prof.export_chrome_trace(path)`: writes [`Trace::chrome_trace_json`].
    pub fn export_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let p = path.as_ref();
        std::fs::write(p, self.chrome_trace_json()).map_err(|e| crate::Error::io("export_chrome_trace", format!("cannot write {}: {e}", p.display())))
    }
}

/// Turns what a profile collected into a trace: reads the CUDA events (one wait for the last).
pub(crate) fn finish(c: state::Collector) -> Trace {
    let mut events = Vec::with_capacity(c.events.len());
    for raw in c.events {
        let mut e = raw.event;
        if let Some((ord, a, b)) = &raw.marks {
            if let (Some(base), Some(dur)) = (c.bases.iter().find(|x| x.device == *ord), a.elapsed_ms(b)) {
                let offset = base.mark.elapsed_ms(a).unwrap_or(0.0) as f64 * 1e6;
                e.cuda = Some(CudaSpan { device: *ord, start_ns: base.host_ns as f64 + offset, dur_ns: dur as f64 * 1e6 });
            }
        }
        events.push(e);
    }
    Trace { events }
}

/// [`op`] for ops over a list of tensors (`cat`, `stack`, `einsum`).
#[inline(always)]
pub fn op_list(name: &'static str, inputs: &[Tensor]) -> Option<RangeGuard> {
    if !is_enabled() {
        return None;
    }
    let ts: Vec<&Tensor> = inputs.iter().collect();
    op_slow(name, &ts)
}

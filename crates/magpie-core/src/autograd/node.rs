//! `Node`: one recorded op in the graph: its backward rule, the edges to its inputs' producers,
//! and what it saved for backward.

use super::saved_hooks::Packed;
use crate::autograd::is_grad_enabled;
use crate::device::Device;
use crate::dtype::DType;
use crate::layout::Layout;
use crate::storage::StorageCell;
use crate::tensor::{Tensor, TensorImpl};
use crate::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

static SEQ: AtomicU64 = AtomicU64::new(1);

/// A backward rule: gradients of the outputs in, gradients of the inputs out (None: no gradient).
pub type BackwardFn = Box<dyn Fn(&BackwardCtx, &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// Where a gradient goes: into a leaf's `.grad`, or into an output slot of another node.
#[derive(Clone)]
pub(crate) enum Edge {
    Leaf(Arc<TensorImpl>),
    Node(Arc<Node>, usize),
}

impl Edge {
    /// The edge a gradient for `t` follows: its producer's output slot, or the leaf itself.
    /// None when `t` does not require grad.
    pub(crate) fn of(t: &Tensor) -> Option<Edge> {
        if !t.requires_grad() {
            None
        } else if let Some((n, i)) = t.grad_edge() {
            Some(Edge::Node(n, i))
        } else {
            Some(Edge::Leaf(t.0.clone()))
        }
    }
}

/// What a node remembers of each output: its shape, dtype and device (to make a zero gradient
/// for an output that received none) and, until the graph is freed, its data (for rules that
/// read the output through [`BackwardCtx::output`]).
pub(crate) struct OutputMeta {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub device: Device,
    pub data: Mutex<Option<(Arc<StorageCell>, Layout, u64)>>,
}

/// One recorded op (`grad_fn` in PyTorch).
pub struct Node {
    pub(crate) seq: u64,
    name: String,
    pub(crate) next: Vec<Option<Edge>>,
    /// The backward rule; None once backward consumed it without `retain_graph`.
    pub(crate) rule: Mutex<Option<BackwardFn>>,
    pub(crate) outputs: Vec<OutputMeta>,
    /// Non-leaf tensors made by this node that have hooks or `retain_grad` (output index, tensor).
    pub(crate) watchers: Mutex<Vec<(usize, Weak<TensorImpl>)>>,
}

impl Node {
    /// The op's name with PyTorch's suffix, e.g. `MulBackward0`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The producers of the inputs: `Some(name)` per input that requires grad (`AccumulateGrad` for leaves).
    pub fn next_functions(&self) -> Vec<Option<String>> {
        self.next
            .iter()
            .map(|e| {
                e.as_ref().map(|e| match e {
                    Edge::Leaf(_) => "AccumulateGrad".to_string(),
                    Edge::Node(n, _) => n.name.clone(),
                })
            })
            .collect()
    }
    /// Number of outputs of the recorded op.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }
    /// True once a backward pass without `retain_graph` has consumed this node (its saved tensors are gone).
    pub fn is_freed(&self) -> bool {
        self.rule.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }
    /// Called before an in-place op overwrites output `k` and rebases its history: the node keeps
    /// a copy of the value it produced, so its rule still reads the right data (PyTorch would
    /// refuse; the gradient is exact either way). A stale output is left stale (still an error).
    pub(crate) fn preserve_output(&self, k: usize) -> Result<()> {
        let Some(m) = self.outputs.get(k) else { return Ok(()) };
        let mut d = m.data.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((st, layout, ver)) = d.as_ref() {
            if st.version() == *ver {
                let t = Tensor::from_parts(st.clone(), layout.clone(), None);
                let c = {
                    let _ng = super::no_grad();
                    t.copy()?
                };
                *d = Some((c.storage().clone(), c.layout().clone(), c.version()));
            }
        }
        Ok(())
    }
    /// Drops the rule (and with it every tensor it saved) and the outputs' data.
    pub(crate) fn release(&self) {
        *self.rule.lock().unwrap_or_else(|e| e.into_inner()) = None;
        for o in &self.outputs {
            *o.data.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

/// What a backward rule can ask of its node.
pub struct BackwardCtx<'a> {
    pub(crate) node: &'a Arc<Node>,
    pub(crate) create_graph: bool,
}

impl BackwardCtx<'_> {
    /// The node's `i`-th output, as saved. Fails if it was modified in place since.
    /// With `create_graph` it carries this node as its history, so higher-order gradients flow through it.
    pub fn output(&self, i: usize) -> Result<Tensor> {
        let m = self.node.outputs.get(i).ok_or_else(|| Error::autograd(self.node.name(), format!("no output {i}")))?;
        let data = m.data.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some((storage, layout, version)) = data else { return Err(freed_error(self.node.name())) };
        let now = storage.version();
        if now != version {
            return Err(modified_error(
                self.node.name(),
                &format!("[{} {:?}], which is output {i} of {},", m.dtype, m.shape, self.node.name()),
                now,
                version,
            ));
        }
        let t = Tensor::from_parts(storage, layout, None);
        if self.create_graph {
            t.set_grad_fn(Some((self.node.clone(), i)));
        }
        Ok(t)
    }
    /// True when the gradient being computed will itself be differentiated.
    pub fn create_graph(&self) -> bool {
        self.create_graph
    }
    /// True if input `i` receives a gradient (PyTorch's `ctx.needs_input_grad[i]`).
    pub fn needs_input_grad(&self, i: usize) -> bool {
        matches!(self.node.next.get(i), Some(Some(_)))
    }
    /// The name of the node being run (`MulBackward0`).
    pub fn name(&self) -> &str {
        self.node.name()
    }
}

pub(crate) fn freed_error(op: &str) -> Error {
    Error::autograd(
        op,
        "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=true if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.",
    )
}

fn modified_error(op: &str, what: &str, now: u64, then: u64) -> Error {
    Error::autograd(
        op,
        format!("one of the variables needed for gradient computation has been modified by an inplace operation: {what} is at version {now}; expected version {then} instead"),
    )
}

/// A tensor saved for backward with its version, so that an in-place change is caught; or,
/// under [`super::saved_tensors_hooks`], what the pack hook made of it.
#[derive(Clone)]
pub struct Saved {
    inner: SavedInner,
    op: &'static str,
}

#[derive(Clone)]
enum SavedInner {
    Plain { tensor: Tensor, version: u64 },
    /// The packed value, and the history the tensor had (reattached on unpack under create_graph;
    /// a node is held weakly, as PyTorch does, so that saving an output makes no cycle).
    Packed { packed: std::result::Result<Arc<Packed>, Error>, history: Option<SavedHistory> },
}

#[derive(Clone)]
enum SavedHistory {
    Leaf(Arc<TensorImpl>),
    Node(Weak<Node>, usize),
}

impl Saved {
    /// Saves `t` for the backward of `op` (through the saved-tensor hooks, if any are active).
    pub fn new(op: &'static str, t: &Tensor) -> Saved {
        let inner = match super::saved_hooks::pack(t) {
            None => SavedInner::Plain { tensor: t.clone(), version: t.version() },
            Some(packed) => {
                let history = if !t.requires_grad() {
                    None
                } else {
                    match t.grad_edge() {
                        Some((n, k)) => Some(SavedHistory::Node(Arc::downgrade(&n), k)),
                        None => Some(SavedHistory::Leaf(t.0.clone())),
                    }
                };
                SavedInner::Packed { packed: packed.map(Arc::new), history }
            }
        };
        Saved { inner, op }
    }
    /// The saved tensor; an error naming the op if it was modified in place since it was saved.
    pub fn get(&self) -> Result<Tensor> {
        match &self.inner {
            SavedInner::Plain { tensor, version } => {
                let now = tensor.version();
                if now != *version {
                    return Err(modified_error(
                        self.op,
                        &format!("[{} {:?}], saved for the backward of {},", tensor.dtype(), tensor.shape(), self.op),
                        now,
                        *version,
                    ));
                }
                Ok(tensor.clone())
            }
            SavedInner::Packed { packed, history } => {
                let t = packed.as_ref().map_err(|e| e.clone())?.unpack()?.detach();
                // differentiating the backward again (create_graph) must reach the saved tensor's history
                if is_grad_enabled() {
                    match history {
                        Some(SavedHistory::Node(n, k)) => {
                            if let Some(n) = n.upgrade() {
                                t.set_grad_fn(Some((n, *k)));
                            }
                        }
                        Some(SavedHistory::Leaf(l)) => {
                            let rule = |_: &BackwardCtx, g: &[Tensor]| -> Result<Vec<Option<Tensor>>> { Ok(vec![Some(g[0].clone())]) };
                            record_edges("UnpackBackward0".to_string(), vec![Some(Edge::Leaf(l.clone()))], &[t.clone()], &[true], Box::new(rule));
                        }
                        None => {}
                    }
                }
                Ok(t)
            }
        }
    }
}

/// Records an op for autograd if grad mode is on and any input requires grad: the outputs get
/// this node as their `grad_fn`. `rule` maps output gradients (zeros where none flowed) to
/// input gradients (one per input, None where none). Returns whether a node was recorded.
///
/// `name` is the forward op's name (`"Mul"`); the node is called `MulBackward0`, as in PyTorch.
pub fn record(
    name: &str,
    inputs: &[&Tensor],
    outputs: &[Tensor],
    rule: impl Fn(&BackwardCtx, &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
) -> bool {
    if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad()) {
        return false;
    }
    let next = inputs.iter().map(|t| Edge::of(t)).collect();
    let attach = vec![true; outputs.len()];
    record_edges(format!("{}Backward0", camel(name)), next, outputs, &attach, Box::new(rule));
    true
}

/// `layer_norm` -> `LayerNorm`, `mul` -> `Mul` (PyTorch's node names).
pub(crate) fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut up = true;
    for c in name.chars() {
        if c == '_' || c == '.' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Makes a node with the given edges and full name; attaches it as `grad_fn` to the float or
/// complex outputs whose `attach` flag is set. Does not look at grad mode.
pub(crate) fn record_edges(name: String, next: Vec<Option<Edge>>, outputs: &[Tensor], attach: &[bool], rule: BackwardFn) -> Arc<Node> {
    let outs = outputs
        .iter()
        .map(|o| OutputMeta {
            shape: o.shape().to_vec(),
            dtype: o.dtype(),
            device: o.device(),
            data: Mutex::new(Some((o.storage().clone(), o.layout().clone(), o.version()))),
        })
        .collect();
    let node = Arc::new(Node {
        seq: SEQ.fetch_add(1, Ordering::Relaxed),
        name,
        next,
        rule: Mutex::new(Some(rule)),
        outputs: outs,
        watchers: Mutex::new(Vec::new()),
    });
    for (i, o) in outputs.iter().enumerate() {
        if attach.get(i).copied().unwrap_or(false) && (o.dtype().is_float() || o.dtype().is_complex()) {
            o.set_grad_fn(Some((node.clone(), i)));
        }
    }
    node
}

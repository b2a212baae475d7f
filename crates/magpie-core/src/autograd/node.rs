//! `Node`: one recorded op in the graph: its backward rule, the edges to its inputs' producers,
//! and what it saved for backward.

use crate::autograd::is_grad_enabled;
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

/// What a node remembers of each output: enough to rebuild it (for rules that use the output)
/// and to make a zero gradient for outputs that received none.
pub(crate) struct OutputMeta {
    pub storage: Arc<StorageCell>,
    pub layout: Layout,
    pub version: u64,
}

/// One recorded op (`grad_fn` in PyTorch).
pub struct Node {
    pub(crate) seq: u64,
    name: String,
    pub(crate) next: Vec<Option<Edge>>,
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
        let m = self.node.outputs.get(i).ok_or_else(|| Error::autograd(self.node.name(), "no such output"))?;
        if m.storage.version() != m.version {
            return Err(modified_error(self.node.name()));
        }
        let t = Tensor::from_parts(m.storage.clone(), m.layout.clone(), None);
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
}

fn modified_error(op: &str) -> Error {
    Error::autograd(
        op,
        "one of the variables needed for gradient computation has been modified by an inplace operation",
    )
}

/// A tensor saved for backward with its version, so that an in-place change is caught.
#[derive(Clone)]
pub struct Saved {
    tensor: Tensor,
    version: u64,
    op: &'static str,
}

impl Saved {
    /// Saves `t` for the backward of `op`.
    pub fn new(op: &'static str, t: &Tensor) -> Saved {
        Saved { tensor: t.clone(), version: t.version(), op }
    }
    /// The saved tensor; an error if it was modified in place since it was saved.
    pub fn get(&self) -> Result<Tensor> {
        if self.tensor.version() != self.version {
            return Err(modified_error(self.op));
        }
        Ok(self.tensor.clone())
    }
}

/// Records an op for autograd if grad mode is on and any input requires grad: the outputs get
/// this node as their `grad_fn`. `rule` maps output gradients (zeros where none flowed) to
/// input gradients (one per input, None where none). Returns whether a node was recorded.
pub fn record(
    name: &str,
    inputs: &[&Tensor],
    outputs: &[Tensor],
    rule: impl Fn(&BackwardCtx, &[Tensor]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
) -> bool {
    if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad()) {
        return false;
    }
    let next = inputs
        .iter()
        .map(|t| {
            if !t.requires_grad() {
                None
            } else if let Some((n, i)) = t.grad_edge() {
                Some(Edge::Node(n, i))
            } else {
                Some(Edge::Leaf(t.0.clone()))
            }
        })
        .collect();
    let outs = outputs
        .iter()
        .map(|o| OutputMeta { storage: o.storage().clone(), layout: o.layout().clone(), version: o.version() })
        .collect();
    let node = Arc::new(Node {
        seq: SEQ.fetch_add(1, Ordering::Relaxed),
        name: format!("{name}Backward0"),
        next,
        rule: Mutex::new(Some(Box::new(rule))),
        outputs: outs,
        watchers: Mutex::new(Vec::new()),
    });
    for (i, o) in outputs.iter().enumerate() {
        if o.dtype().is_float() || o.dtype().is_complex() {
            o.set_grad_fn(Some((node.clone(), i)));
        }
    }
    true
}

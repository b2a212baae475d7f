//! User-defined autograd functions (`torch.autograd.Function`): a type with its own `forward`
//! and `backward`, tensors and other state saved on a [`FunctionCtx`].
//!
//! ```
//! use magpie_core::autograd::{self, Function, FunctionCtx};
//! use magpie_core::{Result, Tensor};
//!
//! /// y = x * k with a hand-written backward.
//! struct Scale(f64);
//! impl Function for Scale {
//!     fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
//!         Ok(vec![inputs[0].mul_scalar(self.0)?])
//!     }
//!     fn backward(&self, _ctx: &FunctionCtx, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
//!         Ok(vec![Some(grads[0].mul_scalar(self.0)?)])
//!     }
//! }
//!
//! let x = Tensor::from_vec(vec![1f64, 2.], &[2])?.with_requires_grad()?;
//! let y = Scale(3.0).apply(&[x.clone()])?.remove(0);
//! assert_eq!(y.grad_fn().unwrap().name(), "ScaleBackward");
//! y.sum()?.backward()?;
//! assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![3., 3.]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

use super::inplace;
use super::node::{record_edges, BackwardCtx, Edge, Saved};
use super::{is_grad_enabled, no_grad};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

/// A differentiable operation with a hand-written backward (PyTorch's `torch.autograd.Function`).
///
/// `forward` runs without recording history (as in PyTorch); its outputs get one node whose
/// backward is [`Function::backward`]. `backward` gets one gradient per output (zeros for outputs
/// that received none) and returns one `Option` per input (`None`: no gradient). It is written
/// with tensor ops, so it can be differentiated again (`create_graph`) unless
/// [`Function::once_differentiable`] says otherwise.
pub trait Function: Send + Sync + 'static {
    /// Computes the outputs; save what backward needs on `ctx`.
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
    /// Gradients of the inputs from the gradients of the outputs.
    fn backward(&self, ctx: &FunctionCtx, grad_outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>>;
    /// The name the node gets (`{name}Backward`); the type's name by default.
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        let base = full.split('<').next().unwrap_or(full);
        base.rsplit("::").next().unwrap_or(base).to_string()
    }
    /// PyTorch's `@once_differentiable`: backward runs under `no_grad`, and differentiating its
    /// result again is an error instead of a silently wrong (zero) second derivative.
    fn once_differentiable(&self) -> bool {
        false
    }
    /// Applies the function: `Scale(2.0).apply(&[x])`. Same as [`apply`].
    fn apply(self, inputs: &[Tensor]) -> Result<Vec<Tensor>>
    where
        Self: Sized,
    {
        apply(self, inputs)
    }
}

enum SavedSlot {
    Input(Saved),
    Output(usize),
}

/// The context a [`Function`] gets: tensors saved for backward (checked against in-place
/// changes), other state by name, which inputs need a gradient, which outputs are not differentiable.
#[derive(Default)]
pub struct FunctionCtx {
    to_save: Vec<Tensor>,
    saved: Arc<Vec<SavedSlot>>,
    state: HashMap<String, Arc<dyn Any + Send + Sync>>,
    needs: Vec<bool>,
    non_diff: Vec<Tensor>,
    dirty: Vec<Tensor>,
    /// In backward: the saved tensors, resolved.
    resolved: Vec<Tensor>,
    name: String,
}

impl FunctionCtx {
    /// `ctx.save_for_backward(*tensors)`: inputs, outputs or intermediates that backward needs.
    /// Replaces what was saved before. Modifying one in place before backward makes backward fail.
    pub fn save_for_backward(&mut self, tensors: &[Tensor]) {
        self.to_save = tensors.to_vec();
    }
    /// `ctx.saved_tensors` in backward, in the order they were saved.
    pub fn saved_tensors(&self) -> &[Tensor] {
        &self.resolved
    }
    /// Stores a non-tensor value for backward (`ctx.k = ...` in PyTorch).
    pub fn save_value<T: Any + Send + Sync>(&mut self, key: &str, value: T) {
        self.state.insert(key.to_string(), Arc::new(value));
    }
    /// A value stored with [`FunctionCtx::save_value`]; an error if absent or of another type.
    pub fn value<T: Any + Send + Sync>(&self, key: &str) -> Result<&T> {
        self.state
            .get(key)
            .and_then(|v| v.downcast_ref::<T>())
            .ok_or_else(|| Error::autograd(&self.name, format!("no saved value '{key}' of type {}", std::any::type_name::<T>())))
    }
    /// `ctx.needs_input_grad[i]`: whether input `i` receives a gradient (valid in forward and backward).
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false)
    }
    /// `ctx.mark_non_differentiable(*outputs)`: these outputs get no history (their gradient in
    /// backward is always zero). Pass tensors that forward returns.
    pub fn mark_non_differentiable(&mut self, outputs: &[Tensor]) {
        self.non_diff.extend(outputs.iter().cloned());
    }
    /// `ctx.mark_dirty(*inputs)`: these inputs were modified in place by `forward`, which must
    /// return them (the same handles) as outputs. Each takes this function's node as its history
    /// (a view's base gets a `CopySlices` node), as an in-place op's result does.
    pub fn mark_dirty(&mut self, inputs: &[Tensor]) {
        self.dirty.extend(inputs.iter().cloned());
    }
}

/// Applies a user-defined [`Function`] to `inputs` and records its node when grad mode is on
/// and an input requires grad.
pub fn apply<F: Function>(f: F, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    let name = f.name();
    let enabled = is_grad_enabled();
    let mut ctx = FunctionCtx {
        needs: inputs.iter().map(|t| enabled && t.requires_grad()).collect(),
        name: format!("{name}Backward"),
        ..Default::default()
    };
    let outs = {
        let _ng = no_grad();
        f.forward(&mut ctx, inputs)?
    };
    let dirty = std::mem::take(&mut ctx.dirty);
    let is_dirty = |o: &Tensor| dirty.iter().any(|d| d.is_same(o));
    for d in &dirty {
        if !inputs.iter().any(|i| i.is_same(d)) {
            return Err(Error::autograd(&ctx.name, "mark_dirty only accepts input tensors, but argument 0 isn't one."));
        }
        if !outs.iter().any(|o| o.is_same(d)) {
            return Err(Error::autograd(&ctx.name, "Some elements marked as dirty during the forward method were not returned as output. The inputs that are modified inplace must all be outputs of the Function."));
        }
        if enabled && d.requires_grad() && d.is_leaf() && d.base().is_none() {
            return Err(Error::autograd(&ctx.name, "a leaf Variable that requires grad has been used in an in-place operation."));
        }
        inplace::check(d, &ctx.name)?;
    }
    // an output that is an input (or otherwise has history) is returned as a fresh alias, so that
    // attaching this node does not rewrite the input's own history; a dirty input's alias takes
    // the node, and the input itself is then rebased onto it (below)
    let returned = outs.clone();
    let outs: Vec<Tensor> = outs
        .into_iter()
        .map(|o| if o.requires_grad() || o.grad_edge().is_some() || inputs.iter().any(|i| i.is_same(&o)) { o.detach() } else { o })
        .collect();
    if !ctx.needs.iter().any(|&b| b) {
        return Ok(returned.into_iter().zip(outs).map(|(r, o)| if is_dirty(&r) { r } else { o }).collect());
    }
    let is_out = |t: &Tensor| outs.iter().position(|o| o.shares_storage(t) && o.layout() == t.layout() && o.dtype() == t.dtype());
    let attach: Vec<bool> = outs.iter().map(|o| !ctx.non_diff.iter().any(|n| n.shares_storage(o) && n.layout() == o.layout())).collect();
    let saved = std::mem::take(&mut ctx.to_save)
        .iter()
        .map(|t| match is_out(t) {
            // saving an output by handle would make a cycle (output -> node -> output): keep its index
            Some(i) => SavedSlot::Output(i),
            None => SavedSlot::Input(Saved::new("custom function", t)),
        })
        .collect();
    ctx.saved = Arc::new(saved);
    ctx.non_diff.clear();
    let next: Vec<Option<Edge>> = inputs.iter().map(|t| if enabled { Edge::of(t) } else { None }).collect();
    let once = f.once_differentiable();
    let f = Arc::new(f);
    let ctx = Arc::new(ctx);
    let rule = move |b: &BackwardCtx, grads: &[Tensor]| -> Result<Vec<Option<Tensor>>> {
        let mut resolved = Vec::with_capacity(ctx.saved.len());
        for s in ctx.saved.iter() {
            resolved.push(match s {
                SavedSlot::Input(s) => s.get().map_err(|e| rename(e, b.name()))?,
                SavedSlot::Output(i) => b.output(*i)?,
            });
        }
        let c = FunctionCtx {
            to_save: Vec::new(),
            saved: ctx.saved.clone(),
            state: ctx.state.clone(),
            needs: (0..ctx.needs.len()).map(|i| b.needs_input_grad(i)).collect(),
            non_diff: Vec::new(),
            dirty: Vec::new(),
            resolved,
            name: ctx.name.clone(),
        };
        let res = if once {
            let _ng = no_grad();
            f.backward(&c, grads)?
        } else {
            f.backward(&c, grads)?
        };
        if res.len() != c.needs.len() {
            return Err(Error::autograd(
                b.name(),
                format!("function {} returned an incorrect number of gradients (expected {}, got {})", b.name(), c.needs.len(), res.len()),
            ));
        }
        let res: Vec<Option<Tensor>> = res.into_iter().enumerate().map(|(i, g)| g.filter(|_| c.needs[i])).collect();
        if once && b.create_graph() {
            return delay_error(b, grads, res);
        }
        Ok(res)
    };
    let node_name = format!("{name}Backward");
    record_edges(node_name.clone(), next, &outs, &attach, Box::new(rule));
    let mut result = Vec::with_capacity(outs.len());
    for (r, o) in returned.into_iter().zip(outs) {
        if is_dirty(&r) {
            // the data is already in place: only the history moves
            inplace::write(&node_name, &r, &o, || Ok(()))?;
            result.push(r);
        } else {
            result.push(o);
        }
    }
    Ok(result)
}

fn rename(e: Error, node: &str) -> Error {
    match e {
        Error::Autograd { msg, .. } => Error::autograd(node, msg.replace("custom function", node)),
        e => e,
    }
}

/// For `once_differentiable` functions under `create_graph`: the gradients get a node that
/// fails when differentiated (PyTorch's `DelayedError`), connected to everything they depend on.
fn delay_error(b: &BackwardCtx, grads: &[Tensor], res: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
    let mut next: Vec<Option<Edge>> = grads.iter().map(Edge::of).collect();
    next.extend(b.node.next.iter().cloned());
    if next.iter().all(|e| e.is_none()) {
        return Ok(res);
    }
    let outs: Vec<Tensor> = res.iter().flatten().map(|g| g.detach()).collect();
    let name = b.name().to_string();
    let attach = vec![true; outs.len()];
    record_edges(
        "DelayedError".to_string(),
        next,
        &outs,
        &attach,
        Box::new(move |_, _| -> Result<Vec<Option<Tensor>>> {
            Err(Error::autograd(
                &name,
                format!("trying to differentiate twice a function that was marked with once_differentiable ({name})"),
            ))
        }),
    );
    let mut it = outs.into_iter();
    Ok(res.into_iter().map(|g| g.and_then(|_| it.next())).collect())
}

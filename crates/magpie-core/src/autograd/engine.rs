//! The backward engine: dependency-counted reverse topological walk over [`Node`]s.

use super::node::{BackwardCtx, Edge, Node};
use super::set_grad_enabled;
use crate::tensor::{Tensor, TensorImpl};
use crate::{Error, Result};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// `torch.autograd.backward(tensors, grad_tensors, retain_graph, create_graph)`:
/// accumulates gradients into the `.grad` of the leaves the outputs depend on.
pub fn backward(outputs: &[Tensor], grad_outputs: &[Tensor], retain_graph: bool, create_graph: bool) -> Result<()> {
    run("backward", outputs, grad_outputs, retain_graph, create_graph, None).map(|_| ())
}

/// `torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)`:
/// returns the gradients of the outputs with respect to `inputs` without touching any `.grad`.
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    grad_outputs: &[Tensor],
    retain_graph: bool,
    create_graph: bool,
    allow_unused: bool,
) -> Result<Vec<Option<Tensor>>> {
    for (i, t) in inputs.iter().enumerate() {
        if !t.requires_grad() {
            return Err(Error::autograd("grad", format!("input {i} of autograd.grad does not require grad")));
        }
    }
    let res = run("grad", outputs, grad_outputs, retain_graph, create_graph, Some(inputs))?.unwrap_or_default();
    if !allow_unused {
        if let Some(i) = res.iter().position(|g| g.is_none()) {
            return Err(Error::autograd(
                "grad",
                format!("one of the differentiated Tensors (input {i}) appears to not have been used in the graph; set allow_unused=True if this is the desired behavior"),
            ));
        }
    }
    Ok(res)
}

struct Ready(Arc<Node>);
impl PartialEq for Ready {
    fn eq(&self, o: &Self) -> bool {
        self.0.seq == o.0.seq
    }
}
impl Eq for Ready {}
impl PartialOrd for Ready {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ready {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.seq.cmp(&o.0.seq)
    }
}

fn key(n: &Arc<Node>) -> usize {
    Arc::as_ptr(n) as usize
}

struct Walk<'a> {
    create_graph: bool,
    capture: Option<&'a [Tensor]>,
    captured: Vec<Option<Tensor>>,
}

impl Walk<'_> {
    fn accumulate_leaf(&mut self, leaf: &Arc<TensorImpl>, g: Tensor) -> Result<()> {
        let t = Tensor(leaf.clone());
        let mut g = g;
        for h in t.hooks() {
            if let Some(r) = h(&g)? {
                g = r;
            }
        }
        if let Some(cap) = self.capture {
            if let Some(i) = cap.iter().position(|c| Arc::ptr_eq(&c.0, leaf)) {
                self.captured[i] = Some(add_opt(self.captured[i].take(), g)?);
            }
            return Ok(());
        }
        let g = if self.create_graph || Arc::strong_count(g.storage()) == 1 { g } else { g.copy()? };
        let prev = t.grad();
        let newg = match prev {
            None => g,
            Some(p) => {
                if self.create_graph {
                    p.add(&g)?
                } else {
                    let _ng = set_grad_enabled(false);
                    p.add(&g)?
                }
            }
        };
        t.set_grad(Some(newg));
        Ok(())
    }
}

fn add_opt(a: Option<Tensor>, b: Tensor) -> Result<Tensor> {
    match a {
        None => Ok(b),
        Some(a) => a.add(&b),
    }
}

fn run(
    op: &str,
    outputs: &[Tensor],
    grad_outputs: &[Tensor],
    retain_graph: bool,
    create_graph: bool,
    capture: Option<&[Tensor]>,
) -> Result<Option<Vec<Option<Tensor>>>> {
    if !grad_outputs.is_empty() && grad_outputs.len() != outputs.len() {
        return Err(Error::autograd(op, format!("got {} tensors and {} gradients", outputs.len(), grad_outputs.len())));
    }
    // root edges and their gradients
    let mut roots: Vec<(Edge, Tensor)> = Vec::new();
    for (i, o) in outputs.iter().enumerate() {
        if !o.requires_grad() {
            return Err(Error::autograd(op, format!("element {i} of tensors does not require grad and does not have a grad_fn")));
        }
        let g = match grad_outputs.get(i) {
            Some(g) => {
                if g.shape() != o.shape() {
                    return Err(Error::shape(op, format!("mismatch in shape: grad_output[{i}] has a shape of {:?} and output[{i}] has a shape of {:?}", g.shape(), o.shape())));
                }
                g.clone()
            }
            None => {
                if o.numel() != 1 {
                    return Err(Error::autograd(op, "grad can be implicitly created only for scalar outputs"));
                }
                o.ones_like()?
            }
        };
        let edge = match o.grad_edge() {
            Some((n, k)) => Edge::Node(n, k),
            None => Edge::Leaf(o.0.clone()),
        };
        roots.push((edge, g));
    }
    // count incoming edges of every reachable node
    let mut deps: HashMap<usize, usize> = HashMap::new();
    let mut seen: HashMap<usize, Arc<Node>> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    for (e, _) in &roots {
        if let Edge::Node(n, _) = e {
            if seen.insert(key(n), n.clone()).is_none() {
                stack.push(n.clone());
            }
        }
    }
    while let Some(n) = stack.pop() {
        for e in n.next.iter().flatten() {
            if let Edge::Node(m, _) = e {
                *deps.entry(key(m)).or_insert(0) += 1;
                if seen.insert(key(m), m.clone()).is_none() {
                    stack.push(m.clone());
                }
            }
        }
    }
    let mut walk = Walk { create_graph, capture, captured: vec![None; capture.map_or(0, |c| c.len())] };
    let mut buffers: HashMap<usize, Vec<Option<Tensor>>> = HashMap::new();
    let mut ready = BinaryHeap::new();
    for (e, g) in roots {
        match e {
            Edge::Leaf(l) => walk.accumulate_leaf(&l, g)?,
            Edge::Node(n, k) => {
                let b = buffers.entry(key(&n)).or_insert_with(|| vec![None; n.outputs.len()]);
                b[k] = Some(add_opt(b[k].take(), g)?);
            }
        }
    }
    for n in seen.values() {
        if deps.get(&key(n)).copied().unwrap_or(0) == 0 {
            ready.push(Ready(n.clone()));
        }
    }
    let _mode = set_grad_enabled(create_graph);
    while let Some(Ready(node)) = ready.pop() {
        let mut grads = buffers.remove(&key(&node)).unwrap_or_else(|| vec![None; node.outputs.len()]);
        // hooks, retain_grad and captures of the non-leaf tensors this node produced
        let watchers: Vec<_> = node.watchers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (k, w) in watchers {
            let (Some(t), Some(g)) = (w.upgrade(), grads.get(k).cloned().flatten()) else { continue };
            let t = Tensor(t);
            let mut g = g;
            for h in t.hooks() {
                if let Some(r) = h(&g)? {
                    g = r;
                }
            }
            if t.retains_grad() && capture.is_none() {
                let prev = t.grad();
                t.set_grad(Some(add_opt(prev, g.detach_if(!create_graph))?));
            }
            grads[k] = Some(g);
        }
        if let Some(cap) = capture {
            for (i, c) in cap.iter().enumerate() {
                if let Some((n, k)) = c.grad_edge() {
                    if Arc::ptr_eq(&n, &node) {
                        if let Some(g) = &grads[k] {
                            walk.captured[i] = Some(add_opt(walk.captured[i].take(), g.clone())?);
                        }
                    }
                }
            }
        }
        let results: Vec<Option<Tensor>> = if grads.iter().all(|g| g.is_none()) {
            vec![None; node.next.len()]
        } else {
            let mut full = Vec::with_capacity(grads.len());
            for (k, g) in grads.into_iter().enumerate() {
                full.push(match g {
                    Some(g) => g,
                    None => {
                        let m = &node.outputs[k];
                        Tensor::zeros_on(&m.layout.shape, m.storage.read().dtype(), m.storage.read().device())?
                    }
                });
            }
            let ctx = BackwardCtx { node: &node, create_graph };
            let mut guard = node.rule.lock().unwrap_or_else(|e| e.into_inner());
            let res = match guard.as_ref() {
                None => {
                    return Err(Error::autograd(
                        node.name(),
                        "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Specify retain_graph=true if you need to backward through the graph a second time",
                    ))
                }
                Some(rule) => rule(&ctx, &full)?,
            };
            if !retain_graph {
                *guard = None;
            }
            res
        };
        if results.len() != node.next.len() {
            return Err(Error::autograd(node.name(), format!("backward returned {} gradients for {} inputs", results.len(), node.next.len())));
        }
        for (edge, g) in node.next.iter().zip(results) {
            let Some(edge) = edge else { continue };
            match edge {
                Edge::Leaf(l) => {
                    if let Some(g) = g {
                        let g = conform(node.name(), g, &l.layout.shape, l.dtype)?;
                        walk.accumulate_leaf(l, g)?;
                    }
                }
                Edge::Node(m, k) => {
                    if let Some(g) = g {
                        let meta = &m.outputs[*k];
                        let dt = meta.storage.read().dtype();
                        let g = conform(node.name(), g, &meta.layout.shape, dt)?;
                        let b = buffers.entry(key(m)).or_insert_with(|| vec![None; m.outputs.len()]);
                        b[*k] = Some(add_opt(b[*k].take(), g)?);
                    }
                    let d = deps.entry(key(m)).or_insert(1);
                    *d -= 1;
                    if *d == 0 {
                        ready.push(Ready(m.clone()));
                    }
                }
            }
        }
    }
    Ok(capture.map(|_| walk.captured))
}

/// Checks a gradient's shape against its input and casts it to the input's dtype (as PyTorch's `validate_outputs`).
fn conform(op: &str, g: Tensor, shape: &[usize], dtype: crate::DType) -> Result<Tensor> {
    if g.shape() != shape {
        return Err(Error::shape(op, format!("backward produced a gradient of shape {:?} for an input of shape {shape:?}", g.shape())));
    }
    if g.dtype() != dtype {
        return g.to_dtype(dtype);
    }
    Ok(g)
}

//! The backward engine: dependency-counted reverse topological walk over [`Node`]s.
//!
//! Gradients reaching the same node (or leaf) along several paths are summed in a buffer before
//! the node runs (or the leaf's hooks run and its `.grad` is updated), once. A leaf is finished as
//! soon as the last node with an edge to it has run (PyTorch's `AccumulateGrad` is a node that runs
//! when ready), so its post-accumulate hooks fire while the rest of backward is still to run: data
//! parallelism overlaps the gradient all-reduce with it. Without `retain_graph`, each node's rule
//! and saved tensors are dropped as soon as it has run.
//! `grad` runs only the nodes on a path to the requested inputs.

use super::anomaly;
use super::node::{freed_error, BackwardCtx, Edge, Node};
use super::set_grad_enabled;
use crate::tensor::{Tensor, TensorImpl};
use crate::{Error, Result};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// `torch.autograd.backward(tensors, grad_tensors, retain_graph, create_graph)`:
/// accumulates gradients into the `.grad` of the leaves the outputs depend on.
/// The graph is kept when `retain_graph` or `create_graph` (PyTorch's default for `retain_graph`).
/// `grad_outputs` may be empty (each output must then have one element: its gradient is 1).
pub fn backward(outputs: &[Tensor], grad_outputs: &[Tensor], retain_graph: bool, create_graph: bool) -> Result<()> {
    run("backward", outputs, grad_outputs, retain_graph || create_graph, create_graph, None).map(|_| ())
}

/// `torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)`:
/// returns the gradients of the outputs with respect to `inputs` (leaves or not) without touching
/// any `.grad` (the graph is kept when `retain_graph` or `create_graph`). An input the outputs do not depend on gives `None` with `allow_unused`, else an error.
///
/// ```
/// use magpie_core::{autograd, Tensor};
/// let x = Tensor::from_vec(vec![1f64, 2., 3.], &[3])?.with_requires_grad()?;
/// let y = x.mul(&x)?.mul(&x)?.sum()?; // sum x^3
/// let g = autograd::grad(&[y], &[x.clone()], &[], true, true, false)?[0].clone().unwrap();
/// assert_eq!(g.to_vec::<f64>()?, vec![3., 12., 27.]); // 3x^2
/// let h = autograd::grad(&[g.sum()?], &[x], &[], false, false, false)?[0].clone().unwrap();
/// assert_eq!(h.to_vec::<f64>()?, vec![6., 12., 18.]); // 6x
/// # Ok::<(), magpie_core::Error>(())
/// ```
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
            return Err(Error::autograd("grad", format!("One of the differentiated Tensors (input {i}) does not require grad")));
        }
    }
    let res = run("grad", outputs, grad_outputs, retain_graph || create_graph, create_graph, Some(inputs))?.unwrap_or_default();
    if !allow_unused {
        if let Some(i) = res.iter().position(|g| g.is_none()) {
            return Err(Error::autograd(
                "grad",
                format!("One of the differentiated Tensors (input {i}) appears to not have been used in the graph. Set allow_unused=true if this is the desired behavior."),
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

fn add_opt(a: Option<Tensor>, b: Tensor) -> Result<Tensor> {
    match a {
        None => Ok(b),
        Some(a) => a.add(&b),
    }
}

/// Runs the tensor hooks of `t` on `g` in registration order; each may replace the gradient.
fn run_hooks(t: &Tensor, mut g: Tensor) -> Result<Tensor> {
    for h in t.hooks() {
        if let Some(r) = h(&g)? {
            g = r;
        }
    }
    Ok(g)
}

/// Summed gradients for leaves, in the order they first received one.
#[derive(Default)]
struct LeafBuffers {
    order: Vec<Arc<TensorImpl>>,
    grads: HashMap<usize, Tensor>,
}

impl LeafBuffers {
    fn add(&mut self, leaf: &Arc<TensorImpl>, g: Tensor) -> Result<()> {
        let k = Arc::as_ptr(leaf) as usize;
        let prev = self.grads.remove(&k);
        if prev.is_none() {
            self.order.push(leaf.clone());
        }
        self.grads.insert(k, add_opt(prev, g)?);
        Ok(())
    }
}

impl LeafBuffers {
    /// `backward` only: runs the leaf's tensor hooks on its summed gradient, accumulates it into
    /// `.grad`, then runs its post-accumulate hooks. A leaf with no gradient buffered is skipped.
    fn finish(&mut self, leaf: &Arc<TensorImpl>, create_graph: bool) -> Result<()> {
        let Some(g) = self.grads.remove(&(Arc::as_ptr(leaf) as usize)) else { return Ok(()) };
        let t = Tensor(leaf.clone());
        let g = run_hooks(&t, g)?;
        accumulate_leaf(&t, g, create_graph)?;
        for h in t.post_accumulate_hooks() {
            h(&t)?;
        }
        Ok(())
    }
}

/// Stores the (hooked) gradient of a leaf into its `.grad`, adding to what is there.
fn accumulate_leaf(t: &Tensor, g: Tensor, create_graph: bool) -> Result<()> {
    let g = if create_graph {
        g
    } else {
        // a fresh, contiguous, history-free buffer the leaf owns alone (PyTorch's AccumulateGrad)
        let d = g.detach();
        drop(g);
        let g = d;
        if Arc::strong_count(g.storage()) == 1 && g.is_contiguous() && g.storage_offset() == 0 && g.storage().read().len() == g.numel() {
            g
        } else {
            g.copy()?
        }
    };
    let newg = match t.grad() {
        None => g,
        Some(p) => p.add(&g)?,
    };
    t.set_grad(Some(newg));
    Ok(())
}

fn run(
    op: &str,
    outputs: &[Tensor],
    grad_outputs: &[Tensor],
    retain_graph: bool,
    create_graph: bool,
    capture: Option<&[Tensor]>,
) -> Result<Option<Vec<Option<Tensor>>>> {
    if outputs.is_empty() {
        return Err(Error::autograd(op, "no outputs to differentiate"));
    }
    // backward rules run in the forward's dtypes, never autocast again
    let _no_autocast = crate::amp::suspend_all();
    if !grad_outputs.is_empty() && grad_outputs.len() != outputs.len() {
        return Err(Error::autograd(op, format!("got {} tensors and {} gradients", outputs.len(), grad_outputs.len())));
    }
    // root edges and their gradients
    let mut roots: Vec<(Edge, Tensor)> = Vec::new();
    for (i, o) in outputs.iter().enumerate() {
        let Some(edge) = Edge::of(o) else {
            return Err(Error::autograd(op, format!("element {i} of tensors does not require grad and does not have a grad_fn")));
        };
        let g = match grad_outputs.get(i) {
            Some(g) => {
                if g.shape() != o.shape() {
                    return Err(Error::shape(op, format!("Mismatch in shape: grad_output[{i}] has a shape of {:?} and output[{i}] has a shape of {:?}.", g.shape(), o.shape())));
                }
                if g.dtype().is_complex() != o.dtype().is_complex() {
                    return Err(Error::dtype(op, format!("For complex Tensors, both grad_output and output are required to have the same dtype. Mismatch in dtype: grad_output[{i}] has a dtype of {} and output[{i}] has a dtype of {}.", g.dtype(), o.dtype())));
                }
                g.clone()
            }
            None => {
                if o.numel() != 1 {
                    return Err(Error::autograd(op, format!("grad can be implicitly created only for scalar outputs (output {i} has shape {:?}); pass a gradient", o.shape())));
                }
                o.ones_like()?
            }
        };
        roots.push((edge, g));
    }
    // every reachable node, and how many edges point at it
    let mut deps: HashMap<usize, usize> = HashMap::new();
    // and how many edges point at each leaf (a leaf is finished when its count reaches zero)
    let mut leaf_deps: HashMap<usize, usize> = HashMap::new();
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
            match e {
                Edge::Node(m, _) => {
                    *deps.entry(key(m)).or_insert(0) += 1;
                    if seen.insert(key(m), m.clone()).is_none() {
                        stack.push(m.clone());
                    }
                }
                Edge::Leaf(l) => *leaf_deps.entry(Arc::as_ptr(l) as usize).or_insert(0) += 1,
            }
        }
    }
    // for `grad`: the nodes that lead to a requested input (the others need not run)
    let needed: Option<HashSet<usize>> = capture.map(|cap| {
        let leaves: HashSet<usize> = cap.iter().filter(|c| c.is_leaf()).map(|c| Arc::as_ptr(&c.0) as usize).collect();
        let targets: HashSet<usize> = cap.iter().filter_map(|c| c.grad_edge()).map(|(n, _)| key(&n)).collect();
        let mut order: Vec<&Arc<Node>> = seen.values().collect();
        // a node's inputs were recorded before it: ascending seq visits producers first
        order.sort_by_key(|n| n.seq);
        let mut needed = HashSet::new();
        for n in order {
            let leads = n.next.iter().flatten().any(|e| match e {
                Edge::Leaf(l) => leaves.contains(&(Arc::as_ptr(l) as usize)),
                Edge::Node(m, _) => targets.contains(&key(m)) || needed.contains(&key(m)),
            });
            if leads {
                needed.insert(key(n));
            }
        }
        needed
    });
    let mut captured: Vec<Option<Tensor>> = vec![None; capture.map_or(0, |c| c.len())];
    let mut leaf_bufs = LeafBuffers::default();
    let mut buffers: HashMap<usize, Vec<Option<Tensor>>> = HashMap::new();
    let mut ready = BinaryHeap::new();
    for (e, g) in roots {
        match e {
            Edge::Leaf(l) => leaf_bufs.add(&l, g)?,
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
    let anomaly = anomaly::is_anomaly_enabled();
    while let Some(Ready(node)) = ready.pop() {
        let mut grads = buffers.remove(&key(&node)).unwrap_or_else(|| vec![None; node.outputs.len()]);
        // hooks, retain_grad and captures of the non-leaf tensors this node produced
        let watchers: Vec<_> = node.watchers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (k, w) in watchers {
            let (Some(t), Some(g)) = (w.upgrade(), grads.get(k).cloned().flatten()) else { continue };
            let t = Tensor(t);
            // the watcher may have been rebased by an in-place op since: only its current history counts
            if !t.grad_edge().is_some_and(|(n, i)| Arc::ptr_eq(&n, &node) && i == k) {
                continue;
            }
            let g = run_hooks(&t, g)?;
            if t.retains_grad() && capture.is_none() {
                let own = if create_graph { g.clone() } else { g.detach().copy()? };
                t.set_grad(Some(add_opt(t.grad(), own)?));
            }
            grads[k] = Some(g);
        }
        if let Some(cap) = capture {
            for (i, c) in cap.iter().enumerate() {
                if let Some((n, k)) = c.grad_edge() {
                    if Arc::ptr_eq(&n, &node) {
                        if let Some(g) = &grads[k] {
                            captured[i] = Some(add_opt(captured[i].take(), g.clone())?);
                        }
                    }
                }
            }
        }
        let skip = needed.as_ref().is_some_and(|s| !s.contains(&key(&node)));
        let results: Vec<Option<Tensor>> = if skip || grads.iter().all(|g| g.is_none()) {
            vec![None; node.next.len()]
        } else {
            let mut full = Vec::with_capacity(grads.len());
            for (k, g) in grads.into_iter().enumerate() {
                full.push(match g {
                    Some(g) => g,
                    None => {
                        let m = &node.outputs[k];
                        Tensor::zeros_on(&m.shape, m.dtype, m.device)?
                    }
                });
            }
            let ctx = BackwardCtx { node: &node, create_graph };
            let _prof = if crate::profiler::is_enabled() {
                let gs: Vec<&Tensor> = full.iter().collect();
                crate::profiler::backward_node(node.name(), &gs, node.outputs.first().map(|m| m.device))
            } else {
                None
            };
            let res = {
                let guard = node.rule.lock().unwrap_or_else(|e| e.into_inner());
                match guard.as_ref() {
                    None => return Err(freed_error(node.name())),
                    Some(rule) => rule(&ctx, &full)?,
                }
            };
            drop(full);
            if !retain_graph {
                node.release();
            }
            if anomaly {
                anomaly::check(node.name(), &res)?;
            }
            res
        };
        if results.len() != node.next.len() {
            return Err(Error::autograd(node.name(), format!("function {} returned an incorrect number of gradients (expected {}, got {})", node.name(), node.next.len(), results.len())));
        }
        for (edge, g) in node.next.iter().zip(results) {
            let Some(edge) = edge else { continue };
            match edge {
                Edge::Leaf(l) => {
                    if let Some(g) = g {
                        let g = conform(node.name(), g, &l.layout.shape, l.dtype)?;
                        leaf_bufs.add(l, g)?;
                    }
                    let d = leaf_deps.entry(Arc::as_ptr(l) as usize).or_insert(1);
                    *d = d.saturating_sub(1);
                    if *d == 0 && capture.is_none() {
                        leaf_bufs.finish(l, create_graph)?;
                    }
                }
                Edge::Node(m, k) => {
                    if let Some(g) = g {
                        let meta = &m.outputs[*k];
                        let g = conform(node.name(), g, &meta.shape, meta.dtype)?;
                        let b = buffers.entry(key(m)).or_insert_with(|| vec![None; m.outputs.len()]);
                        b[*k] = Some(add_opt(b[*k].take(), g)?);
                    }
                    let d = deps.entry(key(m)).or_insert(1);
                    *d = d.saturating_sub(1);
                    if *d == 0 {
                        ready.push(Ready(m.clone()));
                    }
                }
            }
        }
    }
    // leaves not finished during the walk (roots that are leaves; every leaf of `grad`): hooks
    // once on the summed gradient, then capture or accumulate into `.grad`
    let order = std::mem::take(&mut leaf_bufs.order);
    for leaf in order {
        match capture {
            None => leaf_bufs.finish(&leaf, create_graph)?,
            Some(cap) => {
                let Some(g) = leaf_bufs.grads.remove(&(Arc::as_ptr(&leaf) as usize)) else { continue };
                let t = Tensor(leaf);
                let g = run_hooks(&t, g)?;
                for (i, c) in cap.iter().enumerate() {
                    if Arc::ptr_eq(&c.0, &t.0) {
                        captured[i] = Some(add_opt(captured[i].take(), g.clone())?);
                    }
                }
            }
        }
    }
    Ok(capture.map(|_| captured))
}

/// Checks a gradient's shape against its input and casts it to the input's dtype (as PyTorch's `validate_outputs`).
fn conform(op: &str, g: Tensor, shape: &[usize], dtype: crate::DType) -> Result<Tensor> {
    if g.shape() != shape {
        return Err(Error::shape(op, format!("Function {op} returned an invalid gradient - got {:?} but expected shape compatible with {shape:?}", g.shape())));
    }
    if g.dtype() != dtype {
        if g.dtype().is_complex() && !dtype.is_complex() {
            // the gradient of a real input is the real part (PyTorch's handle_r_to_c)
            return Err(Error::unsupported(op, "complex gradient for a real input"));
        }
        return g.to_dtype(dtype);
    }
    Ok(g)
}

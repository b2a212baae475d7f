//! `torch.autograd.functional`: Jacobians, Hessians and vector products of a function of tensors,
//! built on reverse mode ([`grad`](super::grad)) with `create_graph` where a second derivative is needed.
//!
//! Functions take a slice of tensors and return a `Vec` of tensors. Inputs are used through
//! fresh aliases that require grad, so the caller's tensors need not require grad.
//!
//! ```
//! use magpie_core::{autograd::functional, Tensor};
//! // f(x) = sum(x^3): Hessian diag(6x), so H v = 6 x v
//! let f = |x: &[Tensor]| Ok(vec![x[0].mul(&x[0])?.mul(&x[0])?.sum()?]);
//! let x = Tensor::from_vec(vec![1f64, 2.], &[2])?;
//! let v = Tensor::from_vec(vec![1f64, 1.], &[2])?;
//! let (_, hv) = functional::hvp(f, &[x], &[v], false)?;
//! assert_eq!(hv[0].to_vec::<f64>()?, vec![6., 12.]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

use super::{enable_grad, grad};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Fresh aliases of `inputs` that require grad: with `create_graph` they keep the inputs' history
/// (so the result can be differentiated with respect to the originals), else they are detached.
fn prepare(op: &str, inputs: &[Tensor], create_graph: bool) -> Result<Vec<Tensor>> {
    inputs
        .iter()
        .map(|t| {
            if !(t.dtype().is_float() || t.dtype().is_complex()) {
                return Err(Error::dtype(op, format!("inputs must be floating point or complex, got {}", t.dtype())));
            }
            if create_graph && t.requires_grad() {
                let _g = enable_grad();
                Ok(t.alias())
            } else {
                t.detach().requires_grad_(true)
            }
        })
        .collect()
}

/// Results without history unless `create_graph`.
fn finish(ts: Vec<Tensor>, create_graph: bool) -> Vec<Tensor> {
    ts.into_iter().map(|t| t.detach_if(!create_graph)).collect()
}

/// Gradients with `None` (unused input) replaced by zeros.
fn grads_or_zeros(outputs: &[Tensor], inputs: &[Tensor], v: &[Tensor], create_graph: bool) -> Result<Vec<Tensor>> {
    let diff: Vec<usize> = (0..outputs.len()).filter(|&i| outputs[i].requires_grad()).collect();
    if diff.is_empty() {
        return inputs.iter().map(|x| x.zeros_like()).collect();
    }
    let outs: Vec<Tensor> = diff.iter().map(|&i| outputs[i].clone()).collect();
    let vs: Vec<Tensor> = diff.iter().map(|&i| v.get(i).cloned().map_or_else(|| outputs[i].ones_like(), Ok)).collect::<Result<_>>()?;
    let gs = grad(&outs, inputs, &vs, true, create_graph, true)?;
    gs.into_iter().zip(inputs).map(|(g, x)| g.map_or_else(|| x.zeros_like(), Ok)).collect()
}

fn check_like(op: &str, what: &str, a: &[Tensor], b: &[Tensor]) -> Result<()> {
    if a.len() != b.len() {
        return Err(Error::value(op, format!("{what}: expected {} tensors, got {}", a.len(), b.len())));
    }
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x.shape() != y.shape() {
            return Err(Error::shape(op, format!("{what}[{i}] has shape {:?}, expected {:?}", y.shape(), x.shape())));
        }
    }
    Ok(())
}

/// `vjp(f, inputs, v)`: `(f(inputs), v^T J)`, one tensor per input. `v` has one tensor per output
/// (may be empty when every output has one element).
pub fn vjp(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    inputs: &[Tensor],
    v: &[Tensor],
    create_graph: bool,
) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let _g = enable_grad();
    let xs = prepare("vjp", inputs, create_graph)?;
    let outs = f(&xs)?;
    let v: Vec<Tensor> = if v.is_empty() { outs.iter().map(|o| o.ones_like()).collect::<Result<_>>()? } else { v.to_vec() };
    check_like("vjp", "v", &outs, &v)?;
    let g = grads_or_zeros(&outs, &xs, &v, create_graph)?;
    Ok((finish(outs, create_graph), finish(g, create_graph)))
}

/// `jvp(f, inputs, v)`: `(f(inputs), J v)`, one tensor per output, by the double-vjp trick:
/// `u -> J^T u` is linear, and its vjp with `v` is `J v`.
pub fn jvp(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    inputs: &[Tensor],
    v: &[Tensor],
    create_graph: bool,
) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let _g = enable_grad();
    check_like("jvp", "v", inputs, v)?;
    let xs = prepare("jvp", inputs, create_graph)?;
    let outs = f(&xs)?;
    let jv = double_vjp(&outs, &xs, v, create_graph)?;
    Ok((finish(outs, create_graph), finish(jv, create_graph)))
}

/// `J v` for `ys` as functions of `xs` (`v` shaped like `xs`), by the double-vjp trick:
/// `u -> J^T u` is linear in `u`, and its vjp with `v` is `J v`. Zeros (shaped like `ys`) where
/// nothing depends on the inputs.
fn double_vjp(ys: &[Tensor], xs: &[Tensor], v: &[Tensor], create_graph: bool) -> Result<Vec<Tensor>> {
    let us: Vec<Tensor> = ys.iter().map(|o| o.zeros_like()?.requires_grad_(true)).collect::<Result<_>>()?;
    let jt_u = grads_or_zeros(ys, xs, &us, true)?;
    let (jt, vs): (Vec<Tensor>, Vec<Tensor>) = jt_u.into_iter().zip(v.iter().cloned()).filter(|(g, _)| g.requires_grad()).unzip();
    if jt.is_empty() {
        return ys.iter().map(|o| o.zeros_like()).collect();
    }
    let gs = grad(&jt, &us, &vs, true, create_graph, true)?;
    gs.into_iter().zip(ys).map(|(g, o)| g.map_or_else(|| o.zeros_like(), Ok)).collect()
}

/// `jacobian(f, inputs)`: `J[i][j]` of shape `outputs[i].shape ++ inputs[j].shape`, by one
/// backward pass per output element.
pub fn jacobian(f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>, inputs: &[Tensor], create_graph: bool) -> Result<Vec<Vec<Tensor>>> {
    let _g = enable_grad();
    let xs = prepare("jacobian", inputs, create_graph)?;
    let outs = f(&xs)?;
    jacobian_of(&outs, &xs, create_graph)
}

fn jacobian_of(outs: &[Tensor], xs: &[Tensor], create_graph: bool) -> Result<Vec<Vec<Tensor>>> {
    let mut jac = Vec::with_capacity(outs.len());
    for o in outs {
        // rows[j][k]: d o_k / d x_j
        let mut rows: Vec<Vec<Tensor>> = vec![Vec::with_capacity(o.numel()); xs.len()];
        for k in 0..o.numel() {
            let g: Vec<Tensor> = if o.requires_grad() {
                let mut e = vec![0f64; o.numel()];
                e[k] = 1.0;
                let v = Tensor::from_vec(e, o.shape())?.to_dtype(o.dtype())?;
                let gs = grad(&[o.clone()], xs, &[v], true, create_graph, true)?;
                gs.into_iter().zip(xs).map(|(g, x)| g.map_or_else(|| x.zeros_like(), Ok)).collect::<Result<_>>()?
            } else {
                xs.iter().map(|x| x.zeros_like()).collect::<Result<_>>()?
            };
            for (j, gj) in g.into_iter().enumerate() {
                rows[j].push(gj.detach_if(!create_graph));
            }
        }
        let mut per_input = Vec::with_capacity(xs.len());
        for (j, r) in rows.into_iter().enumerate() {
            let mut shape = o.shape().to_vec();
            shape.extend_from_slice(xs[j].shape());
            per_input.push(stack_rows(&r, &shape, xs[j].zeros_like()?)?);
        }
        jac.push(per_input);
    }
    Ok(jac)
}

/// Stacks gradient rows (each shaped like the input) into `shape`; differentiable.
fn stack_rows(rows: &[Tensor], shape: &[usize], zero: Tensor) -> Result<Tensor> {
    if rows.is_empty() {
        return Tensor::zeros_on(shape, zero.dtype(), zero.device());
    }
    let flat: Vec<i64> = vec![1, -1];
    let mut acc: Option<Tensor> = None;
    let n = rows.len();
    let m = rows[0].numel();
    // rows[k] placed at row k of an [n, m] matrix: sum_k e_k (outer) row_k, with tensor ops only
    for (k, r) in rows.iter().enumerate() {
        let mut e = vec![0f64; n];
        e[k] = 1.0;
        let ek = Tensor::from_vec(e, &[n, 1])?.to_dtype(r.dtype())?;
        let term = ek.mul(&r.reshape(&flat)?)?;
        acc = Some(match acc {
            None => term,
            Some(a) => a.add(&term)?,
        });
    }
    let acc = acc.ok_or_else(|| Error::value("jacobian", "empty"))?;
    debug_assert_eq!(acc.numel(), n * m);
    acc.reshape_to(shape)
}

/// `hessian(f, inputs)` for a scalar-valued `f`: `H[i][j]` of shape `inputs[i].shape ++ inputs[j].shape`.
pub fn hessian(f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>, inputs: &[Tensor], create_graph: bool) -> Result<Vec<Vec<Tensor>>> {
    let _g = enable_grad();
    let xs = prepare("hessian", inputs, create_graph)?;
    let outs = f(&xs)?;
    let y = scalar_output("hessian", &outs)?;
    let g = grads_or_zeros(&[y], &xs, &[], true)?;
    jacobian_of(&g, &xs, create_graph)
}

fn scalar_output(op: &str, outs: &[Tensor]) -> Result<Tensor> {
    match outs {
        [y] if y.numel() == 1 => Ok(y.clone()),
        _ => Err(Error::value(op, "the function must return a single tensor with one element")),
    }
}

fn scalar_grad(op: &str, outs: &[Tensor], xs: &[Tensor]) -> Result<Vec<Tensor>> {
    let y = scalar_output(op, outs)?;
    if !y.requires_grad() {
        return xs.iter().map(|x| x.zeros_like()).collect();
    }
    let one = y.ones_like()?;
    grads_or_zeros(&[y], xs, &[one], true)
}

/// The start of `vhp` / `hvp` (under `enable_grad`): `v` checked against `inputs`, the inputs'
/// aliases, `f`'s outputs and the gradient of its scalar output, with its graph.
fn scalar_and_grad(
    op: &str,
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    inputs: &[Tensor],
    v: &[Tensor],
    create_graph: bool,
) -> Result<(Vec<Tensor>, Vec<Tensor>, Vec<Tensor>)> {
    check_like(op, "v", inputs, v)?;
    let xs = prepare(op, inputs, create_graph)?;
    let outs = f(&xs)?;
    let g = scalar_grad(op, &outs, &xs)?;
    Ok((xs, outs, g))
}

/// `vhp(f, inputs, v)` for a scalar `f`: `(f(inputs), v^T H)` by a double backward.
pub fn vhp(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    inputs: &[Tensor],
    v: &[Tensor],
    create_graph: bool,
) -> Result<(Tensor, Vec<Tensor>)> {
    let _g = enable_grad();
    let (xs, outs, g) = scalar_and_grad("vhp", f, inputs, v, create_graph)?;
    let r = grads_or_zeros(&g, &xs, v, create_graph)?;
    Ok((outs[0].detach_if(!create_graph), finish(r, create_graph)))
}

/// `hvp(f, inputs, v)` for a scalar `f`: `(f(inputs), H v)`, by the double-vjp trick (exact also
/// where `H` is not symmetric numerically).
pub fn hvp(
    f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    inputs: &[Tensor],
    v: &[Tensor],
    create_graph: bool,
) -> Result<(Tensor, Vec<Tensor>)> {
    let (xs, outs, g) = scalar_and_grad("hvp", f, inputs, v, create_graph)?;
    // g = grad f (as a function of x, shaped like x): J_g v = H v
    let hv = double_vjp(&g, &xs, v, create_graph)?;
    Ok((outs[0].detach_if(!create_graph), finish(hv, create_graph)))
}

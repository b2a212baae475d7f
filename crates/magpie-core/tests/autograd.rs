//! Autograd engine: accumulation, retain_graph, create_graph, hooks, retain_grad, grad(),
//! version counters, in-place rebase, memory, anomaly mode.

use magpie_core::autograd::{self, Function, FunctionCtx};
use magpie_core::{Result, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v)
}
fn leaf(v: &[f64]) -> Tensor {
    t(v).requires_grad_(true).unwrap()
}
fn vals(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}
fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-9 + 1e-9 * y.abs(), "{a:?} vs {b:?}");
    }
}

#[test]
fn accumulates_over_paths() -> Result<()> {
    // y = x*x + 3x + x*x*x  -> dy/dx = 2x + 3 + 3x^2
    let x = leaf(&[1., 2., -1.]);
    let a = x.mul(&x)?;
    let y = a.add(&x.mul_scalar(3.0)?)?.add(&a.mul(&x)?)?.sum()?;
    y.backward()?;
    close(&vals(&x.grad().unwrap()), &[8., 19., 4.]);
    // a second backward on a new graph accumulates into .grad
    x.mul_scalar(2.0)?.sum()?.backward()?;
    close(&vals(&x.grad().unwrap()), &[10., 21., 6.]);
    Ok(())
}

#[test]
fn same_input_twice_and_broadcast() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let s = Tensor::scalar(3f64).requires_grad_(true)?;
    let y = x.add(&x)?.mul(&s)?.sum()?; // (2x) * s
    y.backward()?;
    close(&vals(&x.grad().unwrap()), &[6., 6.]);
    close(&vals(&s.grad().unwrap()), &[6.]);
    assert_eq!(s.grad().unwrap().shape(), &[] as &[usize]);
    Ok(())
}

#[test]
fn retain_graph_and_freed_graph() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let y = x.exp()?.sum()?;
    y.backward_with(None, true, false)?;
    y.backward()?; // allowed: graph retained
    let e: Vec<f64> = [1f64, 2.].iter().map(|v| 2.0 * v.exp()).collect();
    close(&vals(&x.grad().unwrap()), &e);
    assert!(y.grad_fn().unwrap().is_freed());
    let err = y.backward().unwrap_err().to_string();
    assert!(err.contains("second time"), "{err}");
    Ok(())
}

#[test]
fn saved_tensors_are_freed_by_backward() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let w = t(&[3., 4.]);
    let ws = Arc::downgrade(w.storage());
    let y = x.mul(&w)?.sum()?;
    drop(w);
    assert!(ws.upgrade().is_some()); // saved by Mul
    y.backward()?;
    assert!(ws.upgrade().is_none());
    Ok(())
}

#[test]
fn non_scalar_backward_needs_gradient() -> Result<()> {
    let x = leaf(&[1., 2., 3.]);
    let y = x.mul(&x)?;
    let err = y.backward().unwrap_err().to_string();
    assert!(err.contains("scalar outputs"), "{err}");
    y.backward_with(Some(&t(&[1., 0.5, 2.])), false, false)?;
    close(&vals(&x.grad().unwrap()), &[2., 2., 12.]);
    let z = x.mul(&x)?;
    assert!(z.backward_with(Some(&t(&[1., 2.])), false, false).is_err());
    Ok(())
}

#[test]
fn create_graph_third_derivative() -> Result<()> {
    let x = leaf(&[0.5, -1.5]);
    let y = x.mul(&x)?.mul(&x)?.mul(&x)?.sum()?; // x^4
    let g1 = autograd::grad(&[y], &[x.clone()], &[], false, true, false)?.remove(0).unwrap();
    close(&vals(&g1), &[0.5, -13.5]); // 4x^3
    let g2 = autograd::grad(&[g1.sum()?], &[x.clone()], &[], false, true, false)?.remove(0).unwrap();
    close(&vals(&g2), &[3., 27.]); // 12x^2
    g2.sum()?.backward()?;
    close(&vals(&x.grad().unwrap()), &[12., -36.]); // 24x
    Ok(())
}

#[test]
fn backward_create_graph_grad_has_history() -> Result<()> {
    let x = leaf(&[2.]);
    let y = x.exp()?.sum()?;
    y.backward_with(None, false, true)?;
    let g = x.grad().unwrap();
    assert!(g.requires_grad());
    let h = autograd::grad(&[g.sum()?], &[x.clone()], &[], false, false, false)?.remove(0).unwrap();
    close(&vals(&h), &[2f64.exp()]);
    Ok(())
}

#[test]
fn hooks_on_leaf_run_once_on_summed_grad() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    x.register_hook(move |g| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(Some(g.mul_scalar(10.0)?))
    })?;
    let y = x.mul_scalar(2.0)?.add(&x.mul_scalar(3.0)?)?.sum()?;
    y.backward()?;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    close(&vals(&x.grad().unwrap()), &[50., 50.]);
    Ok(())
}

#[test]
fn hooks_on_non_leaf_change_upstream() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let a = x.mul(&x)?;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    a.register_hook(move |g| {
        s.lock().unwrap().push(g.to_vec::<f64>()?);
        Ok(Some(g.mul_scalar(0.5)?))
    })?;
    let y = a.mul_scalar(4.0)?.add(&a)?.sum()?; // dy/da = 5
    y.backward()?;
    assert_eq!(*seen.lock().unwrap(), vec![vec![5., 5.]]);
    close(&vals(&x.grad().unwrap()), &[5., 10.]); // 2.5 * 2x
    Ok(())
}

#[test]
fn retain_grad_on_non_leaf() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let a = x.mul_scalar(3.0)?;
    a.retain_grad()?;
    let b = x.mul(&x)?;
    assert!(b.grad().is_none());
    a.mul(&a)?.add(&b)?.sum()?.backward()?;
    close(&vals(&a.grad().unwrap()), &[6., 12.]);
    assert!(b.grad().is_none());
    assert!(a.retains_grad() && !a.is_leaf());
    Ok(())
}

#[test]
fn grad_non_leaf_inputs_and_allow_unused() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let u = leaf(&[5.]);
    let a = x.mul_scalar(2.0)?;
    let y = a.mul(&a)?.sum()?;
    let gs = autograd::grad(&[y.clone()], &[a.clone(), x.clone(), u.clone()], &[], true, false, true)?;
    close(&vals(gs[0].as_ref().unwrap()), &[4., 8.]); // 2a
    close(&vals(gs[1].as_ref().unwrap()), &[8., 16.]); // 8x
    assert!(gs[2].is_none());
    let err = autograd::grad(&[y.clone()], &[u.clone()], &[], true, false, false).unwrap_err().to_string();
    assert!(err.contains("allow_unused"), "{err}");
    // grad() leaves .grad alone
    assert!(x.grad().is_none() && a.grad().is_none());
    // a non-leaf input: nodes below it are not run (and not freed)
    let y2 = a.mul(&a)?.sum()?;
    autograd::grad(&[y2], &[a.clone()], &[], false, false, false)?;
    assert!(!a.grad_fn().unwrap().is_freed());
    let t0 = t(&[1.]);
    assert!(autograd::grad(&[y], &[t0], &[], false, false, false).is_err());
    Ok(())
}

#[test]
fn saved_tensor_modified_in_place_is_an_error() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let a = x.mul_scalar(1.0)?;
    let y = a.mul(&a)?.sum()?; // Mul saves a
    a.add_(&t(&[1., 1.]))?;
    let err = y.backward().unwrap_err().to_string();
    assert!(err.contains("modified by an inplace operation") && err.contains("mul"), "{err}");
    // an op that saves its output (exp)
    let b = x.exp()?;
    let z = b.sum()?;
    let _ = z;
    let c = x.mul_scalar(2.0)?.exp()?;
    let w = c.sum()?;
    {
        let _ng = autograd::no_grad();
        c.mul_(&t(&[2., 2.]))?;
    }
    let err = w.backward().unwrap_err().to_string();
    assert!(err.contains("ExpBackward0") && err.contains("version"), "{err}");
    Ok(())
}

#[test]
fn in_place_on_non_leaf_rebases_history() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let y = leaf(&[3., 4.]);
    let a = x.exp()?; // ExpBackward0 reads its output in backward
    a.copy_(&y.mul(&x)?)?; // a = x * y, the old exp value is kept for ExpBackward0
    assert!(!a.is_leaf());
    let b = a.mul(&a)?.add(&x.exp()?)?; // (xy)^2 + exp(x)
    b.sum()?.backward()?;
    let gx: Vec<f64> = [(1., 3.), (2., 4.)].iter().map(|&(x, y): &(f64, f64)| 2. * x * y * y + x.exp()).collect();
    close(&vals(&x.grad().unwrap()), &gx);
    close(&vals(&y.grad().unwrap()), &[6., 32.]); // 2 x^2 y
    // a leaf that requires grad cannot be modified in place
    assert!(x.copy_(&y).is_err());
    {
        let _ng = autograd::no_grad();
        x.copy_(&t(&[2., 3.]))?; // fine under no_grad
    }
    close(&vals(&x), &[2., 3.]);
    // a plain tensor overwritten by a tensor that requires grad gets its history
    let p = t(&[1., 1.]);
    p.copy_(&y.mul_scalar(2.0)?)?;
    assert!(p.requires_grad() && !p.is_leaf());
    p.sum()?.backward()?;
    close(&vals(&y.grad().unwrap()), &[8., 34.]);
    Ok(())
}

#[test]
fn detach_and_no_grad() -> Result<()> {
    let x = leaf(&[1., 2.]);
    let d = x.mul_scalar(2.0)?.detach();
    assert!(!d.requires_grad() && d.is_leaf());
    {
        let _g = autograd::no_grad();
        assert!(!x.exp()?.requires_grad());
        let _e = autograd::enable_grad();
        assert!(x.exp()?.requires_grad());
    }
    assert!(autograd::is_grad_enabled());
    let a = x.mul_scalar(2.0)?;
    a.detach_();
    assert!(a.is_leaf() && !a.requires_grad());
    Ok(())
}

#[test]
fn anomaly_mode_names_the_op() -> Result<()> {
    let x = leaf(&[0., 1.]);
    // without anomaly mode: inf silently reaches .grad
    x.sqrt()?.sum()?.backward()?;
    assert!(vals(&x.grad().unwrap())[0].is_infinite());
    let _a = autograd::detect_anomaly();
    let err = x.sqrt()?.sum()?.backward().unwrap_err().to_string();
    assert!(err.contains("SqrtBackward0") && err.contains("inf"), "{err}");
    let y = leaf(&[-1.]);
    // log(-1) = nan, d/dy (log y * 0) ... use log(x)*log(x): 2 log(x)/x = nan
    let err = y.log()?.mul(&y.log()?)?.sum()?.backward().unwrap_err().to_string();
    assert!(err.contains("nan"), "{err}");
    Ok(())
}

// ---------- custom functions ----------

fn sigmoid(x: &Tensor) -> Result<Tensor> {
    x.ones_like()?.div(&x.neg()?.exp()?.add_scalar(1.0)?)
}

/// The worked example: SiLU with a fused-style backward `g * s * (1 + x (1 - s))`.
/// Backward recomputes `s = sigmoid(x)` from the saved input: forward runs without history, so
/// a saved `s` would be a constant to a second derivative (gradgradcheck would catch that).
struct SiLU;
impl Function for SiLU {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let x = &inputs[0];
        ctx.save_for_backward(&[x.clone()]);
        Ok(vec![x.mul(&sigmoid(x)?)?])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let x = &ctx.saved_tensors()[0];
        let s = &sigmoid(x)?;
        let one_minus_s = s.neg()?.add_scalar(1.0)?;
        let d = s.mul(&x.mul(&one_minus_s)?.add_scalar(1.0)?)?;
        Ok(vec![Some(g[0].mul(&d)?)])
    }
}

#[test]
fn custom_silu_matches_composite() -> Result<()> {
    let data = [-3.0, -0.5, 0.0, 0.7, 2.5];
    let x1 = leaf(&data);
    let x2 = leaf(&data);
    let y1 = SiLU.apply(&[x1.clone()])?.remove(0);
    assert_eq!(y1.grad_fn().unwrap().name(), "SiLUBackward");
    let y2 = x2.mul(&sigmoid(&x2)?)?;
    close(&vals(&y1), &vals(&y2));
    y1.sum()?.backward()?;
    y2.sum()?.backward()?;
    close(&vals(&x1.grad().unwrap()), &vals(&x2.grad().unwrap()));
    let f = |i: &[Tensor]| SiLU.apply(i);
    autograd::gradcheck(f, &[leaf(&data)], &Default::default())?;
    // the backward is written with tensor ops: second order works too
    autograd::gradgradcheck(f, &[leaf(&data)], None, &Default::default())?;
    Ok(())
}

struct SiLUOnce;
impl Function for SiLUOnce {
    fn forward(&self, ctx: &mut FunctionCtx, i: &[Tensor]) -> Result<Vec<Tensor>> {
        SiLU.forward(ctx, i)
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        assert!(!autograd::is_grad_enabled());
        SiLU.backward(ctx, g)
    }
    fn once_differentiable(&self) -> bool {
        true
    }
}

#[test]
fn once_differentiable_refuses_double_backward() -> Result<()> {
    let x = leaf(&[0.5, 1.0]);
    let y = SiLUOnce.apply(&[x.clone()])?.remove(0);
    // first order is fine
    let v = leaf(&[1.0, 1.0]);
    let g = autograd::grad(&[y], &[x.clone()], &[v], false, true, false)?.remove(0).unwrap();
    assert!(g.requires_grad());
    let err = g.sum()?.backward().unwrap_err().to_string();
    assert!(err.contains("once_differentiable") && err.contains("SiLUOnce"), "{err}");
    Ok(())
}

/// Sorts two values: returns (min, max, index of min as f64, marked non-differentiable).
struct MinMax;
impl Function for MinMax {
    fn forward(&self, ctx: &mut FunctionCtx, i: &[Tensor]) -> Result<Vec<Tensor>> {
        let (a, b) = (i[0].to_vec::<f64>()?[0], i[1].to_vec::<f64>()?[0]);
        let first_min = a <= b;
        ctx.save_value("first_min", first_min);
        assert!(ctx.needs_input_grad(0) && !ctx.needs_input_grad(1));
        let idx = Tensor::scalar(if first_min { 0f64 } else { 1. });
        ctx.mark_non_differentiable(&[idx.clone()]);
        let (lo, hi) = if first_min { (&i[0], &i[1]) } else { (&i[1], &i[0]) };
        Ok(vec![lo.clone(), hi.clone(), idx])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let first_min = *ctx.value::<bool>("first_min")?;
        assert!(ctx.needs_input_grad(0) && !ctx.needs_input_grad(1));
        let ga = if first_min { g[0].clone() } else { g[1].clone() };
        Ok(vec![Some(ga), None])
    }
}

#[test]
fn custom_function_state_and_non_differentiable() -> Result<()> {
    let a = Tensor::scalar(5f64).requires_grad_(true)?;
    let b = Tensor::scalar(2f64);
    let out = MinMax.apply(&[a.clone(), b.clone()])?;
    assert!(out[1].requires_grad() && !out[2].requires_grad());
    assert!(!out[0].requires_grad() || out[0].grad_fn().is_some());
    // returning an input did not rewrite the input's own history
    assert!(a.is_leaf() && b.is_leaf() && !b.requires_grad());
    out[1].mul_scalar(3.0)?.add(&out[0])?.backward()?;
    close(&vals(&a.grad().unwrap()), &[3.]);
    Ok(())
}

struct SavesOutput;
impl Function for SavesOutput {
    fn forward(&self, ctx: &mut FunctionCtx, i: &[Tensor]) -> Result<Vec<Tensor>> {
        let y = i[0].exp()?;
        ctx.save_for_backward(&[y.clone()]);
        Ok(vec![y])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g[0].mul(&ctx.saved_tensors()[0])?)])
    }
}

#[test]
fn custom_function_saving_output_checks_version() -> Result<()> {
    let x = leaf(&[0., 1.]);
    let y = SavesOutput.apply(&[x.clone()])?.remove(0);
    y.sum()?.backward_with(None, true, false)?;
    close(&vals(&x.grad().unwrap()), &[1., 1f64.exp()]);
    autograd::gradgradcheck(|i| SavesOutput.apply(i), &[leaf(&[0.3, -0.2])], None, &Default::default())?;
    let y = SavesOutput.apply(&[x.clone()])?.remove(0);
    let s = y.sum()?;
    {
        let _ng = autograd::no_grad();
        y.mul_(&t(&[2., 2.]))?;
    }
    let err = s.backward().unwrap_err().to_string();
    assert!(err.contains("SavesOutputBackward") && err.contains("inplace"), "{err}");
    Ok(())
}

struct WrongBackward;
impl Function for WrongBackward {
    fn forward(&self, _: &mut FunctionCtx, i: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![i[0].mul(&i[0])?])
    }
    fn backward(&self, _: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(g[0].mul_scalar(2.0)?)]) // forgot the x
    }
}

#[test]
fn gradcheck_catches_a_wrong_backward() -> Result<()> {
    let err = autograd::gradcheck(|i| WrongBackward.apply(i), &[leaf(&[3.0, 0.5])], &Default::default()).unwrap_err().to_string();
    assert!(err.contains("Jacobian mismatch") && err.contains("numerical"), "{err}");
    let f32x = Tensor::from_vec(vec![1f32], &[1])?.requires_grad_(true)?;
    assert!(autograd::gradcheck(|i| Ok(vec![i[0].exp()?]), &[f32x], &Default::default()).is_err());
    Ok(())
}


#[test]
fn inplace_op_on_a_non_leaf_keeps_the_gradient() {
    // y = 2x; y *= z; loss = sum(y)  =>  dloss/dx = 2z (PyTorch saves the original y)
    let x = Tensor::from_vec(vec![1f64, -2., 3.], &[3]).unwrap().with_requires_grad().unwrap();
    let z = Tensor::from_vec(vec![0.5f64, 4., -1.], &[3]).unwrap();
    let y = x.mul_scalar(2.0).unwrap();
    y.mul_(&z).unwrap();
    y.add_scalar_(1.0).unwrap();
    y.sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![1.0, 8.0, -2.0]);
}

#[test]
fn inplace_unary_on_a_non_leaf_keeps_the_gradient() {
    // y = 2x; y.exp_(); loss = sum(y)  =>  dloss/dx = 2 exp(2x)
    let x = Tensor::from_vec(vec![0.1f64, -0.3], &[2]).unwrap().with_requires_grad().unwrap();
    let y = x.mul_scalar(2.0).unwrap();
    y.exp_().unwrap();
    y.sum().unwrap().backward().unwrap();
    let g = x.grad().unwrap().to_vec::<f64>().unwrap();
    for (gi, xi) in g.iter().zip([0.1f64, -0.3]) {
        assert!((gi - 2.0 * (2.0 * xi).exp()).abs() < 1e-12, "{g:?}");
    }
}

#[test]
fn post_accumulate_grad_hook_fires_when_the_leaf_is_done() -> Result<()> {
    // a two-layer chain: w2's gradient is complete before the node leading to w1 has run, so its
    // hook must fire first, and each hook sees the leaf's accumulated `.grad`
    let x = t(&[1., 2.]);
    let w1 = leaf(&[0.5, -1.]);
    let w2 = leaf(&[3., 4.]);
    let log: Arc<std::sync::Mutex<Vec<(&'static str, Vec<f64>)>>> = Arc::default();
    for (name, w) in [("w1", &w1), ("w2", &w2)] {
        let log = log.clone();
        w.register_post_accumulate_grad_hook(move |p| {
            log.lock().unwrap().push((name, vals(&p.grad().unwrap())));
            Ok(())
        })?;
    }
    // h = x * w1 (used twice: the hook must wait for both uses), y = sum(h * w2 + h)
    let h = x.mul(&w1)?;
    let y = h.mul(&w2)?.add(&h)?.sum()?;
    y.backward()?;
    {
        let l = log.lock().unwrap();
        assert_eq!(l.len(), 2, "one call per leaf and pass: {l:?}");
        assert_eq!(l[0].0, "w2");
        close(&l[0].1, &[0.5, -2.]); // h
        assert_eq!(l[1].0, "w1");
        close(&l[1].1, &[4., 10.]); // x * (w2 + 1)
    }
    // a second pass: the hook sees the sum of both passes
    x.mul(&w1)?.sum()?.backward()?;
    let l = log.lock().unwrap();
    assert_eq!(l.len(), 3);
    assert_eq!(l[2].0, "w1");
    close(&l[2].1, &[5., 12.]);
    // not on non-leaves, nor on tensors without grad
    assert!(h.register_post_accumulate_grad_hook(|_| Ok(())).is_err());
    assert!(x.register_post_accumulate_grad_hook(|_| Ok(())).is_err());
    // autograd::grad leaves `.grad` alone and runs no post-accumulate hook
    let n = l.len();
    drop(l);
    autograd::grad(&[x.mul(&w2)?.sum()?], &[w2.clone()], &[], false, false, false)?;
    assert_eq!(log.lock().unwrap().len(), n);
    Ok(())
}

#[test]
fn post_accumulate_grad_hook_error_is_returned() -> Result<()> {
    let w = leaf(&[1.]);
    w.register_post_accumulate_grad_hook(|_| Err(magpie_core::Error::value("hook", "stop")))?;
    let e = w.mul_scalar(2.0)?.sum()?.backward().unwrap_err();
    assert!(e.to_string().contains("stop"), "{e}");
    Ok(())
}

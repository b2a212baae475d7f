//! Gradients fixed for the gradcheck conformance mode: `scatter_reduce` / `index_reduce` with
//! `prod` differentiable twice (zeros, repeated indices; values from PyTorch 2.15), and
//! `narrow` with `start` given as a 0-d integer tensor.

use magpie_core::autograd::{self, GradcheckOptions};
use magpie_core::registry::{self, Value};
use magpie_core::{Result, Tensor};

fn t64(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

fn idx(v: &[i64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
    }
}

fn reduce(op: &str, x: &Tensor, i: &Tensor, s: &Tensor, include_self: bool) -> Result<Tensor> {
    if op == "scatter_reduce" {
        x.scatter_reduce(0, i, s, "prod", include_self)
    } else {
        x.index_reduce(0, i, s, "prod", include_self)
    }
}

/// gradcheck and gradgradcheck wrt both the input and the source.
fn check_both(op: &str, x: &[f64], i: &[i64], s: &[f64], include_self: bool) {
    let i = idx(i);
    let xs = [t64(x).requires_grad_(true).unwrap(), t64(s).requires_grad_(true).unwrap()];
    let f = |v: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![reduce(op, &v[0], &i, &v[1], include_self)?]) };
    let opts = GradcheckOptions::default();
    autograd::gradcheck(f, &xs, &opts).unwrap_or_else(|e| panic!("{op} include_self={include_self} x={x:?} s={s:?}: {e}"));
    autograd::gradgradcheck(f, &xs, None, &opts).unwrap_or_else(|e| panic!("{op} include_self={include_self} x={x:?} s={s:?}: {e}"));
}

#[test]
fn prod_reductions_gradgradcheck() {
    for op in ["scatter_reduce", "index_reduce"] {
        for include_self in [true, false] {
            // repeated indices, no zeros
            check_both(op, &[2.0, -1.5, 0.7], &[0, 1, 1, 2, 0, 1], &[1.5, 0.8, -2.0, 1.2, 0.6, 1.1], include_self);
            // one zero in the source at a position, zero in the input elsewhere
            check_both(op, &[2.0, 0.0, 3.0], &[0, 1, 1, 2, 0], &[1.5, 0.0, 2.0, -1.0, 4.0], include_self);
            // a zero in the input where the source has one too
            check_both(op, &[0.0, 1.3, 0.9], &[0, 0, 2], &[0.0, 1.7, -0.4], include_self);
            // positions that receive nothing
            check_both(op, &[0.5, 1.3, 0.9, -2.0], &[1, 1], &[0.3, 1.7], include_self);
        }
    }
}

#[test]
fn prod_reductions_second_order_values() {
    // PyTorch 2.15: out * w summed, first gradients, then (grad_src * v) summed differentiated again
    let w = t64(&[1.0, 2.0, -1.0]);
    let v = t64(&[0.5, 1.0, -2.0, 3.0, 1.0]);
    #[allow(clippy::type_complexity)]
    let want: [(bool, [f64; 3], [f64; 3], [f64; 5], [f64; 3], [f64; 5]); 2] = [
        (true, [12.0, 0.0, -3.0], [6.0, 0.0, 1.0], [8.0, 0.0, 0.0, -3.0, 3.0], [3.5, 4.0, -3.0], [2.0, 0.0, 0.0, 0.0, 1.0]),
        (false, [6.0, 0.0, -1.0], [0.0, 0.0, 0.0], [4.0, 4.0, 0.0, -1.0, 1.5], [0.0, 0.0, 0.0], [1.0, -4.0, 2.0, 0.0, 0.5]),
    ];
    for op in ["scatter_reduce", "index_reduce"] {
        for (include_self, out, gx, gs, hx, hs) in &want {
            let x = t64(&[2.0, 0.0, 3.0]).requires_grad_(true).unwrap();
            let s = t64(&[1.5, 0.0, 2.0, -1.0, 4.0]).requires_grad_(true).unwrap();
            let o = reduce(op, &x, &idx(&[0, 1, 1, 2, 0]), &s, *include_self).unwrap();
            close(&o.to_vec::<f64>().unwrap(), out);
            let g = autograd::grad(&[o.mul(&w).unwrap().sum().unwrap()], &[x.clone(), s.clone()], &[], true, true, false).unwrap();
            let (g0, g1) = (g[0].clone().unwrap(), g[1].clone().unwrap());
            close(&g0.to_vec::<f64>().unwrap(), gx);
            close(&g1.to_vec::<f64>().unwrap(), gs);
            let h = autograd::grad(&[g1.mul(&v).unwrap().sum().unwrap()], &[x, s], &[], false, false, true).unwrap();
            let zeros3 = [0.0; 3];
            let hx_got = h[0].as_ref().map(|t| t.to_vec::<f64>().unwrap()).unwrap_or(zeros3.to_vec());
            close(&hx_got, hx);
            close(&h[1].clone().unwrap().to_vec::<f64>().unwrap(), hs);
        }
    }
}

#[test]
fn prod_reductions_two_zeros_at_one_position() {
    // first order right; differentiating the source gradient again fails as in PyTorch
    for (op, name) in [("scatter_reduce", "src"), ("index_reduce", "source")] {
        let x = t64(&[2.0, 3.0]).requires_grad_(true).unwrap();
        let s = t64(&[0.0, 0.0, 5.0]).requires_grad_(true).unwrap();
        let o = reduce(op, &x, &idx(&[0, 0, 1]), &s, true).unwrap();
        let g = autograd::grad(&[o.sum().unwrap()], &[x.clone(), s.clone()], &[], true, true, false).unwrap();
        let (gx, gs) = (g[0].clone().unwrap(), g[1].clone().unwrap());
        close(&gx.to_vec::<f64>().unwrap(), &[0.0, 5.0]);
        close(&gs.to_vec::<f64>().unwrap(), &[0.0, 0.0, 3.0]);
        let e = autograd::grad(&[gs.sum().unwrap()], &[x.clone(), s.clone()], &[], true, false, true).unwrap_err().to_string();
        let want = format!("{op}(): Double backward is unsupported for {name} when >1 zeros in {name} are scattered to the same position in self");
        assert!(e.contains(&want), "{e}");
        // the input's gradient stays differentiable
        autograd::grad(&[gx.sum().unwrap()], &[x, s], &[], false, false, true).unwrap();
        // without create_graph no error node is made
        let x = t64(&[2.0, 3.0]).requires_grad_(true).unwrap();
        let s = t64(&[0.0, 0.0, 5.0]).requires_grad_(true).unwrap();
        let o = reduce(op, &x, &idx(&[0, 0, 1]), &s, true).unwrap();
        let g = autograd::grad(&[o.sum().unwrap()], &[s], &[], false, false, false).unwrap();
        assert!(!g[0].clone().unwrap().requires_grad());
    }
}

fn narrow_call(x: &Tensor, start: Value) -> Result<Tensor> {
    registry::call("narrow", vec![Value::Tensor(x.clone()), Value::Int(1), start, Value::Int(2)], vec![])?.into_tensor()
}

#[test]
fn narrow_tensor_start() {
    let x = Tensor::from_vec((0..25).map(|v| v as f64).collect::<Vec<_>>(), &[5, 5]).unwrap();
    let start = Tensor::from_vec(vec![2i64], &[]).unwrap();
    let a = narrow_call(&x, Value::Tensor(start.clone())).unwrap();
    let b = narrow_call(&x, Value::Int(2)).unwrap();
    assert_eq!(a.shape(), &[5, 2]);
    assert_eq!(a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    assert_eq!(a.to_vec::<f64>().unwrap()[..2], [2.0, 3.0]);
    // PyTorch: only a 0-d integral tensor (bool rejected, uint8 accepted)
    for bad in [
        Tensor::from_vec(vec![2i64], &[1]).unwrap(),
        Tensor::from_vec(vec![2.0f64], &[]).unwrap(),
        Tensor::from_vec(vec![true], &[]).unwrap(),
    ] {
        let e = narrow_call(&x, Value::Tensor(bad)).unwrap_err().to_string();
        assert!(e.contains("start must be an 0-dim integral Tensor."), "{e}");
    }
    let u = Tensor::from_vec(vec![1u8], &[]).unwrap();
    assert_eq!(narrow_call(&x, Value::Tensor(u)).unwrap().to_vec::<f64>().unwrap()[..2], [1.0, 2.0]);
    // its gradient
    let xs = [x.requires_grad_(true).unwrap()];
    let f = |v: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![narrow_call(&v[0], Value::Tensor(start.clone()))?]) };
    autograd::gradcheck(f, &xs, &GradcheckOptions::default()).unwrap();
}

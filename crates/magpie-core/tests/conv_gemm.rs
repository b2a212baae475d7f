//! The gather + GEMM + scatter_add convolution path that CUDA tensors take (ops/nn/conv_gemm.rs),
//! run on the CPU through `set_conv_via_gemm` and compared with the CPU kernels: conv 1-3d and
//! conv_transpose with strides, padding (explicit, same, valid), dilation, groups, output padding,
//! unfold/fold, odd sizes, f32/f64/bf16, first and second derivatives.

use magpie_core::ops::nn::{conv, conv_transpose, fold, set_conv_via_gemm, unfold, Padding};
use magpie_core::{DType, Tensor};

struct Rng(u64);
impl Rng {
    fn tensor(&mut self, shape: &[usize], dt: DType) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect();
        Tensor::from_vec(v, shape).unwrap().to_dtype(dt).unwrap()
    }
}

fn close(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}: element {i}: {a} vs {b}");
    }
}

/// Runs `f` on leaves made from `inputs` with both paths; compares the outputs, the gradients
/// of `sum(out * r)` and the gradient of the sum of those gradients (second order).
fn both(what: &str, inputs: &[Tensor], tol: f64, f: &dyn Fn(&[Tensor]) -> Tensor) {
    let mut res = Vec::new();
    for via in [false, true] {
        set_conv_via_gemm(via);
        let leaves: Vec<Tensor> = inputs.iter().map(|t| t.requires_grad_(true).unwrap()).collect();
        let y = f(&leaves);
        let r = y.ones_like().unwrap().mul_scalar(0.5).unwrap();
                let g = magpie_core::autograd::grad(&[y.mul(&r).unwrap().sum_dims(None, false, None).unwrap()], &leaves, &[], true, true, false).unwrap();
        let gs: Vec<Tensor> = g.into_iter().map(|t| t.unwrap()).collect();
        let mut total = gs[0].sum_dims(None, false, None).unwrap();
        for t in &gs[1..] {
            total = total.add(&t.mul(t).unwrap().sum_dims(None, false, None).unwrap()).unwrap();
        }
        // ops linear in their only input (unfold, fold) have constant gradients: no second order
        let g2 = if total.requires_grad() { magpie_core::autograd::grad(&[total], &leaves, &[], false, false, true).unwrap() } else { vec![None; leaves.len()] };
        res.push((y.detach(), gs.iter().map(|t| t.detach()).collect::<Vec<_>>(), g2));
    }
    set_conv_via_gemm(false);
    let (a, b) = (&res[0], &res[1]);
    close(&format!("{what} output"), &b.0, &a.0, tol);
    for (i, (x, y)) in b.1.iter().zip(&a.1).enumerate() {
        close(&format!("{what} grad {i}"), x, y, tol);
    }
    for (i, (x, y)) in b.2.iter().zip(&a.2).enumerate() {
        match (x, y) {
            (Some(x), Some(y)) => close(&format!("{what} second-order grad {i}"), x, y, tol),
            (None, None) => {}
            _ => panic!("{what}: second-order grad {i} present on one path only"),
        }
    }
}

/// A convolution geometry: spatial input, kernel, stride, padding, dilation, groups, cin, cout, batch.
type Case = (Vec<usize>, Vec<usize>, Vec<i64>, Vec<i64>, Vec<i64>, usize, usize, usize, usize);

#[test]
fn gemm_path_matches_cpu_kernels() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // (spatial input, kernel, stride, padding, dilation, groups, cin, cout, batch)
    let cases: Vec<Case> = vec![
        (vec![7], vec![3], vec![1], vec![0], vec![1], 1, 2, 3, 2),
        (vec![10], vec![4], vec![3], vec![2], vec![2], 2, 4, 6, 1),
        (vec![5, 6], vec![3, 2], vec![1, 2], vec![1, 0], vec![1, 1], 1, 3, 2, 2),
        (vec![9, 7], vec![3, 3], vec![2, 1], vec![2, 1], vec![2, 1], 3, 3, 6, 1),
        (vec![4, 5, 3], vec![2, 3, 1], vec![1, 2, 1], vec![0, 1, 1], vec![1, 1, 2], 2, 2, 4, 2),
    ];
    for (ins, ks, s, p, d, groups, cin, cout, n) in cases {
        let nd = ins.len();
        for dt in [DType::F64, DType::F32] {
            let tol = if dt == DType::F64 { 1e-12 } else { 1e-5 };
            let mut xs = vec![n, cin];
            xs.extend(&ins);
            let mut ws = vec![cout, cin / groups];
            ws.extend(&ks);
            let x = rng.tensor(&xs, dt);
            let w = rng.tensor(&ws, dt);
            let bias = rng.tensor(&[cout], dt);
            let what = format!("conv{nd}d {xs:?} w {ws:?} s {s:?} p {p:?} d {d:?} g {groups} {dt:?}");
            let (s2, p2, d2) = (s.clone(), p.clone(), d.clone());
            both(&what, &[x.clone(), w.clone(), bias.clone()], tol, &|t| conv(&t[0], &t[1], Some(&t[2]), nd, &s2, &Padding::Explicit(p2.clone()), &d2, groups as i64).unwrap());
            let d3 = d.clone();
            both(&format!("{what} same"), &[x.clone(), w.clone()], tol, &|t| conv(&t[0], &t[1], None, nd, &vec![1; nd], &Padding::Same, &d3, groups as i64).unwrap());
            let s4 = s.clone();
            both(&format!("{what} valid"), &[x.clone(), w.clone()], tol, &|t| conv(&t[0], &t[1], None, nd, &s4, &Padding::Valid, &vec![1; nd], groups as i64).unwrap());
            // conv_transpose: weight [cin, cout / groups, k...], output padding below the stride
            let mut wts = vec![cin, cout / groups];
            wts.extend(&ks);
            let wt = rng.tensor(&wts, dt);
            let op: Vec<i64> = s.iter().map(|&v| if v > 1 { 1 } else { 0 }).collect();
            let (s5, p5, d5) = (s.clone(), p.clone(), d.clone());
            both(&format!("{what} transpose"), &[x.clone(), wt, rng.tensor(&[cout], dt)], tol, &|t| {
                conv_transpose(&t[0], &t[1], Some(&t[2]), nd, &s5, &p5, &op, groups as i64, &d5).unwrap()
            });
        }
    }
    // half inputs compute in float32 on this path too, rounded once
    let x = rng.tensor(&[2, 3, 8], DType::BF16);
    let w = rng.tensor(&[4, 3, 3], DType::BF16);
    both("conv1d bf16", &[x, w], 1e-2, &|t| conv(&t[0], &t[1], None, 1, &[2], &Padding::Explicit(vec![1]), &[1], 1).unwrap());
    // unfold / fold (im2col and col2im as ops)
    let x = rng.tensor(&[2, 3, 7, 6], DType::F64);
    both("unfold", &[x], 1e-12, &|t| unfold(&t[0], &[3, 2], &[1, 2], &[1, 0], &[2, 1]).unwrap());
    let c = rng.tensor(&[2, 12, 12], DType::F64);
    both("fold", &[c], 1e-12, &|t| fold(&t[0], &[5, 6], &[2, 2], &[1, 1], &[0, 0], &[1, 2]).unwrap());
}

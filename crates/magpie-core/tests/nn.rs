//! Tests of the nn family against naive reference loops, adjoint identities, finite
//! differences and values computed with PyTorch.

use magpie_core::ops::nn::{self, loss, Padding, Reduction};
use magpie_core::{autograd, Tensor};

fn rand_vec(n: usize, seed: u64) -> Vec<f64> {
    magpie_core::ops::random::Generator::new(seed).uniform(n).into_iter().map(|u| 2.0 * u - 1.0).collect()
}

fn t64(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(rand_vec(shape.iter().product(), seed), shape).unwrap()
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
    }
}

/// Central finite differences of `f(x).sum()` w.r.t. `x` compared with autograd.
fn check_grad(x: &Tensor, f: impl Fn(&Tensor) -> Tensor) {
    let xr = x.detach().with_requires_grad().unwrap();
    let y = f(&xr).sum().unwrap();
    let g = autograd::grad(&[y], &[xr.clone()], &[], false, false, false).unwrap()[0].clone().unwrap();
    let gv = g.to_vec::<f64>().unwrap();
    let base = x.to_vec::<f64>().unwrap();
    let h = 1e-6;
    for i in 0..base.len() {
        let mut p = base.clone();
        p[i] += h;
        let mut m = base.clone();
        m[i] -= h;
        let fp = f(&Tensor::from_vec(p, x.shape()).unwrap()).sum().unwrap().to_vec::<f64>().unwrap()[0];
        let fm = f(&Tensor::from_vec(m, x.shape()).unwrap()).sum().unwrap().to_vec::<f64>().unwrap()[0];
        let fd = (fp - fm) / (2.0 * h);
        assert!((fd - gv[i]).abs() < 1e-5 * (1.0 + fd.abs()), "grad element {i}: autograd {} vs finite difference {fd}", gv[i]);
    }
}

/// conv2d by the definition, for stride / padding / dilation / groups.
#[allow(clippy::too_many_arguments)]
fn naive_conv2d(x: &[f64], xs: [usize; 4], w: &[f64], ws: [usize; 4], s: [usize; 2], p: [usize; 2], d: [usize; 2], g: usize) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [co, cig, kh, kw] = ws;
    let oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) / s[0] + 1;
    let ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) / s[1] + 1;
    let cog = co / g;
    let mut y = vec![0.0; n * co * oh * ow];
    for b in 0..n {
        for o in 0..co {
            let grp = o / cog;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = 0.0;
                    for ic in 0..cig {
                        let cc = grp * cig + ic;
                        for a in 0..kh {
                            for e in 0..kw {
                                let yy = (i * s[0] + a * d[0]) as i64 - p[0] as i64;
                                let xx = (j * s[1] + e * d[1]) as i64 - p[1] as i64;
                                if yy >= 0 && xx >= 0 && (yy as usize) < h && (xx as usize) < wd {
                                    acc += x[((b * c + cc) * h + yy as usize) * wd + xx as usize] * w[((o * cig + ic) * kh + a) * kw + e];
                                }
                            }
                        }
                    }
                    y[((b * co + o) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    (y, [n, co, oh, ow])
}

#[test]
fn conv2d_matches_naive_loop() {
    let x = t64(&[2, 4, 7, 6], 1);
    let w = t64(&[6, 2, 3, 2], 2);
    let y = nn::conv(&x, &w, None, 2, &[2, 1], &Padding::Explicit(vec![1, 2]), &[1, 2], 2).unwrap();
    let (r, rs) = naive_conv2d(&x.to_vec().unwrap(), [2, 4, 7, 6], &w.to_vec().unwrap(), [6, 2, 3, 2], [2, 1], [1, 2], [1, 2], 2);
    assert_eq!(y.shape(), &rs[..]);
    close(&y.to_vec::<f64>().unwrap(), &r, 1e-12);
}

#[test]
fn conv_transpose_is_the_adjoint_of_conv() {
    // <conv(x, w), y> == <x, conv_transpose(y, w)>
    let x = t64(&[1, 2, 5, 5], 3);
    let w = t64(&[4, 2, 3, 3], 4);
    let cx = nn::conv(&x, &w, None, 2, &[2], &Padding::Explicit(vec![1]), &[1], 1).unwrap();
    let y = t64(cx.shape(), 5);
    let ty = nn::conv_transpose(&y, &w, None, 2, &[2], &[1], &[0], 1, &[1]).unwrap();
    assert_eq!(ty.shape(), x.shape());
    let a = cx.mul(&y).unwrap().sum().unwrap().to_vec::<f64>().unwrap()[0];
    let b = x.mul(&ty).unwrap().sum().unwrap().to_vec::<f64>().unwrap()[0];
    assert!((a - b).abs() < 1e-10, "{a} vs {b}");
}

#[test]
fn conv_gradients_match_finite_differences() {
    let w = t64(&[3, 2, 2, 3], 6);
    let x = t64(&[2, 2, 4, 5], 7);
    check_grad(&x, |x| nn::conv(x, &w, None, 2, &[1], &Padding::Same, &[1], 1).unwrap());
    check_grad(&w, |w| nn::conv(&x, w, None, 2, &[1], &Padding::Explicit(vec![1]), &[2], 1).unwrap());
    // second order: the gradient of conv_transpose's input gradient
    let y = t64(&[1, 3, 3, 3], 8);
    check_grad(&y, |y| nn::conv_transpose(y, &w.reshape(&[3, 2, 2, 3]).unwrap(), None, 2, &[2], &[0], &[1], 1, &[1]).unwrap());
}

#[test]
fn linear_matches_pytorch() {
    let x = Tensor::from_vec(vec![1f32, 2., 3.], &[1, 3]).unwrap();
    let w = Tensor::from_vec(vec![1f32, 0., -1., 2., 1., 0.], &[2, 3]).unwrap();
    let b = Tensor::from_vec(vec![0.5f32, -0.5], &[2]).unwrap();
    let y = nn::linear(&x, &w, Some(&b)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![-1.5, 3.5]);
}

#[test]
fn max_pool_values_indices_and_gradient() {
    let x = Tensor::from_vec((0..16).map(|v| ((v * 7) % 16) as f64).collect::<Vec<_>>(), &[1, 1, 4, 4]).unwrap();
    let (v, i) = nn::max_pool(&x, 2, &[2], &[], &[0], &[1], false).unwrap();
    // x = [[0,7,14,5],[12,3,10,1],[8,15,6,13],[4,11,2,9]]
    assert_eq!(v.to_vec::<f64>().unwrap(), vec![12., 14., 15., 13.]);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![4, 2, 9, 11]);
    let xr = x.with_requires_grad().unwrap();
    let (v, _) = nn::max_pool(&xr, 2, &[2], &[], &[0], &[1], false).unwrap();
    v.sum().unwrap().backward().unwrap();
    let g = xr.grad().unwrap().to_vec::<f64>().unwrap();
    let mut want = vec![0.0; 16];
    for k in [4, 2, 9, 11] {
        want[k] = 1.0;
    }
    assert_eq!(g, want);
}

#[test]
fn avg_pool_excluding_padding_matches_naive() {
    let x = t64(&[1, 1, 5, 5], 9);
    let y = nn::avg_pool(&x, 2, &[3], &[2], &[1], true, false, None).unwrap();
    let xv = x.to_vec::<f64>().unwrap();
    let (oh, ow) = (y.shape()[2], y.shape()[3]);
    let mut want = Vec::new();
    for i in 0..oh {
        for j in 0..ow {
            let (mut s, mut c) = (0.0, 0);
            for a in 0..3 {
                for b in 0..3 {
                    let (r, q) = ((i * 2 + a) as i64 - 1, (j * 2 + b) as i64 - 1);
                    if (0..5).contains(&r) && (0..5).contains(&q) {
                        s += xv[(r * 5 + q) as usize];
                        c += 1;
                    }
                }
            }
            want.push(s / c as f64);
        }
    }
    close(&y.to_vec::<f64>().unwrap(), &want, 1e-12);
    check_grad(&x, |x| nn::avg_pool(x, 2, &[3], &[2], &[1], true, false, None).unwrap());
}

#[test]
fn interpolate_bilinear_align_corners() {
    // torch: F.interpolate(torch.tensor([[[[0., 1.], [2., 3.]]]]), size=3, mode='bilinear', align_corners=True)
    let x = Tensor::from_vec(vec![0f32, 1., 2., 3.], &[1, 1, 2, 2]).unwrap();
    let y = nn::interpolate(&x, Some(&[3]), None, "bilinear", Some(true), None, false).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0., 0.5, 1., 1., 1.5, 2., 2., 2.5, 3.]);
    let y = nn::interpolate(&x, None, Some(&[2.0]), "nearest", None, None, false).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0., 0., 1., 1., 0., 0., 1., 1., 2., 2., 3., 3., 2., 2., 3., 3.]);
}

#[test]
fn layer_and_group_norm_gradients() {
    let x = t64(&[2, 4, 3], 10);
    let w = t64(&[3], 11);
    check_grad(&x, |x| nn::native_layer_norm(x, &[3], Some(&w), None, 1e-5).unwrap().0.mul(&t64(&[2, 4, 3], 12)).unwrap());
    check_grad(&x, |x| nn::native_group_norm(x, 2, None, None, 1e-5).unwrap().0.mul(&t64(&[2, 4, 3], 13)).unwrap());
}

#[test]
fn batch_norm_updates_running_stats() {
    let x = Tensor::from_vec(vec![1f32, 2., 3., 5.], &[4, 1]).unwrap();
    let rm = Tensor::zeros(&[1]).unwrap();
    let rv = Tensor::ones(&[1]).unwrap();
    let (y, _, _) = nn::native_batch_norm(&x, None, None, Some(&rm), Some(&rv), true, 0.1, 0.0).unwrap();
    // mean 2.75, biased var 2.1875, unbiased 2.9166667
    close(&rm.to_vec::<f64>().unwrap(), &[0.275], 1e-6);
    close(&rv.to_vec::<f64>().unwrap(), &[0.9 + 0.29166667], 1e-6);
    let yv = y.to_vec::<f64>().unwrap();
    close(&yv, &[-1.1832160, -0.5070926, 0.1690309, 1.5212777], 1e-5);
}

#[test]
fn cross_entropy_matches_pytorch() {
    let x = Tensor::from_vec(vec![1f32, 2., 3., 1., 1., 1.], &[2, 3]).unwrap();
    let t = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
    // torch: F.cross_entropy(x, t) = (0.40760596 + 1.0986123) / 2
    let l = loss::cross_entropy(&x, &t, None, -100, Reduction::Mean, 0.0).unwrap();
    close(&l.to_vec::<f64>().unwrap(), &[0.75310915], 1e-6);
    // label smoothing 0.1: torch gives 0.80310917
    let l = loss::cross_entropy(&x, &t, None, -100, Reduction::Mean, 0.1).unwrap();
    close(&l.to_vec::<f64>().unwrap(), &[0.80310917], 1e-6);
    // ignore_index drops the second sample
    let t2 = Tensor::from_vec(vec![2i64, -100], &[2]).unwrap();
    let l = loss::cross_entropy(&x, &t2, None, -100, Reduction::Mean, 0.0).unwrap();
    close(&l.to_vec::<f64>().unwrap(), &[0.40760596], 1e-6);
}

#[test]
fn embedding_padding_row_gets_no_gradient() {
    let w = t64(&[4, 3], 14).with_requires_grad().unwrap();
    let idx = Tensor::from_vec(vec![0i64, 2, 2, 1], &[2, 2]).unwrap();
    let e = nn::embedding(&idx, &w, Some(2), None, 2.0).unwrap();
    assert_eq!(e.shape(), &[2, 2, 3]);
    e.sum().unwrap().backward().unwrap();
    let g = w.grad().unwrap().to_vec::<f64>().unwrap();
    assert_eq!(g, vec![1., 1., 1., 1., 1., 1., 0., 0., 0., 0., 0., 0.]);
}

#[test]
fn unfold_fold_roundtrip_counts_overlaps() {
    let x = Tensor::ones(&[1, 1, 3, 3]).unwrap().to_dtype(magpie_core::DType::F64).unwrap();
    let cols = nn::unfold(&x, &[2], &[1], &[0], &[1]).unwrap();
    assert_eq!(cols.shape(), &[1, 4, 4]);
    let back = nn::fold(&cols, &[3], &[2], &[1], &[0], &[1]).unwrap();
    assert_eq!(back.to_vec::<f64>().unwrap(), vec![1., 2., 1., 2., 4., 2., 1., 2., 1.]);
}

#[test]
fn sdpa_causal_first_row_is_first_value() {
    let q = t64(&[1, 3, 4], 15);
    let k = t64(&[1, 3, 4], 16);
    let v = t64(&[1, 3, 4], 17);
    let o = nn::scaled_dot_product_attention(&q, &k, &v, None, 0.0, true, None, false).unwrap();
    close(&o.to_vec::<f64>().unwrap()[..4], &v.to_vec::<f64>().unwrap()[..4], 1e-12);
    check_grad(&q, |q| nn::scaled_dot_product_attention(q, &k, &v, None, 0.0, true, None, false).unwrap().mul(&t64(&[1, 3, 4], 18)).unwrap());
}

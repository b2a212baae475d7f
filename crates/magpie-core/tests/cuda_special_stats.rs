//! The CUDA paths of the special polynomials, `polygamma` (n >= 2), `mvlgamma`, the spread
//! statistics (`var`, `std`, `var_mean`, `std_mean`), the p-norm reductions behind `dist` and
//! `masked.norm`, `histc`, `searchsorted` with a sorter and `max`/`min` of a 0-d tensor over a
//! dim, against the CPU path on random inputs at several sizes (odd ones among them), with
//! gradients, errors, and a check that none of these registry ops fell back to the CPU.
//! Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1 (then they fail).

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, tol, Rng};
use magpie_core::backend::cuda;
use magpie_core::ops::special::{orthogonal_polynomial, Polynomial};
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Tensor};

fn host(t: &Tensor) -> Tensor {
    t.to_device(Device::Cpu).unwrap()
}

const KINDS: [Polynomial; 12] = [
    Polynomial::ChebyshevT,
    Polynomial::ChebyshevU,
    Polynomial::ChebyshevV,
    Polynomial::ChebyshevW,
    Polynomial::ShiftedChebyshevT,
    Polynomial::ShiftedChebyshevU,
    Polynomial::ShiftedChebyshevV,
    Polynomial::ShiftedChebyshevW,
    Polynomial::HermiteH,
    Polynomial::HermiteHe,
    Polynomial::LaguerreL,
    Polynomial::LegendreP,
];

#[test]
fn polynomials_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(21);
    for shape in [vec![1usize], vec![7], vec![3, 129], vec![1000]] {
        // x in (-1.5, 1.5) with the closed-form points ±1 and 0 mixed in; degrees -1..12 and NaN
        let mut x = rand(&mut rng, &shape, DType::F64, -1.5, 1.5).to_vec::<f64>().unwrap();
        for (i, v) in x.iter_mut().enumerate() {
            match i % 11 {
                0 => *v = 1.0,
                1 => *v = -1.0,
                2 => *v = 0.0,
                _ => {}
            }
        }
        let x = Tensor::from_vec(x, &shape).unwrap();
        let mut n = rand(&mut rng, &shape, DType::F64, -1.0, 13.0).floor().unwrap().to_vec::<f64>().unwrap();
        if n.len() > 5 {
            n[5] = f64::NAN;
        }
        let n = Tensor::from_vec(n, &shape).unwrap();
        for dt in [DType::F32, DType::F64] {
            let (xc, nc) = (x.to_dtype(dt).unwrap(), n.to_dtype(dt).unwrap());
            let (xg, ng) = (xc.to_device(dev).unwrap(), nc.to_device(dev).unwrap());
            for kind in KINDS {
                let want = orthogonal_polynomial(kind, &xc, &nc).unwrap();
                let got = orthogonal_polynomial(kind, &xg, &ng).unwrap();
                assert_eq!(got.device(), dev);
                // both compute in f64; the trigonometric and recurrence paths agree to rounding
                let (rt, at) = if dt == DType::F64 { (1e-10, 1e-10) } else { tol(dt) };
                assert_close(&format!("{kind:?} {shape:?} {dt:?}"), &host(&got), &want, rt, at);
            }
        }
    }
    // integer inputs give the default float dtype; a 0-d CPU degree broadcasts over a CUDA x
    let xi = Tensor::from_vec(vec![-2i64, 0, 1, 3, 5], &[5]).unwrap();
    let n0 = Tensor::from_vec(vec![4i64], &[]).unwrap();
    let want = orthogonal_polynomial(Polynomial::HermiteH, &xi, &n0).unwrap();
    let got = orthogonal_polynomial(Polynomial::HermiteH, &xi.to_device(dev).unwrap(), &n0).unwrap();
    assert_eq!(got.dtype(), DType::F32);
    assert_close("hermite_h int", &host(&got), &want, 0.0, 0.0);
}

#[test]
fn polygamma_and_mvlgamma_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(22);
    for shape in [vec![5usize], vec![4, 33]] {
        for dt in [DType::F32, DType::F64] {
            // negative non-integers, the poles' neighbourhood, and large x
            let x = rand(&mut rng, &shape, dt, -3.3, 12.0);
            let xg = x.to_device(dev).unwrap();
            for n in [2i64, 3, 5] {
                let want = x.polygamma(n).unwrap();
                let got = xg.polygamma(n).unwrap();
                assert_eq!(got.device(), dev);
                let (rt, at) = if dt == DType::F64 { (1e-11, 1e-12) } else { (1e-5, 1e-6) };
                assert_close(&format!("polygamma {n} {shape:?} {dt:?}"), &host(&got), &want, rt, at);
            }
            let xp = rand(&mut rng, &shape, dt, 2.1, 9.0);
            let xpg = xp.to_device(dev).unwrap();
            for p in [1i64, 2, 4] {
                let want = xp.mvlgamma(p).unwrap();
                let got = xpg.mvlgamma(p).unwrap();
                let (rt, at) = if dt == DType::F64 { (1e-12, 1e-12) } else { (2e-5, 2e-5) };
                assert_close(&format!("mvlgamma {p} {shape:?} {dt:?}"), &host(&got), &want, rt, at);
            }
        }
    }
    // the domain check reads the device's values: one element at (p - 1) / 2 fails
    let bad = Tensor::from_vec(vec![3.0f32, 1.5, 4.0], &[3]).unwrap().to_device(dev).unwrap();
    let e = bad.mvlgamma(4).unwrap_err().to_string();
    assert!(e.contains("All elements must be greater than (p-1)/2"), "{e}");
    assert!(bad.mvlgamma(0).is_err());
    assert!(bad.polygamma(-1).is_err());
    // gradients: d/dx polygamma(2, x) = polygamma(3, x); mvlgamma's is a sum of digammas
    let x = Tensor::from_vec(vec![0.7f64, 2.5, 4.0, 9.25, 1.3], &[5]).unwrap();
    for which in ["polygamma", "mvlgamma"] {
        let f = |t: &Tensor| if which == "polygamma" { t.polygamma(2).unwrap() } else { t.mvlgamma(2).unwrap() };
        let xc = x.detach().requires_grad_(true).unwrap();
        f(&xc).sum_dims(None, false, None).unwrap().backward().unwrap();
        let xg = x.detach().to_device(dev).unwrap().requires_grad_(true).unwrap();
        f(&xg).sum_dims(None, false, None).unwrap().backward().unwrap();
        assert_close(&format!("{which} grad"), &host(&xg.grad().unwrap()), &xc.grad().unwrap(), 1e-11, 1e-12);
    }
}

#[test]
fn var_std_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(23);
    let dims_sets: [Option<&[i64]>; 5] = [None, Some(&[0]), Some(&[-1]), Some(&[0, 2]), Some(&[1])];
    for shape in [vec![3usize, 5, 7], vec![2, 1, 1001], vec![64, 3, 9]] {
        for dt in [DType::F32, DType::F64, DType::BF16, DType::F16] {
            let x = rand(&mut rng, &shape, dt, -4.0, 6.0);
            let xg = x.to_device(dev).unwrap();
            for dims in dims_sets {
                for correction in [0.0, 1.0, 2.5] {
                    for keep in [false, true] {
                        let what = format!("{shape:?} {dt:?} dims {dims:?} correction {correction} keepdim {keep}");
                        let (rt, at) = match dt {
                            DType::F64 => (1e-12, 1e-12),
                            DType::F32 => (1e-5, 1e-5),
                            _ => tol(dt),
                        };
                        assert_close(&format!("var {what}"), &host(&xg.var_dims(dims, correction, keep).unwrap()), &x.var_dims(dims, correction, keep).unwrap(), rt, at);
                        assert_close(&format!("std {what}"), &host(&xg.std_dims(dims, correction, keep).unwrap()), &x.std_dims(dims, correction, keep).unwrap(), rt, at);
                        let (gv, gm) = xg.var_mean(dims, correction, keep).unwrap();
                        let (cv, cm) = x.var_mean(dims, correction, keep).unwrap();
                        assert_close(&format!("var_mean var {what}"), &host(&gv), &cv, rt, at);
                        assert_close(&format!("var_mean mean {what}"), &host(&gm), &cm, rt, at);
                        let (gs, _) = xg.std_mean(dims, correction, keep).unwrap();
                        let (cs, _) = x.std_mean(dims, correction, keep).unwrap();
                        assert_close(&format!("std_mean std {what}"), &host(&gs), &cs, rt, at);
                    }
                }
            }
        }
    }
    // 0-d input, a single element (0/0 with correction 1), and an empty reduced dim
    for (v, shape) in [(vec![2.5f32], vec![]), (vec![2.5f32], vec![1]), (vec![], vec![0, 3])] {
        let x = Tensor::from_vec(v, &shape).unwrap();
        let xg = x.to_device(dev).unwrap();
        for c in [0.0, 1.0] {
            assert_close(&format!("var {shape:?} correction {c}"), &host(&xg.var_dims(None, c, false).unwrap()), &x.var_dims(None, c, false).unwrap(), 0.0, 0.0);
        }
    }
    // gradients through the recorded rule on both devices
    let x = rand(&mut rng, &[4, 9], DType::F64, -1.0, 1.0);
    let xc = x.detach().requires_grad_(true).unwrap();
    xc.std_dims(Some(&[1]), 1.0, false).unwrap().sum_dims(None, false, None).unwrap().backward().unwrap();
    let xg = x.detach().to_device(dev).unwrap().requires_grad_(true).unwrap();
    xg.std_dims(Some(&[1]), 1.0, false).unwrap().sum_dims(None, false, None).unwrap().backward().unwrap();
    assert_close("std grad", &host(&xg.grad().unwrap()), &xc.grad().unwrap(), 1e-12, 1e-12);
    // integer inputs are rejected as on the CPU
    let xi = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap().to_device(dev).unwrap();
    assert!(xi.var_dims(None, 1.0, false).is_err());
}

#[test]
fn dist_histc_searchsorted_max_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(24);
    for (sa, sb) in [(vec![5usize, 5, 5], vec![5usize, 5, 5]), (vec![5, 5, 5], vec![5]), (vec![33, 7], vec![1, 7])] {
        for dt in [DType::F32, DType::F64, DType::BF16] {
            let a = rand(&mut rng, &sa, dt, -2.0, 2.0);
            let b = rand(&mut rng, &sb, dt, -2.0, 2.0);
            let (ag, bg) = (a.to_device(dev).unwrap(), b.to_device(dev).unwrap());
            for p in [0.0, 1.0, 2.0, 3.0, 0.5, f64::INFINITY, f64::NEG_INFINITY] {
                let (rt, at) = if dt == DType::F64 { (1e-12, 1e-12) } else if dt == DType::F32 { (1e-5, 1e-5) } else { tol(dt) };
                assert_close(&format!("dist {sa:?} {sb:?} {dt:?} p {p}"), &host(&ag.dist(&bg, p).unwrap()), &a.dist(&b, p).unwrap(), rt, at);
            }
        }
    }
    // norm gradient on the device
    let a = rand(&mut rng, &[6, 5], DType::F64, -2.0, 2.0);
    let ac = a.detach().requires_grad_(true).unwrap();
    ac.norm_p(3.0, Some(&[1]), false, None).unwrap().sum_dims(None, false, None).unwrap().backward().unwrap();
    let ag = a.detach().to_device(dev).unwrap().requires_grad_(true).unwrap();
    ag.norm_p(3.0, Some(&[1]), false, None).unwrap().sum_dims(None, false, None).unwrap().backward().unwrap();
    assert_close("norm grad", &host(&ag.grad().unwrap()), &ac.grad().unwrap(), 1e-12, 1e-12);

    // histc: explicit ranges (elements outside ignored, the top edge in the last bin), the
    // data's range, NaN skipped, odd bin counts
    for n in [1usize, 17, 1000, 4099] {
        for dt in [DType::F32, DType::F64] {
            let mut v = rand(&mut rng, &[n], DType::F64, -3.0, 3.0).to_vec::<f64>().unwrap();
            v[0] = 2.0;
            if n > 3 {
                v[3] = f64::NAN;
            }
            let x = Tensor::from_vec(v, &[n]).unwrap().to_dtype(dt).unwrap();
            let xg = x.to_device(dev).unwrap();
            for (bins, lo, hi) in [(10i64, -1.0, 2.0), (7, 0.0, 0.0), (1, -5.0, 5.0), (33, -2.5, 2.5)] {
                let got = xg.histc(bins, lo, hi).unwrap();
                assert_eq!(got.device(), dev);
                assert_close(&format!("histc n {n} {dt:?} bins {bins} [{lo}, {hi}]"), &host(&got), &x.histc(bins, lo, hi).unwrap(), 0.0, 0.0);
            }
        }
    }
    let xg = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().to_device(dev).unwrap();
    assert!(xg.histc(5, 3.0, 1.0).is_err());
    assert!(xg.histc(0, 0.0, 1.0).is_err());

    // searchsorted with a sorter: rows of an unsorted sequence and the permutation sorting them
    for (rows, m, per) in [(1usize, 1usize, 3usize), (1, 9, 20), (4, 33, 7)] {
        let seq = rand(&mut rng, &[rows, m], DType::F32, -5.0, 5.0);
        let (_, sorter) = seq.sort(-1, false).unwrap();
        let vals = rand(&mut rng, &[rows, per], DType::F32, -6.0, 6.0);
        let (seq, vals) = if rows == 1 { (seq.reshape(&[m as i64]).unwrap(), vals.reshape(&[per as i64]).unwrap()) } else { (seq, vals) };
        let sorter = sorter.reshape_to(seq.shape()).unwrap();
        for right in [false, true] {
            let want = seq.searchsorted(&vals, false, right, Some(&sorter)).unwrap();
            let got = seq.to_device(dev).unwrap().searchsorted(&vals.to_device(dev).unwrap(), false, right, Some(&sorter.to_device(dev).unwrap())).unwrap();
            assert_close(&format!("searchsorted sorter {rows}x{m} right {right}"), &host(&got), &want, 0.0, 0.0);
        }
    }
    let bad = Tensor::from_vec(vec![0i64, 5, 1], &[3]).unwrap().to_device(dev).unwrap();
    let seq = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap().to_device(dev).unwrap();
    assert!(seq.searchsorted(&seq, false, false, Some(&bad)).is_err());

    // max / min of a 0-d tensor over dim 0: the value and index 0, with a gradient
    let x = Tensor::from_vec(vec![1.5f64], &[]).unwrap().to_device(dev).unwrap().requires_grad_(true).unwrap();
    let (v, i) = x.max_dim(0, false).unwrap();
    assert_eq!(v.shape(), &[] as &[usize]);
    assert_eq!(host(&v).to_vec::<f64>().unwrap(), vec![1.5]);
    assert_eq!(host(&i).to_vec::<i64>().unwrap(), vec![0]);
    v.mul_scalar(3.0).unwrap().backward().unwrap();
    assert_eq!(host(&x.grad().unwrap()).to_vec::<f64>().unwrap(), vec![3.0]);
    let (v, _) = x.min_dim(-1, true).unwrap();
    assert_eq!(host(&v).to_vec::<f64>().unwrap(), vec![1.5]);
}

#[test]
fn unique_matches_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(26);
    // small value sets (many repeats), NaN among floats, odd sizes and a 2-d input
    for shape in [vec![1usize], vec![9], vec![4, 7], vec![5000]] {
        for dt in [DType::F32, DType::I64, DType::Bool] {
            let n: usize = shape.iter().product();
            let mut v: Vec<f64> = (0..n).map(|_| (rng.next() % 9) as f64 - 4.0).collect();
            if dt.is_float() && n > 2 {
                v[2] = f64::NAN;
            }
            let x = Tensor::from_vec(v, &shape).unwrap().to_dtype(dt).unwrap();
            let xg = x.to_device(dev).unwrap();
            for sorted in [true, false] {
                let (want, got) = if sorted { (x.unique(None).unwrap(), xg.unique(None).unwrap()) } else { (x.unique_consecutive(None).unwrap(), xg.unique_consecutive(None).unwrap()) };
                let what = format!("unique sorted {sorted} {shape:?} {dt:?}");
                assert_eq!(got.values.device(), dev);
                assert_close(&format!("{what} values"), &host(&got.values), &want.values, 0.0, 0.0);
                assert_close(&format!("{what} inverse"), &host(&got.inverse), &want.inverse, 0.0, 0.0);
                assert_close(&format!("{what} counts"), &host(&got.counts), &want.counts, 0.0, 0.0);
            }
        }
    }
    let e = Tensor::zeros(&[0, 3]).unwrap();
    let u = e.to_device(dev).unwrap().unique(None).unwrap();
    assert_eq!(u.values.shape(), &[0]);
    assert_eq!(u.inverse.shape(), &[0, 3]);
}

#[test]
fn quantile_matches_cpu() {
    use magpie_core::ops::reduce::order::Interpolation;
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(27);
    let interps = [Interpolation::Linear, Interpolation::Lower, Interpolation::Higher, Interpolation::Midpoint, Interpolation::Nearest];
    for shape in [vec![1usize], vec![8], vec![5, 7], vec![3, 4, 1001]] {
        for dt in [DType::F32, DType::F64] {
            let n: usize = shape.iter().product();
            // repeated values (ties on the nearest rule's halves) and a NaN in some lines
            let mut v: Vec<f64> = (0..n).map(|_| (rng.next() % 13) as f64 * 0.5 - 3.0).collect();
            if n > 4 {
                v[4] = f64::NAN;
            }
            let x = Tensor::from_vec(v, &shape).unwrap().to_dtype(dt).unwrap();
            let xg = x.to_device(dev).unwrap();
            let qs = [0.0, 0.25, 0.5, 0.7, 1.0];
            for interp in interps {
                for dim in [None, Some(0i64), Some(-1)] {
                    for keep in [false, true] {
                        let what = format!("{shape:?} {dt:?} {interp:?} dim {dim:?} keepdim {keep}");
                        let got = xg.quantile(&qs, false, dim, keep, interp).unwrap();
                        assert_eq!(got.device(), dev);
                        assert_close(&format!("quantile {what}"), &host(&got), &x.quantile(&qs, false, dim, keep, interp).unwrap(), 1e-6, 1e-6);
                        let got = xg.nanquantile(&qs[1..2], true, dim, keep, interp).unwrap();
                        assert_close(&format!("nanquantile {what}"), &host(&got), &x.nanquantile(&qs[1..2], true, dim, keep, interp).unwrap(), 1e-6, 1e-6);
                    }
                }
            }
        }
    }
    // a line of NaNs only: nanquantile is NaN there
    let x = Tensor::from_vec(vec![f64::NAN, f64::NAN, 1.0, 2.0], &[2, 2]).unwrap();
    let got = x.to_device(dev).unwrap().nanquantile(&[0.5], true, Some(1), false, Interpolation::Linear).unwrap();
    assert_close("nanquantile all-NaN line", &host(&got), &x.nanquantile(&[0.5], true, Some(1), false, Interpolation::Linear).unwrap(), 0.0, 0.0);
    // the gradient flows through the two gathers on the device
    let x = rand(&mut rng, &[4, 9], DType::F64, -1.0, 1.0);
    let xc = x.detach().requires_grad_(true).unwrap();
    xc.quantile(&[0.3], true, Some(1), false, Interpolation::Linear).unwrap().sum_dims(None, false, None).unwrap().backward().unwrap();
    let xg = x.detach().to_device(dev).unwrap().requires_grad_(true).unwrap();
    xg.quantile(&[0.3], true, Some(1), false, Interpolation::Linear).unwrap().sum_dims(None, false, None).unwrap().backward().unwrap();
    assert_close("quantile grad", &host(&xg.grad().unwrap()), &xc.grad().unwrap(), 1e-12, 1e-12);
}

#[test]
fn geqrf_matches_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(28);
    // tall, wide, square, batched, odd sizes; LAPACK's reflector convention on both sides
    for shape in [vec![5usize, 3], vec![3, 5], vec![4, 4], vec![2, 7, 6], vec![3, 1, 1]] {
        for dt in [DType::F64, DType::F32] {
            let x = rand(&mut rng, &shape, dt, -1.0, 1.0);
            let (a, tau) = magpie_core::ops::linalg::geqrf(&x).unwrap();
            let (ag, taug) = magpie_core::ops::linalg::geqrf(&x.to_device(dev).unwrap()).unwrap();
            assert_eq!(ag.device(), dev);
            let (rt, at) = if dt == DType::F64 { (1e-10, 1e-10) } else { (1e-4, 1e-5) };
            assert_close(&format!("geqrf a {shape:?} {dt:?}"), &host(&ag), &a, rt, at);
            assert_close(&format!("geqrf tau {shape:?} {dt:?}"), &host(&taug), &tau, rt, at);
        }
    }
}

#[test]
fn integer_products_and_convs_match_cpu() {
    use magpie_core::ops::nn::{conv, conv_transpose, Padding};
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(29);
    for dt in [DType::I64, DType::I32, DType::U8] {
        for (sa, sb) in [(vec![5usize, 10], vec![10usize, 5]), (vec![3, 7, 1], vec![3, 1, 9]), (vec![0, 4], vec![4, 3]), (vec![2, 0], vec![0, 6]), (vec![9], vec![9, 2])] {
            let a = rand(&mut rng, &sa, dt, -9.0, 9.0);
            let b = rand(&mut rng, &sb, dt, -9.0, 9.0);
            let got = a.to_device(dev).unwrap().matmul(&b.to_device(dev).unwrap()).unwrap();
            assert_eq!(got.device(), dev);
            assert_close(&format!("matmul {sa:?} {sb:?} {dt:?}"), &host(&got), &a.matmul(&b).unwrap(), 0.0, 0.0);
        }
    }
    // int64 products past 2^63 wrap as on the CPU
    let a = Tensor::from_vec(vec![i64::MAX, 3], &[1, 2]).unwrap();
    let b = Tensor::from_vec(vec![2i64, 5], &[2, 1]).unwrap();
    assert_close("matmul wraps", &host(&a.to_device(dev).unwrap().mm(&b.to_device(dev).unwrap()).unwrap()), &a.mm(&b).unwrap(), 0.0, 0.0);
    // integer conv and conv_transpose: the gather + product path on the device
    let x = rand(&mut rng, &[2, 4, 7, 6], DType::I64, -5.0, 5.0);
    let w = rand(&mut rng, &[6, 2, 3, 2], DType::I64, -3.0, 3.0);
    let want = conv(&x, &w, None, 2, &[2, 1], &Padding::Explicit(vec![1, 0]), &[1, 2], 2).unwrap();
    let got = conv(&x.to_device(dev).unwrap(), &w.to_device(dev).unwrap(), None, 2, &[2, 1], &Padding::Explicit(vec![1, 0]), &[1, 2], 2).unwrap();
    assert_close("int conv2d", &host(&got), &want, 0.0, 0.0);
    let wt = rand(&mut rng, &[4, 3, 3, 2], DType::I64, -3.0, 3.0);
    let want = conv_transpose(&x, &wt, None, 2, &[2, 1], &[1, 0], &[1, 0], 1, &[1, 1]).unwrap();
    let got = conv_transpose(&x.to_device(dev).unwrap(), &wt.to_device(dev).unwrap(), None, 2, &[2, 1], &[1, 0], &[1, 0], 1, &[1, 1]).unwrap();
    assert_close("int conv_transpose2d", &host(&got), &want, 0.0, 0.0);
    // float convs against the CPU kernels on the device path (cuBLAS GEMMs, no TF32)
    for dt in [DType::F32, DType::F64] {
        let x = rand(&mut rng, &[3, 6, 11], dt, -1.0, 1.0);
        let w = rand(&mut rng, &[4, 3, 5], dt, -1.0, 1.0);
        let b = rand(&mut rng, &[4], dt, -1.0, 1.0);
        let f = |x: &Tensor, w: &Tensor, b: &Tensor| conv(x, w, Some(b), 1, &[2], &Padding::Explicit(vec![3]), &[2], 2).unwrap();
        let (xc, wc, bc) = (x.detach().requires_grad_(true).unwrap(), w.detach().requires_grad_(true).unwrap(), b.detach().requires_grad_(true).unwrap());
        let want = f(&xc, &wc, &bc);
        want.sum_dims(None, false, None).unwrap().backward().unwrap();
        let (xg, wg, bg) = (x.detach().to_device(dev).unwrap().requires_grad_(true).unwrap(), w.detach().to_device(dev).unwrap().requires_grad_(true).unwrap(), b.detach().to_device(dev).unwrap().requires_grad_(true).unwrap());
        let got = f(&xg, &wg, &bg);
        got.sum_dims(None, false, None).unwrap().backward().unwrap();
        let (rt, at) = if dt == DType::F64 { (1e-12, 1e-12) } else { (1e-5, 1e-5) };
        assert_close(&format!("conv1d {dt:?}"), &host(&got.detach()), &want.detach(), rt, at);
        assert_close(&format!("conv1d grad x {dt:?}"), &host(&xg.grad().unwrap()), &xc.grad().unwrap(), rt, at);
        assert_close(&format!("conv1d grad w {dt:?}"), &host(&wg.grad().unwrap()), &wc.grad().unwrap(), rt, at);
    }
}

#[test]
fn registry_calls_do_not_fall_back() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(25);
    let x = rand(&mut rng, &[5, 6], DType::F32, 1.6, 3.0).to_device(dev).unwrap();
    let n = Tensor::from_vec(vec![3.0f32], &[]).unwrap().to_device(dev).unwrap();
    let (t, i, f) = (Value::Tensor, Value::Int, Value::Float);
    cuda::reset_fallback_counts();
    let mut ops: Vec<&str> = Vec::new();
    for name in [
        "special.chebyshev_polynomial_t",
        "special.chebyshev_polynomial_u",
        "special.chebyshev_polynomial_v",
        "special.chebyshev_polynomial_w",
        "special.shifted_chebyshev_polynomial_t",
        "special.shifted_chebyshev_polynomial_u",
        "special.shifted_chebyshev_polynomial_v",
        "special.shifted_chebyshev_polynomial_w",
        "special.hermite_polynomial_h",
        "special.hermite_polynomial_he",
        "special.laguerre_polynomial_l",
        "special.legendre_polynomial_p",
    ] {
        call(name, vec![t(x.clone()), t(n.clone())], vec![]).unwrap_or_else(|e| panic!("{name}: {e}"));
        ops.push(name);
    }
    let calls: Vec<(&str, Vec<Value>)> = vec![
        ("polygamma", vec![i(3), t(x.clone())]),
        ("mvlgamma", vec![t(x.clone()), i(3)]),
        ("var", vec![t(x.clone()), i(1)]),
        ("std", vec![t(x.clone())]),
        ("var_mean", vec![t(x.clone()), i(0)]),
        ("std_mean", vec![t(x.clone()), i(1)]),
        ("dist", vec![t(x.clone()), t(x.flip(&[0]).unwrap()), f(3.0)]),
        ("masked.norm", vec![t(x.clone()), f(2.0)]),
        ("histc", vec![t(x.clone())]),
        ("unique", vec![t(x.clone())]),
        ("geqrf", vec![t(x.clone())]),
        ("nn.functional.conv1d", vec![t(x.reshape(&[1, 5, 6]).unwrap()), t(x.narrow(1, 0, 3).unwrap().reshape(&[3, 5, 1]).unwrap().contiguous().unwrap())]),
        ("quantile", vec![t(x.clone()), f(0.3)]),
        ("nanquantile", vec![t(x.clone()), f(0.6), i(1)]),
        ("unique_consecutive", vec![t(x.clone())]),
        ("max", vec![t(n.clone()), i(0)]),
        ("min", vec![t(n.clone()), i(0)]),
    ];
    for (name, args) in calls {
        call(name, args, vec![]).unwrap_or_else(|e| panic!("{name}: {e}"));
        ops.push(name);
    }
    let seq = x.reshape(&[-1]).unwrap();
    let (_, sorter) = seq.sort(0, false).unwrap();
    call("searchsorted", vec![t(seq.clone()), t(x.clone())], vec![("sorter".into(), t(sorter))]).unwrap_or_else(|e| panic!("searchsorted: {e}"));
    ops.push("searchsorted");
    let counts = cuda::fallback_counts();
    // the convolution's inner kernel runs on the device too (no `host:conv` round trip)
    assert!(!counts.iter().any(|(o, _, f)| o == "host:conv" && *f > 0), "host:conv in {counts:?}");
    for op in ops {
        let c = counts.iter().find(|(o, _, _)| o == op);
        assert!(matches!(c, Some((_, n, 0)) if *n > 0), "{op} did not run natively: {c:?} in {counts:?}");
    }
}

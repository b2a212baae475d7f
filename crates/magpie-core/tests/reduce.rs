//! Tests of the reduce family (reductions, scans, sorting, softmax): values against known
//! PyTorch results or naive loops, gradients against finite differences.

use magpie_core::{DType, Result, Tensor};

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()), "{a:?} vs {b:?}");
    }
}

/// Checks the gradient of `sum(f(x) * w)` (w fixed weights) against central differences in f64.
fn gradcheck(x: &[f64], shape: &[usize], f: impl Fn(&Tensor) -> Result<Tensor>) {
    let xt = t64(x, shape).with_requires_grad().unwrap();
    let y = f(&xt).unwrap();
    let w: Vec<f64> = (0..y.numel()).map(|i| 0.3 + 0.7 * ((i * 37 % 11) as f64) / 11.0).collect();
    let wt = Tensor::from_vec(w.clone(), y.shape()).unwrap();
    y.mul(&wt).unwrap().sum().unwrap().backward().unwrap();
    let g = xt.grad().unwrap().to_vec::<f64>().unwrap();
    let eps = 1e-6;
    for i in 0..x.len() {
        let mut p = x.to_vec();
        p[i] += eps;
        let mut m = x.to_vec();
        m[i] -= eps;
        let fp = f(&t64(&p, shape)).unwrap().to_vec::<f64>().unwrap();
        let fm = f(&t64(&m, shape)).unwrap().to_vec::<f64>().unwrap();
        let num: f64 = fp.iter().zip(&fm).zip(&w).map(|((a, b), w)| (a - b) / (2.0 * eps) * w).sum();
        assert!((num - g[i]).abs() < 1e-5 * (1.0 + num.abs()), "grad[{i}]: numeric {num}, autograd {}", g[i]);
    }
}

const X: [f64; 12] = [0.5, -1.25, 2.0, 3.5, -0.75, 1.5, 0.25, -2.5, 1.75, 0.1, -0.3, 2.2];

#[test]
fn sums_and_products() {
    let x = t64(&X, &[3, 4]);
    let s = x.sum_dims(Some(&[1]), false, None).unwrap().to_vec::<f64>().unwrap();
    close(&s, &[4.75, -1.5, 3.75], 1e-12);
    let p = x.prod_dim(Some(0), true, None).unwrap();
    assert_eq!(p.shape(), &[1, 4]);
    close(&p.to_vec::<f64>().unwrap(), &[0.5 * -0.75 * 1.75, -1.25 * 1.5 * 0.1, 2.0 * 0.25 * -0.3, 3.5 * -2.5 * 2.2], 1e-12);
    // empty sum is 0, empty product is 1, ints sum as int64, mean of ints is an error
    let e = Tensor::zeros(&[0, 3]).unwrap();
    assert_eq!(e.sum().unwrap().to_vec::<f32>().unwrap(), vec![0.0]);
    assert_eq!(e.prod_dim(None, false, None).unwrap().to_vec::<f32>().unwrap(), vec![1.0]);
    let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
    assert_eq!(i.sum().unwrap().dtype(), DType::I64);
    assert!(i.mean().is_err());
    // nansum / nanmean skip NaN
    let n = t64(&[1.0, f64::NAN, 3.0], &[3]);
    close(&n.nansum_dims(None, false, None).unwrap().to_vec::<f64>().unwrap(), &[4.0], 1e-12);
    close(&n.nanmean_dims(None, false, None).unwrap().to_vec::<f64>().unwrap(), &[2.0], 1e-12);
    // the f32 pairwise sum of many equal values stays accurate
    let big = Tensor::from_vec(vec![0.1f32; 1 << 20], &[1 << 20]).unwrap();
    let v = big.sum().unwrap().to_vec::<f64>().unwrap()[0];
    assert!((v - 104857.6).abs() < 0.05, "{v}");
}

#[test]
fn product_gradients_with_and_without_zeros() {
    gradcheck(&X, &[3, 4], |x| x.prod_dim(Some(1), false, None));
    gradcheck(&[2.0, 0.0, 3.0, 0.0, 5.0, 1.5], &[2, 3], |x| x.prod_dim(Some(1), false, None));
    gradcheck(&[2.0, 0.0, 3.0, 4.0], &[4], |x| x.prod_dim(None, false, None));
}

#[test]
fn var_std_against_naive() {
    let x = t64(&X, &[3, 4]);
    let v = x.var_dims(Some(&[1]), 1.0, false).unwrap().to_vec::<f64>().unwrap();
    for (r, got) in v.iter().enumerate() {
        let row = &X[r * 4..r * 4 + 4];
        let m = row.iter().sum::<f64>() / 4.0;
        let want = row.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 3.0;
        assert!((got - want).abs() < 1e-12);
    }
    let (s, m) = x.std_mean(Some(&[0, 1]), 0.0, true).unwrap();
    assert_eq!(s.shape(), &[1, 1]);
    let mean = X.iter().sum::<f64>() / 12.0;
    close(&m.to_vec::<f64>().unwrap(), &[mean], 1e-12);
    gradcheck(&X, &[3, 4], |x| x.var_dims(Some(&[0]), 1.0, false));
    gradcheck(&X, &[3, 4], |x| x.std_dims(Some(&[1]), 0.0, true));
    assert!(Tensor::from_vec(vec![1i64, 2], &[2]).unwrap().var_dims(None, 1.0, false).is_err());
}

#[test]
fn extremes_values_indices_and_gradients() {
    let x = t64(&[1.0, 3.0, 3.0, -1.0, 2.0, f64::NAN], &[2, 3]);
    let (v, i) = x.max_dim(1, false).unwrap();
    let v = v.to_vec::<f64>().unwrap();
    assert_eq!(v[0], 3.0);
    assert!(v[1].is_nan(), "NaN propagates");
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2], "first of ties, NaN index");
    assert_eq!(x.argmin(None, false).unwrap().to_vec::<i64>().unwrap(), vec![5]);
    // amax splits the gradient over ties; max(dim) sends it to the chosen index
    let y = t64(&[1.0, 3.0, 3.0], &[3]).with_requires_grad().unwrap();
    y.amax(&[], false).unwrap().backward().unwrap();
    assert_eq!(y.grad().unwrap().to_vec::<f64>().unwrap(), vec![0.0, 0.5, 0.5]);
    let y = t64(&[1.0, 3.0, 3.0], &[3]).with_requires_grad().unwrap();
    y.max_dim(0, false).unwrap().0.backward().unwrap();
    assert_eq!(y.grad().unwrap().to_vec::<f64>().unwrap(), vec![0.0, 1.0, 0.0]);
    gradcheck(&X, &[3, 4], |x| Ok(x.min_dim(0, true)?.0));
    // empty inputs have no identity
    let e = Tensor::zeros(&[0, 2]).unwrap();
    assert!(e.max().is_err());
    assert!(e.amax(&[0], false).is_err());
    assert_eq!(e.amax(&[1], false).unwrap().shape(), &[0]);
    let (lo, hi) = x.aminmax(Some(0), false).unwrap();
    let (lo, hi) = (lo.to_vec::<f64>().unwrap(), hi.to_vec::<f64>().unwrap());
    assert_eq!(lo[..2], [-1.0, 2.0]);
    assert_eq!(hi[..2], [1.0, 3.0]);
    assert!(lo[2].is_nan() && hi[2].is_nan());
    // elementwise max with broadcasting
    let a = t64(&[1.0, 5.0], &[2, 1]);
    let b = t64(&[2.0, 1.0, 7.0], &[3]);
    let m = magpie_core::ops::reduce::maximum_of(&a, &b).unwrap();
    assert_eq!(m.shape(), &[2, 3]);
    assert_eq!(m.to_vec::<f64>().unwrap(), vec![2.0, 1.0, 7.0, 5.0, 5.0, 7.0]);
}

#[test]
fn logical_reductions() {
    let x = Tensor::from_vec(vec![1.0f32, 0.0, f32::NAN, 2.0], &[2, 2]).unwrap();
    assert_eq!(x.all_dims(Some(&[1]), false).unwrap().to_vec::<bool>().unwrap(), vec![false, true]);
    assert_eq!(x.any_dims(None, false).unwrap().to_vec::<bool>().unwrap(), vec![true]);
    assert_eq!(x.count_nonzero(Some(&[0])).unwrap().to_vec::<i64>().unwrap(), vec![2, 1]);
    let u = Tensor::from_vec(vec![1u8, 0], &[2]).unwrap();
    assert_eq!(u.all_dims(None, false).unwrap().dtype(), DType::U8);
}

#[test]
fn norms_and_logsumexp() {
    let x = t64(&X, &[3, 4]);
    let l = x.logsumexp(&[1], false).unwrap().to_vec::<f64>().unwrap();
    for r in 0..3 {
        let want = X[r * 4..r * 4 + 4].iter().map(|v| v.exp()).sum::<f64>().ln();
        assert!((l[r] - want).abs() < 1e-12);
    }
    let big = t64(&[1000.0, 1000.0], &[2]);
    close(&big.logsumexp(&[0], false).unwrap().to_vec::<f64>().unwrap(), &[1000.0 + 2f64.ln()], 1e-12);
    let n2 = x.norm_p(2.0, None, false, None).unwrap().to_vec::<f64>().unwrap()[0];
    assert!((n2 - X.iter().map(|v| v * v).sum::<f64>().sqrt()).abs() < 1e-12);
    let ninf = x.norm_p(f64::INFINITY, Some(&[1]), false, None).unwrap().to_vec::<f64>().unwrap();
    close(&ninf, &[3.5, 2.5, 2.2], 1e-12);
    for p in [1.0, 1.5, 2.0, 3.0, 0.5, f64::INFINITY] {
        gradcheck(&X, &[3, 4], move |x| x.norm_p(p, Some(&[1]), false, None));
    }
    gradcheck(&X, &[3, 4], |x| x.logsumexp(&[0], true));
    let m = t64(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    close(&m.trace().unwrap().to_vec::<f64>().unwrap(), &[5.0], 0.0);
    assert!(t64(&[1.0; 8], &[2, 2, 2]).trace().is_err());
}

#[test]
fn sort_topk_and_order_statistics() {
    let x = t64(&[3.0, f64::NAN, 1.0, 3.0, -2.0], &[5]);
    let (v, i) = x.sort(0, false).unwrap();
    let v = v.to_vec::<f64>().unwrap();
    assert_eq!(v[..4], [-2.0, 1.0, 3.0, 3.0]);
    assert!(v[4].is_nan(), "NaN sorts last");
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![4, 2, 0, 3, 1], "stable");
    let (_, i) = x.sort(0, true).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 0, 3, 2, 4]);
    let y = t64(&X, &[3, 4]);
    let (tv, ti) = y.topk(2, 1, true).unwrap();
    assert_eq!(tv.to_vec::<f64>().unwrap(), vec![3.5, 2.0, 1.5, 0.25, 2.2, 1.75]);
    assert_eq!(ti.to_vec::<i64>().unwrap(), vec![3, 2, 1, 2, 3, 0]);
    gradcheck(&X, &[3, 4], |x| Ok(x.sort(1, true)?.0));
    gradcheck(&X, &[3, 4], |x| Ok(x.topk(3, 0, false)?.0));
    let (kv, ki) = y.kthvalue(2, 1, false).unwrap();
    assert_eq!(kv.to_vec::<f64>().unwrap(), vec![0.5, -0.75, 0.1]);
    assert_eq!(ki.to_vec::<i64>().unwrap(), vec![0, 0, 1]);
    assert!(y.kthvalue(5, 1, false).is_err());
    // lower median; mode is the smallest of the most frequent, at its last index
    let m = t64(&[4.0, 1.0, 3.0, 2.0], &[4]);
    assert_eq!(m.median().unwrap().to_vec::<f64>().unwrap(), vec![2.0]);
    let md = Tensor::from_vec(vec![2i64, 1, 2, 1, 3], &[5]).unwrap().mode(0, false).unwrap();
    assert_eq!(md.0.to_vec::<i64>().unwrap(), vec![1]);
    assert_eq!(md.1.to_vec::<i64>().unwrap(), vec![3]);
    // quantile interpolation modes on [1, 2, 3, 4] at q = 0.4 (rank 1.2)
    use magpie_core::ops::reduce::order::Interpolation::*;
    for (mode, want) in [(Linear, 2.2), (Lower, 2.0), (Higher, 3.0), (Midpoint, 2.5), (Nearest, 2.0)] {
        let q = m.quantile(&[0.4], true, None, false, mode).unwrap().to_vec::<f64>().unwrap();
        close(&q, &[want], 1e-12);
    }
    let nq = t64(&[1.0, f64::NAN, 3.0], &[3]).nanquantile(&[0.5], true, None, false, Linear).unwrap();
    close(&nq.to_vec::<f64>().unwrap(), &[2.0], 1e-12);
    let qq = y.quantile(&[0.3, 0.9], false, Some(1), true, Linear).unwrap();
    assert_eq!(qq.shape(), &[2, 3, 1]);
    gradcheck(&X, &[3, 4], |x| x.quantile(&[0.3, 0.9], false, Some(1), true, Linear));
}

#[test]
fn scans() {
    let x = t64(&X, &[3, 4]);
    let c = x.cumsum(1, None).unwrap().to_vec::<f64>().unwrap();
    close(&c[..4], &[0.5, -0.75, 1.25, 4.75], 1e-12);
    gradcheck(&X, &[3, 4], |x| x.cumsum(0, None));
    gradcheck(&X, &[3, 4], |x| x.cumprod(1, None));
    gradcheck(&[2.0, 0.0, 3.0, 0.5, 1.5, 0.0, 0.0, 2.0], &[2, 4], |x| x.cumprod(1, None));
    gradcheck(&X, &[3, 4], |x| x.logcumsumexp(1));
    let l = x.logcumsumexp(1).unwrap().to_vec::<f64>().unwrap();
    close(&l[..2], &[0.5, (0.5f64.exp() + (-1.25f64).exp()).ln()], 1e-12);
    let (v, i) = t64(&[1.0, 3.0, 2.0, 3.0], &[4]).cummax(0).unwrap();
    assert_eq!(v.to_vec::<f64>().unwrap(), vec![1.0, 3.0, 3.0, 3.0]);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 1, 3]);
    gradcheck(&X, &[3, 4], |x| Ok(x.cummin(0)?.0));
    let ints = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap().cumsum(0, None).unwrap();
    assert_eq!(ints.dtype(), DType::I64);
}

#[test]
fn softmax_family() {
    let x = t64(&X, &[3, 4]);
    let s = x.softmax(1, None).unwrap().to_vec::<f64>().unwrap();
    for r in 0..3 {
        let e: Vec<f64> = X[r * 4..r * 4 + 4].iter().map(|v| v.exp()).collect();
        let z: f64 = e.iter().sum();
        close(&s[r * 4..r * 4 + 4], &e.iter().map(|v| v / z).collect::<Vec<_>>(), 1e-12);
    }
    let ls = x.log_softmax(0, None).unwrap().exp().unwrap().sum_dims(Some(&[0]), false, None).unwrap();
    close(&ls.to_vec::<f64>().unwrap(), &[1.0; 4], 1e-12);
    gradcheck(&X, &[3, 4], |x| x.softmax(1, None));
    gradcheck(&X, &[3, 4], |x| x.log_softmax(0, None));
    gradcheck(&X, &[3, 4], |x| x.softmin(1, None));
    // an all -inf row is NaN for softmax and 0 for _safe_softmax; big values stay finite
    let inf = t64(&[f64::NEG_INFINITY, f64::NEG_INFINITY, 1e4, 1e4], &[2, 2]);
    let a = inf.softmax(1, None).unwrap().to_vec::<f64>().unwrap();
    assert!(a[0].is_nan());
    assert_eq!(a[2..], [0.5, 0.5]);
    assert_eq!(inf.safe_softmax(1, None).unwrap().to_vec::<f64>().unwrap()[..2], [0.0, 0.0]);
    // integer inputs need a dtype
    let i = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert!(i.softmax(0, None).is_err());
    assert_eq!(i.softmax(0, Some(DType::F64)).unwrap().dtype(), DType::F64);
    // a big contiguous f32 batch of rows (the parallel path) sums to one per row
    let n: usize = 512 * 1000;
    let v: Vec<f32> = (0..n).map(|k| ((k * 7919) % 1000) as f32 / 100.0).collect();
    let big = Tensor::from_vec(v, &[512, 1000]).unwrap().softmax(-1, None).unwrap();
    let rs = big.sum_dims(Some(&[1]), false, None).unwrap().to_vec::<f32>().unwrap();
    assert!(rs.iter().all(|s| (s - 1.0).abs() < 1e-4));
}

#[test]
fn unique_search_histogram() {
    let x = Tensor::from_vec(vec![3i64, 1, 3, 2, 1, 1], &[6]).unwrap();
    let u = x.unique(None).unwrap();
    assert_eq!(u.values.to_vec::<i64>().unwrap(), vec![1, 2, 3]);
    assert_eq!(u.inverse.to_vec::<i64>().unwrap(), vec![2, 0, 2, 1, 0, 0]);
    assert_eq!(u.counts.to_vec::<i64>().unwrap(), vec![3, 1, 2]);
    let c = x.unique_consecutive(None).unwrap();
    assert_eq!(c.values.to_vec::<i64>().unwrap(), vec![3, 1, 3, 2, 1]);
    assert_eq!(c.counts.to_vec::<i64>().unwrap(), vec![1, 1, 1, 1, 2]);
    let rows = Tensor::from_vec(vec![1i64, 2, 0, 1, 1, 2], &[3, 2]).unwrap().unique(Some(0)).unwrap();
    assert_eq!(rows.values.to_vec::<i64>().unwrap(), vec![0, 1, 1, 2]);
    assert_eq!(rows.inverse.to_vec::<i64>().unwrap(), vec![1, 0, 1]);
    let seq = t64(&[1.0, 2.0, 2.0, 5.0], &[4]);
    let q = t64(&[0.0, 2.0, 3.0, 9.0], &[4]);
    assert_eq!(seq.searchsorted(&q, false, false, None).unwrap().to_vec::<i64>().unwrap(), vec![0, 1, 3, 4]);
    let r = seq.searchsorted(&q, true, true, None).unwrap();
    assert_eq!(r.dtype(), DType::I32);
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 3, 3, 4]);
    let sorter = Tensor::from_vec(vec![1i64, 0], &[2]).unwrap();
    let unsorted = t64(&[5.0, 1.0], &[2]);
    assert_eq!(unsorted.searchsorted(&q, false, false, Some(&sorter)).unwrap().to_vec::<i64>().unwrap(), vec![0, 1, 1, 2]);
    assert!(q.bucketize(&t64(&[1.0; 4], &[2, 2]), false, false).is_err());
    let h = t64(&[0.0, 1.0, 1.5, 2.0, 5.0, -1.0], &[6]).histc(4, 0.0, 2.0).unwrap();
    assert_eq!(h.to_vec::<f64>().unwrap(), vec![1.0, 0.0, 1.0, 2.0]);
}

/// Dims listed in descending or mixed order (`x.sum((-1, -3))`) reduce and differentiate as the
/// sorted list does, for every reduction whose backward re-inserts the reduced dims.
#[test]
fn reductions_over_unsorted_dims() {
    let x: Vec<f64> = (0..24).map(|i| (i as f64 * 0.37).sin() + 1.5).collect();
    let shape = [2, 3, 4];
    for dims in [[-1i64, -2], [2, 0]] {
        let mut sorted = dims.to_vec();
        sorted.sort_by_key(|&d| (d + 3) % 3);
        let a = t64(&x, &shape).sum_dims(Some(&dims), false, None).unwrap().to_vec::<f64>().unwrap();
        let b = t64(&x, &shape).sum_dims(Some(&sorted), false, None).unwrap().to_vec::<f64>().unwrap();
        close(&a, &b, 1e-12);
        gradcheck(&x, &shape, |t| t.sum_dims(Some(&dims), false, None));
        gradcheck(&x, &shape, |t| t.mean_dims(Some(&dims), false, None));
        gradcheck(&x, &shape, |t| t.var_dims(Some(&dims), 1.0, false));
        gradcheck(&x, &shape, |t| t.amax(&dims, false));
        gradcheck(&x, &shape, |t| t.logsumexp(&dims, false));
    }
}

//! Tests of the matmul family and torch.linalg: GEMM against a naive loop (odd sizes, strided
//! and transposed operands, every dtype path), decompositions through reconstruction
//! identities, and gradients against finite differences.

use magpie_core::ops::linalg as la;
use magpie_core::{DType, Tensor};

/// Deterministic pseudo-random values in [-1, 1).
fn rand_vec(n: usize, seed: u64) -> Vec<f64> {
    magpie_core::ops::random::Generator::new(seed).uniform(n).into_iter().map(|u| 2.0 * u - 1.0).collect()
}

fn randt(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(rand_vec(shape.iter().product(), seed), shape).unwrap()
}

fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
    }
}

#[test]
fn gemm_matches_naive_at_odd_sizes_all_float_types() {
    for &(m, k, n) in &[(1, 1, 1), (3, 5, 7), (17, 33, 9), (65, 70, 129), (130, 3, 2)] {
        let a = randt(&[m, k], 1);
        let b = randt(&[k, n], 2);
        let want = naive(&a.to_vec::<f64>().unwrap(), &b.to_vec::<f64>().unwrap(), m, k, n);
        for (dt, tol) in [(DType::F64, 1e-12), (DType::F32, 1e-5), (DType::F16, 3e-2), (DType::BF16, 5e-2)] {
            let c = a.to_dtype(dt).unwrap().matmul(&b.to_dtype(dt).unwrap()).unwrap();
            assert_eq!(c.dtype(), dt);
            assert_eq!(c.shape(), &[m, n]);
            close(&c.to_vec::<f64>().unwrap(), &want, tol * (k as f64).sqrt());
        }
    }
}

#[test]
fn gemm_reads_transposed_and_strided_views() {
    let (m, k, n) = (13, 21, 11);
    // a is the transpose of a contiguous [k, m]; b is every other column of [k, 2n]
    let at = randt(&[k, m], 3);
    let a = at.t().unwrap();
    let wide = randt(&[k, 2 * n], 4);
    let b = wide.slice(1, Some(0), None, 2).unwrap();
    assert!(!a.is_contiguous() && !b.is_contiguous());
    let want = naive(&a.to_vec::<f64>().unwrap(), &b.to_vec::<f64>().unwrap(), m, k, n);
    close(&a.matmul(&b).unwrap().to_vec::<f64>().unwrap(), &want, 1e-12);
}

#[test]
fn batched_broadcast_matmul_and_int_path() {
    let a = randt(&[2, 1, 4, 3], 5);
    let b = randt(&[3, 3, 5], 6);
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.shape(), &[2, 3, 4, 5]);
    let av = a.to_vec::<f64>().unwrap();
    let bv = b.to_vec::<f64>().unwrap();
    let cv = c.to_vec::<f64>().unwrap();
    for i in 0..2 {
        for j in 0..3 {
            let want = naive(&av[i * 12..(i + 1) * 12], &bv[j * 15..(j + 1) * 15], 4, 3, 5);
            close(&cv[(i * 3 + j) * 20..(i * 3 + j + 1) * 20], &want, 1e-12);
        }
    }
    let ai = Tensor::from_vec((0..12i64).map(|x| x - 5).collect(), &[3, 4]).unwrap();
    let bi = Tensor::from_vec((0..8i64).map(|x| 2 * x - 7).collect(), &[4, 2]).unwrap();
    let ci = ai.matmul(&bi).unwrap();
    assert_eq!(ci.dtype(), DType::I64);
    let want = naive(&ai.to_vec::<f64>().unwrap(), &bi.to_vec::<f64>().unwrap(), 3, 4, 2);
    assert_eq!(ci.to_vec::<f64>().unwrap(), want);
    // vector cases and shape errors
    let v = randt(&[3], 7);
    assert_eq!(a.matmul(&v).unwrap().shape(), &[2, 1, 4]);
    assert!(randt(&[2, 3], 1).matmul(&randt(&[2, 3], 1)).is_err());
    assert!(randt(&[2, 3], 1).to_dtype(DType::F32).unwrap().matmul(&randt(&[3, 2], 1)).is_err());
}

/// Finite-difference check of d(sum(w * f(x)))/dx against autograd, in f64.
fn gradcheck(f: impl Fn(&Tensor) -> Tensor, x: &Tensor, tol: f64) {
    let y = f(&x.detach().with_requires_grad().unwrap());
    let w = randt(y.shape(), 99);
    let xg = x.detach().with_requires_grad().unwrap();
    let out = f(&xg).mul(&w).unwrap().sum().unwrap();
    out.backward().unwrap();
    let g = xg.grad().unwrap().to_vec::<f64>().unwrap();
    let base = x.to_vec::<f64>().unwrap();
    let eps = 1e-6;
    for i in 0..base.len() {
        let eval = |d: f64| {
            let mut v = base.clone();
            v[i] += d;
            let t = Tensor::from_vec(v, x.shape()).unwrap();
            f(&t).mul(&w).unwrap().sum().unwrap().to_vec::<f64>().unwrap()[0]
        };
        let num = (eval(eps) - eval(-eps)) / (2.0 * eps);
        assert!((num - g[i]).abs() <= tol * (1.0 + num.abs()), "grad element {i}: numeric {num} vs autograd {}", g[i]);
    }
}

fn spd(n: usize, seed: u64) -> Tensor {
    let a = randt(&[n, n], seed);
    a.matmul(&a.t().unwrap()).unwrap().add(&Tensor::eye_on(n, n, DType::F64, Default::default()).unwrap()).unwrap()
}

#[test]
fn matmul_family_gradients() {
    let b = randt(&[4, 3], 11);
    gradcheck(|x| x.matmul(&b).unwrap(), &randt(&[2, 5, 4], 10), 1e-6);
    gradcheck(|x| magpie_core::ops::matmul::einsum("bij,jk->bik", &[x.clone(), b.clone()]).unwrap(), &randt(&[2, 5, 4], 12), 1e-6);
    let v = randt(&[3], 13);
    gradcheck(|x| x.cross(&v.broadcast_to(&[4, 3]).unwrap(), Some(-1)).unwrap(), &randt(&[4, 3], 14), 1e-6);
}

#[test]
fn solve_inv_det_identities_and_gradients() {
    let a = randt(&[4, 4], 20).add(&Tensor::eye_on(4, 4, DType::F64, Default::default()).unwrap().mul_scalar(3.0).unwrap()).unwrap();
    let b = randt(&[4, 2], 21);
    let x = la::solve(&a, &b, true).unwrap();
    close(&a.matmul(&x).unwrap().to_vec::<f64>().unwrap(), &b.to_vec::<f64>().unwrap(), 1e-10);
    let i = la::inv(&a).unwrap();
    let id = Tensor::eye_on(4, 4, DType::F64, Default::default()).unwrap();
    close(&a.matmul(&i).unwrap().to_vec::<f64>().unwrap(), &id.to_vec::<f64>().unwrap(), 1e-10);
    // det of a triangular product is the product of diagonals
    let (s, l) = la::slogdet(&a).unwrap();
    let d = la::det(&a).unwrap().to_vec::<f64>().unwrap()[0];
    close(&[s.to_vec::<f64>().unwrap()[0] * l.to_vec::<f64>().unwrap()[0].exp()], &[d], 1e-10);
    gradcheck(|x| la::det(x).unwrap(), &a, 1e-5);
    gradcheck(|x| la::inv(x).unwrap(), &a, 1e-5);
    gradcheck(|x| la::solve(x, &b, true).unwrap(), &a, 1e-5);
    gradcheck(|x| la::solve_triangular(x, &b, true, true, false).unwrap(), &a, 1e-5);
    gradcheck(|x| la::solve_triangular(x, &b.t().unwrap(), false, false, true).unwrap(), &a, 1e-5);
}

#[test]
fn decompositions_reconstruct() {
    let a = randt(&[5, 3], 30);
    let (q, r) = la::qr(&a, "reduced").unwrap();
    close(&q.matmul(&r).unwrap().to_vec::<f64>().unwrap(), &a.to_vec::<f64>().unwrap(), 1e-10);
    let (u, s, vh) = la::svd(&a, false).unwrap();
    let us = u.mul(&s.unsqueeze(0).unwrap()).unwrap();
    close(&us.matmul(&vh).unwrap().to_vec::<f64>().unwrap(), &a.to_vec::<f64>().unwrap(), 1e-10);
    let p = spd(4, 31);
    let l = la::cholesky(&p, false).unwrap();
    close(&l.matmul(&l.t().unwrap()).unwrap().to_vec::<f64>().unwrap(), &p.to_vec::<f64>().unwrap(), 1e-10);
    let (w, v) = la::eigh(&p, "L").unwrap();
    let vw = v.mul(&w.unsqueeze(0).unwrap()).unwrap();
    close(&vw.matmul(&v.t().unwrap()).unwrap().to_vec::<f64>().unwrap(), &p.to_vec::<f64>().unwrap(), 1e-10);
    for shape in [[3usize, 5], [5, 3], [4, 4]] {
        let m = randt(&shape, 32);
        let (pp, ll, uu, _, _) = la::lu_full(&m).unwrap();
        close(&pp.matmul(&ll).unwrap().matmul(&uu).unwrap().to_vec::<f64>().unwrap(), &m.to_vec::<f64>().unwrap(), 1e-10);
    }
}

#[test]
fn decomposition_gradients() {
    let p = spd(4, 40);
    gradcheck(|x| la::cholesky(&x.add(&x.t().unwrap()).unwrap().mul_scalar(0.5).unwrap(), false).unwrap(), &p, 1e-5);
    gradcheck(|x| la::qr(x, "reduced").unwrap().0, &randt(&[5, 3], 41), 1e-5);
    gradcheck(|x| la::qr(x, "reduced").unwrap().1, &randt(&[5, 3], 42), 1e-5);
    gradcheck(|x| la::svdvals(x).unwrap(), &randt(&[4, 3], 43), 1e-5);
    gradcheck(|x| la::pinv(x, None, None, false).unwrap(), &randt(&[4, 3], 44), 1e-5);
    gradcheck(|x| la::eigh(&x.add(&x.t().unwrap()).unwrap(), "L").unwrap().0, &randt(&[4, 4], 45), 1e-5);
    for shape in [[3usize, 5], [5, 3], [4, 4]] {
        gradcheck(|x| la::lu_factor_ex(x).unwrap().0, &randt(&shape, 46), 1e-5);
    }
}

/// GEMM throughput at the benchmark's sizes (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn gemm_throughput() {
    for &(m, k, n) in &[(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 768, 3072)] {
        let a = randt(&[m, k], 1).to_dtype(DType::F32).unwrap();
        let b = randt(&[k, n], 2).to_dtype(DType::F32).unwrap();
        let _ = a.matmul(&b).unwrap();
        let reps = (2e10 / (2.0 * (m * n * k) as f64)).clamp(1.0, 50.0) as usize;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            let _ = a.matmul(&b).unwrap();
        }
        let dt = t.elapsed().as_secs_f64() / reps as f64;
        println!("{m}x{k}@{k}x{n}: {:.3} ms, {:.1} GFLOP/s", dt * 1e3, 2.0 * (m * n * k) as f64 / dt / 1e9);
    }
}

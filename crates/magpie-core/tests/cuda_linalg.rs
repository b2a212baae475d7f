//! `torch.linalg` on CUDA (cuSOLVER / cuBLAS) against the CPU path: every op through the
//! registry on random well-conditioned inputs (batched, sizes 1 to 65, float32 and float64,
//! non-contiguous views), factors that are unique only up to signs compared through their
//! magnitudes and reconstructions, gradients of the main primitives, PyTorch's errors for
//! singular and non-positive-definite inputs, and no fall back to the CPU. Skips without CUDA
//! unless `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda;
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Tensor};
use util::{gpu, rand, Rng};

/// The registry ops this file covers: none may fall back to the CPU.
const OPS: &[&str] = &[
    "linalg.solve", "linalg.solve_ex", "linalg.inv", "linalg.inv_ex", "linalg.det", "linalg.slogdet", "logdet",
    "linalg.lu", "linalg.lu_factor", "linalg.lu_factor_ex", "lu_unpack", "linalg.lu_solve", "lu_solve",
    "linalg.solve_triangular", "triangular_solve", "linalg.cholesky", "linalg.cholesky_ex", "cholesky_solve",
    "cholesky_inverse", "linalg.eigh", "linalg.eigvalsh", "linalg.qr", "linalg.svd", "svd", "linalg.svdvals",
    "linalg.pinv", "pinverse", "linalg.matrix_rank", "linalg.matrix_norm", "linalg.vector_norm", "linalg.norm",
    "linalg.cond", "linalg.lstsq", "linalg.householder_product", "linalg.matrix_exp", "matrix_exp",
    "linalg.tensorinv", "linalg.tensorsolve",
];

fn tensors(v: Value) -> Vec<Tensor> {
    match v {
        Value::List(l) => l.into_iter().map(|x| x.into_tensor().unwrap()).collect(),
        v => vec![v.into_tensor().unwrap()],
    }
}

fn on(v: &Value, dev: Device) -> Value {
    match v {
        Value::Tensor(t) => Value::Tensor(t.to_device(dev).unwrap()),
        v => v.clone(),
    }
}

/// `op` on `dev` (tensor arguments moved there), results back on the CPU.
fn run(op: &str, args: &[Value], kw: &[(&str, Value)], dev: Device) -> Result<Vec<Tensor>, String> {
    let a = args.iter().map(|v| on(v, dev)).collect();
    let k = kw.iter().map(|(n, v)| (n.to_string(), on(v, dev))).collect();
    let out = call(op, a, k).map_err(|e| e.to_string())?;
    Ok(tensors(out)
        .into_iter()
        .map(|t| {
            assert_eq!(t.device(), dev, "{op}: an output on {} instead of {dev}", t.device());
            t.to_device(Device::Cpu).unwrap()
        })
        .collect())
}

/// `op` on CUDA and on the CPU.
fn both(op: &str, args: &[Value], kw: &[(&str, Value)], dev: Device) -> (Vec<Tensor>, Vec<Tensor>) {
    let g = run(op, args, kw, dev).unwrap_or_else(|e| panic!("{op} on {dev}: {e}"));
    let c = run(op, args, kw, Device::Cpu).unwrap_or_else(|e| panic!("{op} on cpu: {e}"));
    assert_eq!(g.len(), c.len(), "{op}: number of outputs");
    (g, c)
}

fn tol(dt: DType) -> f64 {
    if dt == DType::F64 {
        1e-8
    } else {
        2e-3
    }
}

/// Equal shapes and dtypes, values within `tol` of the larger of 1 and the largest |want|.
fn close(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    let scale = w.iter().fold(1f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * scale;
        assert!(ok, "{what}: element {i}: cuda {a}, cpu {b}");
    }
}

fn same(op: &str, args: &[Value], kw: &[(&str, Value)], dev: Device, dt: DType) {
    let (g, c) = both(op, args, kw, dev);
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        close(&format!("{op} output {i} ({dt:?})"), a, b, tol(dt));
    }
}

fn abs(t: &Tensor) -> Tensor {
    t.abs().unwrap()
}

fn shape(batch: &[usize], m: usize, n: usize) -> Vec<usize> {
    batch.iter().copied().chain([m, n]).collect()
}

/// A random matrix batch, returned as the transpose of a contiguous one (a non-contiguous view).
fn general(rng: &mut Rng, batch: &[usize], m: usize, n: usize, dt: DType) -> Tensor {
    rand(rng, &shape(batch, n, m), dt, -1.0, 1.0).mt().unwrap()
}

/// `A Aᵀ / n + I`: symmetric positive-definite, well conditioned.
fn spd(rng: &mut Rng, batch: &[usize], n: usize, dt: DType) -> Tensor {
    let a = rand(rng, &shape(batch, n, n), dt, -1.0, 1.0);
    let eye = Tensor::eye_on(n, n, dt, Device::Cpu).unwrap();
    a.matmul(&a.mt().unwrap()).unwrap().div_scalar(n as f64).unwrap().add(&eye).unwrap()
}

fn t(x: &Tensor) -> Value {
    Value::Tensor(x.clone())
}

const SQUARE: &[(&[usize], usize)] = &[(&[], 1), (&[3], 2), (&[2, 2], 5), (&[2], 17), (&[], 33), (&[], 65)];
const RECT: &[(&[usize], usize, usize)] = &[(&[], 1, 4), (&[2], 5, 3), (&[2], 3, 5), (&[], 17, 6), (&[3], 6, 17), (&[], 65, 9)];

fn check_no_fallback() {
    for (op, native, fallback) in cuda::fallback_counts() {
        assert!(!OPS.contains(&op.as_str()) || fallback == 0, "{op}: {native} native, {fallback} fell back to the CPU");
    }
}

#[test]
fn solves_and_lu_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(18);
    for dt in [DType::F32, DType::F64] {
        for &(batch, n) in SQUARE {
            let a = general(&mut rng, batch, n, n, dt);
            let b = rand(&mut rng, &shape(batch, n, 3), dt, -1.0, 1.0);
            let v = rand(&mut rng, &batch.iter().copied().chain([n]).collect::<Vec<_>>(), dt, -1.0, 1.0);
            same("linalg.solve", &[t(&a), t(&b)], &[], dev, dt);
            same("linalg.solve", &[t(&a), t(&b.mt().unwrap())], &[("left", Value::Bool(false))], dev, dt);
            same("linalg.solve", &[t(&a), t(&v)], &[], dev, dt);
            same("linalg.solve_ex", &[t(&a), t(&b)], &[], dev, dt);
            same("linalg.inv", &[t(&a)], &[], dev, dt);
            same("linalg.inv_ex", &[t(&a)], &[], dev, dt);
            same("linalg.det", &[t(&a)], &[], dev, dt);
            same("linalg.slogdet", &[t(&a)], &[], dev, dt);
            same("logdet", &[t(&spd(&mut rng, batch, n, dt))], &[], dev, dt);
            // partial pivoting picks the same rows on both devices (no ties in random inputs)
            let (g, c) = both("linalg.lu_factor", &[t(&a)], &[], dev);
            close("lu_factor LU", &g[0], &c[0], tol(dt));
            assert_eq!(g[1].to_vec::<i32>().unwrap(), c[1].to_vec::<i32>().unwrap(), "lu_factor pivots ({dt:?}, n={n})");
            same("linalg.lu_factor_ex", &[t(&a)], &[], dev, dt);
            same("linalg.lu", &[t(&a)], &[], dev, dt);
            same("lu_unpack", &[t(&c[0]), t(&c[1])], &[], dev, dt);
            same("linalg.lu_solve", &[t(&c[0]), t(&c[1]), t(&b)], &[], dev, dt);
            same("linalg.lu_solve", &[t(&c[0]), t(&c[1]), t(&b)], &[("adjoint", Value::Bool(true))], dev, dt);
            same("lu_solve", &[t(&b), t(&c[0]), t(&c[1])], &[], dev, dt);
            // triangular systems with a dominant diagonal (random triangles are badly conditioned)
            let eye2 = Tensor::eye_on(n, n, dt, Device::Cpu).unwrap().mul_scalar(2.0).unwrap();
            let tri = a.div_scalar(n as f64).unwrap().add(&eye2).unwrap();
            for upper in [true, false] {
                for unit in [false, true] {
                    let kw = [("upper", Value::Bool(upper)), ("unitriangular", Value::Bool(unit))];
                    same("linalg.solve_triangular", &[t(&tri), t(&b)], &kw, dev, dt);
                }
                same("linalg.solve_triangular", &[t(&tri), t(&b.mt().unwrap())], &[("upper", Value::Bool(upper)), ("left", Value::Bool(false))], dev, dt);
                same("triangular_solve", &[t(&b), t(&tri), Value::Bool(upper)], &[], dev, dt);
            }
        }
        // rectangular LU (wide and tall)
        for &(batch, m, n) in RECT {
            let a = general(&mut rng, batch, m, n, dt);
            same("linalg.lu", &[t(&a)], &[], dev, dt);
            same("linalg.lu_factor", &[t(&a)], &[], dev, dt);
        }
    }
    check_no_fallback();
}

#[test]
fn cholesky_family_matches_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(7);
    for dt in [DType::F32, DType::F64] {
        for &(batch, n) in SQUARE {
            let a = spd(&mut rng, batch, n, dt).mt().unwrap();
            let b = rand(&mut rng, &shape(batch, n, 2), dt, -1.0, 1.0);
            same("linalg.cholesky", &[t(&a)], &[], dev, dt);
            same("linalg.cholesky", &[t(&a)], &[("upper", Value::Bool(true))], dev, dt);
            same("linalg.cholesky_ex", &[t(&a)], &[], dev, dt);
            let l = run("linalg.cholesky", &[t(&a)], &[], Device::Cpu).unwrap().remove(0);
            same("cholesky_solve", &[t(&b), t(&l)], &[], dev, dt);
            same("cholesky_inverse", &[t(&l)], &[], dev, dt);
            same("linalg.matrix_exp", &[t(&a.div_scalar(4.0).unwrap())], &[], dev, dt);
            same("matrix_exp", &[t(&a.neg().unwrap())], &[], dev, dt);
        }
    }
    check_no_fallback();
}

/// `x ≈ y` up to per-column signs: compares magnitudes.
fn close_abs(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    close(what, &abs(got), &abs(want), tol);
}

#[test]
fn orthogonal_decompositions_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(5);
    for dt in [DType::F32, DType::F64] {
        let tl = tol(dt) * 10.0;
        for &(batch, n) in SQUARE {
            // symmetric with distinct eigenvalues
            let a = general(&mut rng, batch, n, n, dt);
            let s = a.add(&a.mt().unwrap()).unwrap();
            for uplo in ["L", "U"] {
                let kw = [("UPLO", Value::Str(uplo.into()))];
                // only the named triangle is read: the other one holds different values
                let lop = if uplo == "L" { s.tril(0).unwrap().add(&a.triu(1).unwrap()).unwrap() } else { s.triu(0).unwrap().add(&a.tril(-1).unwrap()).unwrap() };
                let (g, c) = both("linalg.eigh", &[t(&lop)], &kw, dev);
                close("eigh values", &g[0], &c[0], tl);
                if n <= 17 {
                    // vectors are sensitive to close eigenvalues: magnitudes on small matrices only
                    close_abs("eigh vectors", &g[1], &c[1], tl.sqrt().min(1e-2));
                }
                let rebuilt = g[1].mul(&g[0].unsqueeze(-2).unwrap()).unwrap().matmul(&g[1].mt().unwrap()).unwrap();
                close("eigh rebuilt", &rebuilt, &s, tl);
                same("linalg.eigvalsh", &[t(&lop)], &kw, dev, dt);
            }
            same("linalg.pinv", &[t(&s)], &[("hermitian", Value::Bool(true))], dev, dt);
            same("linalg.matrix_rank", &[t(&s)], &[("hermitian", Value::Bool(true))], dev, dt);
        }
        let mut rect: Vec<(&[usize], usize, usize)> = RECT.to_vec();
        rect.extend(SQUARE.iter().map(|&(b, n)| (b, n, n)));
        for (batch, m, n) in rect {
            let a = general(&mut rng, batch, m, n, dt);
            for mode in ["reduced", "complete"] {
                let (g, c) = both("linalg.qr", &[t(&a), Value::Str(mode.into())], &[], dev);
                let k = m.min(n) as i64;
                // the first k columns of Q are unique up to sign; the completion need only be orthonormal
                close_abs(&format!("qr Q {mode}"), &g[0].narrow(-1, 0, k).unwrap(), &c[0].narrow(-1, 0, k).unwrap(), tl);
                close_abs(&format!("qr R {mode}"), &g[1], &c[1], tl);
                let q = g[0].shape()[g[0].ndim() - 1];
                let eye_q = Tensor::eye_on(q, q, dt, Device::Cpu).unwrap().broadcast_to(&shape(batch, q, q)).unwrap().contiguous().unwrap();
                close("qr QᵀQ", &g[0].mt().unwrap().matmul(&g[0]).unwrap(), &eye_q, tl);
                let rebuilt = g[0].narrow(-1, 0, k).unwrap().matmul(&g[1].narrow(-2, 0, k).unwrap()).unwrap();
                close("qr rebuilt", &rebuilt, &a, tl);
            }
            for full in [false, true] {
                let (g, c) = both("linalg.svd", &[t(&a)], &[("full_matrices", Value::Bool(full))], dev);
                close("svd S", &g[1], &c[1], tl);
                let k = m.min(n) as i64;
                let (u, vh) = (g[0].narrow(-1, 0, k).unwrap(), g[2].narrow(-2, 0, k).unwrap());
                if k <= 17 {
                    close_abs("svd U", &u, &c[0].narrow(-1, 0, k).unwrap(), tl.sqrt().min(1e-2));
                }
                close("svd rebuilt", &u.mul(&g[1].unsqueeze(-2).unwrap()).unwrap().matmul(&vh).unwrap(), &a, tl);
                let eye_m = Tensor::eye_on(g[0].shape()[g[0].ndim() - 1], g[0].shape()[g[0].ndim() - 1], dt, Device::Cpu).unwrap();
                close("svd UᵀU", &g[0].mt().unwrap().matmul(&g[0]).unwrap(), &eye_m.broadcast_to(&shape(batch, eye_m.shape()[0], eye_m.shape()[0])).unwrap().contiguous().unwrap(), tl);
            }
            same("linalg.svdvals", &[t(&a)], &[], dev, dt);
            same("linalg.pinv", &[t(&a)], &[], dev, dt);
            same("pinverse", &[t(&a)], &[], dev, dt);
            same("linalg.matrix_rank", &[t(&a)], &[], dev, dt);
            // a rank-deficient product: rank min(m, n, 2)
            let low = rand(&mut rng, &shape(batch, m, 2), dt, -1.0, 1.0).matmul(&rand(&mut rng, &shape(batch, 2, n), dt, -1.0, 1.0)).unwrap();
            same("linalg.matrix_rank", &[t(&low)], &[], dev, dt);
            same("linalg.matrix_rank", &[t(&low)], &[("atol", Value::Float(0.5)), ("rtol", Value::Float(0.0))], dev, dt);
            for ord in [Value::Str("fro".into()), Value::Str("nuc".into()), Value::Float(2.0), Value::Float(-2.0), Value::Float(1.0), Value::Float(-1.0), Value::Float(f64::INFINITY)] {
                same("linalg.matrix_norm", &[t(&a), ord], &[], dev, dt);
            }
            for ord in [2.0, 1.0, 0.0, 3.5, f64::INFINITY, f64::NEG_INFINITY] {
                same("linalg.vector_norm", &[t(&a), Value::Float(ord)], &[], dev, dt);
                same("linalg.vector_norm", &[t(&a), Value::Float(ord), Value::Int(-1)], &[], dev, dt);
            }
            same("linalg.cond", &[t(&a)], &[], dev, dt);
            if m >= n {
                let b = rand(&mut rng, &shape(batch, m, 2), dt, -1.0, 1.0);
                let (g, c) = both("linalg.lstsq", &[t(&a), t(&b)], &[], dev);
                close("lstsq solution", &g[0], &c[0], tl);
                let tau = rand(&mut rng, &batch.iter().copied().chain([n]).collect::<Vec<_>>(), dt, 0.0, 2.0);
                same("linalg.householder_product", &[t(&a), t(&tau)], &[], dev, dt);
            }
        }
        let a4 = rand(&mut rng, &[2, 3, 6], dt, -1.0, 1.0);
        same("linalg.tensorinv", &[t(&a4), Value::Int(2)], &[], dev, dt);
        let b2 = rand(&mut rng, &[2, 3], dt, -1.0, 1.0);
        same("linalg.tensorsolve", &[t(&a4.reshape(&[2, 3, 2, 3]).unwrap()), t(&b2)], &[], dev, dt);
    }
    check_no_fallback();
}

/// The gradient of `sum(op(x) * w)` with respect to `x` on `dev`.
fn grad(op: &str, x: &Tensor, kw: &[(&str, Value)], pick: usize, w: &Tensor, dev: Device) -> Tensor {
    let xd = x.to_device(dev).unwrap().detach().requires_grad_(true).unwrap();
    let k = kw.iter().map(|(n, v)| (n.to_string(), v.clone())).collect();
    let out = tensors(call(op, vec![Value::Tensor(xd.clone())], k).unwrap_or_else(|e| panic!("{op} on {dev}: {e}")));
    out[pick].mul(&w.to_device(dev).unwrap()).unwrap().sum().unwrap().backward().unwrap_or_else(|e| panic!("{op} backward on {dev}: {e}"));
    xd.grad().expect("a gradient").to_device(Device::Cpu).unwrap()
}

#[test]
fn gradients_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(3);
    for dt in [DType::F32, DType::F64] {
        for &(batch, n) in &[(&[][..], 4usize), (&[2][..], 7)] {
            let a = general(&mut rng, batch, n, n, dt);
            let s = spd(&mut rng, batch, n, dt);
            let wm = rand(&mut rng, &shape(batch, n, n), dt, -1.0, 1.0);
            let wv = rand(&mut rng, &batch.iter().copied().chain([n]).collect::<Vec<_>>(), dt, -1.0, 1.0);
            let wb = rand(&mut rng, batch, dt, -1.0, 1.0);
            let cases: Vec<(&str, &Tensor, usize, &Tensor)> = vec![
                ("linalg.inv", &a, 0, &wm),
                ("linalg.det", &a, 0, &wb),
                ("linalg.slogdet", &a, 1, &wb),
                ("linalg.cholesky", &s, 0, &wm),
                ("linalg.eigvalsh", &s, 0, &wv),
                ("linalg.svdvals", &a, 0, &wv),
                ("linalg.pinv", &a, 0, &wm),
                ("linalg.matrix_exp", &a, 0, &wm),
            ];
            for (op, x, pick, w) in cases {
                let g = grad(op, x, &[], pick, w, dev);
                let c = grad(op, x, &[], pick, w, Device::Cpu);
                close(&format!("{op} gradient ({dt:?}, n={n})"), &g, &c, tol(dt) * 10.0);
            }
        }
    }
    check_no_fallback();
}

#[test]
fn singular_and_indefinite_inputs_give_pytorch_errors() {
    let Some(dev) = gpu() else { return };
    for dt in [DType::F32, DType::F64] {
        // exactly singular: the second pivot is 0 after the row swap
        let sing = Tensor::from_vec(vec![1.0, 2.0, 2.0, 4.0], &[2, 2]).unwrap().to_dtype(dt).unwrap();
        let b = Tensor::from_vec(vec![1.0, 1.0], &[2, 1]).unwrap().to_dtype(dt).unwrap();
        let indef = Tensor::from_vec(vec![1.0, 2.0, 2.0, 1.0], &[2, 2]).unwrap().to_dtype(dt).unwrap();
        let cases: Vec<(&str, Vec<Value>, &str)> = vec![
            ("linalg.inv", vec![t(&sing)], "the inversion could not be completed because the input matrix is singular"),
            ("linalg.solve", vec![t(&sing), t(&b)], "The solver failed because the input matrix is singular"),
            ("linalg.cholesky", vec![t(&indef)], "The factorization could not be completed because the input is not positive-definite (the leading minor of order 2 is not positive-definite)"),
        ];
        for (op, args, want) in cases {
            let g = run(op, &args, &[], dev).expect_err(op);
            let c = run(op, &args, &[], Device::Cpu).expect_err(op);
            assert!(g.contains(want), "{op} on CUDA: {g}");
            assert_eq!(g, c, "{op}: CUDA and CPU errors differ");
        }
        // the `_ex` forms report instead of failing, with infos on the input's device
        let (g, c) = both("linalg.cholesky_ex", &[t(&indef)], &[], dev);
        assert_eq!(g[1].to_vec::<i32>().unwrap(), vec![2]);
        assert_eq!(c[1].to_vec::<i32>().unwrap(), vec![2]);
        let (g, _) = both("linalg.inv_ex", &[t(&sing)], &[], dev);
        assert_eq!(g[1].to_vec::<i32>().unwrap(), vec![2]);
        let (g, c) = both("linalg.det", &[t(&sing)], &[], dev);
        close("det of a singular matrix", &g[0], &c[0], 0.0);
    }
    check_no_fallback();
}

/// Milliseconds per call of `f` (after one warm-up call), the device drained before and after.
fn time_ms(dev: Device, reps: usize, f: &dyn Fn()) -> f64 {
    f();
    cuda::synchronize(Some(dev)).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..reps {
        f();
    }
    cuda::synchronize(Some(dev)).unwrap();
    t.elapsed().as_secs_f64() * 1e3 / reps as f64
}

/// Speed of the CUDA path against the CPU path with the copies the fallback made (inputs to the
/// host, outputs back), float32, as `benchmark/cuda/linalg_torch.py` times PyTorch:
/// `cargo test --release -p magpie-core --test cuda_linalg -- --ignored --nocapture bench_linalg`.
#[test]
#[ignore]
fn bench_linalg() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(1);
    let dt = DType::F32;
    let sizes: &[(&[usize], usize)] = &[(&[], 64), (&[], 256), (&[64], 16)];
    for &(batch, n) in sizes {
        let a = general(&mut rng, batch, n, n, dt).contiguous().unwrap();
        let s = spd(&mut rng, batch, n, dt);
        let b = rand(&mut rng, &shape(batch, n, 1), dt, -1.0, 1.0);
        let cases: Vec<(&str, Vec<Tensor>)> = vec![
            ("linalg.cholesky", vec![s.clone()]),
            ("linalg.solve", vec![a.clone(), b.clone()]),
            ("linalg.inv", vec![a.clone()]),
            ("linalg.det", vec![a.clone()]),
            ("linalg.lu_factor", vec![a.clone()]),
            ("linalg.qr", vec![a.clone()]),
            ("linalg.eigh", vec![s.clone()]),
            ("linalg.svd", vec![a.clone()]),
        ];
        for (op, args) in cases {
            let on_gpu: Vec<Value> = args.iter().map(|x| Value::Tensor(x.to_device(dev).unwrap())).collect();
            let native = time_ms(dev, 5, &|| {
                call(op, on_gpu.clone(), vec![]).unwrap();
            });
            let host = time_ms(dev, 2, &|| {
                let cpu: Vec<Value> = on_gpu.iter().map(|v| on(v, Device::Cpu)).collect();
                for r in tensors(call(op, cpu, vec![]).unwrap()) {
                    r.to_device(dev).unwrap();
                }
            });
            println!("bench {op:<18} batch={batch:?} n={n:<4} float32: cuda {native:9.3} ms, cpu path + copies {host:9.3} ms");
        }
    }
}

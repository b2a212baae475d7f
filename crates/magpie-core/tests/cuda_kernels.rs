//! The op-family CUDA kernels (reductions, softmax, norms, GEMM, index ops, RNG) against the CPU
//! reference on random inputs: odd and empty sizes, non-contiguous views, several dtypes.
//! Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1 (then they fail).

use magpie_core::{DType, Device, Error, Scalar, Tensor};

const GPU: Device = Device::Cuda(0);

/// True when the tests should run; panics when CUDA is required but missing.
fn cuda() -> bool {
    if magpie_core::backend::cuda::is_available() {
        return true;
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available");
    }
    eprintln!("CUDA not available: skipped");
    false
}

/// Random normal values of `shape` in `dt` on the CPU (fresh for every call).
/// Tests run on parallel threads and share the default generator: the stream test holds this
/// lock so that no other test draws between its re-seed and its draws.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rnd(shape: &[usize], dt: DType) -> Tensor {
    let _g = RNG.lock().unwrap_or_else(|e| e.into_inner());
    Tensor::randn(shape).unwrap().to_dtype(dt).unwrap()
}

/// Random integers in `[lo, hi)` on the CPU, drawn under the same lock as [`rnd`].
fn rint(lo: i64, hi: i64, shape: &[usize], dt: DType) -> Tensor {
    let _g = RNG.lock().unwrap_or_else(|e| e.into_inner());
    Tensor::randint_on(lo, hi, shape, dt, Device::Cpu).unwrap()
}

fn gpu(t: &Tensor) -> Tensor {
    t.to_device(GPU).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// `got` (any device) matches `want` elementwise within `atol + rtol * |want|` (NaN matches NaN),
/// with the same shape and dtype.
#[track_caller]
fn close(got: &Tensor, want: &Tensor, rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.device(), GPU, "{what}: device");
    let (g, w) = (vals(got), vals(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        assert!(ok, "{what}: element {i}: got {a}, want {b}");
    }
}

/// Tolerances for a reduction of `n` elements in `dt` (different summation orders).
fn tol(dt: DType) -> (f64, f64) {
    match dt {
        DType::F64 => (1e-10, 1e-10),
        DType::F32 => (1e-4, 1e-4),
        DType::BF16 => (2e-2, 2e-2),
        DType::F16 => (2e-3, 2e-3),
        _ => (0.0, 0.0),
    }
}

/// The views a test runs on: as is, transposed (first and last dim), a step-2 slice of dim 0.
fn view_names(x: &Tensor) -> Vec<&'static str> {
    let mut v = vec!["contiguous"];
    if x.ndim() >= 2 {
        v.push("transposed");
    }
    if x.ndim() >= 1 && x.shape()[0] >= 2 {
        v.push("step-2 slice");
    }
    v
}

fn view(name: &str, t: &Tensor) -> Tensor {
    match name {
        "transposed" => t.transpose(0, t.ndim() as i64 - 1).unwrap(),
        "step-2 slice" => t.slice(0, None, None, 2).unwrap(),
        _ => t.clone(),
    }
}

#[test]
fn reductions_match_cpu() {
    if !cuda() {
        return;
    }
    let shapes: Vec<Vec<usize>> = vec![vec![0], vec![1], vec![7], vec![33, 17], vec![257, 1025], vec![3, 5, 7, 9], vec![4, 0, 3], vec![2, 3000]];
    for dt in [DType::F32, DType::BF16, DType::F64, DType::F16] {
        let (rt, at) = tol(dt);
        for s in &shapes {
            let x = rnd(s, dt);
            let xg0 = gpu(&x);
            for vn in view_names(&x) {
                let (xv, xg) = (view(vn, &x), view(vn, &xg0));
                let nd = xv.ndim() as i64;
                let mut dimsets: Vec<Option<Vec<i64>>> = vec![None];
                for d in 0..nd {
                    dimsets.push(Some(vec![d]));
                }
                if nd >= 3 {
                    dimsets.push(Some(vec![0, 2]));
                }
                for ds in &dimsets {
                    for keep in [false, true] {
                        let what = format!("sum {dt:?} {s:?} {vn} dims {ds:?} keepdim {keep}");
                        let n = match ds {
                            None => xv.numel(),
                            Some(d) => d.iter().map(|&i| xv.shape()[i as usize]).product(),
                        };
                        let scale = (n as f64).sqrt().max(1.0);
                        let want = xv.sum_dims(ds.as_deref(), keep, None).unwrap();
                        let got = xg.sum_dims(ds.as_deref(), keep, None).unwrap();
                        close(&got, &want, rt, at * scale, &what);
                        if xv.numel() > 0 {
                            let nonempty = ds.as_ref().is_none_or(|d| d.iter().all(|&i| xv.shape()[i as usize] > 0));
                            if nonempty {
                                let dd = ds.clone().unwrap_or_default();
                                close(&xg.amax(&dd, keep).unwrap(), &xv.amax(&dd, keep).unwrap(), 0.0, 0.0, &format!("amax {what}"));
                                close(&xg.amin(&dd, keep).unwrap(), &xv.amin(&dd, keep).unwrap(), 0.0, 0.0, &format!("amin {what}"));
                            }
                        }
                    }
                }
                if xv.numel() > 0 && xv.shape().iter().all(|&v| v > 0) {
                    for d in 0..nd {
                        let (gv, gi) = xg.max_dim(d, false).unwrap();
                        let (cv, ci) = xv.max_dim(d, false).unwrap();
                        close(&gv, &cv, 0.0, 0.0, &format!("max_dim values {dt:?} {s:?} {vn} {d}"));
                        close(&gi, &ci, 0.0, 0.0, &format!("max_dim indices {dt:?} {s:?} {vn} {d}"));
                        close(&xg.argmin(Some(d), true).unwrap(), &xv.argmin(Some(d), true).unwrap(), 0.0, 0.0, &format!("argmin {dt:?} {s:?} {vn} {d}"));
                    }
                    close(&xg.argmax(None, false).unwrap(), &xv.argmax(None, false).unwrap(), 0.0, 0.0, &format!("argmax all {dt:?} {s:?} {vn}"));
                }
            }
        }
    }
}

#[test]
fn split_reductions_and_integers() {
    if !cuda() {
        return;
    }
    // one long row (split over blocks) and few long columns (split over blockIdx.y)
    let x = rnd(&[3_000_001], DType::F32);
    close(&gpu(&x).sum().unwrap(), &x.sum().unwrap(), 1e-4, 1e-2, "sum 3M");
    close(&gpu(&x).amax(&[], false).unwrap(), &x.amax(&[], false).unwrap(), 0.0, 0.0, "amax 3M");
    let c = rnd(&[20000, 40], DType::BF16);
    close(&gpu(&c).sum_dims(Some(&[0]), false, None).unwrap(), &c.sum_dims(Some(&[0]), false, None).unwrap(), 2e-2, 0.5, "cols bf16");
    close(&gpu(&c).mean_dims(Some(&[0]), false, None).unwrap(), &c.mean_dims(Some(&[0]), false, None).unwrap(), 2e-2, 2e-2, "mean cols");
    // contiguous-output column path (16-byte loads across outputs) and block-per-row rows
    let c = rnd(&[3000, 64], DType::F32);
    close(&gpu(&c).sum_dims(Some(&[0]), false, None).unwrap(), &c.sum_dims(Some(&[0]), false, None).unwrap(), 1e-4, 1e-3, "cols f32");
    close(&gpu(&c).amax(&[0], true).unwrap(), &c.amax(&[0], true).unwrap(), 0.0, 0.0, "cols amax");
    let r = rnd(&[4, 20000], DType::F32);
    close(&gpu(&r).sum_dims(Some(&[1]), false, None).unwrap(), &r.sum_dims(Some(&[1]), false, None).unwrap(), 1e-4, 1e-3, "long rows");
    // integers sum as int64, exactly
    let i = rint(-1000, 1000, &[513, 77], DType::I32);
    for d in [0i64, 1] {
        close(&gpu(&i).sum_dims(Some(&[d]), false, None).unwrap(), &i.sum_dims(Some(&[d]), false, None).unwrap(), 0.0, 0.0, "int sum");
        close(&gpu(&i).amax(&[d], false).unwrap(), &i.amax(&[d], false).unwrap(), 0.0, 0.0, "int amax");
        close(&gpu(&i).argmax(Some(d), false).unwrap(), &i.argmax(Some(d), false).unwrap(), 0.0, 0.0, "int argmax");
    }
    let p = Tensor::from_vec(vec![1.5f32, -2.0, 0.5, 3.0, 0.0, 2.0], &[2, 3]).unwrap();
    close(&gpu(&p).prod_dim(Some(1), false, None).unwrap(), &p.prod_dim(Some(1), false, None).unwrap(), 1e-6, 0.0, "prod");
    // NaN propagates through max and wins argmax
    let n = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0, 2.0], &[2, 2]).unwrap();
    close(&gpu(&n).amax(&[1], false).unwrap(), &n.amax(&[1], false).unwrap(), 0.0, 0.0, "nan amax");
    close(&gpu(&n).argmax(Some(1), false).unwrap(), &n.argmax(Some(1), false).unwrap(), 0.0, 0.0, "nan argmax");
    // max over an empty dim is an error, not a crash
    assert!(gpu(&Tensor::zeros(&[0, 3]).unwrap()).amax(&[0], false).is_err());
    // gradients flow through CUDA reductions
    let a = gpu(&rnd(&[5, 6], DType::F32)).requires_grad_(true).unwrap();
    a.sum_dims(Some(&[1]), false, None).unwrap().sum().unwrap().backward().unwrap();
    close(&a.grad().unwrap(), &gpu(&Tensor::ones(&[5, 6]).unwrap()), 0.0, 0.0, "sum grad");
}

#[test]
fn softmax_family_matches_cpu() {
    if !cuda() {
        return;
    }
    let shapes: Vec<(Vec<usize>, i64)> =
        vec![(vec![0, 5], -1), (vec![1, 1], -1), (vec![3, 7], -1), (vec![64, 1000], -1), (vec![8, 4096], -1), (vec![4, 20000], -1), (vec![2, 3, 5], 1), (vec![6, 9], 0)];
    for dt in [DType::F32, DType::BF16, DType::F64, DType::F16] {
        let (rt, at) = match dt {
            DType::F64 => (1e-12, 1e-12),
            DType::F32 => (1e-5, 1e-6),
            _ => (1e-2, 1e-3),
        };
        for (s, dim) in &shapes {
            let x = rnd(s, dt).mul_scalar(3.0).unwrap().to_dtype(dt).unwrap();
            let xg = gpu(&x);
            let what = format!("{dt:?} {s:?} dim {dim}");
            close(&xg.softmax(*dim, None).unwrap(), &x.softmax(*dim, None).unwrap(), rt, at, &format!("softmax {what}"));
            close(&xg.log_softmax(*dim, None).unwrap(), &x.log_softmax(*dim, None).unwrap(), rt, at.max(rt), &format!("log_softmax {what}"));
            if x.ndim() == 2 {
                let t = x.t().unwrap();
                close(&xg.t().unwrap().softmax(-1, None).unwrap(), &t.softmax(-1, None).unwrap(), rt, at, &format!("softmax of a transposed view {what}"));
            }
        }
    }
    // all -inf rows: NaN for softmax, zeros for the safe variant
    let m = Tensor::from_vec(vec![f32::NEG_INFINITY, f32::NEG_INFINITY, 1.0, 2.0], &[2, 2]).unwrap();
    close(&gpu(&m).softmax(-1, None).unwrap(), &m.softmax(-1, None).unwrap(), 1e-6, 1e-7, "softmax -inf");
    close(&gpu(&m).safe_softmax(-1, None).unwrap(), &m.safe_softmax(-1, None).unwrap(), 1e-6, 1e-7, "safe softmax -inf");
    // backward (native kernel) against the CPU
    for log in [false, true] {
        for s in [vec![5usize, 33], vec![3, 5000]] {
            let x = rnd(&s, DType::F32);
            let g = rnd(&s, DType::F32);
            let xc = x.detach().requires_grad_(true).unwrap();
            let xgp = gpu(&x).requires_grad_(true).unwrap();
            let yc = if log { xc.log_softmax(-1, None) } else { xc.softmax(-1, None) }.unwrap();
            let yg = if log { xgp.log_softmax(-1, None) } else { xgp.softmax(-1, None) }.unwrap();
            yc.backward_with(Some(&g), false, false).unwrap();
            yg.backward_with(Some(&gpu(&g)), false, false).unwrap();
            close(&xgp.grad().unwrap(), &xc.grad().unwrap(), 1e-5, 1e-6, &format!("softmax grad log={log} {s:?}"));
        }
    }
}

#[test]
fn norms_match_cpu() {
    if !cuda() {
        return;
    }
    let _ng = magpie_core::autograd::no_grad();
    let cases: Vec<(Vec<usize>, Vec<i64>)> = vec![(vec![5, 33], vec![33]), (vec![64, 4096], vec![4096]), (vec![3, 20000], vec![20000]), (vec![2, 3, 8], vec![3, 8]), (vec![0, 4], vec![4]), (vec![7, 1], vec![1])];
    for dt in [DType::F32, DType::BF16, DType::F64] {
        let (rt, at) = match dt {
            DType::F64 => (1e-10, 1e-10),
            DType::F32 => (1e-4, 1e-4),
            _ => (3e-2, 3e-2),
        };
        for (s, ns) in &cases {
            let n: usize = ns.iter().map(|&v| v as usize).product();
            let x = rnd(s, dt).mul_scalar(2.0).unwrap().add_scalar(0.5).unwrap().to_dtype(dt).unwrap();
            let nsu: Vec<usize> = ns.iter().map(|&v| v as usize).collect();
            let (w, b) = (rnd(&nsu, dt), rnd(&nsu, dt));
            let _ = n;
            for affine in [false, true] {
                let (wo, bo) = if affine { (Some(&w), Some(&b)) } else { (None, None) };
                let (wg, bg) = (gpu(&w), gpu(&b));
                let (wgo, bgo) = if affine { (Some(&wg), Some(&bg)) } else { (None, None) };
                let what = format!("{dt:?} {s:?} affine {affine}");
                let want = magpie_core::ops::nn::norm::native_layer_norm(&x, ns, wo, bo, 1e-5).unwrap();
                let got = magpie_core::ops::nn::norm::native_layer_norm(&gpu(&x), ns, wgo, bgo, 1e-5).unwrap();
                close(&got.0, &want.0, rt, at, &format!("layer_norm y {what}"));
                close(&got.1, &want.1, rt, at, &format!("layer_norm mean {what}"));
                close(&got.2, &want.2, rt, at, &format!("layer_norm rstd {what}"));
                let want = magpie_core::ops::nn::norm::rms_norm(&x, ns, wo, None).unwrap();
                let got = magpie_core::ops::nn::norm::rms_norm(&gpu(&x), ns, wgo, None).unwrap();
                close(&got, &want, rt, at, &format!("rms_norm {what}"));
            }
        }
    }
}

#[test]
fn matmul_matches_cpu() {
    if !cuda() {
        return;
    }
    let shapes = [(1usize, 1usize, 1usize), (7, 13, 5), (64, 128, 32), (129, 65, 33), (5, 0, 3), (0, 4, 2)];
    for dt in [DType::F32, DType::F64, DType::BF16, DType::F16] {
        let (rt, at) = match dt {
            DType::F64 => (1e-10, 1e-10),
            DType::F32 => (1e-4, 1e-4),
            _ => (2e-2, 5e-2),
        };
        for &(m, k, n) in &shapes {
            let (a, b) = (rnd(&[m, k], dt), rnd(&[k, n], dt));
            let what = format!("{dt:?} {m}x{k}@{k}x{n}");
            // reference in f64 on the CPU, rounded to dt
            let want = a.to_dtype(DType::F64).unwrap().matmul(&b.to_dtype(DType::F64).unwrap()).unwrap().to_dtype(dt).unwrap();
            close(&gpu(&a).matmul(&gpu(&b)).unwrap(), &want, rt, at * (k as f64).sqrt().max(1.0), &what);
            // transposed views go to cuBLAS as op flags
            let (at_, bt) = (gpu(&a.t().unwrap().contiguous().unwrap()).t().unwrap(), gpu(&b.t().unwrap().contiguous().unwrap()).t().unwrap());
            close(&at_.matmul(&bt).unwrap(), &want, rt, at * (k as f64).sqrt().max(1.0), &format!("transposed {what}"));
        }
        // batched, broadcast batch, and strides no GEMM layout takes (copied first)
        let (a, b) = (rnd(&[3, 17, 9], dt), rnd(&[3, 9, 11], dt));
        let want = a.to_dtype(DType::F64).unwrap().matmul(&b.to_dtype(DType::F64).unwrap()).unwrap().to_dtype(dt).unwrap();
        close(&gpu(&a).bmm(&gpu(&b)).unwrap(), &want, rt, at * 3.0, &format!("bmm {dt:?}"));
        let (a, b) = (rnd(&[2, 1, 5, 6], dt), rnd(&[3, 6, 4], dt));
        let want = a.to_dtype(DType::F64).unwrap().matmul(&b.to_dtype(DType::F64).unwrap()).unwrap().to_dtype(dt).unwrap();
        close(&gpu(&a).matmul(&gpu(&b)).unwrap(), &want, rt, at * 3.0, &format!("broadcast batch {dt:?}"));
        let a = rnd(&[8, 20], dt);
        let b = rnd(&[10, 7], dt);
        let a2 = a.slice(1, None, None, 2).unwrap();
        let want = a2.to_dtype(DType::F64).unwrap().matmul(&b.to_dtype(DType::F64).unwrap()).unwrap().to_dtype(dt).unwrap();
        close(&gpu(&a).slice(1, None, None, 2).unwrap().matmul(&gpu(&b)).unwrap(), &want, rt, at * 4.0, &format!("strided {dt:?}"));
    }
    // gradients of a CUDA product
    let a = gpu(&rnd(&[4, 3], DType::F32)).requires_grad_(true).unwrap();
    let b = gpu(&rnd(&[3, 5], DType::F32));
    a.matmul(&b).unwrap().sum().unwrap().backward().unwrap();
    let want = Tensor::ones(&[4, 5]).unwrap().matmul(&b.to_device(Device::Cpu).unwrap().t().unwrap()).unwrap();
    close(&a.grad().unwrap(), &want, 1e-5, 1e-5, "mm grad");
}

#[test]
fn index_ops_match_cpu() {
    if !cuda() {
        return;
    }
    for dt in [DType::F32, DType::BF16, DType::I64] {
        let x = if dt == DType::I64 { rint(-50, 50, &[9, 12], dt) } else { rnd(&[9, 12], dt) };
        let xg = gpu(&x);
        let idx = Tensor::from_vec(vec![3i64, 0, 8, 3, 5], &[5]).unwrap();
        for d in [0i64, 1] {
            close(&xg.index_select(d, &gpu(&idx)).unwrap(), &x.index_select(d, &idx).unwrap(), 0.0, 0.0, &format!("index_select {dt:?} {d}"));
        }
        close(&xg.t().unwrap().index_select(1, &gpu(&idx)).unwrap(), &x.t().unwrap().index_select(1, &idx).unwrap(), 0.0, 0.0, "index_select view");
        let gi = rint(0, 12, &[9, 4], DType::I64);
        close(&xg.gather(1, &gpu(&gi)).unwrap(), &x.gather(1, &gi).unwrap(), 0.0, 0.0, &format!("gather {dt:?}"));
        let empty = Tensor::from_vec(Vec::<i64>::new(), &[0]).unwrap();
        close(&xg.index_select(0, &gpu(&empty)).unwrap(), &x.index_select(0, &empty).unwrap(), 0.0, 0.0, "empty index");
        // out of range: an IndexError, not a crash
        let bad = Tensor::from_vec(vec![0i64, 9], &[2]).unwrap();
        assert!(matches!(xg.index_select(0, &gpu(&bad)), Err(Error::Index { .. })), "index_select out of range");
    }
    for dt in [DType::F32, DType::F64, DType::BF16, DType::I64] {
        let (rt, at) = if dt == DType::BF16 { (2e-2, 2e-2) } else { (1e-6, 1e-6) };
        let base = rnd(&[6, 7], DType::F32).to_dtype(dt).unwrap();
        let src = rnd(&[6, 7], DType::F32).to_dtype(dt).unwrap();
        let si = rint(0, 7, &[6, 5], DType::I64);
        let src5 = src.narrow(1, 0, 5).unwrap().contiguous().unwrap();
        close(&gpu(&base).scatter_add(1, &gpu(&si), &gpu(&src5)).unwrap(), &base.scatter_add(1, &si, &src5).unwrap(), rt, at, &format!("scatter_add {dt:?}"));
        let ii = Tensor::from_vec(vec![1i64, 4, 1], &[3]).unwrap();
        let s3 = rnd(&[6, 3], DType::F32).to_dtype(dt).unwrap();
        close(&gpu(&base).index_add(1, &gpu(&ii), &gpu(&s3), Scalar::Int(1)).unwrap(), &base.index_add(1, &ii, &s3, Scalar::Int(1)).unwrap(), rt, at, &format!("index_add {dt:?}"));
    }
    // embedding rows and their gradient (padding row gets none)
    let w = rnd(&[10, 16], DType::F32);
    let ids = Tensor::from_vec(vec![1i64, 2, 2, 9, 0, 1], &[2, 3]).unwrap();
    let want = magpie_core::ops::nn::embedding::embedding(&ids, &w, None, None, 2.0).unwrap();
    let wg = gpu(&w).requires_grad_(true).unwrap();
    let got = magpie_core::ops::nn::embedding::embedding(&gpu(&ids), &wg, Some(2), None, 2.0).unwrap();
    close(&got, &want, 0.0, 0.0, "embedding");
    got.sum().unwrap().backward().unwrap();
    let counts = vec![1.0f32, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let want_g = Tensor::from_vec(counts, &[10, 1]).unwrap().expand(&[10, 16]).unwrap().contiguous().unwrap();
    close(&wg.grad().unwrap(), &want_g, 0.0, 0.0, "embedding grad");
    let bad = Tensor::from_vec(vec![10i64], &[1]).unwrap();
    assert!(magpie_core::ops::nn::embedding::embedding(&gpu(&bad), &gpu(&w), None, None, 2.0).is_err());
}

#[test]
fn rng_streams_match_cpu() {
    if !cuda() {
        return;
    }
    for dt in [DType::F32, DType::F64, DType::BF16] {
        let _g = RNG.lock().unwrap_or_else(|e| e.into_inner());
        magpie_core::ops::random::manual_seed(1234);
        let c = Tensor::rand_on(&[1001], dt, Device::Cpu).unwrap();
        let cn = Tensor::randn_on(&[7, 13], dt, Device::Cpu).unwrap();
        magpie_core::ops::random::manual_seed(1234);
        let g = Tensor::rand_on(&[1001], dt, GPU).unwrap();
        let gn = Tensor::randn_on(&[7, 13], dt, GPU).unwrap();
        close(&g, &c, 0.0, 0.0, &format!("rand {dt:?}"));
        close(&gn, &cn, 1e-6, 1e-6, &format!("randn {dt:?}"));
    }
    // dropout: kept elements scaled by 1 / (1 - p), the backward uses the same mask
    let x = gpu(&rnd(&[100_000], DType::F32).abs().unwrap().add_scalar(0.1).unwrap()).requires_grad_(true).unwrap();
    let y = magpie_core::ops::nn::dropout::dropout(&x, 0.25, true, false).unwrap();
    let (xv, yv) = (vals(&x), vals(&y));
    let kept = yv.iter().filter(|&&v| v != 0.0).count() as f64 / yv.len() as f64;
    assert!((kept - 0.75).abs() < 0.01, "kept fraction {kept}");
    for (a, b) in xv.iter().zip(&yv) {
        assert!(*b == 0.0 || ((b - a / 0.75) / b).abs() < 1e-6);
    }
    y.sum().unwrap().backward().unwrap();
    let gv = vals(&x.grad().unwrap());
    for (g, b) in gv.iter().zip(&yv) {
        assert_eq!(*g == 0.0, *b == 0.0, "dropout grad mask");
    }
}

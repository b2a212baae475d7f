//! The CUDA sort family (sort, argsort, msort, topk, kthvalue, median, nanmedian, mode) and scans
//! (cumsum, cumprod, logcumsumexp, cummax, cummin) against the CPU path on random inputs with
//! ties, NaN and -0.0: line lengths 1, odd ones, 1023, 4096, 4097 and 100,000 (the shared-memory
//! and the long-row paths), many short rows, every dim, every real dtype, empty and 0-d tensors,
//! gradients, and a check that none of these ops fell back to the CPU. Skipped where CUDA is not
//! available, unless MAGPIE_REQUIRE_CUDA=1 (then they fail).

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, tol, Rng};
use magpie_core::backend::cuda;
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Tensor};

const REAL: [DType; 10] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::Bool, DType::U8, DType::I8, DType::I16, DType::I32, DType::I64];

fn host(t: &Tensor) -> Tensor {
    t.to_device(Device::Cpu).unwrap()
}

/// Values from a small set (many ties), with NaN and -0.0 among floats.
fn tied(rng: &mut Rng, shape: &[usize], dt: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| match rng.next() % 29 {
            0 if dt.is_float() => f64::NAN,
            1 => -0.0,
            _ => (rng.next() % 41) as f64 - 20.0,
        })
        .collect();
    let v: Vec<f64> = if dt == DType::Bool { v.into_iter().map(|x| (x > 0.0) as i32 as f64).collect() } else if dt == DType::U8 { v.into_iter().map(|x| x.abs()).collect() } else { v };
    Tensor::from_vec(v, shape).unwrap().to_dtype(dt).unwrap()
}

/// Exact equality of values (NaN matching NaN) and indices.
fn same(what: &str, got: &(Tensor, Tensor), want: &(Tensor, Tensor)) {
    assert_close(&format!("{what} values"), &host(&got.0), &want.0, 0.0, 0.0);
    assert_close(&format!("{what} indices"), &host(&got.1), &want.1, 0.0, 0.0);
}

#[test]
fn sort_argsort_topk_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(11);
    // (shape, dims to sort along): one element, odd sizes, both sides of the 4096 tile, a long
    // row, many short rows, a middle dim
    let cases: Vec<(Vec<usize>, Vec<i64>)> = vec![
        (vec![1], vec![0]),
        (vec![7], vec![0]),
        (vec![3, 33], vec![0, 1]),
        (vec![5, 1023], vec![1]),
        (vec![2, 4096], vec![1]),
        (vec![3, 4097], vec![1, 0]),
        (vec![100_000], vec![0]),
        (vec![5000, 3], vec![1, 0]),
        (vec![4, 9000, 2], vec![1]),
        (vec![6, 5, 7], vec![0, 1, 2]),
    ];
    for (shape, dims) in &cases {
        let x = tied(&mut rng, shape, DType::F32);
        let xg = x.to_device(dev).unwrap();
        for &d in dims {
            for desc in [false, true] {
                same(&format!("sort {shape:?} dim {d} desc {desc}"), &xg.sort(d, desc).unwrap(), &x.sort(d, desc).unwrap());
            }
            let n = shape[d as usize];
            for k in [1, n.div_ceil(2), n] {
                for largest in [true, false] {
                    same(&format!("topk {shape:?} k {k} dim {d} largest {largest}"), &xg.topk(k as i64, d, largest).unwrap(), &x.topk(k as i64, d, largest).unwrap());
                }
            }
        }
    }
    // every real dtype, short and long rows
    for dt in REAL {
        for shape in [[9usize, 301], [2, 5000]] {
            let x = tied(&mut rng, &shape, dt);
            let xg = x.to_device(dev).unwrap();
            for desc in [false, true] {
                same(&format!("sort {dt:?} {shape:?} desc {desc}"), &xg.sort(-1, desc).unwrap(), &x.sort(-1, desc).unwrap());
            }
            same(&format!("topk {dt:?} {shape:?}"), &xg.topk(5, -1, true).unwrap(), &x.topk(5, -1, true).unwrap());
            same(&format!("sort {dt:?} dim 0"), &xg.sort(0, false).unwrap(), &x.sort(0, false).unwrap());
        }
    }
    // distinct random floats (no ties) in 16-bit and 64-bit keys
    for dt in [DType::F64, DType::BF16, DType::I64] {
        let x = rand(&mut rng, &[3, 20_000], dt, -1e6, 1e6);
        let xg = x.to_device(dev).unwrap();
        same(&format!("sort random {dt:?}"), &xg.sort(-1, true).unwrap(), &x.sort(-1, true).unwrap());
    }
    // argsort and msort through the registry
    let x = tied(&mut rng, &[37, 29], DType::F32);
    let xg = x.to_device(dev).unwrap();
    for (op, args) in [("argsort", vec![Value::Int(0), Value::Bool(true)]), ("msort", vec![])] {
        let run = |t: &Tensor| {
            let mut a = vec![Value::Tensor(t.clone())];
            a.extend(args.iter().cloned());
            call(op, a, vec![]).unwrap().into_tensor().unwrap()
        };
        assert_close(op, &host(&run(&xg)), &run(&x), 0.0, 0.0);
    }
    // empty and 0-d
    for shape in [vec![0usize], vec![3, 0], vec![0, 4]] {
        let x = Tensor::zeros_on(&shape, DType::F32, Device::Cpu).unwrap();
        let xg = x.to_device(dev).unwrap();
        same(&format!("sort empty {shape:?}"), &xg.sort(-1, false).unwrap(), &x.sort(-1, false).unwrap());
        same(&format!("topk 0 {shape:?}"), &xg.topk(0, -1, true).unwrap(), &x.topk(0, -1, true).unwrap());
    }
    let x = Tensor::from_vec(vec![2.5f32], &[]).unwrap();
    same("sort 0-d", &x.to_device(dev).unwrap().sort(0, false).unwrap(), &x.sort(0, false).unwrap());
    // k out of range is PyTorch's error
    assert!(xg.topk(100, 0, true).is_err());
}

#[test]
fn kthvalue_median_mode_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(12);
    for shape in [vec![1usize], vec![7], vec![4, 33], vec![3, 1023], vec![2, 4097], vec![100_000], vec![3000, 5], vec![5, 6, 7]] {
        for dt in [DType::F32, DType::I32, DType::F16] {
            let x = tied(&mut rng, &shape, dt);
            let xg = x.to_device(dev).unwrap();
            for d in 0..shape.len() as i64 {
                let n = shape[d as usize] as i64;
                for keep in [false, true] {
                    let what = format!("{dt:?} {shape:?} dim {d} keepdim {keep}");
                    for k in [1, (n + 1) / 2, n] {
                        same(&format!("kthvalue {k} {what}"), &xg.kthvalue(k, d, keep).unwrap(), &x.kthvalue(k, d, keep).unwrap());
                    }
                    same(&format!("median {what}"), &xg.median_dim(d, keep).unwrap(), &x.median_dim(d, keep).unwrap());
                    same(&format!("nanmedian {what}"), &xg.nanmedian_dim(d, keep).unwrap(), &x.nanmedian_dim(d, keep).unwrap());
                    same(&format!("mode {what}"), &xg.mode(d, keep).unwrap(), &x.mode(d, keep).unwrap());
                }
            }
            assert_close(&format!("median all {dt:?} {shape:?}"), &host(&xg.median().unwrap()), &x.median().unwrap(), 0.0, 0.0);
            assert_close(&format!("nanmedian all {dt:?} {shape:?}"), &host(&xg.nanmedian().unwrap()), &x.nanmedian().unwrap(), 0.0, 0.0);
        }
    }
    // all-NaN rows: nanmedian gives NaN at the first position
    let x = Tensor::from_vec(vec![f32::NAN; 6], &[2, 3]).unwrap();
    same("nanmedian all NaN", &x.to_device(dev).unwrap().nanmedian_dim(1, false).unwrap(), &x.nanmedian_dim(1, false).unwrap());
    // every real dtype
    for dt in REAL {
        let x = tied(&mut rng, &[6, 555], dt);
        let xg = x.to_device(dev).unwrap();
        same(&format!("median {dt:?}"), &xg.median_dim(1, false).unwrap(), &x.median_dim(1, false).unwrap());
        same(&format!("mode {dt:?}"), &xg.mode(1, false).unwrap(), &x.mode(1, false).unwrap());
        same(&format!("kthvalue {dt:?}"), &xg.kthvalue(100, 1, false).unwrap(), &x.kthvalue(100, 1, false).unwrap());
    }
    // empty dims are PyTorch's errors on both devices
    let e = Tensor::zeros_on(&[3, 0], DType::F32, Device::Cpu).unwrap().to_device(dev).unwrap();
    assert!(e.median_dim(1, false).is_err());
    assert!(e.kthvalue(1, 1, false).is_err());
}

fn scan_ops() -> [(&'static str, fn(&Tensor, i64) -> Tensor); 3] {
    [
        ("cumsum", |t, d| t.cumsum(d, None).unwrap()),
        ("cumprod", |t, d| t.cumprod(d, None).unwrap()),
        ("logcumsumexp", |t, d| t.logcumsumexp(d).unwrap()),
    ]
}

#[test]
fn scans_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(13);
    let shapes: Vec<Vec<usize>> = vec![vec![1], vec![7], vec![3, 33], vec![5, 1023], vec![3, 4097], vec![100_000], vec![2, 300_000], vec![5000, 3], vec![4, 3000, 2], vec![6, 5, 7], vec![300, 1000]];
    for shape in &shapes {
        for dt in [DType::F32, DType::F64] {
            // near 1 so that long products stay finite
            let x = rand(&mut rng, shape, dt, 0.999, 1.001);
            let xg = x.to_device(dev).unwrap();
            for d in 0..shape.len() as i64 {
                let n = shape[d as usize] as f64;
                for (name, f) in scan_ops() {
                    let (rt, at) = tol(dt);
                    let at = at * n.sqrt().max(1.0);
                    assert_close(&format!("{name} {dt:?} {shape:?} dim {d}"), &host(&f(&xg, d)), &f(&x, d), rt * 4.0, at);
                }
                for (name, max) in [("cummax", true), ("cummin", false)] {
                    let y = tied(&mut rng, shape, dt);
                    let yg = y.to_device(dev).unwrap();
                    let (g, w) = if max { (yg.cummax(d).unwrap(), y.cummax(d).unwrap()) } else { (yg.cummin(d).unwrap(), y.cummin(d).unwrap()) };
                    same(&format!("{name} {dt:?} {shape:?} dim {d}"), &g, &w);
                }
            }
        }
    }
    // every real dtype: integers accumulate in int64 (exact, wrapping), the rest within tolerance
    for dt in REAL {
        let x = tied(&mut rng, &[7, 2049], dt);
        let xg = x.to_device(dev).unwrap();
        for d in [0i64, 1] {
            let (rt, at) = tol(dt);
            assert_close(&format!("cumsum {dt:?} dim {d}"), &host(&xg.cumsum(d, None).unwrap()), &x.cumsum(d, None).unwrap(), rt, at.max(rt));
            // floats near 1 (a long product of the tied values would overflow in some partial
            // products and not in others); integers wrap exactly
            let p = if dt.is_float() { rand(&mut rng, &[7, 2049], dt, 0.9, 1.1) } else { x.clone() };
            let pg = p.to_device(dev).unwrap();
            assert_close(&format!("cumprod {dt:?} dim {d}"), &host(&pg.cumprod(d, None).unwrap()), &p.cumprod(d, None).unwrap(), rt * 4.0, at.max(rt));
            same(&format!("cummax {dt:?} dim {d}"), &xg.cummax(d).unwrap(), &x.cummax(d).unwrap());
            same(&format!("cummin {dt:?} dim {d}"), &xg.cummin(d).unwrap(), &x.cummin(d).unwrap());
            if dt.is_float() {
                let y = rand(&mut rng, &[7, 2049], dt, -3.0, 3.0);
                assert_close(&format!("logcumsumexp {dt:?} dim {d}"), &host(&y.to_device(dev).unwrap().logcumsumexp(d).unwrap()), &y.logcumsumexp(d).unwrap(), rt * 4.0, at * 4.0);
            }
        }
        // an explicit output dtype: int32 wraps as the CPU does
        if dt.is_integral() {
            let w = x.cumsum(1, Some(DType::I32)).unwrap();
            assert_close(&format!("cumsum {dt:?} as int32"), &host(&xg.cumsum(1, Some(DType::I32)).unwrap()), &w, 0.0, 0.0);
        }
    }
    // NaN and infinities through logcumsumexp
    let x = Tensor::from_vec(vec![f32::NEG_INFINITY, 1.0, f32::INFINITY, 2.0, f32::NAN, 3.0, f32::NEG_INFINITY, f32::NEG_INFINITY], &[2, 4]).unwrap();
    assert_close("logcumsumexp inf/nan", &host(&x.to_device(dev).unwrap().logcumsumexp(1).unwrap()), &x.logcumsumexp(1).unwrap(), 1e-6, 1e-6);
    // empty and 0-d
    for shape in [vec![0usize], vec![3, 0], vec![0, 4]] {
        let x = Tensor::zeros_on(&shape, DType::F32, Device::Cpu).unwrap();
        let xg = x.to_device(dev).unwrap();
        assert_close(&format!("cumsum empty {shape:?}"), &host(&xg.cumsum(-1, None).unwrap()), &x.cumsum(-1, None).unwrap(), 0.0, 0.0);
        same(&format!("cummax empty {shape:?}"), &xg.cummax(-1).unwrap(), &x.cummax(-1).unwrap());
    }
    let x = Tensor::from_vec(vec![-1.5f32], &[]).unwrap();
    let xg = x.to_device(dev).unwrap();
    assert_close("cumsum 0-d", &host(&xg.cumsum(0, None).unwrap()), &x.cumsum(0, None).unwrap(), 0.0, 0.0);
    same("cummin 0-d", &xg.cummin(0).unwrap(), &x.cummin(0).unwrap());
}

/// Independent leaf copies of `x` on the CPU and on `dev`.
fn leaves(x: &Tensor, dev: Device) -> (Tensor, Tensor) {
    (x.detach().with_requires_grad().unwrap(), x.detach().to_device(dev).unwrap().with_requires_grad().unwrap())
}

#[test]
fn gradients_match_cpu_without_fallback() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(14);
    type F = fn(&Tensor) -> Tensor;
    let ops: [(&str, F); 12] = [
        ("sort", |t| t.sort(1, true).unwrap().0),
        ("topk", |t| t.topk(3, 0, false).unwrap().0),
        ("kthvalue", |t| t.kthvalue(2, 1, true).unwrap().0),
        ("median", |t| t.median_dim(0, false).unwrap().0),
        ("median all", |t| t.median().unwrap()),
        ("nanmedian", |t| t.nanmedian_dim(1, false).unwrap().0),
        ("mode", |t| t.mode(1, false).unwrap().0),
        ("cumsum", |t| t.cumsum(1, None).unwrap()),
        ("cumprod", |t| t.cumprod(0, None).unwrap()),
        ("logcumsumexp", |t| t.logcumsumexp(1).unwrap()),
        ("cummax", |t| t.cummax(0).unwrap().0),
        ("cummin", |t| t.cummin(1).unwrap().0),
    ];
    for shape in [[5usize, 7], [9, 4100]] {
        let x = rand(&mut rng, &shape, DType::F64, 0.5, 1.5);
        for (name, f) in ops {
            let (xc, xg) = leaves(&x, dev);
            let (yc, yg) = (f(&xc), f(&xg));
            assert!(yg.device().is_cuda(), "{name}");
            let gy = rand(&mut rng, yc.shape(), DType::F64, -1.0, 1.0);
            yc.backward_with(Some(&gy), false, false).unwrap();
            yg.backward_with(Some(&gy.to_device(dev).unwrap()), false, false).unwrap();
            let gg = xg.grad().unwrap();
            assert_eq!(gg.device(), dev, "{name}");
            assert_close(&format!("grad {name} {shape:?}"), &host(&gg), &xc.grad().unwrap(), 1e-9, 1e-9);
        }
    }
}

#[test]
fn cumprod_gradient_with_zeros_matches_cpu() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(vec![0.5f64, 0.0, 2.0, 3.0, 1.5, -1.0, 0.0, 4.0, 0.0, 2.0, 0.25, 1.0], &[3, 4]).unwrap();
    let gy = Tensor::from_vec((0..12).map(|i| i as f64 * 0.3 - 1.0).collect::<Vec<_>>(), &[3, 4]).unwrap();
    for d in [0i64, 1] {
        let (xc, xg) = leaves(&x, dev);
        xc.cumprod(d, None).unwrap().backward_with(Some(&gy), false, false).unwrap();
        xg.cumprod(d, None).unwrap().backward_with(Some(&gy.to_device(dev).unwrap()), false, false).unwrap();
        let gg = xg.grad().unwrap();
        assert_eq!(gg.device(), dev);
        assert_close(&format!("cumprod grad with zeros dim {d}"), &host(&gg), &xc.grad().unwrap(), 1e-12, 1e-12);
    }
}

/// The registry names of these ops, each of which must run natively on CUDA tensors.
const NATIVE: [&str; 13] = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"];

#[test]
fn registry_calls_do_not_fall_back() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(15);
    let x = tied(&mut rng, &[6, 50], DType::F32).to_device(dev).unwrap();
    cuda::reset_fallback_counts();
    let i = Value::Int;
    for op in NATIVE {
        let extra: Vec<Value> = match op {
            "topk" | "kthvalue" => vec![i(3), i(1)],
            "median" | "nanmedian" | "mode" => vec![i(1)],
            "msort" => vec![],
            _ => vec![i(1)],
        };
        let mut a = vec![Value::Tensor(x.clone())];
        a.extend(extra);
        call(op, a, vec![]).unwrap_or_else(|e| panic!("{op}: {e}"));
    }
    call("median", vec![Value::Tensor(x.clone())], vec![]).unwrap();
    let counts = cuda::fallback_counts();
    for op in NATIVE {
        let c = counts.iter().find(|(o, _, _)| o == op);
        assert!(matches!(c, Some((_, n, 0)) if *n > 0), "{op} did not run natively: {c:?} in {counts:?}");
    }
}

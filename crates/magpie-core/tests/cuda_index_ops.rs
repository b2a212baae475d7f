//! The index, mask, search and selection ops on CUDA against the CPU path, through the registry
//! (as the conformance runner calls them): advanced indexing and every scatter with a reduction
//! (duplicate and negative indices, include_self both ways), take/put, the index_* family,
//! masked_select/masked_scatter, nonzero and friends, the logical reductions, flip/rot90,
//! isclose/allclose/equal, searchsorted/bucketize; every real dtype, odd sizes, transposed (non-contiguous) inputs,
//! empty tensors; PyTorch's IndexError for out-of-range indices; a check that none of these
//! calls fell back to the CPU; and multinomial drawn on the device, tested by its statistics.
//! Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1 (then they fail).

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, tol, Rng};
use magpie_core::backend::cuda;
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Tensor};

const REAL: [DType; 10] = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::Bool, DType::U8, DType::I8, DType::I16, DType::I32, DType::I64];

fn on(v: &Value, dev: Device) -> Value {
    match v {
        Value::Tensor(t) => Value::Tensor(t.to_device(dev).unwrap()),
        Value::List(l) => Value::List(l.iter().map(|x| on(x, dev)).collect()),
        x => x.clone(),
    }
}

/// Calls `op` on CPU and on CUDA copies of the arguments and compares the results (tensors
/// within `rtol`/`atol`, everything else exactly); errors must match too. Returns whether the
/// CPU call succeeded.
fn both(dev: Device, what: &str, op: &str, args: Vec<Value>, kw: Vec<(&str, Value)>, rtol: f64, atol: f64) -> bool {
    let kw_c: Vec<(String, Value)> = kw.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let kw_g: Vec<(String, Value)> = kw.iter().map(|(k, v)| (k.to_string(), on(v, dev))).collect();
    let want = call(op, args.clone(), kw_c);
    let got = call(op, args.iter().map(|v| on(v, dev)).collect(), kw_g);
    match (want, got) {
        (Ok(w), Ok(g)) => {
            let name = format!("{what} [{op}]");
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compare(&name, &g, &w, dev, rtol, atol)));
            if let Err(e) = r {
                let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                fail(format!("{name}: {msg}"));
            }
            true
        }
        (Err(w), Err(g)) => {
            if g.to_string() != w.to_string() {
                fail(format!("{what} [{op}]: error messages differ: cpu {w} vs cuda {g}"));
            }
            false
        }
        (w, g) => {
            fail(format!("{what} [{op}]: cpu {:?} vs cuda {:?}", w.map(|_| ()), g.map(|_| ())));
            false
        }
    }
}

/// Mismatches found so far (each test asserts its own at the end, so one run lists them all).
static FAILS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn fail(msg: String) {
    FAILS.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
}

fn assert_no_mismatch() {
    let f = std::mem::take(&mut *FAILS.lock().unwrap_or_else(|e| e.into_inner()));
    assert!(f.is_empty(), "{} mismatches:\n{}", f.len(), f.iter().take(60).cloned().collect::<Vec<_>>().join("\n"));
}

fn compare(what: &str, got: &Value, want: &Value, dev: Device, rtol: f64, atol: f64) {
    match (got, want) {
        (Value::Tensor(g), Value::Tensor(w)) => {
            assert_eq!(g.device(), dev, "{what}: result not on the GPU");
            assert_close(what, &g.to_device(Device::Cpu).unwrap(), w, rtol, atol);
        }
        (Value::List(g), Value::List(w)) => {
            assert_eq!(g.len(), w.len(), "{what}: list length");
            for (k, (a, b)) in g.iter().zip(w).enumerate() {
                compare(&format!("{what}[{k}]"), a, b, dev, rtol, atol);
            }
        }
        (Value::Bool(g), Value::Bool(w)) => assert_eq!(g, w, "{what}"),
        (g, w) => panic!("{what}: got {} want {}", g.kind(), w.kind()),
    }
}

fn ten(t: Tensor) -> Value {
    Value::Tensor(t)
}

/// Int64 indices in [lo, hi) (duplicates and negatives when lo < 0).
fn idx(rng: &mut Rng, shape: &[usize], lo: i64, hi: i64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n).map(|_| lo + (rng.next() % (hi - lo).max(1) as u64) as i64).collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// Values of `dt` in a small range (exact sums and products in every dtype), some of them zero.
fn vals(rng: &mut Rng, shape: &[usize], dt: DType) -> Tensor {
    let (lo, hi) = match dt {
        DType::Bool => (0.0, 2.0),
        DType::U8 => (0.0, 3.0),
        _ => (-2.0, 3.0),
    };
    rand(rng, shape, dt, lo, hi)
}

/// The ops this file expects to run natively on CUDA.
const NATIVE: [&str; 26] = [
    "index_select", "take", "put", "index_put", "index_fill", "index_copy", "index_add", "scatter", "scatter_reduce", "index_reduce",
    "masked_select", "masked_scatter", "nonzero", "nonzero_static", "argwhere", "count_nonzero", "any", "all", "flip", "rot90",
    "isclose", "allclose", "equal", "_unsafe_masked_index", "searchsorted", "bucketize",
];

#[test]
fn index_ops_match_cpu_without_fallback() {
    let Some(dev) = gpu() else { return };
    cuda::reset_fallback_counts();
    let mut rng = Rng::new(18);
    let (i, f, s, b) = (Value::Int, Value::Float, |x: &str| Value::Str(x.to_string()), Value::Bool);
    for dt in REAL {
        let (rt, at) = tol(dt);
        // contiguous, transposed (non-contiguous) and empty inputs
        let base = vals(&mut rng, &[7, 5, 3], dt);
        let inputs = [("contiguous", base.clone()), ("transposed", vals(&mut rng, &[3, 5, 7], dt).transpose(0, 2).unwrap()), ("empty", vals(&mut rng, &[0, 5, 3], dt))];
        for (name, x) in &inputs {
            let w = format!("{dt:?} {name}");
            let sh = x.shape().to_vec();
            let n0 = sh[0] as i64;
            for d in 0..3usize {
                let nd = sh[d] as i64;
                let ix = idx(&mut rng, &[9], -nd, nd.max(1));
                let ix = if nd == 0 { Tensor::from_vec(Vec::<i64>::new(), &[0]).unwrap() } else { ix };
                let k = ix.numel();
                let mut ssh = sh.clone();
                ssh[d] = k;
                let src = vals(&mut rng, &ssh, dt);
                let di = i(d as i64);
                // index_select takes no negative indices in PyTorch (IndexError), index_fill does
                let isel = if nd == 0 { ix.clone() } else { idx(&mut rng, &[9], 0, nd) };
                both(dev, &w, "index_select", vec![ten(x.clone()), di.clone(), ten(isel)], vec![], 0.0, 0.0);
                both(dev, &w, "index_fill", vec![ten(x.clone()), di.clone(), ten(ix.clone()), f(1.0)], vec![], 0.0, 0.0);
                if nd > 0 {
                    // index_copy / index_add / index_reduce take indices in [0, n)
                    let ip = idx(&mut rng, &[k], 0, nd);
                    both(dev, &w, "index_copy", vec![ten(x.clone()), di.clone(), ten(ip.clone()), ten(src.clone())], vec![], 0.0, 0.0);
                    both(dev, &w, "index_add", vec![ten(x.clone()), di.clone(), ten(ip.clone()), ten(src.clone())], vec![], rt, at);
                    for red in ["prod", "mean", "amax", "amin"] {
                        if dt == DType::Bool && red == "mean" {
                            continue;
                        }
                        for inc in [true, false] {
                            both(dev, &w, "index_reduce", vec![ten(x.clone()), di.clone(), ten(ip.clone()), ten(src.clone()), s(red)], vec![("include_self", b(inc))], rt, at);
                        }
                    }
                    // gather-shaped index for scatter / scatter_reduce, many duplicates
                    let mut gsh = sh.clone();
                    gsh[d] = 4;
                    let gi = idx(&mut rng, &gsh, 0, nd);
                    let gsrc = vals(&mut rng, &gsh, dt);
                    both(dev, &w, "scatter", vec![ten(x.clone()), di.clone(), ten(gi.clone()), ten(gsrc.clone())], vec![], 0.0, 0.0);
                    both(dev, &w, "scatter", vec![ten(x.clone()), di.clone(), ten(gi.clone())], vec![("value", f(2.0))], 0.0, 0.0);
                    for red in ["sum", "prod", "mean", "amax", "amin"] {
                        if dt == DType::Bool && red == "mean" {
                            continue;
                        }
                        for inc in [true, false] {
                            both(dev, &w, "scatter_reduce", vec![ten(x.clone()), di.clone(), ten(gi.clone()), ten(gsrc.clone()), s(red)], vec![("include_self", b(inc))], rt, at);
                        }
                    }
                }
            }
            let numel = x.numel() as i64;
            if numel > 0 {
                let ti = idx(&mut rng, &[4, 3], -numel, numel);
                both(dev, &w, "take", vec![ten(x.clone()), ten(ti.clone())], vec![], 0.0, 0.0);
                let pv = vals(&mut rng, &[4, 3], dt);
                for acc in [false, true] {
                    both(dev, &w, "put", vec![ten(x.clone()), ten(ti.clone()), ten(pv.clone()), b(acc)], vec![], rt, at);
                }
                // two advanced indices apart (index dims go first) and adjacent, with duplicates
                let i0 = idx(&mut rng, &[6], -n0, n0);
                let i2 = idx(&mut rng, &[6], 0, sh[2] as i64);
                let i1 = idx(&mut rng, &[2, 1], 0, sh[1] as i64);
                let none = Value::None;
                for acc in [false, true] {
                    let v = vals(&mut rng, &[6, sh[1]], dt);
                    both(dev, &w, "index_put", vec![ten(x.clone()), Value::List(vec![ten(i0.clone()), none.clone(), ten(i2.clone())]), ten(v), b(acc)], vec![], rt, at);
                    let v = vals(&mut rng, &[2, 6], dt);
                    both(dev, &w, "index_put", vec![ten(x.clone()), Value::List(vec![ten(i0.clone()), ten(i1.clone())]), ten(v), b(acc)], vec![], rt, at);
                }
                let m = vals(&mut rng, &[sh[1], sh[2]], DType::Bool);
                both(dev, &w, "_unsafe_masked_index", vec![ten(x.clone()), ten(m.clone()), Value::List(vec![ten(i0.clone())]), f(0.0)], vec![], 0.0, 0.0);
            }
            // masks (broadcast), nonzero and the logical reductions
            let m = vals(&mut rng, &[sh[1], sh[2]], DType::Bool);
            both(dev, &w, "masked_select", vec![ten(x.clone()), ten(m.clone())], vec![], 0.0, 0.0);
            let ms = vals(&mut rng, &[x.numel().max(1)], dt);
            both(dev, &w, "masked_scatter", vec![ten(x.clone()), ten(m.clone()), ten(ms)], vec![], 0.0, 0.0);
            for op in ["nonzero", "argwhere"] {
                both(dev, &w, op, vec![ten(x.clone())], vec![], 0.0, 0.0);
            }
            for size in [0, 3, 1000] {
                both(dev, &w, "nonzero_static", vec![ten(x.clone())], vec![("size", i(size)), ("fill_value", i(-7))], 0.0, 0.0);
            }
            for op in ["count_nonzero", "any", "all"] {
                both(dev, &w, op, vec![ten(x.clone())], vec![], 0.0, 0.0);
                both(dev, &w, op, vec![ten(x.clone()), i(1)], vec![], 0.0, 0.0);
            }
            both(dev, &w, "count_nonzero", vec![ten(x.clone()), Value::List(vec![i(0), i(2)])], vec![], 0.0, 0.0);
            // binary search in a sorted 1-d sequence and in sorted rows (ties, both sides)
            let flat = x.reshape(&[x.numel() as i64]).unwrap().sort(0, false).unwrap().0;
            let rows = x.reshape(&[sh[0] as i64, (sh[1] * sh[2]) as i64]).unwrap().sort(1, false).unwrap().0;
            let probe = vals(&mut rng, &[sh[0], 4], dt);
            for right in [false, true] {
                both(dev, &w, "searchsorted", vec![ten(flat.clone()), ten(x.clone())], vec![("right", b(right))], 0.0, 0.0);
                both(dev, &w, "searchsorted", vec![ten(rows.clone()), ten(probe.clone())], vec![("right", b(right)), ("out_int32", b(true))], 0.0, 0.0);
                both(dev, &w, "bucketize", vec![ten(x.clone()), ten(flat.clone())], vec![("right", b(right))], 0.0, 0.0);
            }
            // flips and rotations
            both(dev, &w, "flip", vec![ten(x.clone()), Value::List(vec![i(0), i(2)])], vec![], 0.0, 0.0);
            for k in [1, 2, 3, -1] {
                both(dev, &w, "rot90", vec![ten(x.clone()), i(k), Value::List(vec![i(1), i(2)])], vec![], 0.0, 0.0);
            }
            // closeness: equal copies, perturbed copies, NaN in both
            let y = x.to_dtype(DType::F64).unwrap().add_scalar(if dt == DType::Bool { 0.0 } else { 1e-3 }).unwrap().to_dtype(dt).unwrap();
            for other in [x.clone(), y] {
                both(dev, &w, "isclose", vec![ten(x.clone()), ten(other.clone())], vec![], 0.0, 0.0);
                both(dev, &w, "isclose", vec![ten(x.clone()), ten(other.clone())], vec![("rtol", f(0.0)), ("atol", f(2e-3))], 0.0, 0.0);
                both(dev, &w, "allclose", vec![ten(x.clone()), ten(other.clone())], vec![], 0.0, 0.0);
                both(dev, &w, "equal", vec![ten(x.clone()), ten(other.clone())], vec![], 0.0, 0.0);
            }
        }
    }
    let nan = Tensor::from_vec(vec![f32::NAN, 1.0, f32::INFINITY, -f32::INFINITY, 0.0], &[5]).unwrap();
    let nan2 = Tensor::from_vec(vec![f32::NAN, 1.0 + 1e-7, f32::INFINITY, f32::INFINITY, -0.0], &[5]).unwrap();
    for en in [false, true] {
        both(dev, "nan", "isclose", vec![ten(nan.clone()), ten(nan2.clone())], vec![("equal_nan", b(en))], 0.0, 0.0);
        both(dev, "nan", "allclose", vec![ten(nan.clone()), ten(nan.clone())], vec![("equal_nan", b(en))], 0.0, 0.0);
    }
    both(dev, "nan", "scatter_reduce", vec![ten(nan.clone()), i(0), ten(idx(&mut rng, &[5], 0, 5)), ten(nan2.clone()), s("amax")], vec![], 0.0, 0.0);
    both(dev, "nan", "scatter_reduce", vec![ten(nan.clone()), i(0), ten(idx(&mut rng, &[5], 0, 5)), ten(nan2), s("amin")], vec![], 0.0, 0.0);
    assert_no_mismatch();
    let counts = cuda::fallback_counts();
    for op in NATIVE {
        let c = counts.iter().find(|(o, _, _)| o == op);
        assert!(matches!(c, Some((_, n, 0)) if *n > 0), "{op} did not run natively: {c:?}");
    }
}

#[test]
fn large_scatters_and_indexing_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(19);
    // long runs of one destination (all indices equal) and many destinations
    let x = rand(&mut rng, &[1001, 33], DType::F32, -1.0, 1.0);
    for (lo, hi) in [(0, 1), (0, 1001)] {
        let gi = idx(&mut rng, &[3001, 33], lo, hi);
        let src = rand(&mut rng, &[3001, 33], DType::F32, -1.0, 1.0);
        for red in ["sum", "mean", "amax", "amin"] {
            both(dev, "large", "scatter_reduce", vec![ten(x.clone()), Value::Int(0), ten(gi.clone()), ten(src.clone()), Value::Str(red.into())], vec![], 1e-5, 1e-5);
        }
        let ii = idx(&mut rng, &[3001], lo, hi);
        let v = rand(&mut rng, &[3001, 33], DType::F32, -1.0, 1.0);
        both(dev, "large", "index_put", vec![ten(x.clone()), Value::List(vec![ten(ii.clone())]), ten(v), Value::Bool(true)], vec![], 1e-5, 1e-5);
    }
    let big = rand(&mut rng, &[100_003], DType::F32, -1.0, 1.0);
    both(dev, "large", "nonzero", vec![ten(big.gt_scalar(0.3).unwrap())], vec![], 0.0, 0.0);
    both(dev, "large", "masked_select", vec![ten(big.clone()), ten(big.lt_scalar(-0.5).unwrap())], vec![], 0.0, 0.0);
    // index_put with accumulate is deterministic: the same bits twice
    let ii = idx(&mut rng, &[50_000], 0, 7).to_device(dev).unwrap();
    let v = rand(&mut rng, &[50_000], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
    let z = Tensor::zeros_on(&[7], DType::F32, dev).unwrap();
    let run = || call("index_put", vec![ten(z.clone()), Value::List(vec![ten(ii.clone())]), ten(v.clone()), Value::Bool(true)], vec![]).unwrap().into_tensor().unwrap().to_vec::<f32>().unwrap();
    let (a, c) = (run(), run());
    assert_eq!(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), c.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "index_put accumulate is not deterministic");
    assert_no_mismatch();
}

#[test]
fn out_of_range_indices_are_index_errors() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::arange(0i64, 12, 1).unwrap().reshape(&[3, 4]).unwrap();
    let bad = Tensor::from_vec(vec![0i64, 3, -4], &[3]).unwrap();
    for (op, args) in [
        ("take", vec![ten(x.clone()), ten(Tensor::from_vec(vec![5i64, 12], &[2]).unwrap())]),
        ("index_put", vec![ten(x.clone()), Value::List(vec![ten(bad.clone())]), ten(Tensor::from_vec(vec![1i64], &[1]).unwrap())]),
        ("put", vec![ten(x.clone()), ten(Tensor::from_vec(vec![-13i64], &[1]).unwrap()), ten(Tensor::from_vec(vec![1i64], &[1]).unwrap())]),
    ] {
        let ok = both(dev, "out of range", op, args, vec![], 0.0, 0.0);
        assert!(!ok, "{op} accepted an out-of-range index");
    }
    assert_no_mismatch();
    // index_select rejects negative indices as PyTorch does, on both devices
    let neg_cpu = Tensor::from_vec(vec![-1i64], &[1]).unwrap();
    let e = x.index_select(0, &neg_cpu).unwrap_err().to_string();
    assert!(e.contains("index out of range in self"), "{e}");
    let neg = neg_cpu.to_device(dev).unwrap();
    let e = x.to_device(dev).unwrap().index_select(0, &neg).unwrap_err().to_string();
    assert!(e.contains("index out of range in self"), "{e}");
    // the device is still usable after the error
    let y = x.to_device(dev).unwrap().add_scalar(1).unwrap();
    assert_eq!(y.to_vec::<i64>().unwrap()[11], 12);
}

#[test]
fn multinomial_draws_on_the_device() {
    let Some(dev) = gpu() else { return };
    let p = Tensor::from_vec(vec![0.1f32, 0.0, 0.2, 0.3, 0.4, 1.0, 1.0, 0.0, 2.0, 0.0], &[2, 5]).unwrap().to_device(dev).unwrap();
    let n = 40_000usize;
    let out = p.multinomial(n, true).unwrap();
    assert_eq!(out.device(), dev, "multinomial result not on the GPU");
    assert_eq!(out.shape(), &[2, n]);
    let v = out.to_vec::<i64>().unwrap();
    let want = [[0.1, 0.0, 0.2, 0.3, 0.4], [0.25, 0.25, 0.0, 0.5, 0.0]];
    for r in 0..2 {
        let mut c = [0usize; 5];
        for &k in &v[r * n..(r + 1) * n] {
            c[k as usize] += 1;
        }
        for k in 0..5 {
            let f = c[k] as f64 / n as f64;
            // 5 standard deviations of a binomial frequency (at most 0.0125 for n = 40000)
            let sd = (want[r][k] * (1.0 - want[r][k]) / n as f64).sqrt();
            assert!((f - want[r][k]).abs() <= 5.0 * sd + 1e-12, "row {r} category {k}: frequency {f}, want {}", want[r][k]);
        }
    }
    // without replacement: distinct picks per row, zero weights never before positive ones,
    // first picks in proportion to the weights
    let q = Tensor::from_vec(vec![1.0f64, 0.0, 3.0, 6.0], &[4]).unwrap().to_device(dev).unwrap();
    let mut first = [0usize; 4];
    let trials = 20_000;
    let rows = q.reshape(&[1, 4]).unwrap().repeat(&[trials as i64, 1]).unwrap();
    let draws = rows.multinomial(3, false).unwrap();
    assert_eq!(draws.device(), dev);
    let d = draws.to_vec::<i64>().unwrap();
    for t in 0..trials {
        let r = &d[3 * t..3 * t + 3];
        assert!(r[0] != r[1] && r[0] != r[2] && r[1] != r[2], "repeated pick {r:?}");
        assert!(!r.contains(&1), "zero-weight category drawn among the first 3: {r:?}");
        first[r[0] as usize] += 1;
    }
    for (k, w) in [0.1, 0.0, 0.3, 0.6].iter().enumerate() {
        let f = first[k] as f64 / trials as f64;
        let sd = (w * (1.0 - w) / trials as f64).sqrt();
        assert!((f - w).abs() <= 5.0 * sd + 1e-12, "first pick {k}: frequency {f}, want {w}");
    }
    // second picks follow sampling without replacement: P(second = 3) = sum over first != 3
    let p2: f64 = 0.1 * (0.6 / 0.9) + 0.3 * (0.6 / 0.7);
    let f2 = (0..trials).filter(|&t| d[3 * t + 1] == 3).count() as f64 / trials as f64;
    assert!((f2 - p2).abs() <= 5.0 * (p2 * (1.0 - p2) / trials as f64).sqrt(), "second pick of 3: {f2}, want {p2}");
    // 1-d input, and PyTorch's errors
    assert_eq!(q.multinomial(2, true).unwrap().shape(), &[2]);
    let neg = Tensor::from_vec(vec![1.0f32, -1.0], &[2]).unwrap().to_device(dev).unwrap();
    assert!(neg.multinomial(1, true).unwrap_err().to_string().contains("element < 0"));
    let zero = Tensor::zeros_on(&[3], DType::F32, dev).unwrap();
    assert!(zero.multinomial(1, true).unwrap_err().to_string().contains("sum of probabilities <= 0"));
}

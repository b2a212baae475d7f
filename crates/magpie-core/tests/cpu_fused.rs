//! The fused f32 CPU kernels (softmax, log_softmax, layer_norm, cross_entropy, gelu, sums,
//! linear) against their references: the same op in f64 (which runs the composite or scalar
//! path) or the composite itself, forward and gradients, at odd sizes and on non-contiguous
//! inputs; plus double backward through the fused ops' composite gradient path. Fused attention
//! (`scaled_dot_product_attention` in f32) is checked against the f64 composite the same way.

use magpie_core::autograd;
use magpie_core::ops::nn::{self, loss, Reduction};
use magpie_core::{DType, Result, Tensor};

/// Seeds the default generator and holds a lock for the test's duration: the tests of this file
/// run in parallel threads but share the generator, so without it each test's random inputs would
/// depend on how the others interleave (and a tolerance met on one draw may miss on another).
fn seeded(seed: u64) -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    magpie_core::ops::random::manual_seed(seed);
    g
}

fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape).unwrap()
}

fn f64v(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Max |a - b| / (1 + |b|) over all elements; shapes must match.
fn close(what: &str, a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    let (av, bv) = (f64v(a), f64v(b));
    let mut worst = 0f64;
    for (x, y) in av.iter().zip(&bv) {
        if x.is_nan() && y.is_nan() {
            continue;
        }
        worst = worst.max((x - y).abs() / (1.0 + y.abs()));
    }
    assert!(worst <= tol, "{what}: worst relative error {worst:e} > {tol:e}");
}

/// `(f(x), d<f(x), g>/dx for each input)` with a fixed random output gradient `g`.
fn value_and_grads(f: &dyn Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], g: Option<&Tensor>) -> (Tensor, Vec<Tensor>) {
    let leaves: Vec<Tensor> = inputs.iter().map(|t| t.detach().requires_grad_(true).unwrap()).collect();
    let y = f(&leaves).unwrap();
    let gy = match g {
        Some(g) => g.to_dtype(y.dtype()).unwrap(),
        None => y.ones_like().unwrap(),
    };
    y.backward_with(Some(&gy), false, false).unwrap();
    (y.detach(), leaves.iter().map(|l| l.grad().unwrap()).collect())
}

fn to64(ts: &[Tensor]) -> Vec<Tensor> {
    ts.iter().map(|t| t.to_dtype(DType::F64).unwrap()).collect()
}

/// Checks `f` on f32 inputs (fused kernels) against `f` on f64 copies (reference paths).
fn check_vs_f64(what: &str, f: &dyn Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], tol: f64) {
    let y0 = f(inputs).unwrap();
    let g = randn(y0.shape());
    let (y, gs) = value_and_grads(f, inputs, Some(&g));
    let (yr, gr) = value_and_grads(f, &to64(inputs), Some(&g));
    close(&format!("{what} value"), &y, &yr, tol);
    for (i, (a, b)) in gs.iter().zip(&gr).enumerate() {
        close(&format!("{what} grad {i}"), a, b, tol);
    }
}

const SHAPES: &[&[usize]] = &[&[1, 1], &[3, 7], &[5, 33], &[2, 3, 64], &[70, 1025], &[600, 65]];

#[test]
fn softmax_and_log_softmax_match_f64() {
    let _serial = seeded(1);
    for s in SHAPES {
        let x = randn(s).mul_scalar(3.0).unwrap();
        check_vs_f64("softmax", &|a| a[0].softmax(-1, None), &[x.clone()], 2e-6);
        // log_softmax's gradient `g - exp(y) * sum(g)` carries the f32 rounding of a row sum of up
        // to 1025 random values (~|sum| * n * eps, a few 1e-6 here), as the dim-0 case below
        check_vs_f64("log_softmax", &|a| a[0].log_softmax(-1, None), &[x.clone()], 1e-5);
        // non-contiguous input (a transpose) and a non-last dim
        let xt = x.mt().unwrap();
        check_vs_f64("softmax t", &|a| a[0].softmax(-1, None), &[xt.clone()], 2e-6);
        check_vs_f64("log_softmax dim0", &|a| a[0].log_softmax(0, None), &[x.clone()], 1e-5);
    }
    // -inf entries and fully masked rows behave as the reference
    let x = Tensor::from_vec(vec![0.0f32, f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY], &[2, 3]).unwrap();
    close("softmax -inf", &x.softmax(-1, None).unwrap(), &x.to_dtype(DType::F64).unwrap().softmax(-1, None).unwrap(), 1e-6);
}

#[test]
fn layer_norm_matches_composite() {
    let _serial = seeded(2);
    for s in SHAPES {
        let n = *s.last().unwrap();
        let x = randn(s).mul_scalar(2.0).unwrap().add_scalar(0.5).unwrap();
        let (w, b) = (randn(&[n]), randn(&[n]));
        let ns = [n as i64];
        let fused = |a: &[Tensor]| nn::native_layer_norm(&a[0], &ns, Some(&a[1]), Some(&a[2]), 1e-5).map(|r| r.0);
        let comp = |a: &[Tensor]| nn::norm::layer_norm_composite(&a[0], &ns, Some(&a[1]), Some(&a[2]), 1e-5).map(|r| r.0);
        let ins = [x.clone(), w.clone(), b.clone()];
        let g = randn(x.shape());
        let (y, gs) = value_and_grads(&fused, &ins, Some(&g));
        let (yr, gr) = value_and_grads(&comp, &to64(&ins), Some(&g));
        let leaf = x.detach().requires_grad_(true).unwrap();
        assert_eq!(fused(&[leaf, w.clone(), b.clone()]).unwrap().grad_fn().unwrap().name(), "NativeLayerNormBackward0", "fused path taken");
        close("layer_norm value", &y, &yr, 2e-5);
        for (i, (a, b)) in gs.iter().zip(&gr).enumerate() {
            close(&format!("layer_norm grad {i} {s:?}"), a, b, 1e-4);
        }
        // no weight / bias, and a non-contiguous input
        let xt = randn(&[n, s[0]]).mt().unwrap();
        check_vs_f64("layer_norm plain", &|a| nn::native_layer_norm(&a[0], &ns, None, None, 1e-5).map(|r| r.0), &[xt], 1e-4);
    }
    // the mean / rstd outputs and their gradients
    let x = randn(&[4, 6, 10]);
    let f = |a: &[Tensor]| {
        let (y, m, r) = nn::native_layer_norm(&a[0], &[6, 10], None, None, 1e-5)?;
        y.sum()?.add(&m.mul_scalar(3.0)?.sum()?)?.add(&r.sum()?)
    };
    check_vs_f64("layer_norm stats", &f, &[x], 1e-4);
}

#[test]
fn layer_norm_double_backward_matches_composite() {
    let _serial = seeded(3);
    let x = randn(&[5, 12]);
    let w = randn(&[12]);
    let g = randn(&[5, 12]);
    let v = randn(&[5, 12]);
    let run = |x: &Tensor, w: &Tensor, fused: bool| -> Vec<Tensor> {
        let x = x.detach().requires_grad_(true).unwrap();
        let w = w.detach().requires_grad_(true).unwrap();
        let y = if fused {
            nn::native_layer_norm(&x, &[12], Some(&w), None, 1e-5).unwrap().0
        } else {
            nn::norm::layer_norm_composite(&x, &[12], Some(&w), None, 1e-5).unwrap().0
        };
        let gx = autograd::grad(&[y], &[x.clone()], &[g.to_dtype(x.dtype()).unwrap()], true, true, false).unwrap()[0].clone().unwrap();
        let s = gx.mul(&v.to_dtype(x.dtype()).unwrap()).unwrap().sum().unwrap();
        autograd::grad(&[s], &[x, w], &[], false, false, false).unwrap().into_iter().map(|t| t.unwrap()).collect()
    };
    let a = run(&x, &w, true);
    let b = run(&x.to_dtype(DType::F64).unwrap(), &w.to_dtype(DType::F64).unwrap(), false);
    close("layer_norm ggx", &a[0], &b[0], 1e-4);
    close("layer_norm ggw", &a[1], &b[1], 1e-4);
}

#[test]
fn cross_entropy_matches_composite() {
    let _serial = seeded(4);
    for &(n, c) in &[(1usize, 1usize), (3, 7), (64, 513), (300, 10)] {
        let x = randn(&[n, c]).mul_scalar(2.0).unwrap();
        let mut tv: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % c as i64).collect();
        if n > 2 {
            tv[1] = -100;
        }
        let t = Tensor::from_vec(tv, &[n]).unwrap();
        for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            let fused = |a: &[Tensor]| loss::cross_entropy(&a[0], &t, None, -100, r, 0.0);
            let comp = |a: &[Tensor]| loss::nll_loss(&a[0].log_softmax(1, None)?, &t, None, -100, r);
            let y0 = fused(&[x.clone()]).unwrap();
            let g = randn(y0.shape());
            let (y, gs) = value_and_grads(&fused, &[x.clone()], Some(&g));
            let (yr, gr) = value_and_grads(&comp, &to64(&[x.clone()]), Some(&g));
            close("cross_entropy value", &y, &yr, 1e-5);
            let leaf = x.detach().requires_grad_(true).unwrap();
            assert_eq!(fused(&[leaf]).unwrap().grad_fn().unwrap().name(), "CrossEntropyLossBackward0", "fused path taken");
            close("cross_entropy grad", &gs[0], &gr[0], 1e-5);
        }
    }
    // out-of-range targets are an error, not a panic
    let x = randn(&[2, 3]);
    let t = Tensor::from_vec(vec![0i64, 3], &[2]).unwrap();
    assert!(loss::cross_entropy(&x, &t, None, -100, Reduction::Mean, 0.0).is_err());
}

#[test]
fn cross_entropy_double_backward() {
    let _serial = seeded(5);
    let x = randn(&[6, 5]);
    let t = Tensor::from_vec(vec![0i64, 4, 2, 2, 1, 3], &[6]).unwrap();
    let v = randn(&[6, 5]);
    let run = |x: &Tensor, fused: bool| -> Tensor {
        let x = x.detach().requires_grad_(true).unwrap();
        let l = if fused {
            loss::cross_entropy(&x, &t, None, -100, Reduction::Mean, 0.0).unwrap()
        } else {
            loss::nll_loss(&x.log_softmax(1, None).unwrap(), &t, None, -100, Reduction::Mean).unwrap()
        };
        let gx = autograd::grad(&[l], &[x.clone()], &[], true, true, false).unwrap()[0].clone().unwrap();
        let s = gx.mul(&v.to_dtype(x.dtype()).unwrap()).unwrap().sum().unwrap();
        autograd::grad(&[s], &[x], &[], false, false, false).unwrap()[0].clone().unwrap()
    };
    close("cross_entropy ggx", &run(&x, true), &run(&x.to_dtype(DType::F64).unwrap(), false), 1e-5);
}

#[test]
fn gelu_matches_f64() {
    let _serial = seeded(6);
    for s in SHAPES {
        let x = randn(s).mul_scalar(3.0).unwrap();
        for approx in ["none", "tanh"] {
            check_vs_f64(approx, &|a| a[0].gelu(approx), &[x.clone()], 2e-6);
            check_vs_f64(approx, &|a| a[0].gelu(approx), &[x.mt().unwrap()], 2e-6);
        }
    }
}

#[test]
fn sums_match_f64() {
    let _serial = seeded(7);
    let dims: &[&[i64]] = &[&[-1], &[0], &[0, 1], &[1], &[1, 2], &[0, 2]];
    for s in [&[3usize, 5, 7][..], &[2, 300, 70], &[64, 3, 1025], &[1, 1, 1], &[4096, 2, 3]] {
        let x = randn(s);
        for d in dims {
            check_vs_f64(&format!("sum {s:?} {d:?}"), &|a| a[0].sum_dims(Some(d), false, None), &[x.clone()], 1e-5);
            check_vs_f64("sum keepdim", &|a| a[0].sum_dims(Some(d), true, None), &[x.clone()], 1e-5);
        }
        check_vs_f64("sum all", &|a| a[0].sum(), &[x.clone()], 1e-5);
        check_vs_f64("sum t", &|a| a[0].sum_dims(Some(&[0]), false, None), &[x.mt().unwrap()], 1e-5);
    }
    // one long row (split over threads)
    let x = randn(&[1 << 19]);
    check_vs_f64("sum long", &|a| a[0].sum(), &[x], 1e-5);
}

#[test]
fn linear_matches_matmul_reference() {
    let _serial = seeded(8);
    for &(lead, i, o) in &[(&[1usize][..], 1usize, 1usize), (&[3], 7, 5), (&[2, 9], 33, 17), (&[130], 64, 96)] {
        let mut xs = lead.to_vec();
        xs.push(i);
        let (x, w, b) = (randn(&xs), randn(&[o, i]), randn(&[o]));
        let fused = |a: &[Tensor]| nn::linear(&a[0], &a[1], Some(&a[2]));
        let reference = |a: &[Tensor]| a[0].matmul(&a[1].t()?)?.add(&a[2]);
        let g = randn(&{
            let mut s = lead.to_vec();
            s.push(o);
            s
        });
        let ins = [x.clone(), w.clone(), b.clone()];
        let (y, gs) = value_and_grads(&fused, &ins, Some(&g));
        let (yr, gr) = value_and_grads(&reference, &to64(&ins), Some(&g));
        close("linear value", &y, &yr, 1e-5);
        let leaf = x.detach().requires_grad_(true).unwrap();
        assert_eq!(fused(&[leaf, w.clone(), b.clone()]).unwrap().grad_fn().unwrap().name(), "LinearBackward0", "fused path taken");
        for (k, (a, b)) in gs.iter().zip(&gr).enumerate() {
            close(&format!("linear grad {k}"), a, b, 1e-5);
        }
        // no bias, transposed input
        let xt = randn(&[i, 4]).mt().unwrap();
        check_vs_f64("linear nobias", &|a| nn::linear(&a[0], &a[1], None), &[xt, w.clone()], 1e-5);
    }
}

fn sdpa(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, gqa: bool) -> Result<Tensor> {
    nn::scaled_dot_product_attention(q, k, v, None, 0.0, causal, None, gqa)
}

#[test]
fn attention_matches_f64_composite() {
    let _serial = seeded(11);
    // (q, k, v shapes): odd sizes, L > S and L < S, 2-D and 3-D, a batch big enough to run in parallel
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[2, 3, 7, 5], &[2, 3, 13, 5], &[2, 3, 13, 3]),
        (&[1, 2, 9, 4], &[1, 2, 4, 4], &[1, 2, 4, 6]),
        (&[7, 5], &[7, 5], &[7, 5]),
        (&[3, 1, 17], &[3, 33, 17], &[3, 33, 9]),
        (&[4, 4, 64, 32], &[4, 4, 64, 32], &[4, 4, 64, 32]),
    ];
    for &(qs, ks, vs) in cases {
        for causal in [false, true] {
            let f = |x: &[Tensor]| sdpa(&x[0], &x[1], &x[2], causal, false);
            check_vs_f64(&format!("sdpa {qs:?} {ks:?} causal={causal}"), &f, &[randn(qs), randn(ks), randn(vs)], 2e-5);
        }
    }
}

#[test]
fn attention_gqa_and_strided_head_views() {
    let _serial = seeded(12);
    // grouped-query attention: 6 query heads over 2 key/value heads
    let f = |x: &[Tensor]| sdpa(&x[0], &x[1], &x[2], true, true);
    check_vs_f64("sdpa gqa", &f, &[randn(&[2, 6, 11, 8]), randn(&[2, 2, 11, 8]), randn(&[2, 2, 11, 8])], 2e-5);
    // q, k, v as head-split views of one fused projection (read in place through their strides)
    let (b, t, h, hd) = (2usize, 10usize, 4usize, 8usize);
    let c = h * hd;
    let f = |x: &[Tensor]| {
        let heads = |i: i64| x[0].narrow(2, i * c as i64, c as i64)?.reshape(&[b as i64, t as i64, h as i64, hd as i64])?.transpose(1, 2);
        sdpa(&heads(0)?, &heads(1)?, &heads(2)?, true, false)?.transpose(1, 2)?.reshape(&[b as i64, t as i64, c as i64])
    };
    check_vs_f64("sdpa qkv views", &f, &[randn(&[b, t, 3 * c])], 2e-5);
}

#[test]
fn attention_double_backward_matches_composite() {
    let _serial = seeded(13);
    let (q, k, v) = (randn(&[2, 2, 6, 4]), randn(&[2, 2, 6, 4]), randn(&[2, 2, 6, 3]));
    let (g, w) = (randn(&[2, 2, 6, 3]), randn(&[2, 2, 6, 4]));
    let run = |dt: DType| -> Vec<Tensor> {
        let leaf = |t: &Tensor| t.to_dtype(dt).unwrap().requires_grad_(true).unwrap();
        let (q, k, v) = (leaf(&q), leaf(&k), leaf(&v));
        let y = sdpa(&q, &k, &v, true, false).unwrap();
        let gs = autograd::grad(&[y], &[q.clone(), k.clone(), v.clone()], &[g.to_dtype(dt).unwrap()], true, true, false).unwrap();
        // a scalar of all three first-order gradients, differentiated again
        let w = w.to_dtype(dt).unwrap();
        let mut s = gs[0].as_ref().unwrap().mul(&w).unwrap().sum().unwrap();
        s = s.add(&gs[1].as_ref().unwrap().mul(&w).unwrap().sum().unwrap()).unwrap();
        s = s.add(&gs[2].as_ref().unwrap().pow_scalar(2.0).unwrap().sum().unwrap()).unwrap();
        autograd::grad(&[s], &[q, k, v], &[], false, false, false).unwrap().into_iter().map(|t| t.unwrap()).collect()
    };
    let (a, b) = (run(DType::F32), run(DType::F64));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        close(&format!("sdpa second-order grad {i}"), x, y, 1e-4);
    }
}

/// The thread-split paths of `linear` (forward rows in independent blocks, backward products side
/// by side) at a size that takes them, in pools of 1-3 threads, against the f64 reference;
/// also a transposed (strided) input, whose row blocks start at a column offset.
#[test]
fn linear_thread_splits_match_reference() {
    let _serial = seeded(9);
    let (m, i, o) = (1030usize, 100usize, 70usize);
    let (x, w, b, g) = (randn(&[m, i]), randn(&[o, i]), randn(&[o]), randn(&[m, o]));
    let xt = randn(&[i, m]).mt().unwrap();
    let fused = |a: &[Tensor]| nn::linear(&a[0], &a[1], Some(&a[2]));
    let reference = |a: &[Tensor]| a[0].matmul(&a[1].t()?)?.add(&a[2]);
    for threads in 1..=3 {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            for input in [&x, &xt] {
                let ins = [input.clone(), w.clone(), b.clone()];
                let (y, gs) = value_and_grads(&fused, &ins, Some(&g));
                let (yr, gr) = value_and_grads(&reference, &to64(&ins), Some(&g));
                close(&format!("linear value, {threads} threads"), &y, &yr, 1e-5);
                // dW and the bias gradient sum 1030 f32 products: a looser bound than the value's
                for (k, (a, r)) in gs.iter().zip(&gr).enumerate() {
                    close(&format!("linear grad {k}, {threads} threads"), a, r, 1e-4);
                }
            }
        });
    }
}

/// The kernels' narrower SIMD variants (AVX2 with FMA, and the baseline) give the same answers:
/// this binary's other tests exercise the widest variant the CPU has; here they run again in a
/// child process per variant, with `MAGPIE_SIMD` capping the level (read once per process).
#[test]
fn narrower_simd_variants_match_f64() {
    if std::env::var("MAGPIE_SIMD").is_ok() {
        return; // a child: the variant under test is already set
    }
    let exe = std::env::current_exe().unwrap();
    for level in ["avx2", "base"] {
        for t in ["softmax_and_log_softmax_match_f64", "layer_norm_matches_composite", "cross_entropy_matches_composite", "gelu_matches_f64", "sums_match_f64"] {
            let out = std::process::Command::new(&exe).args([t, "--exact", "--test-threads=1"]).env("MAGPIE_SIMD", level).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success() && text.contains("1 passed"), "{t} with MAGPIE_SIMD={level}:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

//! The vectorized activation kernels (backend/cpu/activations.rs, vmath) against independent
//! f64 references: forward in f32 (ulp-level), fused backward in f32 and f64, at several sizes
//! (odd ones, and above the parallel threshold) on contiguous, transposed (dense, other order)
//! and sliced (gathered) inputs, with NaN, +-inf, -0.0, subnormals and large |x| among the
//! values; plus gradcheck / gradgradcheck of the double-backward (tensor-op) path.

use magpie_core::autograd::{self, GradcheckOptions};
use magpie_core::{DType, Result, Tensor};

/// Special values every input starts with.
const SPECIAL: [f32; 44] = [
    0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-30, -1e-30, 1e-40, -1e-40, 88.5, -88.5, 89.0, -89.0, 100.0,
    -100.0, 1e4, -1e4, 20.0, 20.001, 19.99, -20.0, 0.625, -0.625, 0.6249, -0.6251, 3.0, -3.0, 2.999, -2.999, 1e-4, -1e-4,
    0.3465, -0.3466, 1.0, -1.0, 0.5, -1.278, 9.99, 10.01, -10.5, 1e-8, -1e-8, 150.0, -103.9,
];

/// `n` values: the specials, then pseudo-random ones spread over [-12, 12] (with a few wider).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            if i < SPECIAL.len() {
                return SPECIAL[i];
            }
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let v = (u * 24.0 - 12.0) as f32;
            if i % 97 == 0 { v * 9.0 } else { v }
        })
        .collect()
}

/// The distance between `want` (rounded to f32) and its f32 neighbours; 2^-149 at the bottom.
fn ulp(want: f64) -> f64 {
    let w = (want.abs() as f32).max(f32::MIN_POSITIVE);
    if !w.is_finite() {
        return 2f64.powi(104); // the ulp of f32::MAX: an infinite want must be met exactly
    }
    (f32::from_bits(w.to_bits() + 1) as f64 - w as f64).max(1e-45)
}

/// True when `got` is `want` (both NaN, or equal) or within `tol` of it.
fn near(got: f64, want: f64, tol: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= tol
}

/// `want` as f32 would hold it when it overflows f32 (infinite), else unchanged.
fn f32_range(want: f64) -> f64 {
    if (want.abs() as f32).is_infinite() { want as f32 as f64 } else { want }
}

/// Products with subnormal factors (`x sigmoid(x)` at x = -100) carry the subnormal's absolute
/// rounding (~1e-45) times |x|: below this, absolute errors are not counted in ulps.
const SUBNORMAL_FLOOR: f64 = 1e-40;

/// One activation: f32 forward `f`, the reference forward `rf` and derivative `rd(x, y)`
/// in f64 (`y`: the op's output, for the rules that use it), forward ulp tolerance.
struct Act {
    name: &'static str,
    f: fn(&Tensor) -> Result<Tensor>,
    rf: fn(f64) -> f64,
    /// `d y / d x` from `x` and the (f32-rounded) output `y`.
    rd: fn(f64, f64) -> f64,
    ulps: f64,
}

fn sig(x: f64) -> f64 {
    if x >= 0.0 { 1.0 / (1.0 + (-x).exp()) } else { x.exp() / (1.0 + x.exp()) }
}
fn sp(x: f64) -> f64 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

const SELU_A: f64 = 1.673_263_242_354_377_3;
const SELU_S: f64 = 1.050_700_987_355_480_5;

fn acts() -> Vec<Act> {
    vec![
        Act { name: "relu", f: |x| x.relu(), rf: |x| if x > 0.0 || x.is_nan() { x } else { 0.0 }, rd: |_, y| if y > 0.0 { 1.0 } else { 0.0 }, ulps: 0.0 },
        Act {
            name: "leaky_relu",
            f: |x| x.leaky_relu(0.02),
            rf: |x| if x > 0.0 { x } else { x * 0.02 },
            rd: |x, _| if x > 0.0 { 1.0 } else { 0.02 },
            ulps: 0.5,
        },
        Act {
            name: "hardtanh",
            f: |x| x.hardtanh(-1.5, 2.0),
            rf: |x| if x < -1.5 { -1.5 } else if x > 2.0 { 2.0 } else { x },
            rd: |x, _| if x > -1.5 && x < 2.0 { 1.0 } else { 0.0 },
            ulps: 0.0,
        },
        Act {
            name: "relu6",
            f: |x| x.relu6(),
            rf: |x| if x < 0.0 { 0.0 } else if x > 6.0 { 6.0 } else { x },
            rd: |x, _| if x > 0.0 && x < 6.0 { 1.0 } else { 0.0 },
            ulps: 0.0,
        },
        Act {
            name: "threshold",
            f: |x| x.threshold(0.5, -2.0),
            rf: |x| if x <= 0.5 { -2.0 } else { x },
            rd: |x, _| if x > 0.5 { 1.0 } else { 0.0 },
            ulps: 0.0,
        },
        Act {
            name: "hardswish",
            f: |x| x.hardswish(),
            rf: |x| x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            rd: |x, _| if x < -3.0 { 0.0 } else if x <= 3.0 { (2.0 * x + 3.0) / 6.0 } else { 1.0 },
            ulps: 1.0,
        },
        Act {
            name: "hardsigmoid",
            f: |x| x.hardsigmoid(),
            rf: |x| (x + 3.0).clamp(0.0, 6.0) / 6.0,
            rd: |x, _| if x > -3.0 && x < 3.0 { 1.0 / 6.0 } else { 0.0 },
            ulps: 1.0,
        },
        Act {
            name: "hardshrink",
            f: |x| x.hardshrink(0.5),
            rf: |x| if (-0.5..=0.5).contains(&x) { 0.0 } else { x },
            rd: |x, _| if (-0.5..=0.5).contains(&x) { 0.0 } else { 1.0 },
            ulps: 0.0,
        },
        Act {
            name: "softshrink",
            f: |x| x.softshrink(0.5),
            rf: |x| if x > 0.5 { x - 0.5 } else if x < -0.5 { x + 0.5 } else { 0.0 },
            rd: |x, _| if (-0.5..=0.5).contains(&x) { 0.0 } else { 1.0 },
            ulps: 0.5,
        },
        Act { name: "elu", f: |x| x.elu(1.3), rf: |x| if x > 0.0 { x } else { 1.3 * x.exp_m1() }, rd: |x, _| if x > 0.0 { 1.0 } else { 1.3 * x.exp() }, ulps: 3.0 },
        Act {
            name: "selu",
            f: |x| x.selu(),
            rf: |x| SELU_S * if x > 0.0 { x } else { SELU_A * x.exp_m1() },
            rd: |x, _| SELU_S * if x > 0.0 { 1.0 } else { SELU_A * x.exp() },
            ulps: 3.0,
        },
        Act {
            name: "celu",
            f: |x| x.celu(0.7),
            rf: |x| if x > 0.0 { x } else { 0.7 * (x / 0.7).exp_m1() },
            rd: |x, _| if x > 0.0 { 1.0 } else { (x / 0.7).exp() },
            ulps: 3.0,
        },
        Act { name: "exp", f: |x| x.exp(), rf: f64::exp, rd: |_, y| y, ulps: 2.0 },
        Act { name: "sigmoid", f: |x| x.sigmoid(), rf: sig, rd: |_, y| y * (1.0 - y), ulps: 3.0 },
        Act { name: "tanh", f: |x| x.tanh(), rf: f64::tanh, rd: |_, y| 1.0 - y * y, ulps: 3.0 },
        Act { name: "silu", f: |x| x.silu(), rf: |x| x * sig(x), rd: |x, _| sig(x) * (1.0 + x * (1.0 - sig(x))), ulps: 3.0 },
        Act {
            name: "softplus",
            f: |x| x.softplus(1.0, 20.0),
            rf: |x| if x > 20.0 { x } else { x.exp().ln_1p() },
            rd: |x, _| if x > 20.0 { 1.0 } else { sig(x) },
            ulps: 3.0,
        },
        Act {
            name: "softplus(beta 2, threshold 5)",
            f: |x| x.softplus(2.0, 5.0),
            rf: |x| if 2.0 * x > 5.0 { x } else { (2.0 * x).exp().ln_1p() / 2.0 },
            rd: |x, _| if 2.0 * x > 5.0 { 1.0 } else { sig(2.0 * x) },
            ulps: 3.0,
        },
        Act {
            name: "mish",
            f: |x| x.mish(),
            rf: |x| x * sp(x).tanh(),
            rd: |x, _| {
                let t = sp(x).tanh();
                t + x * sig(x) * (1.0 - t * t)
            },
            ulps: 4.0,
        },
        Act {
            name: "logsigmoid",
            f: |x| x.logsigmoid(),
            rf: |x| x.min(0.0) - (-x.abs()).exp().ln_1p(),
            rd: |x, _| sig(-x),
            ulps: 3.0,
        },
    ]
}

/// Inputs of `n` elements as (name, view): contiguous, transposed (dense in another order) and
/// every other column of a wider tensor (gathered).
fn layouts(v: &[f32]) -> Vec<(&'static str, Tensor)> {
    let n = v.len();
    let mut out = vec![("contiguous", Tensor::from_vec(v.to_vec(), &[n]).unwrap())];
    // [r, c] transposed from a [c, r] tensor holding v in its storage order
    for c in [3usize, 8, 37] {
        if n % c == 0 {
            let r = n / c;
            out.push(("transposed", Tensor::from_vec(v.to_vec(), &[c, r]).unwrap().transpose(0, 1).unwrap()));
            break;
        }
    }
    let mut wide = vec![0f32; 2 * n];
    for (i, &x) in v.iter().enumerate() {
        wide[2 * i] = x;
        wide[2 * i + 1] = 7.0;
    }
    out.push(("strided", Tensor::from_vec(wide, &[n, 2]).unwrap().select(1, 0).unwrap()));
    out
}

/// The elements of `t` in row-major order, as f64.
fn vals(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Forward and (fused, no graph) backward of every activation in f32 and f64 against the references.
#[test]
fn forward_and_backward_match_f64_references() {
    // failures are collected (a few per op) so that one run shows every op's problems
    let mut fails: Vec<String> = Vec::new();
    let mut check = |ok: bool, msg: &dyn Fn() -> String, count: &mut usize| {
        if !ok {
            *count += 1;
            if *count <= 3 {
                fails.push(msg());
            }
        }
    };
    for a in acts() {
        let mut count = 0usize;
        let mut worst_f = 0f64;
        let mut worst_b = 0f64;
        for (k, n) in [1usize, 7, 8, 45, 111, 1031, 40_009].into_iter().enumerate() {
            let v = values(n, k as u64 + 1);
            let gv: Vec<f32> = values(n + SPECIAL.len(), k as u64 + 100)[SPECIAL.len()..].iter().map(|g| g / 4.0).collect();
            for (lname, x) in layouts(&v) {
                for dt in [DType::F32, DType::F64] {
                    let what = format!("{} {dt:?} n={n} {lname}", a.name);
                    let x = x.to_dtype(dt).unwrap().requires_grad_(true).unwrap();
                    let y = (a.f)(&x).unwrap();
                    assert_eq!(y.shape(), x.shape(), "{what}");
                    // g with x's strides when x is transposed (the same-order path), else contiguous
                    let g = if lname == "transposed" {
                        let sh = x.shape();
                        Tensor::from_vec(gv.clone(), &[sh[1], sh[0]]).unwrap().transpose(0, 1).unwrap()
                    } else {
                        Tensor::from_vec(gv.clone(), x.shape()).unwrap()
                    }
                    .to_dtype(dt)
                    .unwrap();
                    let dx = autograd::grad(&[y.clone()], &[x.clone()], &[g.clone()], false, false, false).unwrap()[0].clone().unwrap();
                    let (xs, ys, gs, dxs) = (vals(&x), vals(&y), vals(&g), vals(&dx));
                    for i in 0..xs.len() {
                        let want = (a.rf)(xs[i]);
                        let dwant = gs[i] * (a.rd)(xs[i], ys[i]);
                        if dt == DType::F32 {
                            let (want, dwant) = (f32_range(want), f32_range(dwant));
                            let err = ((ys[i] - want).abs() - SUBNORMAL_FLOOR).max(0.0) / ulp(want);
                            check(near(ys[i], want, a.ulps * ulp(want) + SUBNORMAL_FLOOR), &|| format!("{what}: f({}) = {} want {want} ({err} ulp)", xs[i], ys[i]), &mut count);
                            if err.is_finite() {
                                worst_f = worst_f.max(err);
                            }
                            // the derivative in f32 times g: a few ulp of g's size
                            let tol = 4.0 * (ulp(dwant) + ulp(gs[i]));
                            check(near(dxs[i], dwant, tol), &|| format!("{what}: grad at {} (g {}) = {} want {dwant}", xs[i], gs[i], dxs[i]), &mut count);
                            if (dxs[i] - dwant).is_finite() {
                                worst_b = worst_b.max((dxs[i] - dwant).abs() / (ulp(dwant) + ulp(gs[i])));
                            }
                        } else {
                            check(near(ys[i], want, 1e-14 * want.abs()), &|| format!("{what}: f({}) = {} want {want}", xs[i], ys[i]), &mut count);
                            let tol = 1e-14 * (dwant.abs() + gs[i].abs() * (1.0 + xs[i].abs()));
                            check(near(dxs[i], dwant, tol), &|| format!("{what}: grad at {} (g {}) = {} want {dwant}", xs[i], gs[i], dxs[i]), &mut count);
                        }
                    }
                }
            }
        }
        eprintln!("{}: worst forward {worst_f:.2} ulp, backward {worst_b:.2} ulp of |g|; {count} failures", a.name);
    }
    assert!(fails.is_empty(), "{} failures:\n{}", fails.len(), fails.join("\n"));
}

/// The fused first derivative equals the tensor-op rule used when a graph of the gradient is built.
#[test]
fn fused_backward_equals_composite_rule() {
    for a in acts() {
        let v: Vec<f32> = values(2000, 5)[SPECIAL.len()..].to_vec();
        let x = Tensor::from_vec(v.clone(), &[v.len()]).unwrap().requires_grad_(true).unwrap();
        let gv: Vec<f32> = values(v.len() + SPECIAL.len(), 9)[SPECIAL.len()..].iter().map(|g| g / 4.0).collect();
        let g = Tensor::from_vec(gv.clone(), &[v.len()]).unwrap();
        let y = (a.f)(&x).unwrap();
        let fused = autograd::grad(&[y.clone()], &[x.clone()], &[g.clone()], true, false, false).unwrap()[0].clone().unwrap();
        let comp = autograd::grad(&[y], &[x], &[g], true, true, false).unwrap()[0].clone().unwrap();
        // both in f32: a few ulp, and the composite's cancellations (1 - t^2 at t ~ 1) times |g| (1 + |x|)
        for (i, (p, q)) in vals(&fused).iter().zip(vals(&comp)).enumerate() {
            let tol = 8.0 * ulp(q) + 4e-7 * (gv[i].abs() as f64) * (1.0 + v[i].abs() as f64);
            assert!(near(*p, q, tol), "{}: at {} (g {}): fused {p} composite {q}", a.name, v[i], gv[i]);
        }
    }
}

/// gradcheck and gradgradcheck (f64) of the ops, away from their kinks.
#[test]
fn gradcheck_and_gradgradcheck() -> Result<()> {
    let v: Vec<f64> = [-2.3, -1.1, -0.4, 0.3, 0.9, 1.7, 2.6, -3.4, 3.6, 0.05, -0.05, 4.2].to_vec();
    let x = Tensor::from_vec(v, &[3, 4])?.requires_grad_(true)?;
    let opts = GradcheckOptions::default();
    for a in acts() {
        let f = |xs: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![(a.f)(&xs[0])?]) };
        autograd::gradcheck(f, &[x.clone()], &opts).map_err(|e| magpie_core::Error::value("gradcheck", format!("{}: {e}", a.name)))?;
        autograd::gradgradcheck(f, &[x.clone()], None, &opts).map_err(|e| magpie_core::Error::value("gradgradcheck", format!("{}: {e}", a.name)))?;
    }
    Ok(())
}

/// The forward keeps a dense input's memory order (as the other elementwise maps do).
#[test]
fn forward_keeps_dense_order() -> Result<()> {
    let x = Tensor::from_vec(values(60, 3), &[6, 10])?.transpose(0, 1)?;
    for a in acts() {
        let y = (a.f)(&x)?;
        assert_eq!(y.strides(), x.strides(), "{}", a.name);
    }
    Ok(())
}

/// The scalar building blocks over a dense sweep of [-110, 110] (and a fine one near 0):
/// worst error in ulp against f64.
#[test]
fn vmath_functions_within_a_few_ulp() {
    use magpie_core::backend::cpu::vmath;
    let mut xs: Vec<f32> = Vec::new();
    let mut x = -110.0f32;
    while x < 110.0 {
        xs.push(x);
        x += 0.000_913;
    }
    let mut x = 1e-12f32;
    while x < 2.0 {
        xs.push(x);
        xs.push(-x);
        x *= 1.0007;
    }
    let l1p = |u: f64| u.ln_1p();
    let cases: [(&str, fn(f32) -> f32, fn(f64) -> f64, f64, f64, f64); 5] = [
        ("tanhf", vmath::tanhf, f64::tanh, -110.0, 110.0, 3.0),
        ("sigmoidf", vmath::sigmoidf, |x| if x >= 0.0 { 1.0 / (1.0 + (-x).exp()) } else { x.exp() / (1.0 + x.exp()) }, -110.0, 110.0, 3.0),
        ("expm1f", vmath::expm1f, f64::exp_m1, -110.0, 88.0, 3.0),
        ("log1pf_unit", vmath::log1pf_unit, l1p, 0.0, 1.0, 2.0),
        ("expf", vmath::expf, f64::exp, -110.0, 88.0, 2.0),
    ];
    for (name, f, r, lo, hi, tol) in cases {
        let mut worst = (0f64, 0f32);
        for &x in xs.iter().filter(|&&x| (x as f64) >= lo && (x as f64) <= hi) {
            let want = r(x as f64);
            let got = f(x) as f64;
            let err = ((got - want).abs() - SUBNORMAL_FLOOR).max(0.0) / ulp(want);
            if err > worst.0 {
                worst = (err, x);
            }
        }
        eprintln!("{name}: worst {:.2} ulp at {}", worst.0, worst.1);
        assert!(worst.0 <= tol, "{name}: {:.2} ulp at {}", worst.0, worst.1);
    }
    for f in [vmath::tanhf, vmath::sigmoidf, vmath::expm1f, vmath::log1pf_unit] {
        assert!(f(f32::NAN).is_nan());
    }
    assert_eq!(vmath::tanhf(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!((vmath::tanhf(f32::INFINITY), vmath::tanhf(f32::NEG_INFINITY)), (1.0, -1.0));
    assert_eq!((vmath::sigmoidf(f32::INFINITY), vmath::sigmoidf(f32::NEG_INFINITY)), (1.0, 0.0));
    assert_eq!((vmath::expm1f(f32::INFINITY), vmath::expm1f(f32::NEG_INFINITY)), (f32::INFINITY, -1.0));
    assert_eq!(vmath::expm1f(-0.0).to_bits(), (-0.0f32).to_bits());
}

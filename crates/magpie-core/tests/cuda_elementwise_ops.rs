//! The parametric activations, the predicates, `nan_to_num` and `bitwise_not` on CUDA (one
//! expression kernel each) against the CPU path: random values with NaN, ±inf and ±0 mixed in,
//! every dtype the op takes, odd sizes, transposed and sliced views, and input gradients.
//! Methods are called on CUDA tensors directly, so a CPU-only kernel would fail the test rather
//! than fall back. Skips without CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::{DType, Device, Result, Tensor};
use util::{assert_close, gpu, tol, Rng};

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];
const INTS: [DType; 6] = [DType::Bool, DType::U8, DType::I8, DType::I16, DType::I32, DType::I64];

/// Values in [-range, range) with about one in six a special value (NaN, ±inf, ±0, or a
/// parameter boundary such as -3, 3, 0.5) for float dtypes; integers rounded down.
fn values(rng: &mut Rng, n: usize, d: DType, range: f64) -> Vec<f64> {
    const SPECIAL: [f64; 9] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, -3.0, 3.0, 0.5, -0.5];
    (0..n)
        .map(|_| {
            if d.is_float() && rng.next().is_multiple_of(6) {
                SPECIAL[(rng.next() % SPECIAL.len() as u64) as usize]
            } else {
                let v = rng.uniform(-range, range);
                if d.is_float() { v } else { v.floor() }
            }
        })
        .collect()
}

/// (name, cpu, gpu) inputs of one dtype: odd sizes, a scalar, an empty tensor, a transposed
/// and a sliced view.
fn layouts(rng: &mut Rng, d: DType, range: f64, dev: Device) -> Vec<(String, Tensor, Tensor)> {
    let mut v = Vec::new();
    let mk = |rng: &mut Rng, shape: &[usize]| {
        let n = shape.iter().product();
        Tensor::from_vec(values(rng, n, d, range), shape).unwrap().to_dtype(d).unwrap()
    };
    for shape in [vec![1usize], vec![37], vec![5, 7], vec![3, 1001], vec![0, 3], vec![]] {
        let c = mk(rng, &shape);
        let g = c.to_device(dev).unwrap();
        v.push((format!("{shape:?}"), c, g));
    }
    let c = mk(rng, &[6, 9]);
    let g = c.to_device(dev).unwrap();
    v.push(("transposed".into(), c.t().unwrap(), g.t().unwrap()));
    v.push(("sliced".into(), c.slice(1, Some(1), Some(9), 3).unwrap(), g.slice(1, Some(1), Some(9), 3).unwrap()));
    v
}

type Op = (&'static str, fn(&Tensor) -> Result<Tensor>);

/// Every float op of the file with its parameters (defaults and non-default ones).
fn float_ops() -> Vec<Op> {
    vec![
        ("relu", |x| x.relu()),
        ("relu6", |x| x.relu6()),
        ("hardtanh", |x| x.hardtanh(-1.0, 1.0)),
        ("hardtanh(-0.3,2.5)", |x| x.hardtanh(-0.3, 2.5)),
        ("threshold(0.1,20)", |x| x.threshold(0.1, 20.0)),
        ("threshold(-1,-inf)", |x| x.threshold(-1.0, f64::NEG_INFINITY)),
        ("elu", |x| x.elu(1.0)),
        ("elu(0.3)", |x| x.elu(0.3)),
        ("selu", |x| x.selu()),
        ("celu(1.7)", |x| x.celu(1.7)),
        ("leaky_relu", |x| x.leaky_relu(0.01)),
        ("leaky_relu(-2)", |x| x.leaky_relu(-2.0)),
        ("rrelu(eval)", |x| x.rrelu(0.125, 1.0 / 3.0, false)),
        ("hardswish", |x| x.hardswish()),
        ("hardsigmoid", |x| x.hardsigmoid()),
        ("hardshrink", |x| x.hardshrink(0.5)),
        ("softshrink", |x| x.softshrink(0.5)),
        ("softshrink(0)", |x| x.softshrink(0.0)),
        ("softplus", |x| x.softplus(1.0, 20.0)),
        ("softplus(2,3)", |x| x.softplus(2.0, 3.0)),
        ("softplus(-1,20)", |x| x.softplus(-1.0, 20.0)),
        ("mish", |x| x.mish()),
        ("logsigmoid", |x| x.logsigmoid()),
        ("nan_to_num", |x| x.nan_to_num(None, None, None)),
        ("nan_to_num(1,2,-3)", |x| x.nan_to_num(Some(1.0), Some(2.0), Some(-3.0))),
    ]
}

/// The bool-valued ops (every dtype but complex).
fn predicates() -> Vec<Op> {
    vec![
        ("isnan", |x| x.isnan()),
        ("isinf", |x| x.isinf()),
        ("isposinf", |x| x.isposinf()),
        ("isneginf", |x| x.isneginf()),
        ("isfinite", |x| x.isfinite()),
        ("isreal", |x| x.isreal()),
        ("signbit", |x| x.signbit()),
        ("logical_not", |x| x.logical_not()),
    ]
}

/// The ops that keep integer dtypes (bools rejected, as on the CPU, except `bitwise_not`).
fn int_ops() -> Vec<Op> {
    vec![
        ("relu", |x| x.relu()),
        ("relu6", |x| x.relu6()),
        ("hardtanh(-3.7,5.2)", |x| x.hardtanh(-3.7, 5.2)),
        ("threshold(2.5,-7)", |x| x.threshold(2.5, -7.0)),
        ("bitwise_not", |x| x.bitwise_not()),
        ("nan_to_num", |x| x.nan_to_num(None, None, None)),
    ]
}

/// The GPU result equals the CPU's (same dtype and device kind; errors on both or neither).
fn check(what: &str, got: Result<Tensor>, want: Result<Tensor>, dev: Device) {
    match (got, want) {
        (Ok(g), Ok(w)) => {
            assert_eq!(g.device(), dev, "{what}: device");
            let (rt, at) = tol(w.dtype());
            assert_close(what, &g.to_device(Device::Cpu).unwrap(), &w, rt * 4.0, at * 4.0);
        }
        (Err(_), Err(_)) => {}
        (g, w) => panic!("{what}: gpu {:?} vs cpu {:?}", g.map(|_| ()), w.map(|_| ())),
    }
}

#[test]
fn float_activations_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(181);
    for d in FLOATS {
        for (lname, c, g) in layouts(&mut rng, d, 8.0, dev) {
            for (name, f) in float_ops() {
                check(&format!("{name} {d} {lname}"), f(&g), f(&c), dev);
            }
        }
    }
}

#[test]
fn integer_inputs_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(182);
    for d in INTS {
        for (lname, c, g) in layouts(&mut rng, d, 100.0, dev) {
            // integers keep their dtype; bool is rejected by both
            for (name, f) in int_ops() {
                check(&format!("{name} {d} {lname}"), f(&g), f(&c), dev);
            }
            // the float activations promote integers to the default dtype
            for (name, f) in float_ops() {
                check(&format!("{name} {d} {lname}"), f(&g), f(&c), dev);
            }
        }
    }
}

#[test]
fn predicates_match_cpu_for_every_dtype() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(183);
    for d in FLOATS.iter().chain(INTS.iter()) {
        for (lname, c, g) in layouts(&mut rng, *d, 5.0, dev) {
            for (name, f) in predicates() {
                let got = f(&g);
                if let Ok(t) = &got {
                    assert_eq!(t.dtype(), DType::Bool, "{name} {d}: bool result");
                }
                check(&format!("{name} {d} {lname}"), got, f(&c), dev);
            }
        }
    }
}

#[test]
fn signbit_sees_negative_zero_and_nan_sign() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::from_vec(vec![-0.0f64, 0.0, -f64::NAN, f64::NAN, -1e-300, f64::NEG_INFINITY], &[6]).unwrap();
    for d in [DType::F64, DType::F32] {
        let c = x.to_dtype(d).unwrap();
        let g = c.to_device(dev).unwrap().signbit().unwrap().to_device(Device::Cpu).unwrap();
        let got: Vec<f64> = g.to_f64_vec().unwrap();
        let want = c.signbit().unwrap().to_f64_vec().unwrap();
        assert_eq!(got, want, "signbit {d}");
        assert_eq!(got[0], 1.0, "signbit(-0.0) {d}");
    }
}

#[test]
fn gradients_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(184);
    for d in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for n in [1usize, 37, 1001] {
            // no NaN/inf here: the CPU fused rules and the composites differ on them already
            let xv: Vec<f64> = (0..n).map(|i| if i % 7 == 0 { [0.0, -3.0, 3.0, 0.5, -0.5, 25.0, -1.0][(i / 7) % 7] } else { rng.uniform(-6.0, 6.0) }).collect();
            let gv: Vec<f64> = (0..n).map(|_| rng.uniform(-2.0, 2.0)).collect();
            let xc = Tensor::from_vec(xv, &[n]).unwrap().to_dtype(d).unwrap();
            let gc = Tensor::from_vec(gv, &[n]).unwrap().to_dtype(d).unwrap();
            let (xg, gg) = (xc.to_device(dev).unwrap(), gc.to_device(dev).unwrap());
            for (name, f) in float_ops() {
                let grad = |x: &Tensor, g: &Tensor| -> Tensor {
                    let x = x.detach().requires_grad_(true).unwrap();
                    f(&x).unwrap().backward_with(Some(g), false, false).unwrap();
                    x.grad().unwrap()
                };
                // half types: the CPU rule in f32, rounded once (the kernel computes in f32; the
                // CPU's half composites round every step)
                let want = if matches!(d, DType::F16 | DType::BF16) {
                    grad(&xc.to_dtype(DType::F32).unwrap(), &gc.to_dtype(DType::F32).unwrap()).to_dtype(d).unwrap()
                } else {
                    grad(&xc, &gc)
                };
                let got = grad(&xg, &gg);
                assert_eq!(got.device(), dev, "{name} {d} grad device");
                let (rt, at) = tol(d);
                assert_close(&format!("{name} {d} [{n}] grad"), &got.to_device(Device::Cpu).unwrap(), &want, rt * 4.0, at * 4.0);
            }
        }
    }
}

#[test]
fn double_backward_uses_the_differentiable_rule() {
    let Some(dev) = gpu() else { return };
    let xc = Tensor::from_vec(vec![-2.0f64, -0.5, 0.25, 1.5, 4.0], &[5]).unwrap();
    let ops: [Op; 4] = [("elu", |x| x.elu(0.7)), ("softplus", |x| x.softplus(1.5, 20.0)), ("mish", |x| x.mish()), ("logsigmoid", |x| x.logsigmoid())];
    for (name, f) in ops {
        let second = |x: &Tensor| -> Tensor {
            let x = x.detach().requires_grad_(true).unwrap();
            let y = f(&x).unwrap().sum().unwrap();
            let g = magpie_core::autograd::grad(&[y], std::slice::from_ref(&x), &[], true, true, false).unwrap();
            let g0 = g[0].clone().unwrap();
            g0.sum().unwrap().backward().unwrap();
            x.grad().unwrap()
        };
        let want = second(&xc);
        let got = second(&xc.to_device(dev).unwrap());
        assert_close(&format!("{name} second derivative"), &got.to_device(Device::Cpu).unwrap(), &want, 1e-10, 1e-12);
    }
}

#[test]
fn parameter_errors_match_cpu() {
    let Some(dev) = gpu() else { return };
    let g = Tensor::from_vec(vec![1.0f32, -2.0], &[2]).unwrap().to_device(dev).unwrap();
    assert!(g.hardtanh(2.0, 1.0).is_err());
    assert!(g.softshrink(-0.5).is_err());
    assert!(g.celu(0.0).is_err());
    let b = Tensor::from_vec(vec![1.0f32, 0.0], &[2]).unwrap().to_dtype(DType::Bool).unwrap().to_device(dev).unwrap();
    assert!(b.relu().is_err(), "relu on bool is rejected as on the CPU");
}

//! CUDA elementwise ops (unary, binary with broadcasting and type promotion, where) compared
//! with the CPU on random inputs: odd sizes, transposed and sliced views, empty tensors,
//! broadcasting, every real dtype. Skips without CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Tensor};
use util::{assert_close, gpu, rand, tol, Rng};

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];
const INTS: [DType; 6] = [DType::Bool, DType::U8, DType::I8, DType::I16, DType::I32, DType::I64];

/// Inputs of one dtype in several layouts: (name, cpu tensor, gpu tensor).
fn layouts(rng: &mut Rng, d: DType, lo: f64, hi: f64, dev: Device) -> Vec<(String, Tensor, Tensor)> {
    let mut v = Vec::new();
    for shape in [vec![37usize], vec![5, 7], vec![0, 3], vec![]] {
        let c = rand(rng, &shape, d, lo, hi);
        let g = c.to_device(dev).unwrap();
        v.push((format!("{shape:?}"), c, g));
    }
    let c = rand(rng, &[6, 9], d, lo, hi);
    let g = c.to_device(dev).unwrap();
    v.push(("transposed".into(), c.t().unwrap(), g.t().unwrap()));
    v.push(("sliced".into(), c.slice(1, Some(1), Some(9), 3).unwrap(), g.slice(1, Some(1), Some(9), 3).unwrap()));
    v
}

fn op1(name: &str, x: &Tensor) -> magpie_core::Result<Tensor> {
    call(name, vec![Value::Tensor(x.clone())], vec![])?.into_tensor()
}

fn op2(name: &str, a: Value, b: Value) -> magpie_core::Result<Tensor> {
    call(name, vec![a, b], vec![])?.into_tensor()
}

fn check(what: &str, got: magpie_core::Result<Tensor>, want: magpie_core::Result<Tensor>, dev: Device) {
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
fn unary_ops_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(11);
    let ops = [
        "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "square", "sin", "cos", "tan",
        "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "deg2rad", "rad2deg", "sinc", "abs",
        "sign", "sgn", "ceil", "floor", "round", "trunc", "frac", "erf", "erfc", "erfinv", "lgamma",
    ];
    for d in FLOATS.iter().chain(INTS.iter()) {
        for (lname, c, g) in layouts(&mut rng, *d, -0.95, 3.0, dev) {
            for op in ops {
                check(&format!("{op} {d} {lname}"), op1(op, &g), op1(op, &c), dev);
            }
        }
    }
}

#[test]
fn binary_ops_match_cpu_with_broadcasting_and_promotion() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(12);
    let ops = [
        "add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum",
        "fmax", "fmin", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "atan2", "hypot",
        "copysign", "nextafter", "logaddexp", "logaddexp2", "xlogy", "heaviside", "bitwise_left_shift", "bitwise_right_shift", "gcd",
    ];
    let pairs = [(DType::F32, DType::F32), (DType::F16, DType::F16), (DType::BF16, DType::F32), (DType::F64, DType::I64), (DType::I64, DType::I64), (DType::I32, DType::U8), (DType::Bool, DType::Bool), (DType::I8, DType::F16)];
    let shapes: [(&[usize], &[usize]); 4] = [(&[5, 7], &[5, 7]), (&[5, 1], &[1, 7]), (&[3, 1, 4], &[4]), (&[0, 3], &[3])];
    for (da, db) in pairs {
        for (sa, sb) in shapes {
            // positive divisors for the integer division ops (a zero divisor is an error there)
            let ac = rand(&mut rng, sa, da, -4.0, 6.0);
            let bc = rand(&mut rng, sb, db, 1.0, 5.0);
            let (ag, bg) = (ac.to_device(dev).unwrap(), bc.to_device(dev).unwrap());
            for op in ops {
                let what = format!("{op} {da}{sa:?} {db}{sb:?}");
                check(&what, op2(op, Value::Tensor(ag.clone()), Value::Tensor(bg.clone())), op2(op, Value::Tensor(ac.clone()), Value::Tensor(bc.clone())), dev);
            }
            // a transposed operand and a scalar operand
            if sa.len() == 2 && sa == sb {
                let (at_c, at_g) = (ac.t().unwrap().contiguous().unwrap().t().unwrap(), ag.t().unwrap().contiguous().unwrap().t().unwrap());
                for op in ["add", "mul", "sub", "div", "lt", "maximum", "pow"] {
                    check(&format!("{op} strided {da} {db}"), op2(op, Value::Tensor(at_g.clone()), Value::Tensor(bg.clone())), op2(op, Value::Tensor(at_c.clone()), Value::Tensor(bc.clone())), dev);
                    check(&format!("{op} scalar {da}"), op2(op, Value::Tensor(ag.clone()), Value::Float(2.5)), op2(op, Value::Tensor(ac.clone()), Value::Float(2.5)), dev);
                    check(&format!("{op} int scalar {da}"), op2(op, Value::Tensor(ag.clone()), Value::Int(3)), op2(op, Value::Tensor(ac.clone()), Value::Int(3)), dev);
                }
            }
        }
    }
}

#[test]
fn where_and_in_place_ops_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(13);
    for d in [DType::F32, DType::F16, DType::I64, DType::Bool, DType::F64] {
        let cc = rand(&mut rng, &[4, 1], DType::F32, -1.0, 1.0).gt_scalar(0.0).unwrap();
        let ac = rand(&mut rng, &[4, 5], d, -3.0, 3.0);
        let bc = rand(&mut rng, &[5], DType::F32, -3.0, 3.0);
        let (cg, ag, bg) = (cc.to_device(dev).unwrap(), ac.to_device(dev).unwrap(), bc.to_device(dev).unwrap());
        check(&format!("where {d}"), cg.where_(&ag, &bg), cc.where_(&ac, &bc), dev);
        // in place through a view
        if d.is_float() {
            let (xc, xg) = (ac.copy().unwrap(), ag.copy().unwrap());
            xc.t().unwrap().narrow(0, 1, 3).unwrap().add_(&bc.narrow(0, 0, 4).unwrap().to_dtype(d).unwrap()).unwrap();
            xg.t().unwrap().narrow(0, 1, 3).unwrap().add_(&bg.narrow(0, 0, 4).unwrap().to_dtype(d).unwrap()).unwrap();
            check(&format!("add_ view {d}"), Ok(xg.clone()), Ok(xc.clone()), dev);
            for op in ["sin_", "exp_", "neg_"] {
                call(op, vec![Value::Tensor(xc.clone())], vec![]).unwrap();
                call(op, vec![Value::Tensor(xg.clone())], vec![]).unwrap();
                check(&format!("{op} {d}"), Ok(xg.clone()), Ok(xc.clone()), dev);
            }
        }
    }
}

#[test]
fn large_contiguous_binary_matches_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(14);
    let n = (1 << 20) + 3;
    for d in [DType::F32, DType::BF16] {
        let (ac, bc) = (rand(&mut rng, &[n], d, -1.0, 1.0), rand(&mut rng, &[n], d, -1.0, 1.0));
        let (ag, bg) = (ac.to_device(dev).unwrap(), bc.to_device(dev).unwrap());
        check(&format!("add large {d}"), ag.add(&bg), ac.add(&bc), dev);
        check(&format!("mul large {d}"), ag.mul(&bg), ac.mul(&bc), dev);
    }
}

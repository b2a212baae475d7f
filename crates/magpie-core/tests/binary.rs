//! Binary and ternary elementwise ops: PyTorch type promotion, broadcasting, scalar operands,
//! integer edge cases, in-place casting rules, and gradients against finite differences.
//! Expected values are PyTorch's (checked by hand against `torch` semantics) or naive loops.

use magpie_core::ops::binary as b;
use magpie_core::ops::ternary;
use magpie_core::ops::Operand;
use magpie_core::registry::{call, Value};
use magpie_core::{autograd, DType, Result, Scalar, Tensor};

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}
fn i64s(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}
fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}
fn ints(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

#[test]
fn promotion_table() -> Result<()> {
    let i32t = Tensor::from_vec(vec![1i32, 2], &[2])?;
    let u8t = Tensor::from_vec(vec![1u8, 2], &[2])?;
    let i8t = Tensor::from_vec(vec![1i8, 2], &[2])?;
    let f16t = Tensor::from_vec(vec![magpie_core::half::f16::from_f32(1.0); 2], &[2])?;
    let bt = Tensor::from_vec(vec![true, false], &[2])?;
    // dims tensors promote by dtype; scalars and 0-d tensors only across categories
    assert_eq!(i32t.add_scalar(5i64)?.dtype(), DType::I32);
    assert_eq!(i32t.add_scalar(0.5)?.dtype(), DType::F32);
    assert_eq!(u8t.add(&i8t)?.dtype(), DType::I16);
    assert_eq!(f16t.add(&Tensor::scalar(2.0f64))?.dtype(), DType::F16);
    assert_eq!(i32t.add(&Tensor::scalar(2.0f64))?.dtype(), DType::F64);
    assert_eq!(u8t.add(&Tensor::scalar(300i64))?.dtype(), DType::U8);
    assert_eq!(bt.add(&bt)?.dtype(), DType::Bool);
    assert_eq!(bt.add_scalar(1i64)?.dtype(), DType::I64);
    assert_eq!(i32t.add(&f16t)?.dtype(), DType::F16);
    // true division and float-only math give the default float dtype for integers
    assert_eq!(i32t.div(&i32t)?.dtype(), DType::F32);
    assert_eq!(i32t.atan2(&i32t)?.dtype(), DType::F32);
    assert_eq!(i32t.xlogy(&i32t)?.dtype(), DType::F32);
    // rounding divisions keep integers
    assert_eq!(i32t.div_mode(&i32t, Some("floor"))?.dtype(), DType::I32);
    // comparisons are bool, computed in the promoted type: 1 (int) < 1.5 (float scalar)
    let lt = i32t.lt_scalar(1.5)?;
    assert_eq!(lt.dtype(), DType::Bool);
    assert_eq!(lt.to_vec::<bool>()?, vec![true, false]);
    // float_power is always double
    assert_eq!(f32s(&[2.0], &[1]).float_power(&i64s(&[3], &[1]))?.dtype(), DType::F64);
    Ok(())
}

#[test]
fn broadcasting_matches_naive_loop() -> Result<()> {
    let a: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
    let bb: Vec<f32> = (0..4).map(|i| i as f32 + 0.25).collect();
    let x = f32s(&a, &[3, 2, 1]);
    let y = f32s(&bb, &[4]);
    let out = x.mul(&y)?;
    assert_eq!(out.shape(), &[3, 2, 4]);
    let mut want = Vec::new();
    for &p in &a {
        for &q in &bb {
            want.push((p * q) as f64);
        }
    }
    assert_eq!(vals(&out), want);
    // a non-contiguous (transposed) operand
    let m = f32s(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let mt = m.t()?;
    let s = mt.sub(&f32s(&[10., 20.], &[2]))?;
    assert_eq!(vals(&s), vec![-9., -16., -8., -15., -7., -14.]);
    // incompatible shapes are an error
    assert!(f32s(&[1., 2., 3.], &[3]).add(&f32s(&[1., 2.], &[2])).is_err());
    Ok(())
}

#[test]
fn scalar_operands_on_either_side() -> Result<()> {
    let x = f32s(&[1., 2., 4.], &[3]);
    let r = b::pow_op(Operand::Scalar(Scalar::Int(2)), Operand::Tensor(&x))?;
    assert_eq!(vals(&r), vec![2., 4., 16.]);
    assert_eq!(r.dtype(), DType::F32);
    let r = b::rsub_op(Operand::Tensor(&x), Operand::Scalar(Scalar::Int(10)), Some(Scalar::Int(2)))?;
    assert_eq!(vals(&r), vec![8., 6., 2.]);
    let r = call("__rdiv__", vec![Value::Tensor(x.clone()), Value::Int(8)], vec![])?.into_tensor()?;
    assert_eq!(vals(&r), vec![8., 4., 2.]);
    let r = call("add", vec![Value::Tensor(x.clone()), Value::Float(0.5)], vec![("alpha".into(), Value::Int(2))])?.into_tensor()?;
    assert_eq!(vals(&r), vec![2., 3., 5.]);
    // Python-number-only calls and scalar `other` where PyTorch takes only tensors are rejected
    assert!(call("atan2", vec![Value::Tensor(x.clone()), Value::Int(2)], vec![]).is_err());
    assert!(call("xlogy", vec![Value::Int(2), Value::Int(3)], vec![]).is_err());
    let w = ternary::where_op(&Tensor::from_vec(vec![true, false, true], &[3])?, Operand::Tensor(&x), Operand::Scalar(Scalar::Float(0.0)))?;
    assert_eq!(vals(&w), vec![1., 0., 4.]);
    assert_eq!(w.dtype(), DType::F32);
    Ok(())
}

#[test]
fn integer_division_semantics() -> Result<()> {
    let a = i64s(&[-7, 7, -7, 7, 5], &[5]);
    let d = i64s(&[2, -2, -2, 2, 5], &[5]);
    assert_eq!(ints(&a.floor_divide(&d)?), vec![-4, -4, 3, 3, 1]);
    assert_eq!(ints(&a.div_mode(&d, Some("trunc"))?), vec![-3, -3, 3, 3, 1]);
    assert_eq!(ints(&a.remainder(&d)?), vec![1, -1, -1, 1, 0]);
    assert_eq!(ints(&a.fmod(&d)?), vec![-1, 1, -1, 1, 0]);
    assert_eq!(vals(&a.div(&d)?), vec![-3.5, -3.5, 3.5, 3.5, 1.0]);
    // integer division by zero raises (ZeroDivisionError), never panics
    let z = i64s(&[1, 0, 1, 1, 1], &[5]);
    assert!(a.floor_divide(&z).is_err());
    assert!(a.remainder(&z).is_err());
    assert!(a.fmod(&z).is_err());
    assert!(a.div_mode(&z, Some("trunc")).is_err());
    assert!(a.div_mode(&d, Some("round")).is_err());
    // true division by zero is fine: inf
    assert_eq!(vals(&a.div(&z)?)[1], f64::INFINITY);
    // i64::MIN / -1 wraps like PyTorch instead of overflowing
    let m = i64s(&[i64::MIN], &[1]);
    assert_eq!(ints(&m.div_mode(&i64s(&[-1], &[1]), Some("trunc"))?), vec![i64::MIN]);
    // float floor division and remainder follow Python
    let x = f32s(&[-7.5, 7.5], &[2]);
    let y = f32s(&[2.0, -2.0], &[2]);
    assert_eq!(vals(&x.floor_divide(&y)?), vec![-4., -4.]);
    assert_eq!(vals(&x.remainder(&y)?), vec![0.5, -0.5]);
    assert_eq!(vals(&x.fmod(&y)?), vec![-1.5, 1.5]);
    Ok(())
}

#[test]
fn integer_pow_and_bitwise() -> Result<()> {
    let a = i64s(&[2, -1, 1, 3, 0], &[5]);
    let e = i64s(&[-1, -3, -5, 3, 0], &[5]);
    assert_eq!(ints(&a.pow(&e)?), vec![0, -1, 1, 27, 1]);
    let err = a.pow_scalar(-2i64).unwrap_err().to_string();
    assert!(err.contains("Integers to negative integer powers are not allowed"), "{err}");
    // scalar float exponent promotes to float
    assert_eq!(a.pow_scalar(0.5)?.dtype(), DType::F32);
    let x = i64s(&[-8, 5, 1], &[3]);
    assert_eq!(ints(&x.bitwise_left_shift(&i64s(&[1, 2, 64], &[3]))?), vec![-16, 20, 0]);
    assert_eq!(ints(&x.bitwise_right_shift(&i64s(&[1, 1, 70], &[3]))?), vec![-4, 2, 0]);
    assert_eq!(ints(&x.bitwise_right_shift_scalar(70i64)?), vec![-1, 0, 0]);
    assert_eq!(ints(&x.bitwise_xor_scalar(3i64)?), vec![-8 ^ 3, 6, 2]);
    assert!(f32s(&[1.0], &[1]).bitwise_and(&f32s(&[1.0], &[1])).is_err());
    assert_eq!(ints(&i64s(&[12, -18, 0], &[3]).gcd(&i64s(&[18, 12, 5], &[3]))?), vec![6, 6, 5]);
    assert_eq!(ints(&i64s(&[4, -6, 0], &[3]).lcm(&i64s(&[6, 4, 5], &[3]))?), vec![12, 12, 0]);
    // bool subtraction is rejected like PyTorch
    let bt = Tensor::from_vec(vec![true, false], &[2])?;
    assert!(bt.sub(&bt).is_err());
    assert!(bt.sub_scalar(1i64).is_err());
    Ok(())
}

#[test]
fn nan_and_special_values() -> Result<()> {
    let x = f32s(&[f32::NAN, 1.0, 3.0], &[3]);
    let y = f32s(&[0.0, f32::NAN, 2.0], &[3]);
    let mx = vals(&x.maximum(&y)?);
    assert!(mx[0].is_nan() && mx[1].is_nan() && mx[2] == 3.0);
    assert_eq!(vals(&x.fmax(&y)?), vec![0.0, 1.0, 3.0]);
    assert_eq!(vals(&x.fmin(&y)?), vec![0.0, 1.0, 2.0]);
    // xlogy: 0 * log(0) = 0, NaN in y wins
    let r = vals(&f32s(&[0.0, 0.0, 2.0], &[3]).xlogy(&f32s(&[0.0, f32::NAN, 1.0], &[3]))?);
    assert!(r[0] == 0.0 && r[1].is_nan() && r[2] == 0.0);
    // heaviside
    let h = f32s(&[-1.0, 0.0, 2.0], &[3]).heaviside(&f32s(&[0.5], &[1]))?;
    assert_eq!(vals(&h), vec![0.0, 0.5, 1.0]);
    // nextafter moves one ulp
    let n = f32s(&[1.0], &[1]).nextafter(&f32s(&[2.0], &[1]))?;
    assert_eq!(n.to_vec::<f32>()?[0], 1.0f32 + f32::EPSILON);
    // logaddexp of equal infinities, and a large-magnitude pair without overflow
    let l = vals(&f32s(&[f32::NEG_INFINITY, 1000.0], &[2]).logaddexp(&f32s(&[f32::NEG_INFINITY, 1000.0], &[2]))?);
    assert!(l[0] == f64::NEG_INFINITY && (l[1] - (1000.0 + 2f64.ln())).abs() < 1e-3);
    // special functions against known values (scipy)
    let z = vals(&Tensor::from_vec(vec![2.0f64, 3.0], &[2])?.zeta(&Tensor::from_vec(vec![1.0f64, 2.0], &[2])?)?);
    assert!((z[0] - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-12);
    assert!((z[1] - 0.2020569031595942).abs() < 1e-12);
    let g = vals(&Tensor::from_vec(vec![0.5f64, 2.0], &[2])?.igamma(&Tensor::from_vec(vec![1.0f64, 3.0], &[2])?)?);
    assert!((g[0] - 0.8427007929497149).abs() < 1e-12);
    assert!((g[1] - (1.0 - 4.0 * (-3f64).exp())).abs() < 1e-12);
    let gc = vals(&Tensor::from_vec(vec![2.0f64], &[1])?.igammac(&Tensor::from_vec(vec![3.0f64], &[1])?)?);
    assert!((gc[0] - 0.19914827347145578).abs() < 1e-12);
    Ok(())
}

#[test]
fn comparisons_and_closeness() -> Result<()> {
    let x = f32s(&[1.0, 2.0, f32::NAN], &[3]);
    let y = f32s(&[1.0, 2.1, f32::NAN], &[3]);
    assert_eq!(x.eq(&y)?.to_vec::<bool>()?, vec![true, false, false]);
    assert_eq!(x.isclose(&y, 0.1, 0.0, false)?.to_vec::<bool>()?, vec![true, true, false]);
    assert_eq!(x.isclose(&y, 0.0, 0.0, true)?.to_vec::<bool>()?, vec![true, false, true]);
    assert!(x.isclose(&y, -1.0, 0.0, false).is_err());
    assert!(!x.allclose(&y, 0.1, 0.0, false)?);
    assert!(x.allclose(&y, 0.1, 0.0, true)?);
    assert!(!x.equal(&x)?); // NaN != NaN
    assert!(f32s(&[1.0, 2.0], &[2]).equal(&f32s(&[1.0, 2.0], &[2]))?);
    assert!(!f32s(&[1.0, 2.0], &[2]).equal(&f32s(&[1.0, 2.0], &[1, 2]))?);
    let l = i64s(&[0, 3, -1], &[3]).logical_and(&f32s(&[1.0, 0.0, f32::NAN], &[3]))?;
    assert_eq!(l.to_vec::<bool>()?, vec![false, false, true]);
    Ok(())
}

#[test]
fn ternary_ops() -> Result<()> {
    let x = f32s(&[-2.0, 0.5, 3.0, f32::NAN], &[4]);
    assert_eq!(vals(&x.clamp(Some(-1.0), Some(1.0))?)[..3], [-1.0, 0.5, 1.0]);
    assert!(vals(&x.clamp(Some(-1.0), Some(1.0))?)[3].is_nan());
    // min > max gives max
    assert_eq!(vals(&x.clamp(Some(2.0), Some(1.0))?)[..3], [1.0, 1.0, 1.0]);
    assert!(x.clamp(None, None).is_err());
    // integer clamp with a float bound promotes
    let c = i64s(&[1, 2, 3], &[3]).clamp_min(1.5)?;
    assert_eq!(c.dtype(), DType::F32);
    assert_eq!(vals(&c), vec![1.5, 2.0, 3.0]);
    let lo = f32s(&[0.0, 1.0, 2.0, 0.0], &[4]);
    assert_eq!(vals(&x.clamp_tensor(Some(&lo), None)?)[..3], [0.0, 1.0, 3.0]);
    // lerp
    let s = f32s(&[0.0, 10.0], &[2]);
    let e = f32s(&[1.0, 20.0], &[2]);
    assert_eq!(vals(&s.lerp(&e, 0.25)?), vec![0.25, 12.5]);
    assert_eq!(vals(&s.lerp(&e, 0.75)?), vec![0.75, 17.5]);
    assert!(i64s(&[1], &[1]).lerp(&i64s(&[2], &[1]), 0.5).is_err());
    // addcmul / addcdiv
    let one = f32s(&[1.0, 1.0], &[2]);
    assert_eq!(vals(&one.addcmul(&f32s(&[2.0, 3.0], &[2]), &f32s(&[4.0], &[1]), 0.5)?), vec![5.0, 7.0]);
    assert_eq!(vals(&one.addcdiv(&f32s(&[2.0, 3.0], &[2]), &f32s(&[4.0], &[1]), 2)?), vec![2.0, 2.5]);
    assert!(i64s(&[1], &[1]).addcdiv(&i64s(&[1], &[1]), &i64s(&[1], &[1]), 1).is_err());
    assert_eq!(ints(&i64s(&[1, 1], &[2]).addcmul(&i64s(&[2, 3], &[2]), &i64s(&[4, 5], &[2]), 3)?), vec![25, 46]);
    // masked_fill broadcasts the mask and keeps the dtype
    let m = Tensor::from_vec(vec![true, false], &[2])?;
    let t = i64s(&[1, 2, 3, 4], &[2, 2]);
    assert_eq!(ints(&t.masked_fill(&m, 9)?), vec![9, 2, 9, 4]);
    assert!(t.masked_fill(&i64s(&[1, 0], &[2]), 9).is_err());
    let bad = ternary::masked_fill_op(&t, &m, Operand::Tensor(&i64s(&[1], &[1])));
    assert!(bad.is_err());
    Ok(())
}

#[test]
fn inplace_casting_rules() -> Result<()> {
    let x = i64s(&[1, 2], &[2]);
    let err = x.add_(&f32s(&[0.5, 0.5], &[2])).unwrap_err().to_string();
    assert!(err.contains("result type Float can't be cast to the desired output type Long"), "{err}");
    assert!(x.div_(&i64s(&[1, 2], &[2])).is_err());
    // float self with int other is fine, and the write is visible through the handle
    let y = f32s(&[1.0, 2.0], &[2]);
    y.add_(&i64s(&[1, 1], &[2]))?;
    assert_eq!(vals(&y), vec![2.0, 3.0]);
    // an in-place op cannot broadcast self to a bigger shape
    assert!(f32s(&[1.0], &[1]).add_(&f32s(&[1.0, 2.0], &[2])).is_err());
    // masked_fill_ through the registry, in a view
    let z = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let row = z.select(0, 1)?;
    call("masked_fill_", vec![Value::Tensor(row), Value::Tensor(Tensor::from_vec(vec![true, false], &[2])?), Value::Float(0.0)], vec![])?;
    assert_eq!(vals(&z), vec![1.0, 2.0, 0.0, 4.0]);
    // clamp_ and the bool result of an in-place comparison
    let w = f32s(&[-3.0, 3.0], &[2]);
    w.clamp_(Some(-1.0), Some(1.0))?;
    assert_eq!(vals(&w), vec![-1.0, 1.0]);
    call("lt_", vec![Value::Tensor(w.clone()), Value::Float(0.0)], vec![])?;
    assert_eq!(vals(&w), vec![1.0, 0.0]);
    Ok(())
}

/// Checks autograd gradients of `f` at `inputs` (float64) against central finite differences of
/// `sum(f(inputs) * gout)`.
fn gradcheck(name: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>) -> Result<()> {
    let xs: Vec<Tensor> = inputs.iter().map(|t| t.detach().requires_grad_(true).unwrap()).collect();
    let out = f(&xs)?;
    let n = out.numel();
    let gout = Tensor::from_vec((0..n).map(|i| 0.3 + 0.17 * i as f64).collect::<Vec<_>>(), out.shape())?;
    let grads = autograd::grad(&[out], &xs, &[gout.clone()], false, false, true)?;
    let gv: Vec<f64> = gout.to_vec()?;
    let eps = 1e-6;
    for (k, x) in inputs.iter().enumerate() {
        let base: Vec<f64> = x.to_vec()?;
        let analytic: Vec<f64> = match &grads[k] {
            Some(g) => g.to_vec()?,
            None => vec![0.0; base.len()],
        };
        for i in 0..base.len() {
            let eval = |d: f64| -> Result<f64> {
                let mut v = base.clone();
                v[i] += d;
                let mut args: Vec<Tensor> = inputs.to_vec();
                args[k] = Tensor::from_vec(v, x.shape())?;
                let o: Vec<f64> = f(&args)?.to_vec()?;
                Ok(o.iter().zip(&gv).map(|(a, b)| a * b).sum())
            };
            let num = (eval(eps)? - eval(-eps)?) / (2.0 * eps);
            assert!(
                (num - analytic[i]).abs() <= 1e-5 + 1e-4 * num.abs(),
                "{name}: d/d input {k}[{i}]: numeric {num}, autograd {}",
                analytic[i]
            );
        }
    }
    Ok(())
}

fn f64s(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

#[test]
fn gradients_match_finite_differences() -> Result<()> {
    let a = f64s(&[0.7, 1.3, 2.1, 0.4, 1.9, 0.9], &[2, 3]);
    let bb = f64s(&[1.1, 0.6, 1.7], &[3]);
    let neg = f64s(&[-0.7, 1.3, -2.1, 0.4, -1.9, 0.9], &[2, 3]);
    type F = fn(&[Tensor]) -> Result<Tensor>;
    let cases: Vec<(&str, Tensor, Tensor, F)> = vec![
        ("add", a.clone(), bb.clone(), |t| b::add_alpha(Operand::Tensor(&t[0]), Operand::Tensor(&t[1]), Some(Scalar::Float(2.5)))),
        ("sub", a.clone(), bb.clone(), |t| b::sub_alpha(Operand::Tensor(&t[0]), Operand::Tensor(&t[1]), Some(Scalar::Int(3)))),
        ("mul", a.clone(), bb.clone(), |t| t[0].mul(&t[1])),
        ("div", a.clone(), bb.clone(), |t| t[0].div(&t[1])),
        ("pow", a.clone(), bb.clone(), |t| t[0].pow(&t[1])),
        ("float_power", a.clone(), bb.clone(), |t| t[0].float_power(&t[1])),
        ("atan2", neg.clone(), bb.clone(), |t| t[0].atan2(&t[1])),
        ("hypot", neg.clone(), bb.clone(), |t| t[0].hypot(&t[1])),
        ("copysign", neg.clone(), bb.clone(), |t| t[0].copysign(&t[1])),
        ("logaddexp", neg.clone(), bb.clone(), |t| t[0].logaddexp(&t[1])),
        ("logaddexp2", neg.clone(), bb.clone(), |t| t[0].logaddexp2(&t[1])),
        ("xlogy", neg.clone(), bb.clone(), |t| t[0].xlogy(&t[1])),
        ("xlog1py", neg.clone(), bb.clone(), |t| t[0].xlog1py(&t[1])),
        ("remainder", neg.clone(), bb.clone(), |t| t[0].remainder(&t[1])),
        ("fmod", neg.clone(), bb.clone(), |t| t[0].fmod(&t[1])),
        ("maximum", neg.clone(), bb.clone(), |t| t[0].maximum(&t[1])),
        ("minimum", neg.clone(), bb.clone(), |t| t[0].minimum(&t[1])),
        ("fmax", neg.clone(), bb.clone(), |t| t[0].fmax(&t[1])),
        ("fmin", neg.clone(), bb.clone(), |t| t[0].fmin(&t[1])),
        ("ldexp", neg.clone(), bb.clone(), |t| t[0].ldexp(&t[1])),
        ("clamp", neg.clone(), bb.clone(), |t| t[0].clamp_tensor(Some(&t[1].mul_scalar(-1.0)?), Some(&t[1]))),
        ("lerp", neg.clone(), bb.clone(), |t| t[0].lerp(&t[1].broadcast_to(&[2, 3])?, 0.3)),
        ("lerp_tensor", neg.clone(), bb.clone(), |t| t[0].lerp_tensor(&t[1].broadcast_to(&[2, 3])?, &t[1].mul_scalar(0.4)?)),
        ("addcmul", neg.clone(), bb.clone(), |t| t[0].addcmul(&t[1], &t[0], 0.5)),
        ("addcdiv", neg.clone(), bb.clone(), |t| t[0].addcdiv(&t[0], &t[1], 1.5)),
        ("where", neg.clone(), bb.clone(), |t| t[0].gt_scalar(0.0)?.where_(&t[0], &t[1])),
    ];
    for (name, x, y, f) in cases {
        gradcheck(name, &[x, y], f)?;
    }
    // masked_fill with a 0-d tensor value gets the masked gradient sum
    let mask = Tensor::from_vec(vec![true, false, true], &[3])?;
    gradcheck("masked_fill", &[a.clone(), f64s(&[0.5], &[])], move |t| {
        ternary::masked_fill_op(&t[0], &mask, Operand::Tensor(&t[1]))
    })?;
    // scalar exponent and scalar base
    gradcheck("pow_scalar", &[a.clone()], |t| t[0].pow_scalar(2.5))?;
    gradcheck("rpow", &[a.clone()], |t| b::pow_op(Operand::Scalar(Scalar::Float(1.7)), Operand::Tensor(&t[0])))?;
    Ok(())
}

#[test]
fn extremum_ties_split_the_gradient() -> Result<()> {
    let x = f64s(&[1.0, 2.0, 3.0], &[3]).requires_grad_(true)?;
    let y = f64s(&[1.0, 5.0, 0.0], &[3]).requires_grad_(true)?;
    let g = autograd::grad(&[x.maximum(&y)?], &[x.clone(), y.clone()], &[f64s(&[0.0; 3], &[3]).ones_like()?], false, false, true)?;
    assert_eq!(vals(g[0].as_ref().unwrap()), vec![0.5, 0.0, 1.0]);
    assert_eq!(vals(g[1].as_ref().unwrap()), vec![0.5, 1.0, 0.0]);
    // fmax gives ties to the first input
    let g = autograd::grad(&[x.fmax(&y)?], &[x.clone(), y.clone()], &[f64s(&[0.0; 3], &[3]).ones_like()?], false, false, true)?;
    assert_eq!(vals(g[0].as_ref().unwrap()), vec![1.0, 0.0, 1.0]);
    assert_eq!(vals(g[1].as_ref().unwrap()), vec![0.0, 1.0, 0.0]);
    // pow: d/da at b == 0 is 0, d/db at a == 0, b >= 0 is 0
    let a0 = f64s(&[0.0, 0.0], &[2]).requires_grad_(true)?;
    let e0 = f64s(&[0.0, 2.0], &[2]).requires_grad_(true)?;
    let g = autograd::grad(&[a0.pow(&e0)?], &[a0.clone(), e0.clone()], &[f64s(&[1.0, 1.0], &[2])], false, false, true)?;
    assert_eq!(vals(g[0].as_ref().unwrap()), vec![0.0, 0.0]);
    assert_eq!(vals(g[1].as_ref().unwrap()), vec![0.0, 0.0]);
    Ok(())
}

//! Floating-point binary math: `atan2`, `hypot`, `copysign`, `nextafter`, `ldexp`, `logaddexp`,
//! `logaddexp2`, `xlogy`, `special.xlog1py`, `special.zeta`, `igamma`, `igammac`, `heaviside`.

use super::special_fns::{hurwitz_zeta, igamma, igammac};
use super::{binary, common_dtype, not_implemented, BinarySpec, Promote};
use crate::ops::Operand;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

macro_rules! logaddexp {
    ($t:ty) => {
        |a: $t, b: $t| -> $t {
            if a.is_infinite() && a == b {
                a
            } else {
                let m = a.max(b);
                m + (-(a - b).abs()).exp().ln_1p()
            }
        }
    };
}
macro_rules! logaddexp2 {
    ($t:ty) => {
        |a: $t, b: $t| -> $t {
            if a.is_infinite() && a == b {
                a
            } else {
                let m = a.max(b);
                m + (-(a - b).abs()).exp2().ln_1p() / std::f64::consts::LN_2 as $t
            }
        }
    };
}
macro_rules! xlogy {
    ($t:ty, $log:ident) => {
        |a: $t, b: $t| -> $t {
            if b.is_nan() {
                <$t>::NAN
            } else if a == 0.0 {
                0.0
            } else {
                a * b.$log()
            }
        }
    };
}

fn nextafter32(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        return f32::NAN;
    }
    if a == b {
        return b;
    }
    if a == 0.0 {
        return f32::from_bits(1).copysign(b);
    }
    let bits = a.to_bits();
    let up = (b > a) == (a > 0.0);
    f32::from_bits(if up { bits + 1 } else { bits - 1 })
}
fn nextafter64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == b {
        return b;
    }
    if a == 0.0 {
        return f64::from_bits(1).copysign(b);
    }
    let bits = a.to_bits();
    let up = (b > a) == (a > 0.0);
    f64::from_bits(if up { bits + 1 } else { bits - 1 })
}

spec!(ATAN2, "atan2", "atan2", Promote::IntToFloat, f32::atan2, f64::atan2, None, None, None, None,
    Some(|a, b, _, g| {
        let r = a.mul(a)?.add(&b.mul(b)?)?;
        let k = g.div(&r)?;
        Ok((Some(k.mul(b)?), Some(k.mul(a)?.neg_raw()?)))
    }));
spec!(HYPOT, "hypot", "hypot", Promote::Same, f32::hypot, f64::hypot, None, None, None, None,
    Some(|a, b, o, g| {
        let k = g.div(&o()?)?;
        Ok((Some(k.mul(a)?), Some(k.mul(b)?)))
    }));
spec!(COPYSIGN, "copysign", "copysign", Promote::IntToFloat, f32::copysign, f64::copysign, None, None, None, None,
    Some(|a, _, o, g| {
        // d/da copysign(a, b) = sign(a) * sign(b) = out / a, taken as 0 where a == 0
        let r = o()?.div(a)?;
        let ga = a.eq_scalar(0)?.where_(&r.zeros_like()?, &g.mul(&r)?)?;
        // PyTorch gives `other` a zero gradient (not none)
        Ok((Some(ga), Some(g.zeros_like()?)))
    }));
spec!(NEXTAFTER, "nextafter", "nextafter", Promote::Same, nextafter32, nextafter64, None, None, None, None,
    Some(|_, _, _, g| Ok((Some(g.clone()), None))));
spec!(LOGADDEXP, "logaddexp", "logaddexp", Promote::Same, logaddexp!(f32), logaddexp!(f64), None, None, None, None,
    Some(|a, b, _, g| {
        // d/da = 1 / (1 + exp(b - a))
        let ga = g.div(&b.sub(a)?.exp()?.add_scalar(1)?)?;
        let gb = g.div(&a.sub(b)?.exp()?.add_scalar(1)?)?;
        Ok((Some(ga), Some(gb)))
    }));
spec!(LOGADDEXP2, "logaddexp2", "logaddexp2", Promote::Same, logaddexp2!(f32), logaddexp2!(f64), None, None, None, None,
    Some(|a, b, _, g| {
        let two = |t: &Tensor| -> Result<Tensor> { pow_base_two(t) };
        let ga = g.div(&two(&b.sub(a)?)?.add_scalar(1)?)?;
        let gb = g.div(&two(&a.sub(b)?)?.add_scalar(1)?)?;
        Ok((Some(ga), Some(gb)))
    }));
spec!(XLOGY, "xlogy", "xlogy", Promote::IntToFloat, xlogy!(f32, ln), xlogy!(f64, ln), None, None, None, None,
    Some(|a, b, _, g| {
        // self: xlogy(grad, other), 0 where self == 0 and other <= 0; other: grad * self / other
        let ga = g.xlogy(b)?;
        let m = a.eq_scalar(0)?.logical_and(&b.le_scalar(0)?)?;
        let ga = m.where_(&ga.zeros_like()?, &ga)?;
        Ok((Some(ga), Some(g.mul(a)?.div(b)?)))
    }));
spec!(XLOG1PY, "special.xlog1py", "xlog1py", Promote::IntToFloat, xlogy!(f32, ln_1p), xlogy!(f64, ln_1p), None, None, None, None,
    Some(|a, b, _, g| {
        let ga = binary(&XLOG1PY, Operand::Tensor(g), Operand::Tensor(b))?;
        let m = a.eq_scalar(0)?.logical_and(&b.le_scalar(-1)?)?;
        let ga = m.where_(&ga.zeros_like()?, &ga)?;
        Ok((Some(ga), Some(g.mul(a)?.div(&b.add_scalar(1)?)?)))
    }));
spec!(ZETA, "special.zeta", "zeta", Promote::IntToFloat, |x, q| hurwitz_zeta(x as f64, q as f64) as f32, hurwitz_zeta, None, None, None, None, None);
spec!(IGAMMA, "igamma", "igamma", Promote::Same, |a, x| igamma(a as f64, x as f64) as f32, igamma, None, None, None, None, None);
spec!(IGAMMAC, "igammac", "igammac", Promote::Same, |a, x| igammac(a as f64, x as f64) as f32, igammac, None, None, None, None, None);
spec!(HEAVISIDE, "heaviside", "heaviside", Promote::Same, |a, b| if a == 0.0 { b } else { (a > 0.0) as u8 as f32 },
    |a, b| if a == 0.0 { b } else { (a > 0.0) as u8 as f64 },
    Some(|a: i64, b: i64| if a == 0 { b } else { (a > 0) as i64 }), Some(|a, b| a | b), None, None, None);

/// `2^t` for a float tensor (through `pow` with a scalar base).
fn pow_base_two(t: &Tensor) -> Result<Tensor> {
    binary(&super::POW, Operand::Scalar(Scalar::Float(2.0)), Operand::Tensor(t))
}

/// Rejects complex inputs for the real-only math ops.
fn real_only(op: &str, a: &Operand, b: &Operand) -> Result<()> {
    let dt = common_dtype(op, a, b)?;
    if dt.is_complex() {
        return Err(Error::dtype(op, format!("{op} does not support complex inputs")));
    }
    Ok(())
}

/// `torch.ldexp(a, e)`: `a * 2^e` (PyTorch's composite: `mul(a, pow(2.0, e))`).
pub fn ldexp_op(a: &Tensor, e: &Tensor) -> Result<Tensor> {
    a.mul(&pow_base_two(e)?)
}

/// Runs a spec after rejecting complex inputs.
pub fn real_binary(spec: &'static BinarySpec, a: Operand, b: Operand) -> Result<Tensor> {
    real_only(spec.name, &a, &b)?;
    binary(spec, a, b)
}

/// `torch.heaviside(input, values)`: both must have the same dtype.
pub fn heaviside_op(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(Error::dtype("heaviside", "heaviside is not yet implemented for tensors with different dtypes"));
    }
    if a.dtype().is_complex() {
        return Err(not_implemented("heaviside", a.dtype()));
    }
    binary(&HEAVISIDE, Operand::Tensor(a), Operand::Tensor(b))
}

impl Tensor {
    /// `torch.atan2(a, b)`: the angle of `(b, a)`; integers give floats.
    pub fn atan2(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&ATAN2, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.hypot(a, b)`: `sqrt(a^2 + b^2)` without overflow.
    pub fn hypot(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&HYPOT, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.copysign(a, b)`: `|a|` with the sign of `b`.
    pub fn copysign(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&COPYSIGN, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.nextafter(a, b)`: the next representable value after `a` toward `b`.
    pub fn nextafter(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&NEXTAFTER, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.ldexp(a, e)`: `a * 2^e`.
    pub fn ldexp(&self, other: &Tensor) -> Result<Tensor> {
        ldexp_op(self, other)
    }
    /// `torch.logaddexp(a, b)`: `log(exp(a) + exp(b))` without overflow.
    pub fn logaddexp(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&LOGADDEXP, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.logaddexp2(a, b)`: `log2(2^a + 2^b)`.
    pub fn logaddexp2(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&LOGADDEXP2, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.xlogy(a, b)`: `a * log(b)`, 0 where `a == 0` (unless `b` is NaN).
    pub fn xlogy(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&XLOGY, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.special.xlog1py(a, b)`: `a * log1p(b)`, 0 where `a == 0`.
    pub fn xlog1py(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&XLOG1PY, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.special.zeta(x, q)`: the Hurwitz zeta function.
    pub fn zeta(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&ZETA, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.igamma(a, x)`: the regularized lower incomplete gamma function P(a, x).
    pub fn igamma(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&IGAMMA, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.igammac(a, x)`: the regularized upper incomplete gamma function Q(a, x).
    pub fn igammac(&self, other: &Tensor) -> Result<Tensor> {
        real_binary(&IGAMMAC, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.heaviside(input, values)`.
    pub fn heaviside(&self, values: &Tensor) -> Result<Tensor> {
        heaviside_op(self, values)
    }
}

//! Arithmetic: `add`/`sub` (with `alpha`), `mul`, `div` (all rounding modes), `floor_divide`,
//! `remainder`, `fmod`, `pow`, `float_power`, `rsub`, and their in-place forms.

use super::{binary, check_int_divisor, common_dtype, operand_dtype, BinarySpec, Promote};
use crate::dtype::DType;
use crate::ops::Operand;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::Complex64;

/// Floor division of floats as PyTorch computes it (`div_floor_floating`): exact for
/// representable quotients, and consistent with `remainder`.
macro_rules! div_floor_float {
    ($t:ty) => {
        |a: $t, b: $t| -> $t {
            if b == 0.0 {
                return a / b;
            }
            let m = a % b;
            let mut div = (a - m) / b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                div -= 1.0;
            }
            if div != 0.0 {
                let mut f = div.floor();
                if div - f > 0.5 {
                    f += 1.0;
                }
                f
            } else {
                (0.0 as $t).copysign(a / b)
            }
        }
    };
}

/// Remainder with the divisor's sign (Python's `%`), for floats.
macro_rules! remainder_float {
    ($t:ty) => {
        |a: $t, b: $t| -> $t {
            let m = a % b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                m + b
            } else {
                m
            }
        }
    };
}

fn div_floor_int(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0; // rejected before the kernel runs
    }
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn remainder_int(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// Integer power as PyTorch's `powi`: negative exponents give 0 except for bases 1 and -1.
pub(crate) fn powi(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut base, mut e, mut acc) = (a, b as u64, 1i64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc
}

fn no_grad_bw(_: &Tensor, _: &Tensor, _: &dyn Fn() -> Result<Tensor>, _: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
    Ok((None, None))
}

spec!(ADD, "add", "add", Promote::Same, |a, b| a + b, |a, b| a + b, Some(|a: i64, b: i64| a.wrapping_add(b)), Some(|a, b| a | b), Some(|a, b| a + b), None,
    Some(|_, _, _, g| Ok((Some(g.clone()), Some(g.clone())))));
spec!(SUB, "sub", "sub", Promote::Same, |a, b| a - b, |a, b| a - b, Some(|a: i64, b: i64| a.wrapping_sub(b)), None, Some(|a, b| a - b), None,
    Some(|_, _, _, g| Ok((Some(g.clone()), Some(g.neg_raw()?)))));
spec!(MUL, "mul", "mul", Promote::Same, |a, b| a * b, |a, b| a * b, Some(|a: i64, b: i64| a.wrapping_mul(b)), Some(|a, b| a & b), Some(|a, b| a * b), None,
    Some(|a, b, _, g| Ok((Some(g.mul(b)?), Some(g.mul(a)?)))));
spec!(DIV, "div", "div", Promote::IntToFloat, |a, b| a / b, |a, b| a / b, None, None, Some(|a, b| a / b), None,
    Some(|a, b, _, g| {
        let ga = g.div(b)?;
        let gb = ga.neg_raw()?.mul(a)?.div(b)?;
        Ok((Some(ga), Some(gb)))
    }));
spec!(DIV_TRUNC, "div", "div_trunc", Promote::Same, |a, b| (a / b).trunc(), |a, b| (a / b).trunc(),
    Some(|a: i64, b: i64| if b == 0 { 0 } else { a.wrapping_div(b) }), None, None, None, Some(no_grad_bw));
spec!(DIV_FLOOR, "div", "div_floor", Promote::Same, div_floor_float!(f32), div_floor_float!(f64), Some(div_floor_int), None, None, None, Some(no_grad_bw));
spec!(FLOOR_DIVIDE, "floor_divide", "div_floor", Promote::Same, div_floor_float!(f32), div_floor_float!(f64), Some(div_floor_int), None, None, None, None);
spec!(REMAINDER, "remainder", "remainder", Promote::Same, remainder_float!(f32), remainder_float!(f64), Some(remainder_int), None, None, None,
    Some(|a, b, _, g| Ok((Some(g.clone()), Some(g.neg_raw()?.mul(&a.div_mode(b, Some("floor"))?)?)))));
spec!(FMOD, "fmod", "fmod", Promote::Same, |a, b| a % b, |a, b| a % b, Some(|a: i64, b: i64| if b == 0 { 0 } else { a.wrapping_rem(b) }), None, None, None,
    Some(|a, b, _, g| Ok((Some(g.clone()), Some(g.neg_raw()?.mul(&a.div_mode(b, Some("trunc"))?)?)))));
spec!(POW, "pow", "pow", Promote::Same, f32::powf, f64::powf, Some(powi), None, Some(|a: Complex64, b: Complex64| {
        if b == Complex64::new(0.0, 0.0) { Complex64::new(1.0, 0.0) } else if a == Complex64::new(0.0, 0.0) && b.re > 0.0 { a } else { a.powc(b) }
    }), None,
    Some(|a, b, o, g| {
        // d/da a^b = b a^(b-1), taken as 0 where b == 0 (PyTorch's pow_backward_self)
        let d = b.mul(&a.pow(&b.sub_scalar(1)?)?)?;
        let ga = b.eq_scalar(0)?.where_(&d.zeros_like()?, &g.mul(&d)?)?;
        // d/db a^b = a^b ln a, taken as 0 where a == 0 and b >= 0 (pow_backward_exponent)
        let zero_base = a.eq_scalar(0)?.logical_and(&b.ge_scalar(0)?)?;
        let e = o()?.mul(&a.log()?)?;
        let gb = zero_base.where_(&e.zeros_like()?, &g.mul(&e)?)?;
        Ok((Some(ga), Some(gb)))
    }));

/// Scales `b` by `alpha` for `add`/`sub`, keeping what `b` contributes to type promotion.
fn scale_alpha(op: &str, a: &Operand, b: &Operand, alpha: Scalar) -> Result<Option<OwnedOperand>> {
    let dt = common_dtype(op, a, b)?;
    if matches!(alpha, Scalar::Bool(_)) && dt != DType::Bool {
        return Err(Error::dtype(op, "Boolean alpha only supported for Boolean results."));
    }
    if !(dt.is_float() || dt.is_complex()) && !alpha.is_integral() {
        return Err(Error::dtype(op, "For integral input tensors, argument alpha must not be a floating point number."));
    }
    if !dt.is_complex() && matches!(alpha, Scalar::Complex(_)) {
        return Err(Error::dtype(op, "For non-complex input tensors, argument alpha must not be a complex number."));
    }
    let is_one = match alpha {
        Scalar::Bool(v) => v,
        Scalar::Int(v) => v == 1,
        Scalar::Float(v) => v == 1.0,
        Scalar::Complex(c) => c == Complex64::new(1.0, 0.0),
    };
    if is_one {
        return Ok(None);
    }
    Ok(Some(match b {
        // Cast first so that `b * alpha` computes in the result dtype and promotes like `b`.
        Operand::Tensor(t) => OwnedOperand::Tensor(binary(&MUL, Operand::Tensor(&t.to_dtype(dt)?), Operand::Scalar(alpha))?),
        Operand::Scalar(s) => OwnedOperand::Scalar(match (*s, alpha) {
            (Scalar::Complex(_), _) | (_, Scalar::Complex(_)) => Scalar::Complex(s.to_c128() * alpha.to_c128()),
            (Scalar::Float(_), _) | (_, Scalar::Float(_)) => Scalar::Float(s.to_f64() * alpha.to_f64()),
            (Scalar::Bool(x), Scalar::Bool(y)) => Scalar::Bool(x && y),
            _ => Scalar::Int(s.to_i64().wrapping_mul(alpha.to_i64())),
        }),
    }))
}

/// An operand that owns its tensor (for intermediate results).
pub(crate) enum OwnedOperand {
    Tensor(Tensor),
    Scalar(Scalar),
}

impl OwnedOperand {
    pub(crate) fn operand(&self) -> Operand<'_> {
        match self {
            OwnedOperand::Tensor(t) => Operand::Tensor(t),
            OwnedOperand::Scalar(s) => Operand::Scalar(*s),
        }
    }
}

fn sub_check(a: &Operand, b: &Operand) -> Result<()> {
    let (da, db) = (operand_dtype(a), operand_dtype(b));
    if da.is_bool() && db.is_bool() {
        return Err(Error::dtype("sub", "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead."));
    }
    if da.is_bool() || db.is_bool() {
        return Err(Error::dtype("sub", "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."));
    }
    Ok(())
}

/// `torch.add(a, b, alpha=alpha)`: `a + alpha * b`.
pub fn add_alpha(a: Operand, b: Operand, alpha: Option<Scalar>) -> Result<Tensor> {
    match alpha.map(|al| scale_alpha("add", &a, &b, al)).transpose()?.flatten() {
        None => binary(&ADD, a, b),
        Some(s) => binary(&ADD, a, s.operand()),
    }
}

/// `torch.sub(a, b, alpha=alpha)`: `a - alpha * b`.
pub fn sub_alpha(a: Operand, b: Operand, alpha: Option<Scalar>) -> Result<Tensor> {
    sub_check(&a, &b)?;
    match alpha.map(|al| scale_alpha("sub", &a, &b, al)).transpose()?.flatten() {
        None => binary(&SUB, a, b),
        Some(s) => binary(&SUB, a, s.operand()),
    }
}

/// `torch.div(a, b, rounding_mode=mode)`: true division (None), `"trunc"` or `"floor"`.
pub fn div_rounding(a: Operand, b: Operand, mode: Option<&str>) -> Result<Tensor> {
    match mode {
        None => binary(&DIV, a, b),
        Some(m @ ("trunc" | "floor")) => {
            let dt = common_dtype("div", &a, &b)?;
            check_int_divisor("div", &b, dt)?;
            binary(if m == "trunc" { &DIV_TRUNC } else { &DIV_FLOOR }, a, b)
        }
        Some(m) => Err(Error::value(
            "div",
            format!("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"),
        )),
    }
}

/// `torch.floor_divide(a, b)`.
pub fn floor_divide_op(a: Operand, b: Operand) -> Result<Tensor> {
    check_int_divisor("floor_divide", &b, common_dtype("floor_divide", &a, &b)?)?;
    binary(&FLOOR_DIVIDE, a, b)
}

/// `torch.remainder(a, b)`: the remainder with the sign of the divisor (Python's `%`).
pub fn remainder_op(a: Operand, b: Operand) -> Result<Tensor> {
    check_int_divisor("remainder", &b, common_dtype("remainder", &a, &b)?)?;
    binary(&REMAINDER, a, b)
}

/// `torch.fmod(a, b)`: the remainder with the sign of the dividend (C's `fmod`).
pub fn fmod_op(a: Operand, b: Operand) -> Result<Tensor> {
    check_int_divisor("fmod", &b, common_dtype("fmod", &a, &b)?)?;
    binary(&FMOD, a, b)
}

/// `torch.pow(a, b)` for tensors or scalars on either side.
pub fn pow_op(a: Operand, b: Operand) -> Result<Tensor> {
    if let (Operand::Tensor(t), Operand::Scalar(Scalar::Int(e))) = (&a, &b) {
        if t.dtype().is_integral() && *e < 0 {
            return Err(Error::value("pow", "Integers to negative integer powers are not allowed."));
        }
    }
    binary(&POW, a, b)
}

/// `torch.float_power(a, b)`: `pow` computed in double precision (complex128 for complex inputs).
pub fn float_power_op(a: Operand, b: Operand) -> Result<Tensor> {
    let complex = operand_dtype(&a).is_complex() || operand_dtype(&b).is_complex();
    let dt = if complex { DType::C128 } else { DType::F64 };
    let up = |o: &Operand| -> Result<OwnedOperand> {
        Ok(match o {
            Operand::Tensor(t) => OwnedOperand::Tensor(t.to_dtype(dt)?),
            Operand::Scalar(s) => OwnedOperand::Scalar(if complex { Scalar::Complex(s.to_c128()) } else { Scalar::Float(s.to_f64()) }),
        })
    };
    let (x, y) = (up(&a)?, up(&b)?);
    binary(&POW, x.operand(), y.operand())
}

/// `torch.rsub(a, b, alpha=alpha)`: `b - alpha * a`.
pub fn rsub_op(a: Operand, b: Operand, alpha: Option<Scalar>) -> Result<Tensor> {
    sub_alpha(b, a, alpha)
}

impl Tensor {
    /// `torch.add(a, b)` (`a + b`).
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        binary(&ADD, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `a + s` for a scalar `s`.
    pub fn add_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(&ADD, Operand::Tensor(self), Operand::Scalar(s.into()))
    }
    /// `torch.sub(a, b)` (`a - b`).
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        sub_alpha(Operand::Tensor(self), Operand::Tensor(other), None)
    }
    /// `a - s`.
    pub fn sub_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        sub_alpha(Operand::Tensor(self), Operand::Scalar(s.into()), None)
    }
    /// `torch.mul(a, b)` (`a * b`).
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        binary(&MUL, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `a * s`.
    pub fn mul_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(&MUL, Operand::Tensor(self), Operand::Scalar(s.into()))
    }
    /// `torch.div(a, b)` (true division; integers give floats).
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        binary(&DIV, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `a / s`.
    pub fn div_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(&DIV, Operand::Tensor(self), Operand::Scalar(s.into()))
    }
    /// `torch.div(a, b, rounding_mode=mode)` with `mode` None, `"trunc"` or `"floor"`.
    pub fn div_mode(&self, other: &Tensor, mode: Option<&str>) -> Result<Tensor> {
        div_rounding(Operand::Tensor(self), Operand::Tensor(other), mode)
    }
    /// `torch.floor_divide(a, b)`: division rounded toward negative infinity.
    pub fn floor_divide(&self, other: &Tensor) -> Result<Tensor> {
        floor_divide_op(Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.remainder(a, b)` (`a % b`, the sign of `b`).
    pub fn remainder(&self, other: &Tensor) -> Result<Tensor> {
        remainder_op(Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.remainder(a, s)` with a scalar divisor.
    pub fn remainder_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        remainder_op(Operand::Tensor(self), Operand::Scalar(s.into()))
    }
    /// `torch.fmod(a, b)` (the sign of `a`).
    pub fn fmod(&self, other: &Tensor) -> Result<Tensor> {
        fmod_op(Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.fmod(a, s)` with a scalar divisor.
    pub fn fmod_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        fmod_op(Operand::Tensor(self), Operand::Scalar(s.into()))
    }
    /// `torch.pow(a, b)`.
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        pow_op(Operand::Tensor(self), Operand::Tensor(exponent))
    }
    /// `torch.pow(a, s)` with a scalar exponent.
    pub fn pow_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        pow_op(Operand::Tensor(self), Operand::Scalar(s.into()))
    }
    /// `torch.float_power(a, b)`: `pow` in float64.
    pub fn float_power(&self, exponent: &Tensor) -> Result<Tensor> {
        float_power_op(Operand::Tensor(self), Operand::Tensor(exponent))
    }
    /// `torch.rsub(a, b)`: `b - a`.
    pub fn rsub(&self, other: &Tensor) -> Result<Tensor> {
        rsub_op(Operand::Tensor(self), Operand::Tensor(other), None)
    }

    /// `a.add_(b)` in place.
    pub fn add_(&self, other: &Tensor) -> Result<Tensor> {
        self.update_("add_", &[], |x| x.add(other))
    }
    /// `a.add_(s)` in place.
    pub fn add_scalar_(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        self.update_("add_", &[], |x| x.add_scalar(s))
    }
    /// `a.sub_(b)` in place.
    pub fn sub_(&self, other: &Tensor) -> Result<Tensor> {
        self.update_("sub_", &[], |x| x.sub(other))
    }
    /// `a.mul_(b)` in place.
    pub fn mul_(&self, other: &Tensor) -> Result<Tensor> {
        self.update_("mul_", &[other], |x| x.mul(other))
    }
    /// `a.mul_(s)` in place.
    pub fn mul_scalar_(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        self.update_("mul_", &[], |x| x.mul_scalar(s))
    }
    /// `a.div_(b)` in place (integer tensors reject true division: the result is float).
    pub fn div_(&self, other: &Tensor) -> Result<Tensor> {
        self.update_("div_", &[other], |x| x.div(other))
    }
    /// `a.pow_(b)` in place.
    pub fn pow_(&self, exponent: &Tensor) -> Result<Tensor> {
        self.update_("pow_", &[exponent], |x| x.pow(exponent))
    }
}

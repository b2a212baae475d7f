//! Comparisons and extrema: `eq`/`ne`/`lt`/`le`/`gt`/`ge`, `equal`, `isclose`, `allclose`,
//! `maximum`/`minimum` (NaN-propagating) and `fmax`/`fmin` (NaN-ignoring).

use super::{binary, BinarySpec, Promote};
use crate::backend::cpu;
use crate::dtype::DType;
use crate::ops::Operand;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

spec!(EQ, "eq", "eq", Promote::Bool, |a, b| (a == b) as u8 as f32, |a, b| (a == b) as u8 as f64, None, None, None, Some((|a, b| a == b, |a, b| a == b)), None);
spec!(NE, "ne", "ne", Promote::Bool, |a, b| (a != b) as u8 as f32, |a, b| (a != b) as u8 as f64, None, None, None, Some((|a, b| a != b, |a, b| a != b)), None);
spec!(LT, "lt", "lt", Promote::Bool, |a, b| (a < b) as u8 as f32, |a, b| (a < b) as u8 as f64, None, None, None, Some((|a, b| a < b, |a, b| a < b)), None);
spec!(LE, "le", "le", Promote::Bool, |a, b| (a <= b) as u8 as f32, |a, b| (a <= b) as u8 as f64, None, None, None, Some((|a, b| a <= b, |a, b| a <= b)), None);
spec!(GT, "gt", "gt", Promote::Bool, |a, b| (a > b) as u8 as f32, |a, b| (a > b) as u8 as f64, None, None, None, Some((|a, b| a > b, |a, b| a > b)), None);
spec!(GE, "ge", "ge", Promote::Bool, |a, b| (a >= b) as u8 as f32, |a, b| (a >= b) as u8 as f64, None, None, None, Some((|a, b| a >= b, |a, b| a >= b)), None);

macro_rules! cmp_methods {
    ($($m:ident, $ms:ident, $spec:ident);*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", stringify!($m), "(a, b)`: elementwise comparison, a bool tensor.")]
            pub fn $m(&self, other: &Tensor) -> Result<Tensor> {
                binary(&$spec, Operand::Tensor(self), Operand::Tensor(other))
            }
            #[doc = concat!("`torch.", stringify!($m), "(a, s)` with a scalar.")]
            pub fn $ms(&self, s: impl Into<Scalar>) -> Result<Tensor> {
                binary(&$spec, Operand::Tensor(self), Operand::Scalar(s.into()))
            }
        )*}
    };
}
cmp_methods!(eq, eq_scalar, EQ; ne, ne_scalar, NE; lt, lt_scalar, LT; le, le_scalar, LE; gt, gt_scalar, GT; ge, ge_scalar, GE);

macro_rules! nan_max {
    ($t:ty, $pick:ident) => {
        |a: $t, b: $t| -> $t {
            if a.is_nan() || b.is_nan() {
                <$t>::NAN
            } else {
                a.$pick(b)
            }
        }
    };
}

/// Gradient of `maximum`/`minimum`: the larger (smaller) input gets the gradient, ties split it in half.
fn extremum_bw(a: &Tensor, b: &Tensor, g: &Tensor, a_wins: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let tie = a.eq(b)?;
    let z = g.zeros_like()?;
    let half = g.mul_scalar(0.5)?;
    let ga = tie.where_(&half, &a_wins.where_(g, &z)?)?;
    let gb = tie.where_(&half, &a_wins.where_(&z, g)?)?;
    Ok((Some(ga), Some(gb)))
}

/// Gradient of `fmax`/`fmin`: `a` takes it where it won or tied or `b` is NaN; `b` takes the rest.
fn fextremum_bw(b: &Tensor, g: &Tensor, a_ge: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let to_a = a_ge.logical_or(&b.ne(b)?)?;
    let z = g.zeros_like()?;
    Ok((Some(to_a.where_(g, &z)?), Some(to_a.where_(&z, g)?)))
}

spec!(MAXIMUM, "maximum", "maximum", Promote::Same, nan_max!(f32, max), nan_max!(f64, max), Some(|a: i64, b: i64| a.max(b)), Some(|a, b| a | b), None, None,
    Some(|a, b, _, g| extremum_bw(a, b, g, &a.gt(b)?)));
spec!(MINIMUM, "minimum", "minimum", Promote::Same, nan_max!(f32, min), nan_max!(f64, min), Some(|a: i64, b: i64| a.min(b)), Some(|a, b| a & b), None, None,
    Some(|a, b, _, g| extremum_bw(a, b, g, &a.lt(b)?)));
spec!(FMAX, "fmax", "fmax", Promote::Same, f32::max, f64::max, Some(|a: i64, b: i64| a.max(b)), Some(|a, b| a | b), None, None,
    Some(|a, b, _, g| fextremum_bw(b, g, &a.ge(b)?)));
spec!(FMIN, "fmin", "fmin", Promote::Same, f32::min, f64::min, Some(|a: i64, b: i64| a.min(b)), Some(|a, b| a & b), None, None,
    Some(|a, b, _, g| fextremum_bw(b, g, &a.le(b)?)));

fn no_complex(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype().is_complex() || b.dtype().is_complex() {
        return Err(Error::dtype(op, format!("{op} not implemented for complex tensors.")));
    }
    Ok(())
}

impl Tensor {
    /// `torch.maximum(a, b)`: elementwise max; NaN if either is NaN.
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        no_complex("maximum", self, other)?;
        binary(&MAXIMUM, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.minimum(a, b)`: elementwise min; NaN if either is NaN.
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        no_complex("minimum", self, other)?;
        binary(&MINIMUM, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.fmax(a, b)`: elementwise max ignoring NaN (NaN only where both are).
    pub fn fmax(&self, other: &Tensor) -> Result<Tensor> {
        no_complex("fmax", self, other)?;
        binary(&FMAX, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.fmin(a, b)`: elementwise min ignoring NaN.
    pub fn fmin(&self, other: &Tensor) -> Result<Tensor> {
        no_complex("fmin", self, other)?;
        binary(&FMIN, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `torch.equal(a, b)`: same shape and equal elements (NaN is not equal to itself).
    pub fn equal(&self, other: &Tensor) -> Result<bool> {
        crate::ops::same_device("equal", &[self, other])?;
        if self.shape() != other.shape() {
            return Ok(false);
        }
        if self.device().is_cuda() {
            // on the device: count the differing elements, read one number back
            return Ok(!any_true(&self.ne(other)?)?);
        }
        let e = self.eq(other)?;
        cpu::read(&e, |v: &[bool]| v.iter().all(|&x| x))
    }
    /// `torch.isclose(a, b, rtol, atol, equal_nan)`: `|a - b| <= atol + rtol * |b|`, elementwise.
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
        if self.dtype() != other.dtype() {
            return Err(Error::dtype(
                "isclose",
                format!("{} did not match {}", other.dtype().name(), self.dtype().name()),
            ));
        }
        if equal_nan && (self.dtype().is_complex()) {
            return Err(Error::unsupported("isclose", "equal_nan on complex inputs"));
        }
        if rtol < 0.0 {
            return Err(Error::value("isclose", format!("rtol must be greater than or equal to zero, but got {rtol}")));
        }
        if atol < 0.0 {
            return Err(Error::value("isclose", format!("atol must be greater than or equal to zero, but got {atol}")));
        }
        if self.dtype().is_complex() {
            return Err(Error::unsupported("isclose", "complex inputs"));
        }
        let _ng = crate::autograd::no_grad();
        let dt = self.dtype();
        if self.device().is_cuda() {
            return isclose_native(self, other, rtol, atol, equal_nan);
        }
        let f = move |a: f64, b: f64| -> bool {
            if a == b {
                return true;
            }
            if a.is_nan() || b.is_nan() {
                return equal_nan && a.is_nan() && b.is_nan();
            }
            let err = (a - b).abs();
            err.is_finite() && err <= atol + (rtol * b).abs()
        };
        if dt.is_int() {
            // exact for |a - b| < 2^53; compared in f64 like PyTorch's float comparison
            cpu::map_binary::<i64, i64, bool>("isclose", self, other, move |a, b| {
                a == b || (a.wrapping_sub(b) as f64).abs() <= atol + (rtol * b as f64).abs()
            })
        } else if dt.is_float() && dt != DType::F64 {
            // PyTorch computes the tolerance in the input's precision.
            cpu::map_binary::<f32, f32, bool>("isclose", self, other, move |a, b| {
                if a == b {
                    return true;
                }
                if a.is_nan() || b.is_nan() {
                    return equal_nan && a.is_nan() && b.is_nan();
                }
                let err = (a - b).abs();
                err.is_finite() && err <= atol as f32 + (rtol as f32 * b).abs()
            })
        } else {
            cpu::map_binary::<f64, f64, bool>("isclose", self, other, f)
        }
    }
    /// `torch.allclose(a, b, rtol, atol, equal_nan)`: `isclose(...).all()`.
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<bool> {
        let c = self.isclose(other, rtol, atol, equal_nan)?;
        if c.device().is_cuda() {
            return Ok(!any_true(&c.logical_not()?)?);
        }
        cpu::read(&c, |v: &[bool]| v.iter().all(|&x| x))
    }
}

/// True when some element of the bool tensor `m` is true (one host read of a count).
fn any_true(m: &Tensor) -> Result<bool> {
    let _ng = crate::autograd::no_grad();
    Ok(m.to_dtype(DType::I64)?.sum()?.item()?.to_i64() != 0)
}

/// `isclose` from elementwise ops that run natively on every device (the CUDA path): floats in
/// f32 (f64 for f64) as the CPU kernel, integers and bool by their int64 difference in f64.
fn isclose_native(a: &Tensor, b: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
    let dt = a.dtype();
    if dt.is_float() {
        let c = if dt == DType::F64 { DType::F64 } else { DType::F32 };
        let (a, b) = (a.to_dtype(c)?, b.to_dtype(c)?);
        let err = a.sub(&b)?.abs()?;
        let tol = b.mul_scalar(rtol)?.abs()?.add_scalar(atol)?;
        let close = err.isfinite()?.logical_and(&err.le(&tol)?)?.logical_or(&a.eq(&b)?)?;
        if equal_nan {
            return close.logical_or(&a.isnan()?.logical_and(&b.isnan()?)?);
        }
        return Ok(close);
    }
    let (a, b) = (a.to_dtype(DType::I64)?, b.to_dtype(DType::I64)?);
    let err = a.sub(&b)?.to_dtype(DType::F64)?.abs()?;
    let tol = b.to_dtype(DType::F64)?.mul_scalar(rtol)?.abs()?.add_scalar(atol)?;
    err.le(&tol)?.logical_or(&a.eq(&b)?)
}

//! Bool-valued unary ops: `isnan`, `isinf`, `isposinf`, `isneginf`, `isfinite`, `isreal`,
//! `signbit`, `logical_not`. None of them is differentiable.

use super::cuda_expr::{self as cx, Out};
use super::predicate;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::Complex64;

/// The predicate on CUDA: `f` for floats (half types in f32), `i` for integers and bools (in
/// i64). `x - x == 0` holds exactly for finite `x`, so no infinity constants are needed.
fn cuda(name: &'static str, x: &Tensor, f: &str, i: &str) -> Result<Option<Tensor>> {
    cx::unary(name, x, Out::Bool, f, Some(i), None)
}

impl Tensor {
    /// `torch.isnan(x)`.
    pub fn isnan(&self) -> Result<Tensor> {
        if let Some(o) = cuda("isnan", self, "x != x", "false")? {
            return Ok(o);
        }
        predicate("isnan", self, f64::is_nan, |_| false, Some(|z: Complex64| z.re.is_nan() || z.im.is_nan()))
    }
    /// `torch.isinf(x)`: +inf or -inf.
    pub fn isinf(&self) -> Result<Tensor> {
        if let Some(o) = cuda("isinf", self, "x == x && !(x - x == (C)0)", "false")? {
            return Ok(o);
        }
        predicate("isinf", self, f64::is_infinite, |_| false, Some(|z: Complex64| z.re.is_infinite() || z.im.is_infinite()))
    }
    /// `torch.isposinf(x)`.
    pub fn isposinf(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::value("isposinf", "isposinf does not support complex inputs."));
        }
        if let Some(o) = cuda("isposinf", self, "x > (C)0 && !(x - x == (C)0)", "false")? {
            return Ok(o);
        }
        predicate("isposinf", self, |v| v == f64::INFINITY, |_| false, None)
    }
    /// `torch.isneginf(x)`.
    pub fn isneginf(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::value("isneginf", "isneginf does not support complex inputs."));
        }
        if let Some(o) = cuda("isneginf", self, "x < (C)0 && !(x - x == (C)0)", "false")? {
            return Ok(o);
        }
        predicate("isneginf", self, |v| v == f64::NEG_INFINITY, |_| false, None)
    }
    /// `torch.isfinite(x)`: neither NaN nor infinite (always true for integers).
    pub fn isfinite(&self) -> Result<Tensor> {
        if let Some(o) = cuda("isfinite", self, "x - x == (C)0", "true")? {
            return Ok(o);
        }
        predicate("isfinite", self, f64::is_finite, |_| true, Some(|z: Complex64| z.re.is_finite() && z.im.is_finite()))
    }
    /// `torch.isreal(x)`: imaginary part zero (always true for real dtypes).
    pub fn isreal(&self) -> Result<Tensor> {
        if let Some(o) = cuda("isreal", self, "true", "true")? {
            return Ok(o);
        }
        predicate("isreal", self, |_| true, |_| true, Some(|z: Complex64| z.im == 0.0))
    }
    /// `torch.signbit(x)`: the sign bit is set (true for -0.0 too).
    pub fn signbit(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::dtype("signbit", "signbit is not implemented for complex tensors."));
        }
        if let Some(o) = cuda("signbit", self, "m_copysign((C)1, x) < (C)0", "x < 0")? {
            return Ok(o);
        }
        predicate("signbit", self, f64::is_sign_negative, |v| v < 0, None)
    }
    /// `torch.logical_not(x)`: `x == 0`.
    pub fn logical_not(&self) -> Result<Tensor> {
        if let Some(o) = cuda("logical_not", self, "x == (C)0", "x == 0")? {
            return Ok(o);
        }
        predicate("logical_not", self, |v| v == 0.0, |v| v == 0, Some(|z: Complex64| z.re == 0.0 && z.im == 0.0))
    }
}

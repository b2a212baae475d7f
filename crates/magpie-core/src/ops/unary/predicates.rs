//! Bool-valued unary ops: `isnan`, `isinf`, `isposinf`, `isneginf`, `isfinite`, `isreal`,
//! `signbit`, `logical_not`. None of them is differentiable.

use super::predicate;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::Complex64;

impl Tensor {
    /// `torch.isnan(x)`.
    pub fn isnan(&self) -> Result<Tensor> {
        predicate("isnan", self, f64::is_nan, |_| false, Some(|z: Complex64| z.re.is_nan() || z.im.is_nan()))
    }
    /// `torch.isinf(x)`: +inf or -inf.
    pub fn isinf(&self) -> Result<Tensor> {
        predicate("isinf", self, f64::is_infinite, |_| false, Some(|z: Complex64| z.re.is_infinite() || z.im.is_infinite()))
    }
    /// `torch.isposinf(x)`.
    pub fn isposinf(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::value("isposinf", "isposinf does not support complex inputs."));
        }
        predicate("isposinf", self, |v| v == f64::INFINITY, |_| false, None)
    }
    /// `torch.isneginf(x)`.
    pub fn isneginf(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::value("isneginf", "isneginf does not support complex inputs."));
        }
        predicate("isneginf", self, |v| v == f64::NEG_INFINITY, |_| false, None)
    }
    /// `torch.isfinite(x)`: neither NaN nor infinite (always true for integers).
    pub fn isfinite(&self) -> Result<Tensor> {
        predicate("isfinite", self, f64::is_finite, |_| true, Some(|z: Complex64| z.re.is_finite() && z.im.is_finite()))
    }
    /// `torch.isreal(x)`: imaginary part zero (always true for real dtypes).
    pub fn isreal(&self) -> Result<Tensor> {
        predicate("isreal", self, |_| true, |_| true, Some(|z: Complex64| z.im == 0.0))
    }
    /// `torch.signbit(x)`: the sign bit is set (true for -0.0 too).
    pub fn signbit(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::dtype("signbit", "signbit is not implemented for complex tensors."));
        }
        predicate("signbit", self, f64::is_sign_negative, |v| v < 0, None)
    }
    /// `torch.logical_not(x)`: `x == 0`.
    pub fn logical_not(&self) -> Result<Tensor> {
        predicate("logical_not", self, |v| v == 0.0, |v| v == 0, Some(|z: Complex64| z.re == 0.0 && z.im == 0.0))
    }
}

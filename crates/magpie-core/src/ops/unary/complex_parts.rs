//! Complex-number parts of (mostly real) tensors: `real`, `conj`, `conj_physical`,
//! `resolve_conj`, `resolve_neg`, `angle`. For real dtypes these are identities (views) or,
//! for `angle`, 0 / pi by sign.

use super::{map_float, record_unary};
use crate::backend::cpu;
use crate::tensor::Tensor;
use crate::Result;
use num_complex::Complex64;
use std::f64::consts::PI;

impl Tensor {
    /// `torch.real(x)`: the tensor itself (as a view) for real dtypes; the real parts of a complex tensor (a copy).
    pub fn real(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            let rd = self.dtype().to_real();
            return cpu::map_unary::<Complex64, f64>(self, |z| z.re)?.to_dtype(rd);
        }
        Ok(self.alias())
    }
    /// `torch.conj(x)`: the tensor itself (as a view) for real dtypes; the conjugate (a copy) for complex.
    pub fn conj(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return self.conj_physical();
        }
        Ok(self.alias())
    }
    /// `torch.conj_physical(x)`: a conjugated copy (a plain copy for real dtypes).
    pub fn conj_physical(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            let d = self.dtype();
            let out = cpu::map_unary::<Complex64, Complex64>(self, |z| z.conj())?.to_dtype(d)?;
            record_unary("conj_physical", self, &out, |_, _, g| g.conj_physical());
            return Ok(out);
        }
        self.copy()
    }
    /// `torch.resolve_conj(x)`: conjugation is never lazy here, so the tensor itself (a view).
    pub fn resolve_conj(&self) -> Result<Tensor> {
        Ok(self.alias())
    }
    /// `torch.resolve_neg(x)`: negation is never lazy here, so the tensor itself (a view).
    pub fn resolve_neg(&self) -> Result<Tensor> {
        Ok(self.alias())
    }
    /// `torch.angle(x)`: the argument of each element; for real inputs 0 for `x >= 0`, pi for
    /// `x < 0`, NaN for NaN (integers give floats). Its gradient is zero for real inputs.
    pub fn angle(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            let rd = self.dtype().to_real();
            return cpu::map_unary::<Complex64, f64>(self, |z| z.arg())?.to_dtype(rd);
        }
        let pi = super::cuda_expr::lit(PI);
        let cuda = super::cuda_expr::unary("angle", self, super::cuda_expr::Out::Float, &format!("x != x ? x : (x < (C)0 ? {pi} : (C)0)"), None, None)?;
        let out = match cuda {
            Some(o) => o,
            None => map_float("angle", self, |v| if v.is_nan() { v } else if v < 0.0 { PI } else { 0.0 })?,
        };
        record_unary("angle", self, &out, |_, _, g| g.zeros_like());
        Ok(out)
    }
}

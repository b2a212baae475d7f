//! Rounding, sign and value-cleaning ops: `abs`, `sign`, `sgn`, `ceil`, `floor`, `round`
//! (with `decimals`), `trunc`/`fix`, `frac`, `positive`, `nan_to_num`, `bitwise_not`.
//! Integer inputs keep their dtype where PyTorch keeps it.

use super::cuda_expr as cx;
use super::{not_implemented, record_unary, unary, unary_methods, unary_spec, IntMode};
use crate::backend::cpu;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::Complex64;

/// A zero gradient (piecewise-constant ops).
fn zero_grad(_: &Tensor, _: &Tensor, g: &Tensor) -> Result<Tensor> {
    g.zeros_like()
}

fn sign_f32(x: f32) -> f32 {
    ((0.0 < x) as i32 - (x < 0.0) as i32) as f32
}
fn sign_f64(x: f64) -> f64 {
    ((0.0 < x) as i32 - (x < 0.0) as i32) as f64
}
fn sgn_c(z: Complex64) -> Complex64 {
    let n = z.norm();
    if n == 0.0 {
        Complex64::new(0.0, 0.0)
    } else {
        z / n
    }
}

unary_spec!(ABS, "abs", f32::abs, f64::abs, IntMode::Same(|x: i64| x.wrapping_abs()), None, Some(|x, _, g| g.mul(&x.sign()?)));
unary_spec!(SIGN, "sign", sign_f32, sign_f64, IntMode::Same(i64::signum), None, Some(zero_grad));
unary_spec!(SGN, "sgn", sign_f32, sign_f64, IntMode::Same(i64::signum), Some(sgn_c), Some(zero_grad));
unary_spec!(CEIL, "ceil", f32::ceil, f64::ceil, IntMode::Identity, None, Some(zero_grad));
unary_spec!(FLOOR, "floor", f32::floor, f64::floor, IntMode::Identity, None, Some(zero_grad));
unary_spec!(ROUND, "round", f32::round_ties_even, f64::round_ties_even, IntMode::Identity, None, Some(zero_grad));
unary_spec!(TRUNC, "trunc", f32::trunc, f64::trunc, IntMode::Identity, None, Some(zero_grad));
unary_spec!(FRAC, "frac", |x| x - x.trunc(), |x| x - x.trunc(), IntMode::Reject, None, Some(|_, _, g| Ok(g.clone())));

unary_methods!(ceil => CEIL, floor => FLOOR, trunc => TRUNC, frac => FRAC);

impl Tensor {
    /// `torch.abs(x)` (`absolute`); integers keep their dtype, bool is rejected.
    pub fn abs(&self) -> Result<Tensor> {
        unary(&ABS, self)
    }
    /// `torch.sign(x)`: -1, 0 or 1 (0 for NaN); bool tensors are returned as they are.
    pub fn sign(&self) -> Result<Tensor> {
        if self.dtype().is_bool() {
            return self.copy();
        }
        if self.dtype().is_complex() {
            return Err(Error::dtype("sign", "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead."));
        }
        unary(&SIGN, self)
    }
    /// `torch.sgn(x)`: `sign` for real inputs, `z / |z|` for complex ones.
    pub fn sgn(&self) -> Result<Tensor> {
        if self.dtype().is_bool() {
            return self.copy();
        }
        unary(&SGN, self)
    }
    /// `torch.round(x)`: to the nearest integer, ties to even.
    pub fn round(&self) -> Result<Tensor> {
        unary(&ROUND, self)
    }
    /// `torch.round(x, decimals=d)`: rounds to `d` decimal places (negative: to tens, hundreds, ...),
    /// computed in the input's float type as PyTorch does.
    pub fn round_decimals(&self, decimals: i64) -> Result<Tensor> {
        if decimals == 0 {
            return self.round();
        }
        let d = self.dtype();
        if !d.is_float() {
            return Err(not_implemented("round", d));
        }
        let neg = decimals < 0;
        let p = decimals.unsigned_abs().min(400) as i32;
        let ten64 = 10f64.powi(p);
        // CUDA: the same arithmetic as an expression kernel (f32 for f32 and the half types)
        let t = cx::lit(ten64);
        let expr = if neg { format!("m_round(x / {t}) * {t}") } else { format!("m_round(x * {t}) / {t}") };
        let out = if let Some(o) = cx::unary("round", self, cx::Out::Float, &expr, None, None)? {
            o
        } else if d == DType::F64 {
            cpu::map_unary::<f64, f64>(self, |a| if neg { (a / ten64).round_ties_even() * ten64 } else { (a * ten64).round_ties_even() / ten64 })?
        } else {
            let ten = ten64 as f32;
            let t = cpu::map_unary::<f32, f32>(self, |a| if neg { (a / ten).round_ties_even() * ten } else { (a * ten).round_ties_even() / ten })?;
            t.to_dtype(d)?
        };
        record_unary("round", self, &out, zero_grad);
        Ok(out)
    }
    /// `torch.fix(x)`: alias of `trunc`.
    pub fn fix(&self) -> Result<Tensor> {
        self.trunc()
    }
    /// `torch.positive(x)`: `x` itself; bool tensors are rejected like PyTorch's unary `+`.
    pub fn positive(&self) -> Result<Tensor> {
        if self.dtype().is_bool() {
            return Err(Error::dtype("positive", "The `+` operator, on a bool tensor is not supported."));
        }
        Ok(self.clone())
    }
    /// `torch.nan_to_num(x, nan, posinf, neginf)`: replaces NaN with `nan` (0 by default) and
    /// infinities with `posinf` / `neginf` (the dtype's largest / lowest finite value by default).
    pub fn nan_to_num(&self, nan: Option<f64>, posinf: Option<f64>, neginf: Option<f64>) -> Result<Tensor> {
        let d = self.dtype();
        if d.is_integral() {
            return self.copy();
        }
        if d.is_complex() {
            return Err(Error::unsupported("nan_to_num", "complex inputs"));
        }
        let (lo, hi) = finite_range(d);
        let (n, p, m) = (nan.unwrap_or(0.0), posinf.unwrap_or(hi), neginf.unwrap_or(lo));
        let (nf, pf, mf) = (cx::lit(n), cx::lit(p), cx::lit(m));
        let fexpr = format!("x != x ? {nf} : (x - x == (C)0 ? x : (x > (C)0 ? {pf} : {mf}))");
        if let Some(out) = cx::unary("nan_to_num", self, cx::Out::Float, &fexpr, None, None)? {
            record_unary("nan_to_num", self, &out, nan_to_num_grad);
            return Ok(out);
        }
        let f = move |v: f64| {
            if v.is_nan() {
                n
            } else if v == f64::INFINITY {
                p
            } else if v == f64::NEG_INFINITY {
                m
            } else {
                v
            }
        };
        let out = match d {
            DType::F64 => cpu::map_unary::<f64, f64>(self, f)?,
            _ => cpu::map_unary::<f32, f32>(self, |v| f(v as f64) as f32)?.to_dtype(d)?,
        };
        record_unary("nan_to_num", self, &out, nan_to_num_grad);
        Ok(out)
    }
    /// `torch.bitwise_not(x)` (`~x`): bitwise complement of integers, logical not of bools.
    pub fn bitwise_not(&self) -> Result<Tensor> {
        let d = self.dtype();
        if d.is_int() || d.is_bool() {
            if let Some(o) = cx::unary("bitwise_not", self, cx::Out::Keep, "x", Some("~x"), Some("!x"))? {
                return Ok(o);
            }
        }
        if d.is_bool() {
            return cpu::map_unary::<bool, bool>(self, |v| !v);
        }
        if !d.is_int() {
            return Err(not_implemented("bitwise_not", d));
        }
        cpu::map_unary::<i64, i64>(self, |v| !v)?.to_dtype(d)
    }
}

/// `nan_to_num`'s gradient: `g` where `x` is finite, else 0.
fn nan_to_num_grad(x: &Tensor, _: &Tensor, g: &Tensor) -> Result<Tensor> {
    if let Some(d) = cx::grad("nan_to_num_backward", x, g, "x - x == (C)0 ? y : (C)0")? {
        return Ok(d);
    }
    x.isfinite()?.where_(g, &g.zeros_like()?)
}

/// The lowest and largest finite values of a float dtype.
fn finite_range(d: DType) -> (f64, f64) {
    let hi = match d {
        DType::F64 => f64::MAX,
        DType::F16 => half::f16::MAX.to_f64(),
        DType::BF16 => half::bf16::MAX.to_f64(),
        DType::F8E4M3 => 448.0,
        DType::F8E5M2 => 57344.0,
        _ => f32::MAX as f64,
    };
    (-hi, hi)
}

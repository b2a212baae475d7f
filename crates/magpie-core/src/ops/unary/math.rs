//! Exponentials, logarithms, powers, trigonometric and hyperbolic functions, `sigmoid`, `sinc`,
//! `logit`: float-valued unary ops (integer inputs promote to the default float dtype).

use super::{map_float, record_unary, unary, unary_methods, unary_spec, IntMode};
use crate::backend::cpu::activations::{self as act, f32k};
use crate::backend::cpu::vmath;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::Complex64;
use std::f64::consts::{LN_10, LN_2, PI};

/// `1 - t`.
pub(crate) fn one_minus(t: &Tensor) -> Result<Tensor> {
    t.neg_raw()?.add_scalar(1.0)
}

/// `1 - x*x`, shared by the inverse trigonometric gradients.
fn one_minus_sq(x: &Tensor) -> Result<Tensor> {
    one_minus(&x.mul(x)?)
}

unary_spec!(NEG, "neg", |x| -x, |x| -x, IntMode::Same(|x: i64| x.wrapping_neg()), Some(|x| -x), Some(|_, _, g| g.neg_raw()));
unary_spec!(EXP, "exp", vmath::expf, f64::exp, IntMode::ToFloat, Some(|x: Complex64| x.exp()), Some(|_, y, g| g.mul(y)),
    kernel = |x| act::forward_f32(x, f32k::exp_fwd));
unary_spec!(EXP2, "exp2", f32::exp2, f64::exp2, IntMode::ToFloat, Some(|x: Complex64| (x * LN_2).exp()),
    Some(|_, y, g| g.mul(y)?.mul_scalar(LN_2)));
unary_spec!(EXPM1, "expm1", f32::exp_m1, f64::exp_m1, IntMode::ToFloat, Some(|x: Complex64| x.exp() - 1.0),
    Some(|_, y, g| g.mul(&y.add_scalar(1.0)?)));
unary_spec!(LOG, "log", f32::ln, f64::ln, IntMode::ToFloat, Some(|x: Complex64| x.ln()), Some(|x, _, g| g.div(x)));
unary_spec!(LOG2, "log2", f32::log2, f64::log2, IntMode::ToFloat, Some(|x: Complex64| x.ln() / LN_2),
    Some(|x, _, g| g.div(&x.mul_scalar(LN_2)?)));
unary_spec!(LOG10, "log10", f32::log10, f64::log10, IntMode::ToFloat, Some(|x: Complex64| x.ln() / LN_10),
    Some(|x, _, g| g.div(&x.mul_scalar(LN_10)?)));
unary_spec!(LOG1P, "log1p", f32::ln_1p, f64::ln_1p, IntMode::ToFloat, Some(|x: Complex64| (x + 1.0).ln()),
    Some(|x, _, g| g.div(&x.add_scalar(1.0)?)));
unary_spec!(SQRT, "sqrt", f32::sqrt, f64::sqrt, IntMode::ToFloat, Some(|x: Complex64| x.sqrt()),
    Some(|_, y, g| g.div(&y.mul_scalar(2.0)?)));
unary_spec!(RSQRT, "rsqrt", |x| 1.0 / x.sqrt(), |x| 1.0 / x.sqrt(), IntMode::ToFloat, Some(|x: Complex64| 1.0 / x.sqrt()),
    Some(|_, y, g| g.mul(&y.mul(y)?.mul(y)?)?.mul_scalar(-0.5)));
unary_spec!(RECIPROCAL, "reciprocal", |x| 1.0 / x, |x| 1.0 / x, IntMode::ToFloat, Some(|x: Complex64| 1.0 / x),
    Some(|_, y, g| g.mul(&y.mul(y)?)?.neg_raw()));
unary_spec!(SQUARE, "square", |x| x * x, |x| x * x, IntMode::Same(|x: i64| x.wrapping_mul(x)), Some(|x: Complex64| x * x),
    Some(|x, _, g| g.mul(&x.mul_scalar(2.0)?)));

unary_spec!(SIN, "sin", f32::sin, f64::sin, IntMode::ToFloat, Some(|x: Complex64| x.sin()), Some(|x, _, g| g.mul(&x.cos()?)));
unary_spec!(COS, "cos", f32::cos, f64::cos, IntMode::ToFloat, Some(|x: Complex64| x.cos()),
    Some(|x, _, g| g.mul(&x.sin()?)?.neg_raw()));
unary_spec!(TAN, "tan", f32::tan, f64::tan, IntMode::ToFloat, Some(|x: Complex64| x.tan()),
    Some(|_, y, g| g.mul(&y.mul(y)?.add_scalar(1.0)?)));
unary_spec!(ASIN, "asin", f32::asin, f64::asin, IntMode::ToFloat, Some(|x: Complex64| x.asin()),
    Some(|x, _, g| g.div(&one_minus_sq(x)?.sqrt()?)));
unary_spec!(ACOS, "acos", f32::acos, f64::acos, IntMode::ToFloat, Some(|x: Complex64| x.acos()),
    Some(|x, _, g| g.div(&one_minus_sq(x)?.sqrt()?)?.neg_raw()));
unary_spec!(ATAN, "atan", f32::atan, f64::atan, IntMode::ToFloat, Some(|x: Complex64| x.atan()),
    Some(|x, _, g| g.div(&x.mul(x)?.add_scalar(1.0)?)));
unary_spec!(SINH, "sinh", f32::sinh, f64::sinh, IntMode::ToFloat, Some(|x: Complex64| x.sinh()), Some(|x, _, g| g.mul(&x.cosh()?)));
unary_spec!(COSH, "cosh", f32::cosh, f64::cosh, IntMode::ToFloat, Some(|x: Complex64| x.cosh()), Some(|x, _, g| g.mul(&x.sinh()?)));
unary_spec!(TANH, "tanh", vmath::tanhf, f64::tanh, IntMode::ToFloat, Some(|x: Complex64| x.tanh()), Some(tanh_backward),
    kernel = |x| act::forward_f32(x, f32k::tanh_fwd));
unary_spec!(ASINH, "asinh", f32::asinh, f64::asinh, IntMode::ToFloat, Some(|x: Complex64| x.asinh()),
    Some(|x, _, g| g.div(&x.mul(x)?.add_scalar(1.0)?.sqrt()?)));
unary_spec!(ACOSH, "acosh", f32::acosh, f64::acosh, IntMode::ToFloat, Some(|x: Complex64| x.acosh()),
    Some(|x, _, g| g.div(&x.mul(x)?.add_scalar(-1.0)?.sqrt()?)));
unary_spec!(ATANH, "atanh", f32::atanh, f64::atanh, IntMode::ToFloat, Some(|x: Complex64| x.atanh()),
    Some(|x, _, g| g.div(&one_minus_sq(x)?)));
unary_spec!(SIGMOID, "sigmoid", vmath::sigmoidf, sigmoid_f64, IntMode::ToFloat, Some(|x: Complex64| 1.0 / (1.0 + (-x).exp())),
    Some(sigmoid_backward), kernel = |x| act::forward_f32(x, f32k::sigmoid_fwd));
unary_spec!(DEG2RAD, "deg2rad", |x| x * (PI / 180.0) as f32, |x| x * (PI / 180.0), IntMode::ToFloat, None,
    Some(|_, _, g| g.mul_scalar(PI / 180.0)));
unary_spec!(RAD2DEG, "rad2deg", |x| x * (180.0 / PI) as f32, |x| x * (180.0 / PI), IntMode::ToFloat, None,
    Some(|_, _, g| g.mul_scalar(180.0 / PI)));
unary_spec!(SINC, "sinc", |x| sinc_f64(x as f64) as f32, sinc_f64, IntMode::ToFloat, Some(sinc_c), Some(sinc_backward));

/// `g (1 - y^2)` from tanh's output: one fused pass when no graph of the gradient is built.
fn tanh_backward(_x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    if act::fast_backward(y, g) {
        return crate::act_backward!("tanh", y, g, tanh_bwd);
    }
    g.mul(&one_minus(&y.mul(y)?)?)
}

/// `g y (1 - y)` from sigmoid's output: one fused pass when no graph of the gradient is built.
fn sigmoid_backward(_x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    if act::fast_backward(y, g) {
        return crate::act_backward!("sigmoid", y, g, sigmoid_bwd);
    }
    g.mul(&y.mul(&one_minus(y)?)?)
}

fn sigmoid_f64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `sin(pi x) / (pi x)`, 1 at 0.
pub(crate) fn sinc_f64(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let px = PI * x;
    // sin(pi x) through the reduced argument keeps the zeros at integers exact
    sin_pi(x) / px
}

/// `sin(pi x)` with exact zeros at the integers.
pub(crate) fn sin_pi(x: f64) -> f64 {
    if !x.is_finite() {
        return f64::NAN;
    }
    let r = x % 2.0; // in (-2, 2)
    let r = if r > 1.0 { r - 2.0 } else if r < -1.0 { r + 2.0 } else { r }; // in [-1, 1]
    if r == 0.0 || r.abs() == 1.0 {
        return 0.0 * x.signum();
    }
    // sin(pi r) = sin(pi (1 - r)) keeps the argument small
    let r = if r > 0.5 { 1.0 - r } else if r < -0.5 { -1.0 - r } else { r };
    (PI * r).sin()
}

fn sinc_c(x: Complex64) -> Complex64 {
    if x == Complex64::new(0.0, 0.0) {
        return Complex64::new(1.0, 0.0);
    }
    let px = x * PI;
    px.sin() / px
}

/// d/dx sinc(x) = (cos(pi x) pi x - sin(pi x)) / (pi x^2), 0 at 0.
fn sinc_backward(x: &Tensor, _y: &Tensor, g: &Tensor) -> Result<Tensor> {
    let px = x.mul_scalar(PI)?;
    let num = px.cos()?.mul(&px)?.sub(&px.sin()?)?;
    let den = x.mul(&px)?;
    let d = num.div(&den)?;
    let zero = x.eq_scalar(0.0)?;
    g.mul(&zero.where_(&d.zeros_like()?, &d)?)
}

unary_methods!(
    exp => EXP, exp2 => EXP2, expm1 => EXPM1, log => LOG, log2 => LOG2, log10 => LOG10, log1p => LOG1P,
    sqrt => SQRT, rsqrt => RSQRT, reciprocal => RECIPROCAL, square => SQUARE,
    sin => SIN, cos => COS, tan => TAN, asin => ASIN, acos => ACOS, atan => ATAN,
    sinh => SINH, cosh => COSH, tanh => TANH, asinh => ASINH, acosh => ACOSH, atanh => ATANH,
    sigmoid => SIGMOID, deg2rad => DEG2RAD, rad2deg => RAD2DEG, sinc => SINC,
);

impl Tensor {
    /// `torch.neg(x)` (`-x`).
    pub fn neg(&self) -> Result<Tensor> {
        if self.dtype().is_bool() {
            return Err(Error::dtype("neg", "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."));
        }
        unary(&NEG, self)
    }
    /// `-g` for backward rules (same as `neg`).
    pub(crate) fn neg_raw(&self) -> Result<Tensor> {
        unary(&NEG, self)
    }
    /// `torch.logit(x, eps)`: `log(z / (1 - z))` with `z = clamp(x, eps, 1 - eps)` when `eps` is given.
    pub fn logit(&self, eps: Option<f64>) -> Result<Tensor> {
        // PyTorch treats a negative eps as none
        let eps = eps.filter(|e| *e >= 0.0);
        let z = match eps {
            Some(lo) => {
                let (l, h) = (super::cuda_expr::lit(lo), super::cuda_expr::lit(1.0 - lo));
                format!("(x < {l} ? {l} : (x > {h} ? {h} : x))")
            }
            None => "x".to_string(),
        };
        let cuda = super::cuda_expr::unary("logit", self, super::cuda_expr::Out::Float, &format!("m_log({z} / ((C)1 - {z}))"), None, None)?;
        let out = if let Some(o) = cuda {
            o
        } else {
            map_float("logit", self, move |v| {
            let z = match eps {
                Some(lo) => {
                    let hi = 1.0 - lo;
                    if v < lo { lo } else if v > hi { hi } else { v }
                }
                None => v,
            };
            (z / (1.0 - z)).ln()
            })?
        };
        record_unary("logit", self, &out, move |x, _, g| {
            let d = g.div(&x.mul(&one_minus(x)?)?)?;
            let (lo, hi, fill) = match eps {
                None => (0.0, 1.0, f64::NAN),
                Some(e) => (e, 1.0 - e, 0.0),
            };
            let f = d.full_like(fill)?;
            x.lt_scalar(lo)?.where_(&f, &x.gt_scalar(hi)?.where_(&f, &d)?)
        });
        Ok(out)
    }
}

//! Unary elementwise ops as one table of specs: scalar functions per compute type, how
//! integer inputs are treated, and the backward rule.

use crate::autograd::{self, Saved};
use crate::backend::cpu;
use crate::dtype::DType;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::{Complex32, Complex64};

/// Gradient of a unary op: `(input, output, grad_output) -> grad_input`, written with tensor ops.
pub type UnaryBackward = fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor>;

/// What a unary op does with integer (and bool) inputs.
#[derive(Clone, Copy)]
pub enum IntMode {
    /// Promote to the default float dtype first (`sin`, `exp`).
    ToFloat,
    /// Compute in i64 and keep the dtype (`neg`, `abs`); bool inputs are rejected.
    Same(fn(i64) -> i64),
    /// Integers are returned unchanged (`floor`, `round`, `trunc` on ints).
    Identity,
    /// Integer inputs are an error.
    Reject,
}

/// One unary op.
pub struct UnarySpec {
    pub name: &'static str,
    pub kernel: &'static str,
    pub f32: fn(f32) -> f32,
    pub f64: fn(f64) -> f64,
    pub int: IntMode,
    pub complex: Option<fn(Complex64) -> Complex64>,
    pub backward: Option<UnaryBackward>,
}

/// Runs a unary spec with autograd.
pub fn unary(spec: &'static UnarySpec, x: &Tensor) -> Result<Tensor> {
    let name = spec.name;
    let d = x.dtype();
    let out = match d {
        _ if d.is_integral() => match spec.int {
            IntMode::ToFloat => {
                let f = x.to_dtype(crate::default_dtype())?;
                return unary(spec, &f);
            }
            IntMode::Same(f) if !d.is_bool() => {
                crate::with_dtype!(d, T, { cpu::map_unary::<i64, T>(x, |v| T::from_i64(f(v)))? })
            }
            IntMode::Identity => x.copy()?,
            _ => return Err(Error::dtype(name, format!("\"{name}\" not implemented for '{}'", d.name()))),
        },
        DType::F32 => cpu::map_unary::<f32, f32>(x, spec.f32)?,
        DType::F64 => cpu::map_unary::<f64, f64>(x, spec.f64)?,
        DType::C64 => match spec.complex {
            Some(f) => cpu::map_unary::<Complex32, Complex32>(x, |v| Complex32::from_c128(f(v.to_c128())))?,
            None => return Err(Error::unsupported(name, "complex inputs")),
        },
        DType::C128 => match spec.complex {
            Some(f) => cpu::map_unary::<Complex64, Complex64>(x, f)?,
            None => return Err(Error::unsupported(name, "complex inputs")),
        },
        _ => crate::with_dtype!(d, T, { cpu::map_unary::<f32, T>(x, |v| T::from_f64((spec.f32)(v) as f64))? }),
    };
    if let Some(bw) = spec.backward {
        if out.dtype().is_float() || out.dtype().is_complex() {
            let sx = Saved::new(name, x);
            autograd::record(name, &[x], &[out.clone()], move |ctx, g| {
                Ok(vec![Some(bw(&sx.get()?, &ctx.output(0)?, &g[0])?)])
            });
        }
    }
    Ok(out)
}

macro_rules! unary_spec {
    ($id:ident, $name:expr, $f32:expr, $f64:expr, $int:expr, $complex:expr, $bw:expr) => {
        #[doc = concat!("`torch.", $name, "`.")]
        pub static $id: UnarySpec = UnarySpec {
            name: $name,
            kernel: $name,
            f32: $f32,
            f64: $f64,
            int: $int,
            complex: $complex,
            backward: $bw,
        };
    };
}

unary_spec!(NEG, "neg", |x| -x, |x| -x, IntMode::Same(|x: i64| x.wrapping_neg()), Some(|x| -x), Some(|_, _, g| g.neg_raw()));
unary_spec!(EXP, "exp", f32::exp, f64::exp, IntMode::ToFloat, Some(|x: Complex64| x.exp()), Some(|_, y, g| g.mul(y)));
unary_spec!(LOG, "log", f32::ln, f64::ln, IntMode::ToFloat, Some(|x: Complex64| x.ln()), Some(|x, _, g| g.div(x)));
unary_spec!(SQRT, "sqrt", f32::sqrt, f64::sqrt, IntMode::ToFloat, Some(|x: Complex64| x.sqrt()), Some(|_, y, g| g.div(&y.mul_scalar(2.0)?)));

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
    /// `torch.exp(x)`.
    pub fn exp(&self) -> Result<Tensor> {
        unary(&EXP, self)
    }
    /// `torch.log(x)`.
    pub fn log(&self) -> Result<Tensor> {
        unary(&LOG, self)
    }
    /// `torch.sqrt(x)`.
    pub fn sqrt(&self) -> Result<Tensor> {
        unary(&SQRT, self)
    }
}

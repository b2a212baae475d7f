//! Unary elementwise ops: the engine (dtype handling, kernels, autograd recording) and, in the
//! submodules, the op tables: math functions, rounding and sign, predicates, complex parts.
//!
//! Most ops are data: a [`UnarySpec`] static with scalar functions per compute type, what
//! integer inputs do, and a backward rule written with tensor ops. Ops with parameters
//! (`round(decimals)`, `logit(eps)`, `leaky_relu(slope)`, ...) use [`map_float`] / [`map_keep`]
//! with a closure and record their backward with [`record_unary`].

pub mod complex_parts;
pub(crate) mod cuda_expr;
pub mod inplace;
pub mod math;
pub mod predicates;
pub mod rounding;

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
    /// The f32 kernel with `f32` inlined into the loop (a monomorphized copy of
    /// `map_unary(.., f32)`), so the hot path vectorizes instead of calling through a pointer.
    pub f32_kernel: fn(&Tensor) -> Result<Tensor>,
}

fn not_implemented(name: &str, d: DType) -> Error {
    Error::dtype(name, format!("\"{name}\" not implemented for '{}'", d.name()))
}

/// Runs a unary spec with autograd.
pub fn unary(spec: &'static UnarySpec, x: &Tensor) -> Result<Tensor> {
    let _prof = crate::profiler::op(spec.name, &[x]);
    if let Some(c) = crate::amp::tensors(spec.name, &[x])? {
        return unary(spec, &c.args[0]);
    }
    let name = spec.name;
    let d = x.dtype();
    if x.device().is_cuda() {
        if d.is_integral() {
            match spec.int {
                IntMode::ToFloat => return unary(spec, &x.to_dtype(crate::default_dtype())?),
                IntMode::Identity => return x.copy(),
                IntMode::Reject => return Err(not_implemented(name, d)),
                IntMode::Same(_) if d.is_bool() => return Err(not_implemented(name, d)),
                IntMode::Same(_) => {}
            }
        }
        // a CUDA kernel when the op has one for this dtype, else the op on the CPU (autograd
        // flows through the differentiable device moves)
        let Some(out) = crate::backend::cuda::ops::unary(spec, x)? else {
            return x.to_device(crate::Device::Cpu).and_then(|c| unary(spec, &c)).and_then(|r| r.to_device(x.device()));
        };
        if let Some(bw) = spec.backward {
            record_unary(name, x, &out, bw);
        }
        return Ok(out);
    }
    let out = match d {
        _ if d.is_integral() => match spec.int {
            IntMode::ToFloat => {
                let f = x.to_dtype(crate::default_dtype())?;
                return unary(spec, &f);
            }
            IntMode::Same(f) if !d.is_bool() => {
                if d == DType::I64 {
                    cpu::map_unary::<i64, i64>(x, f)?
                } else {
                    cpu::map_unary::<i64, i64>(x, f)?.to_dtype(d)?
                }
            }
            IntMode::Identity => x.copy()?,
            _ => return Err(not_implemented(name, d)),
        },
        DType::F32 => (spec.f32_kernel)(x)?,
        DType::F64 => cpu::map_unary::<f64, f64>(x, spec.f64)?,
        DType::C64 => match spec.complex {
            Some(f) => cpu::map_unary::<Complex32, Complex32>(x, |v| Complex32::from_c128(f(v.to_c128())))?,
            None => return Err(not_implemented(name, d)),
        },
        DType::C128 => match spec.complex {
            Some(f) => cpu::map_unary::<Complex64, Complex64>(x, f)?,
            None => return Err(not_implemented(name, d)),
        },
        // half types compute in f32 and round once
        _ => cpu::map_unary::<f32, f32>(x, spec.f32)?.to_dtype(d)?,
    };
    if let Some(bw) = spec.backward {
        record_spec(spec, x, &out, bw);
    }
    Ok(out)
}

/// [`record_unary`] for a spec on the CPU: for half tensors the rule sees the input, the output
/// recomputed from it and the gradient all in float32 (not the output rounded to the half dtype,
/// whose error a rule such as `tan`'s `g * (1 + y^2)` would carry), and its result is rounded
/// once; the recomputation is itself recorded when the rule's graph is built (`create_graph`).
fn record_spec(spec: &'static UnarySpec, x: &Tensor, out: &Tensor, bw: UnaryBackward) {
    if out.dtype().is_float() || out.dtype().is_complex() {
        let sx = Saved::new(spec.name, x);
        autograd::record(spec.name, &[x], std::slice::from_ref(out), move |ctx, g| {
            let x = sx.get()?;
            if crate::ops::acc::half_cpu(&[&x, &g[0]]).is_some() {
                let x32 = crate::ops::acc::up(&x)?;
                let y32 = unary(spec, &x32)?;
                return Ok(vec![Some(bw(&x32, &y32, &crate::ops::acc::up(&g[0])?)?)]);
            }
            Ok(vec![Some(bw(&x, &ctx.output(0)?, &g[0])?)])
        });
    }
}

/// Records `out = op(x)` for autograd with `bw(x, out, grad) -> grad_x` (nothing for non-float outputs).
pub(crate) fn record_unary(
    name: &'static str,
    x: &Tensor,
    out: &Tensor,
    bw: impl Fn(&Tensor, &Tensor, &Tensor) -> Result<Tensor> + Send + Sync + 'static,
) {
    if out.dtype().is_float() || out.dtype().is_complex() {
        let sx = Saved::new(name, x);
        autograd::record(name, &[x], &[out.clone()], move |ctx, g| {
            let (x, y) = (sx.get()?, ctx.output(0)?);
            // half CPU tensors: the rule in float32, rounded once (the engine casts the result)
            if crate::ops::acc::half_cpu(&[&x, &y, &g[0]]).is_some() {
                use crate::ops::acc::up;
                return Ok(vec![Some(bw(&up(&x)?, &up(&y)?, &up(&g[0])?)?)]);
            }
            Ok(vec![Some(bw(&x, &y, &g[0])?)])
        });
    }
}

/// `f` applied elementwise in f64 (f32 and half inputs round once at the end); integer and
/// bool inputs are promoted to the default float dtype first, complex inputs are rejected.
pub(crate) fn map_float(name: &str, x: &Tensor, f: impl Fn(f64) -> f64 + Sync + Send) -> Result<Tensor> {
    let d = x.dtype();
    match d {
        _ if d.is_integral() => map_float(name, &x.to_dtype(crate::default_dtype())?, f),
        DType::F64 => cpu::map_unary::<f64, f64>(x, f),
        DType::F32 => cpu::map_unary::<f32, f32>(x, |v| f(v as f64) as f32),
        _ if d.is_complex() => Err(not_implemented(name, d)),
        _ => cpu::map_unary::<f32, f32>(x, |v| f(v as f64) as f32)?.to_dtype(d),
    }
}

/// Like [`map_float`], but integer inputs keep their dtype and compute with `fi` in i64
/// (`relu`, `threshold`, `hardtanh` on integers); bool inputs are rejected.
pub(crate) fn map_keep(
    name: &str,
    x: &Tensor,
    ff: impl Fn(f64) -> f64 + Sync + Send,
    fi: impl Fn(i64) -> i64 + Sync + Send,
) -> Result<Tensor> {
    let d = x.dtype();
    if d.is_bool() {
        return Err(not_implemented(name, d));
    }
    if d.is_int() {
        return cpu::map_unary::<i64, i64>(x, fi)?.to_dtype(d);
    }
    map_float(name, x, ff)
}

/// A bool tensor `pf(x)` for floats (computed in f64) and `pi(x)` for integers and bools.
/// Complex inputs use `pc` if given.
pub(crate) fn predicate(
    name: &str,
    x: &Tensor,
    pf: impl Fn(f64) -> bool + Sync + Send,
    pi: impl Fn(i64) -> bool + Sync + Send,
    pc: Option<fn(Complex64) -> bool>,
) -> Result<Tensor> {
    let d = x.dtype();
    if d.is_integral() {
        cpu::map_unary::<i64, bool>(x, pi)
    } else if d.is_complex() {
        match pc {
            Some(f) => cpu::map_unary::<Complex64, bool>(x, f),
            None => Err(not_implemented(name, d)),
        }
    } else if d == DType::F32 {
        cpu::map_unary::<f32, bool>(x, |v| pf(v as f64))
    } else {
        cpu::map_unary::<f64, bool>(x, pf)
    }
}

/// Declares a [`UnarySpec`] static.
macro_rules! unary_spec {
    ($id:ident, $name:expr, $f32:expr, $f64:expr, $int:expr, $complex:expr, $bw:expr) => {
        $crate::ops::unary::unary_spec!($id, $name, $f32, $f64, $int, $complex, $bw,
            kernel = |x| $crate::backend::cpu::map_unary::<f32, f32>(x, $f32));
    };
    // with a dedicated f32 kernel (a vectorized block kernel) instead of `map_unary(.., f32)`
    ($id:ident, $name:expr, $f32:expr, $f64:expr, $int:expr, $complex:expr, $bw:expr, kernel = $k:expr) => {
        #[doc = concat!("`torch.", $name, "`.")]
        pub static $id: $crate::ops::unary::UnarySpec = $crate::ops::unary::UnarySpec {
            name: $name,
            kernel: $name,
            f32: $f32,
            f64: $f64,
            int: $int,
            complex: $complex,
            backward: $bw,
            f32_kernel: $k,
        };
    };
}
pub(crate) use unary_spec;

/// Declares `Tensor` methods that run a spec: `unary_methods!(sin => SIN, ...)`.
macro_rules! unary_methods {
    ($($m:ident => $spec:ident),* $(,)?) => {
        impl $crate::tensor::Tensor {$(
            #[doc = concat!("`torch.", stringify!($m), "(x)`, elementwise.")]
            pub fn $m(&self) -> $crate::Result<$crate::tensor::Tensor> {
                $crate::ops::unary::unary(&$spec, self)
            }
        )*}
    };
}
pub(crate) use unary_methods;

/// f64 evaluation of a scalar function for the f32 path (special functions are computed in
/// f64 and rounded once, which is at least as accurate as PyTorch's f32 kernels).
#[inline]
pub(crate) fn via64(f: fn(f64) -> f64, x: f32) -> f32 {
    f(x as f64) as f32
}

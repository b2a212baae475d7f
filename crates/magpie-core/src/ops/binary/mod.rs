//! Binary elementwise ops with broadcasting and PyTorch type promotion, as tables of specs:
//! each spec carries its scalar functions per compute type and its backward rule. The machinery
//! (promotion, kernels, autograd, in-place checks) is here; the ops live in submodules by concept.

use super::Operand;
use crate::autograd::{self, Saved};
use crate::backend::cpu;
use crate::dtype::{result_type, DType};
use crate::element::Element;
use crate::layout::for_each_run;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::{Complex32, Complex64};

/// Gradients of a binary op: `(ctx-free) (a, b, out, grad) -> (grad_a, grad_b)`, before un-broadcasting.
/// The third argument gives the op's output on demand, so rules that do not need it keep
/// working when the output was modified in place afterwards (as in PyTorch).
pub type BinaryBackward = fn(&Tensor, &Tensor, &dyn Fn() -> Result<Tensor>, &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)>;

/// How a binary op's result dtype follows from its inputs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Promote {
    /// `result_type(a, b)` (add, mul, ...).
    Same,
    /// Like `Same`, but integer results become the default float dtype (true division, atan2).
    IntToFloat,
    /// The result is bool (comparisons, logical ops); computed in `result_type(a, b)`.
    Bool,
}

/// One binary op: its name, CUDA kernel name, scalar functions and gradient.
pub struct BinarySpec {
    pub name: &'static str,
    pub kernel: &'static str,
    pub promote: Promote,
    pub f32: fn(f32, f32) -> f32,
    pub f64: fn(f64, f64) -> f64,
    /// Integer version (computed in i64, wrapped to the result type); None: ints unsupported.
    pub int: Option<fn(i64, i64) -> i64>,
    /// Bool version; None: bool inputs compute as ints (or are rejected if `int` is None).
    pub boolean: Option<fn(bool, bool) -> bool>,
    pub complex: Option<fn(Complex64, Complex64) -> Complex64>,
    /// For `Promote::Bool` ops: the predicate in f64, i64 and complex.
    pub pred: Option<(fn(f64, f64) -> bool, fn(i64, i64) -> bool)>,
    pub backward: Option<BinaryBackward>,
    /// The f32 kernel with `f32` inlined into the loop (a monomorphized copy of
    /// `map_binary(.., f32)`), so the hot path vectorizes instead of calling through a pointer.
    pub f32_kernel: fn(&str, &Tensor, &Tensor) -> Result<Tensor>,
}

macro_rules! spec {
    ($id:ident, $name:expr, $kernel:expr, $promote:expr, $f32:expr, $f64:expr, $int:expr, $boolean:expr, $complex:expr, $pred:expr, $bw:expr) => {
        #[doc = concat!("`torch.", $name, "`.")]
        pub static $id: BinarySpec = BinarySpec {
            name: $name,
            kernel: $kernel,
            promote: $promote,
            f32: $f32,
            f64: $f64,
            int: $int,
            boolean: $boolean,
            complex: $complex,
            pred: $pred,
            backward: $bw,
            f32_kernel: |op, a, b| $crate::backend::cpu::map_binary::<f32, f32, f32>(op, a, b, $f32),
        };
    };
}

mod arith;
mod compare;
mod logical;
mod math;
mod special_fns;

pub use arith::*;
pub use compare::*;
pub use logical::*;
pub use math::*;
pub use special_fns::{hurwitz_zeta, igamma as igamma_scalar, igammac as igammac_scalar, ln_gamma};

pub use super::ternary::where_cond;

fn operand_promo(o: &Operand) -> crate::dtype::Operand {
    match o {
        Operand::Tensor(t) => t.promo(),
        Operand::Scalar(s) => crate::dtype::Operand::Scalar(s.dtype()),
    }
}

/// The dtype of an operand as PyTorch sees it (a scalar's Python type).
pub(crate) fn operand_dtype(o: &Operand) -> DType {
    match o {
        Operand::Tensor(t) => t.dtype(),
        Operand::Scalar(s) => s.dtype(),
    }
}

/// `torch.result_type(a, b)` for two operands (tensors, 0-d tensors or scalars).
pub fn common_dtype(op: &str, a: &Operand, b: &Operand) -> Result<DType> {
    result_type(&[operand_promo(a), operand_promo(b)]).map_err(|e| Error::dtype(op, e.to_string()))
}

/// Computes the result dtype and the dtype the kernel computes in.
fn dtypes(spec: &BinarySpec, a: &Operand, b: &Operand) -> Result<(DType, DType)> {
    let common = common_dtype(spec.name, a, b)?;
    Ok(match spec.promote {
        Promote::Same => (common, common),
        Promote::IntToFloat => {
            let c = if common.is_integral() { crate::default_dtype() } else { common };
            (c, c)
        }
        Promote::Bool => (DType::Bool, common),
    })
}

fn to_tensor(o: &Operand, dtype: DType, device: crate::Device) -> Result<Tensor> {
    match o {
        Operand::Tensor(t) => Ok((*t).clone()),
        Operand::Scalar(s) => Tensor::scalar_tensor(*s, dtype, device),
    }
}

/// Runs a binary spec on two operands (tensors or scalars), with autograd.
pub fn binary(spec: &'static BinarySpec, a: Operand, b: Operand) -> Result<Tensor> {
    let _prof = match (&a, &b) {
        _ if !crate::profiler::is_enabled() => None,
        (Operand::Tensor(x), Operand::Tensor(y)) => crate::profiler::op(spec.name, &[x, y]),
        (Operand::Tensor(x), _) | (_, Operand::Tensor(x)) => crate::profiler::op(spec.name, &[x]),
        _ => crate::profiler::op(spec.name, &[]),
    };
    if crate::amp::any_active() {
        let ts: Vec<&Tensor> = [&a, &b].into_iter().filter_map(|o| if let Operand::Tensor(t) = o { Some(*t) } else { None }).collect();
        if let Some(c) = crate::amp::tensors(spec.name, &ts)? {
            let mut cast = c.args.iter();
            let a2 = match &a {
                Operand::Tensor(_) => cast.next().map_or(a.clone(), Operand::Tensor),
                _ => a.clone(),
            };
            let b2 = match &b {
                Operand::Tensor(_) => cast.next().map_or(b.clone(), Operand::Tensor),
                _ => b.clone(),
            };
            return binary(spec, a2, b2);
        }
    }
    let (out_dt, compute) = dtypes(spec, &a, &b)?;
    let device = match (&a, &b) {
        (Operand::Tensor(x), Operand::Tensor(y)) => super::common_device(spec.name, &[x, y])?,
        (Operand::Tensor(x), _) | (_, Operand::Tensor(x)) => x.device(),
        _ => crate::Device::Cpu,
    };
    // a 0-d CPU tensor with a CUDA tensor: moved to the GPU (PyTorch treats it as a scalar)
    if let (Operand::Tensor(x), Operand::Tensor(y)) = (&a, &b) {
        if x.device() != y.device() {
            let (mx, my) = (super::scalar_to_device(x, device)?, super::scalar_to_device(y, device)?);
            return binary(spec, Operand::Tensor(&mx), Operand::Tensor(&my));
        }
    }
    let ta = to_tensor(&a, compute, device)?;
    let tb = to_tensor(&b, compute, device)?;
    let out = if device.is_cuda() {
        match crate::backend::cuda::ops::binary(spec, &ta, &tb, compute, out_dt)? {
            Some(t) => t,
            // no CUDA kernel: the op on the CPU, moved back (differentiable moves)
            None => {
                let cpu = |o: &Operand| -> Result<Option<Tensor>> {
                    match o {
                        Operand::Tensor(t) => Ok(Some(t.to_device(crate::Device::Cpu)?)),
                        Operand::Scalar(_) => Ok(None),
                    }
                };
                let (ca, cb) = (cpu(&a)?, cpu(&b)?);
                let oa = ca.as_ref().map_or(a.clone(), Operand::Tensor);
                let ob = cb.as_ref().map_or(b.clone(), Operand::Tensor);
                return binary(spec, oa, ob)?.to_device(device);
            }
        }
    } else {
        kernel(spec, &ta, &tb, compute, out_dt)?
    };
    if let Some(bw) = spec.backward {
        // (nothing to save when nothing will be recorded: no clones, no saved-tensor hooks)
        let recording = autograd::is_grad_enabled() && (ta.requires_grad() || tb.requires_grad());
        if recording && (out_dt.is_float() || out_dt.is_complex()) {
            let (sa, sb) = (Saved::new(spec.name, &ta), Saved::new(spec.name, &tb));
            let (sha, shb) = (ta.shape().to_vec(), tb.shape().to_vec());
            autograd::record(spec.name, &[&ta, &tb], &[out.clone()], move |ctx, g| {
                let (x, y) = (sa.get()?, sb.get()?);
                // half CPU tensors: the rule in float32, rounded once (the engine casts the results)
                let (ga, gb) = if crate::ops::acc::half_cpu(&[&x, &y, &g[0]]).is_some() {
                    // the output recomputed in float32 (not the rounded one), recorded when
                    // the rule's graph is built
                    use crate::ops::acc::up;
                    let (x32, y32) = (up(&x)?, up(&y)?);
                    bw(&x32, &y32, &|| binary(spec, Operand::Tensor(&x32), Operand::Tensor(&y32)), &up(&g[0])?)?
                } else {
                    bw(&x, &y, &|| ctx.output(0), &g[0])?
                };
                let ga = match ga {
                    Some(t) if ctx.needs_input_grad(0) => Some(t.sum_to_size(&sha)?),
                    _ => None,
                };
                let gb = match gb {
                    Some(t) if ctx.needs_input_grad(1) => Some(t.sum_to_size(&shb)?),
                    _ => None,
                };
                Ok(vec![ga, gb])
            });
        }
    }
    Ok(out)
}

fn kernel(spec: &BinarySpec, a: &Tensor, b: &Tensor, compute: DType, out_dt: DType) -> Result<Tensor> {
    let name = spec.name;
    if let Some((pf, pi)) = spec.pred {
        return if compute.is_integral() {
            cpu::map_binary::<i64, i64, bool>(name, a, b, pi)
        } else if compute.is_complex() {
            Err(Error::unsupported(name, "complex inputs"))
        } else if compute == DType::F32 {
            // f32 values are exact in f64, so the predicate gives the same answer.
            cpu::map_binary::<f32, f32, bool>(name, a, b, |x, y| pf(x as f64, y as f64))
        } else {
            cpu::map_binary::<f64, f64, bool>(name, a, b, pf)
        };
    }
    let t = match compute {
        DType::Bool => match (spec.boolean, spec.int) {
            (Some(f), _) => cpu::map_binary::<bool, bool, bool>(name, a, b, f)?,
            (None, Some(f)) => cpu::map_binary::<i64, i64, i64>(name, a, b, f)?,
            _ => return Err(not_implemented(name, DType::Bool)),
        },
        DType::I64 => match spec.int {
            Some(f) => cpu::map_binary::<i64, i64, i64>(name, a, b, f)?,
            None => return Err(not_implemented(name, compute)),
        },
        d if d.is_int() => match spec.int {
            Some(f) => crate::with_dtype!(d, T, { cpu::map_binary::<T, T, T>(name, a, b, |x, y| T::from_i64(f(x.to_i64(), y.to_i64())))? }),
            None => return Err(not_implemented(name, d)),
        },
        DType::F32 => (spec.f32_kernel)(name, a, b)?,
        DType::F64 => cpu::map_binary::<f64, f64, f64>(name, a, b, spec.f64)?,
        DType::C64 | DType::C128 => match spec.complex {
            Some(f) if compute == DType::C64 => {
                cpu::map_binary::<Complex32, Complex32, Complex32>(name, a, b, |x, y| Complex32::from_c128(f(x.to_c128(), y.to_c128())))?
            }
            Some(f) => cpu::map_binary::<Complex64, Complex64, Complex64>(name, a, b, f)?,
            None => return Err(Error::unsupported(name, "complex inputs")),
        },
        d => crate::with_dtype!(d, T, { cpu::map_binary::<f32, f32, T>(name, a, b, |x, y| T::from_f64((spec.f32)(x, y) as f64))? }),
    };
    t.to_dtype(out_dt)
}

/// PyTorch's dispatch error for a dtype a kernel lacks: `"atan2_cpu" not implemented for 'Long'`.
pub(crate) fn not_implemented(op: &str, d: DType) -> Error {
    Error::dtype(op, format!("\"{op}_cpu\" not implemented for '{}'", scalar_type_name(d)))
}

/// PyTorch's C++ ScalarType name (`Float`, `Long`, ...), as its error messages spell dtypes.
pub fn scalar_type_name(d: DType) -> &'static str {
    match d {
        DType::Bool => "Bool",
        DType::U8 => "Byte",
        DType::I8 => "Char",
        DType::I16 => "Short",
        DType::I32 => "Int",
        DType::I64 => "Long",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::F32 => "Float",
        DType::F64 => "Double",
        DType::C64 => "ComplexFloat",
        DType::C128 => "ComplexDouble",
        DType::F8E4M3 => "Float8_e4m3fn",
        DType::F8E5M2 => "Float8_e5m2",
    }
}

/// `torch.can_cast(from, to)`: no complex to real, no float to integer, nothing but bool to bool.
pub fn can_cast(from: DType, to: DType) -> bool {
    !((from.is_complex() && !to.is_complex())
        || (from.is_float() && to.is_integral())
        || (!from.is_bool() && to.is_bool()))
}

/// Writes an out-of-place `result` into `dst` as an in-place op does: the result dtype must cast
/// to `dst`'s dtype and the result must not broadcast `dst` to a bigger shape.
pub(crate) fn write_inplace(op: &str, dst: &Tensor, result: &Tensor) -> Result<Tensor> {
    if !can_cast(result.dtype(), dst.dtype()) {
        return Err(Error::dtype(
            op,
            format!(
                "result type {} can't be cast to the desired output type {}",
                scalar_type_name(result.dtype()),
                scalar_type_name(dst.dtype())
            ),
        ));
    }
    dst.assign_(op, &result.to_dtype(dst.dtype())?)
}

/// Integer division (and modulo) by zero raises `ZeroDivisionError` in PyTorch; checks the divisor
/// when the op computes in an integer dtype.
pub(crate) fn check_int_divisor(op: &str, b: &Operand, compute: DType) -> Result<()> {
    if !compute.is_integral() {
        return Ok(());
    }
    let zero = match b {
        Operand::Scalar(s) => s.to_i64() == 0,
        Operand::Tensor(t) if t.device().is_cuda() => t.to_device(crate::Device::Cpu)?.to_vec::<i64>()?.contains(&0),
        Operand::Tensor(t) => cpu::read(t, |v: &[i64]| v.contains(&0))?,
    };
    if zero {
        return Err(Error::value(op, "ZeroDivisionError"));
    }
    Ok(())
}

/// Adds `g` into the elements of the view `v` in place, accumulating where the view repeats a
/// storage position (expand, overlapping unfold / as_strided). Not recorded by autograd.
pub(crate) fn add_into_view(v: &Tensor, g: &Tensor) -> Result<()> {
    #[cfg(feature = "cuda")]
    if v.device().is_cuda() {
        return crate::backend::cuda::strided::add_into(v, g);
    }
    match v.dtype() {
        // floats add natively (the complex round trip of the general case is exact but slow)
        DType::F32 => add_into_view_t(v, g, |a: f32, b: f32| a + b),
        DType::F64 => add_into_view_t(v, g, |a: f64, b: f64| a + b),
        dt => crate::with_dtype!(dt, T, { add_into_view_t(v, g, |a: T, b: T| T::from_c128(a.to_c128() + b.to_c128())) }),
    }
}

fn add_into_view_t<T: Element>(v: &Tensor, g: &Tensor, add: impl Fn(T, T) -> T) -> Result<()> {
    let layout = v.layout().clone();
    let vals: Vec<T> = cpu::to_vec(g)?;
    let mut guard = v.storage().write();
    let Storage::Cpu(s) = &mut *guard else { return Err(crate::backend::cuda::cpu_only("add_into_view")) };
    let dst = T::slice_mut(s).ok_or_else(|| Error::dtype("add_into_view", "dtype mismatch"))?;
    let mut k = 0;
    for_each_run(&layout, |start, len, stride| {
        for (j, &x) in vals[k..k + len].iter().enumerate() {
            let i = start + j * stride;
            dst[i] = add(dst[i], x);
        }
        k += len;
    });
    Ok(())
}

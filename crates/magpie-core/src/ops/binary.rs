//! Binary elementwise ops with broadcasting and type promotion, as one table of specs:
//! each spec carries its scalar functions per compute type and its backward rule.

use super::Operand;
use crate::autograd::{self, Saved};
use crate::backend::cpu;
use crate::dtype::{result_type, DType};
use crate::element::Element;
use crate::layout::for_each_index;
use crate::scalar::Scalar;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::{Complex32, Complex64};

/// Gradients of a binary op: `(ctx-free) (a, b, out, grad) -> (grad_a, grad_b)`, before un-broadcasting.
pub type BinaryBackward = fn(&Tensor, &Tensor, &Tensor, &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)>;

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
}

fn operand_promo(o: &Operand) -> crate::dtype::Operand {
    match o {
        Operand::Tensor(t) => t.promo(),
        Operand::Scalar(s) => crate::dtype::Operand::Scalar(s.dtype()),
    }
}

/// Computes the result dtype and the dtype the kernel computes in.
fn dtypes(spec: &BinarySpec, a: &Operand, b: &Operand) -> Result<(DType, DType)> {
    let common = result_type(&[operand_promo(a), operand_promo(b)]).map_err(|e| Error::dtype(spec.name, e.to_string()))?;
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
    let (out_dt, compute) = dtypes(spec, &a, &b)?;
    let device = match (&a, &b) {
        (Operand::Tensor(x), Operand::Tensor(y)) => super::same_device(spec.name, &[x, y])?,
        (Operand::Tensor(x), _) | (_, Operand::Tensor(x)) => x.device(),
        _ => crate::Device::Cpu,
    };
    let ta = to_tensor(&a, compute, device)?;
    let tb = to_tensor(&b, compute, device)?;
    let out = kernel(spec, &ta, &tb, compute, out_dt)?;
    if let Some(bw) = spec.backward {
        if out_dt.is_float() || out_dt.is_complex() {
            let (sa, sb) = (Saved::new(spec.name, &ta), Saved::new(spec.name, &tb));
            let (sha, shb) = (ta.shape().to_vec(), tb.shape().to_vec());
            autograd::record(spec.name, &[&ta, &tb], &[out.clone()], move |ctx, g| {
                let (x, y) = (sa.get()?, sb.get()?);
                let o = ctx.output(0)?;
                let (ga, gb) = bw(&x, &y, &o, &g[0])?;
                let ga = match ga { Some(t) if ctx.needs_input_grad(0) => Some(t.sum_to_size(&sha)?), _ => None };
                let gb = match gb { Some(t) if ctx.needs_input_grad(1) => Some(t.sum_to_size(&shb)?), _ => None };
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
        } else {
            cpu::map_binary::<f64, f64, bool>(name, a, b, pf)
        };
    }
    let t = match compute {
        DType::Bool => match (spec.boolean, spec.int) {
            (Some(f), _) => cpu::map_binary::<bool, bool, bool>(name, a, b, f)?,
            (None, Some(f)) => cpu::map_binary::<i64, i64, i64>(name, a, b, f)?,
            _ => return Err(Error::dtype(name, format!("\"{name}\" not implemented for 'Bool'"))),
        },
        d if d.is_int() => match spec.int {
            Some(f) => crate::with_dtype!(d, T, { cpu::map_binary::<i64, i64, T>(name, a, b, |x, y| T::from_i64(f(x, y)))? }),
            None => return Err(Error::dtype(name, format!("\"{name}\" not implemented for '{}'", d.name()))),
        },
        DType::F32 => cpu::map_binary::<f32, f32, f32>(name, a, b, spec.f32)?,
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

/// Adds `g` into the elements of the view `v` in place, accumulating where the view repeats a
/// storage position (expand, overlapping unfold / as_strided). Not recorded by autograd.
pub(crate) fn add_into_view(v: &Tensor, g: &Tensor) -> Result<()> {
    let layout = v.layout().clone();
    crate::with_dtype!(v.dtype(), T, {
        let vals: Vec<T> = cpu::to_vec(g)?;
        let mut guard = v.storage().write();
        let Storage::Cpu(s) = &mut *guard else { return Err(Error::device("add_into_view", "CPU only")) };
        let dst = T::slice_mut(s).ok_or_else(|| Error::dtype("add_into_view", "dtype mismatch"))?;
        let mut k = 0;
        for_each_index(&layout, |i| {
            dst[i] = T::from_c128(dst[i].to_c128() + vals[k].to_c128());
            k += 1;
        });
    });
    Ok(())
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
        };
    };
}

spec!(ADD, "add", "add", Promote::Same, |a, b| a + b, |a, b| a + b, Some(|a: i64, b: i64| a.wrapping_add(b)), Some(|a, b| a | b), Some(|a, b| a + b), None,
    Some(|_, _, _, g| Ok((Some(g.clone()), Some(g.clone())))));
spec!(SUB, "sub", "sub", Promote::Same, |a, b| a - b, |a, b| a - b, Some(|a: i64, b: i64| a.wrapping_sub(b)), None, Some(|a, b| a - b), None,
    Some(|_, _, _, g| Ok((Some(g.clone()), Some(g.neg()?)))));
spec!(MUL, "mul", "mul", Promote::Same, |a, b| a * b, |a, b| a * b, Some(|a: i64, b: i64| a.wrapping_mul(b)), Some(|a, b| a & b), Some(|a, b| a * b), None,
    Some(|a, b, _, g| Ok((Some(g.mul(b)?), Some(g.mul(a)?)))));
spec!(DIV, "div", "div", Promote::IntToFloat, |a, b| a / b, |a, b| a / b, None, None, Some(|a, b| a / b), None,
    Some(|a, b, _, g| Ok((Some(g.div(b)?), Some(g.neg()?.mul(a)?.div(&b.mul(b)?)?)))));

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
        if self.dtype().is_bool() && other.dtype().is_bool() {
            return Err(Error::dtype("sub", "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead."));
        }
        binary(&SUB, Operand::Tensor(self), Operand::Tensor(other))
    }
    /// `a - s`.
    pub fn sub_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(&SUB, Operand::Tensor(self), Operand::Scalar(s.into()))
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
    /// `a.add_(b)` in place.
    pub fn add_(&self, other: &Tensor) -> Result<Tensor> {
        let r = self.add(other)?;
        self.assign_("add_", &r.to_dtype(self.dtype())?)
    }
    /// `a.mul_(b)` in place.
    pub fn mul_(&self, other: &Tensor) -> Result<Tensor> {
        let r = self.mul(other)?;
        self.assign_("mul_", &r.to_dtype(self.dtype())?)
    }
    /// `a.sub_(b)` in place.
    pub fn sub_(&self, other: &Tensor) -> Result<Tensor> {
        let r = self.sub(other)?;
        self.assign_("sub_", &r.to_dtype(self.dtype())?)
    }
    /// `a.div_(b)` in place.
    pub fn div_(&self, other: &Tensor) -> Result<Tensor> {
        let r = self.div(other)?;
        self.assign_("div_", &r.to_dtype(self.dtype())?)
    }
}

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

spec!(POW, "pow", "pow", Promote::Same, f32::powf, f64::powf, Some(|a: i64, b: i64| if b < 0 { if a == 1 { 1 } else if a == -1 { if b % 2 == 0 { 1 } else { -1 } } else { 0 } } else { a.wrapping_pow(b.min(u32::MAX as i64) as u32) }), None, Some(|a: Complex64, b: Complex64| a.powc(b)), None,
    Some(|a, b, o, g| {
        let ga = g.mul(&b.mul(&a.pow(&b.sub_scalar(1)?)?)?)?;
        // d/db a^b = a^b ln a, taken as 0 where a == 0 and b >= 0 (PyTorch's convention)
        let lg = a.log()?;
        let safe = a.eq_scalar(0)?.where_(&a.zeros_like()?, &lg)?;
        let gb = g.mul(&o.mul(&safe)?)?;
        Ok((Some(ga), Some(gb)))
    }));

impl Tensor {
    /// `torch.pow(a, b)`.
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        binary(&POW, Operand::Tensor(self), Operand::Tensor(exponent))
    }
    /// `torch.pow(a, s)` with a scalar exponent.
    pub fn pow_scalar(&self, s: impl Into<Scalar>) -> Result<Tensor> {
        binary(&POW, Operand::Tensor(self), Operand::Scalar(s.into()))
    }
    /// `torch.where(cond, self, other)` as a method of the condition: `cond.where_(a, b)`
    /// picks `a` where true, `b` where false (broadcasting all three).
    pub fn where_(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        where_cond(self, a, b)
    }
}

/// `torch.where(condition, input, other)` with broadcasting and type promotion; differentiable in `input` and `other`.
pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if cond.dtype() != DType::Bool {
        return Err(Error::dtype("where", format!("where expected condition to be a boolean tensor, but got a tensor with dtype {}", cond.dtype().name())));
    }
    let dt = result_type(&[a.promo(), b.promo()])?;
    let shape = crate::shape::broadcast_all("where", &[cond.shape(), a.shape(), b.shape()])?;
    let c = cond.broadcast_to(&shape)?;
    let (ab, bb) = {
        let _ng = autograd::no_grad();
        (a.broadcast_to(&shape)?, b.broadcast_to(&shape)?)
    };
    let out = crate::with_dtype!(dt, T, {
        let cv: Vec<bool> = cpu::to_vec(&c)?;
        let av: Vec<T> = cpu::to_vec(&ab)?;
        let bv: Vec<T> = cpu::to_vec(&bb)?;
        let v: Vec<T> = cv.iter().zip(av.iter().zip(&bv)).map(|(&k, (&x, &y))| if k { x } else { y }).collect();
        Tensor::from_vec(v, &shape)?
    });
    let sc = Saved::new("where", cond);
    let (sha, shb) = (a.shape().to_vec(), b.shape().to_vec());
    autograd::record("Where", &[a, b], &[out.clone()], move |ctx, g| {
        let c = sc.get()?;
        let z = g[0].zeros_like()?;
        let ga = if ctx.needs_input_grad(0) { Some(c.where_(&g[0], &z)?.sum_to_size(&sha)?) } else { None };
        let gb = if ctx.needs_input_grad(1) { Some(c.where_(&z, &g[0])?.sum_to_size(&shb)?) } else { None };
        Ok(vec![ga, gb])
    });
    Ok(out)
}

//! Elementwise ops with parameters (activations, predicates, `nan_to_num`, `bitwise_not`) on
//! CUDA through the one expression kernel of backend/cuda/elementwise.rs: each op states its
//! forward (and gradient) as a CUDA C expression with its parameters written in as literals.

use crate::tensor::Tensor;
use crate::Result;

/// The dtype a CUDA expression kernel writes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Out {
    /// Floats keep their dtype; integers and bools become the default float dtype.
    Float,
    /// Every dtype keeps itself (integers compute in i64 with the `int` expression).
    Keep,
    /// A bool tensor (predicates).
    Bool,
}

/// A C literal of the compute type `C` for `v` (non-finite values as IEEE bit patterns of double).
pub(crate) fn lit(v: f64) -> String {
    if v.is_finite() {
        format!("((C)({v:e}))")
    } else {
        format!("((C)__longlong_as_double({}ll))", v.to_bits() as i64)
    }
}

/// An i64 C literal for `v`.
pub(crate) fn ilit(v: i64) -> String {
    if v == i64::MIN {
        "((i64)(-9223372036854775807ll - 1))".into()
    } else {
        format!("((i64)({v}ll))")
    }
}

/// `x` mapped by `float` (computed in f32 for f32 and half dtypes, f64 for f64) or, for integer
/// and bool inputs of [`Out::Keep`] / [`Out::Bool`] ops, by `int` (computed in i64, bools in
/// bool when `int_bool` is given). None when `x` is not on CUDA or no kernel takes the dtype:
/// the caller then runs its CPU path.
pub(crate) fn unary(op: &'static str, x: &Tensor, out_kind: Out, float: &str, int: Option<&str>, int_bool: Option<&str>) -> Result<Option<Tensor>> {
    imp::unary(op, x, out_kind, float, int, int_bool)
}

/// The gradient `float(x, y = g)` of a float op on CUDA (f32 arithmetic, f64 for double), or
/// None when the graph of the gradient is built (the caller's tensor-op rule stays
/// differentiable) or the inputs do not suit the kernel.
pub(crate) fn grad(op: &'static str, x: &Tensor, g: &Tensor, float: &str) -> Result<Option<Tensor>> {
    if crate::autograd::is_grad_enabled() {
        return Ok(None);
    }
    imp::grad(op, x, g, float)
}

/// `out = float(x, y)` over two broadcast tensors, `x` and `y` read as f64 (whatever their dtypes)
/// and the expression computed in double, written as `out_dtype`. A CPU 0-d operand is moved to
/// the other's device. None when neither is a CUDA tensor or the dtypes have no kernel.
pub(crate) fn binary_f64(op: &'static str, x: &Tensor, y: &Tensor, out_dtype: crate::DType, float: &str) -> Result<Option<Tensor>> {
    imp::binary_f64(op, x, y, out_dtype, float)
}

#[cfg(feature = "cuda")]
mod imp {
    use super::{Out, Result, Tensor};
    use crate::DType;
    use crate::backend::cuda::elementwise::{map, supported, Opnd};
    use std::collections::HashSet;
    use std::sync::Mutex;

    /// The kernel cache keys on `&'static str`: each distinct expression (one per parameter
    /// value) is leaked once and reused.
    fn intern(s: String) -> &'static str {
        static SEEN: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
        let mut g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
        let set = g.get_or_insert_with(HashSet::new);
        if let Some(k) = set.get(s.as_str()) {
            return k;
        }
        let k: &'static str = Box::leak(s.into_boxed_str());
        set.insert(k);
        k
    }

    fn float_compute(d: DType) -> DType {
        if d == DType::F64 {
            DType::F64
        } else {
            DType::F32
        }
    }

    pub(super) fn unary(op: &'static str, x: &Tensor, out_kind: Out, float: &str, int: Option<&str>, int_bool: Option<&str>) -> Result<Option<Tensor>> {
        let d = x.dtype();
        let crate::Device::Cuda(ord) = x.device() else { return Ok(None) };
        if !supported(d) {
            return Ok(None);
        }
        let (compute, expr, out_d) = if d.is_float() {
            let od = if out_kind == Out::Bool { DType::Bool } else { d };
            (float_compute(d), float, od)
        } else {
            match out_kind {
                Out::Float => {
                    let f = crate::default_dtype();
                    if !supported(f) {
                        return Ok(None);
                    }
                    (float_compute(f), float, f)
                }
                Out::Keep | Out::Bool => {
                    let od = if out_kind == Out::Bool { DType::Bool } else { d };
                    match (d.is_bool(), int_bool, int) {
                        (true, Some(b), _) => (DType::Bool, b, od),
                        (_, _, Some(i)) => (DType::I64, i, od),
                        _ => return Ok(None),
                    }
                }
            }
        };
        let out = crate::backend::cuda::ops::empty(op, ord, out_d, x.shape())?;
        map(op, op, intern(expr.to_string()), compute, &out, &[Opnd { t: x, load_as: compute }])?;
        Ok(Some(out))
    }

    pub(super) fn grad(op: &'static str, x: &Tensor, g: &Tensor, float: &str) -> Result<Option<Tensor>> {
        let d = x.dtype();
        let crate::Device::Cuda(ord) = x.device() else { return Ok(None) };
        if !d.is_float() || !supported(d) || g.dtype() != d || g.device() != x.device() {
            return Ok(None);
        }
        let shape = crate::shape::broadcast_shapes(op, x.shape(), g.shape())?;
        let compute = float_compute(d);
        let out = crate::backend::cuda::ops::empty(op, ord, d, &shape)?;
        map(op, op, intern(float.to_string()), compute, &out, &[Opnd { t: x, load_as: compute }, Opnd { t: g, load_as: compute }])?;
        Ok(Some(out))
    }

    pub(super) fn binary_f64(op: &'static str, x: &Tensor, y: &Tensor, out_dtype: DType, float: &str) -> Result<Option<Tensor>> {
        let dev = match (x.device(), y.device()) {
            (a, b) if a == b && a.is_cuda() => a,
            (a, crate::Device::Cpu) if a.is_cuda() && y.ndim() == 0 => a,
            (crate::Device::Cpu, b) if b.is_cuda() && x.ndim() == 0 => b,
            _ => return Ok(None),
        };
        let crate::Device::Cuda(ord) = dev else { return Ok(None) };
        if !supported(x.dtype()) || !supported(y.dtype()) || !supported(out_dtype) {
            return Ok(None);
        }
        let x = if x.device() == dev { x.clone() } else { x.to_device(dev)? };
        let y = if y.device() == dev { y.clone() } else { y.to_device(dev)? };
        let shape = crate::shape::broadcast_shapes(op, x.shape(), y.shape())?;
        let out = crate::backend::cuda::ops::empty(op, ord, out_dtype, &shape)?;
        map(op, op, intern(float.to_string()), DType::F64, &out, &[Opnd { t: &x, load_as: DType::F64 }, Opnd { t: &y, load_as: DType::F64 }])?;
        Ok(Some(out))
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::{Out, Result, Tensor};

    pub(super) fn unary(_: &'static str, _: &Tensor, _: Out, _: &str, _: Option<&str>, _: Option<&str>) -> Result<Option<Tensor>> {
        Ok(None)
    }

    pub(super) fn grad(_: &'static str, _: &Tensor, _: &Tensor, _: &str) -> Result<Option<Tensor>> {
        Ok(None)
    }

    pub(super) fn binary_f64(_: &'static str, _: &Tensor, _: &Tensor, _: crate::DType, _: &str) -> Result<Option<Tensor>> {
        Ok(None)
    }
}

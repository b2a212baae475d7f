//! Registry entries for the binary and ternary elementwise ops: arithmetic, comparisons,
//! logical/bitwise ops, floating-point math, `where`, `clamp`, `lerp`, `addcmul`, `addcdiv`,
//! `masked_fill`, the reflected `__r*__` operators and the in-place forms.

use super::args::TensorOrScalar;
use super::{Args, Registry, Value};
use crate::ops::binary::{self as b, binary, integral_only, real_binary, BinarySpec};
use crate::ops::ternary;
use crate::ops::Operand;
use crate::tensor::Tensor;
use crate::{Error, Result, Scalar};

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// Reads `(input, other)`; `self_scalar` / `other_scalar` say which may be Python numbers
/// (as PyTorch's `Scalar` overloads allow). Two numbers are rejected, as in PyTorch.
fn pair(a: &mut Args, other: &str, self_scalar: bool, other_scalar: bool) -> Result<(TensorOrScalar, TensorOrScalar)> {
    let x = if self_scalar { a.tensor_or_scalar(0, "input")? } else { TensorOrScalar::Tensor(a.tensor(0, "input")?) };
    let y = if other_scalar { a.tensor_or_scalar(1, other)? } else { TensorOrScalar::Tensor(a.tensor(1, other)?) };
    if let (TensorOrScalar::Scalar(_), TensorOrScalar::Scalar(_)) = (&x, &y) {
        return Err(Error::value(a.op(), format!("{}() received an invalid combination of arguments: at least one Tensor is required", a.op())));
    }
    Ok((x, y))
}

/// The tensor an in-place op writes into.
fn self_tensor(x: &TensorOrScalar, op: &str) -> Result<Tensor> {
    match x {
        TensorOrScalar::Tensor(t) => Ok(t.clone()),
        TensorOrScalar::Scalar(_) => Err(Error::value(op, "in-place ops need a Tensor as self")),
    }
}

/// The Python in-place operators (`x += y` is `x.__iadd__(y)`).
const INPLACE_OPERATORS: &[&str] = &[
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__",
    "__ixor__", "__ilshift__", "__irshift__",
];

/// True for an in-place name: `add_`, `__iadd__`.
fn is_inplace(op: &str) -> bool {
    (op.ends_with('_') && !op.ends_with("__")) || INPLACE_OPERATORS.contains(&op)
}

/// Runs the op `f` on `input`: out of place, or for an in-place name written into `input`
/// through [`Args::inplace`] (so that `f` reads a copy of `input` when autograd records).
fn run(a: &Args, x: &TensorOrScalar, f: impl FnOnce(Operand) -> Result<Tensor>) -> Result<Value> {
    if is_inplace(a.op()) {
        return a.inplace(&self_tensor(x, a.op())?, |s| f(Operand::Tensor(s)));
    }
    t(f(x.operand())?)
}

/// [`run`] for ops whose `input` is always a tensor.
fn run_t(a: &Args, x: &Tensor, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Value> {
    if is_inplace(a.op()) {
        return a.inplace(x, f);
    }
    t(f(x)?)
}

macro_rules! simple {
    // A binary spec reachable under `names` (and `name_` in place); flags: may self / other be scalars.
    ($r:ident, $names:expr, $spec:expr, $self_s:expr, $other_s:expr, $other:expr, $run:ident) => {
        $r.add_all($names, |a| {
            let (x, y) = pair(a, $other, $self_s, $other_s)?;
            run(a, &x, |x| $run(&$spec, x, y.operand()))
        });
    };
}

fn plain(spec: &'static BinarySpec, x: Operand, y: Operand) -> Result<Tensor> {
    binary(spec, x, y)
}

/// A reflected operator `input.__rop__(other)`: `other op input`.
fn reflected(a: &mut Args, f: fn(Operand, Operand) -> Result<Tensor>) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let y = a.tensor_or_scalar(1, "other")?;
    t(f(y.operand(), Operand::Tensor(&x))?)
}

/// Registers this family's ops.
pub(crate) fn register(r: &mut Registry) {
    register_arith(r);
    register_compare(r);
    register_logical(r);
    register_math(r);
    register_ternary(r);
    register_reflected(r);
}

fn register_arith(r: &mut Registry) {
    r.add_all(&["add", "add_", "__add__", "__iadd__"], |a| {
        let (x, y) = pair(a, "other", false, true)?;
        let alpha = a.opt_scalar(2, "alpha")?;
        run(a, &x, |x| b::add_alpha(x, y.operand(), alpha))
    });
    r.add_all(&["sub", "sub_", "subtract", "subtract_", "__sub__", "__isub__"], |a| {
        let (x, y) = pair(a, "other", false, true)?;
        let alpha = a.opt_scalar(2, "alpha")?;
        run(a, &x, |x| b::sub_alpha(x, y.operand(), alpha))
    });
    r.add("rsub", |a| {
        let (x, y) = pair(a, "other", false, true)?;
        let alpha = a.opt_scalar(2, "alpha")?;
        t(b::rsub_op(x.operand(), y.operand(), alpha)?)
    });
    simple!(r, &["mul", "mul_", "multiply", "multiply_", "__mul__", "__imul__"], b::MUL, false, true, "other", plain);
    r.add_all(&["div", "div_", "divide", "divide_"], |a| {
        let (x, y) = pair(a, "other", false, true)?;
        let mode = a.opt_str(2, "rounding_mode")?;
        run(a, &x, |x| b::div_rounding(x, y.operand(), mode.as_deref()))
    });
    simple!(r, &["true_divide", "true_divide_", "__truediv__", "__div__", "__itruediv__"], b::DIV, false, true, "other", plain);
    r.add_all(&["floor_divide", "floor_divide_", "__floordiv__", "__ifloordiv__"], |a| {
        let (x, y) = pair(a, "other", false, true)?;
        run(a, &x, |x| b::floor_divide_op(x, y.operand()))
    });
    r.add_all(&["remainder", "remainder_", "__mod__", "__imod__"], |a| {
        let (x, y) = pair(a, "other", !a.op().ends_with('_'), true)?;
        run(a, &x, |x| b::remainder_op(x, y.operand()))
    });
    r.add_all(&["fmod", "fmod_"], |a| {
        let (x, y) = pair(a, "other", false, true)?;
        run(a, &x, |x| b::fmod_op(x, y.operand()))
    });
    r.add_all(&["pow", "pow_", "__pow__", "__ipow__"], |a| {
        let (x, y) = pair(a, "exponent", a.op() == "pow", true)?;
        run(a, &x, |x| b::pow_op(x, y.operand()))
    });
    r.add_all(&["float_power", "float_power_"], |a| {
        let (x, y) = pair(a, "exponent", a.op() == "float_power", true)?;
        let inplace = a.op() == "float_power_";
        run(a, &x, |x| {
            let base_dtype = if let Operand::Tensor(s) = &x { Some(s.dtype()) } else { None };
            let out = b::float_power_op(x, y.operand())?;
            match base_dtype {
                // float_power_ computes in f64 / complex128 and does not cast the result down
                Some(d) if inplace && d != out.dtype() => Err(Error::dtype(
                    "float_power_",
                    format!("the base given to float_power_ has dtype {} but the operation's result requires dtype {}", b::scalar_type_name(d), b::scalar_type_name(out.dtype())),
                )),
                _ => Ok(out),
            }
        })
    });
}

fn register_compare(r: &mut Registry) {
    simple!(r, &["eq", "eq_", "__eq__"], b::EQ, false, true, "other", plain);
    simple!(r, &["ne", "ne_", "not_equal", "not_equal_", "__ne__"], b::NE, false, true, "other", plain);
    simple!(r, &["lt", "lt_", "less", "less_", "__lt__"], b::LT, false, true, "other", plain);
    simple!(r, &["le", "le_", "less_equal", "less_equal_", "__le__"], b::LE, false, true, "other", plain);
    simple!(r, &["gt", "gt_", "greater", "greater_", "__gt__"], b::GT, false, true, "other", plain);
    simple!(r, &["ge", "ge_", "greater_equal", "greater_equal_", "__ge__"], b::GE, false, true, "other", plain);
    r.add_all(&["maximum", "minimum", "fmax", "fmin"], |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        t(match a.op() {
            "maximum" => x.maximum(&y)?,
            "minimum" => x.minimum(&y)?,
            "fmax" => x.fmax(&y)?,
            _ => x.fmin(&y)?,
        })
    });
    r.add("equal", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        Ok(Value::Bool(x.equal(&y)?))
    });
    r.add_all(&["isclose", "allclose"], |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        let rtol = a.float_or(2, "rtol", 1e-5)?;
        let atol = a.float_or(3, "atol", 1e-8)?;
        let equal_nan = a.bool_or(4, "equal_nan", false)?;
        if a.op() == "allclose" {
            Ok(Value::Bool(x.allclose(&y, rtol, atol, equal_nan)?))
        } else {
            t(x.isclose(&y, rtol, atol, equal_nan)?)
        }
    });
}

fn register_logical(r: &mut Registry) {
    simple!(r, &["logical_and", "logical_and_"], b::LOGICAL_AND, false, false, "other", plain);
    simple!(r, &["logical_or", "logical_or_"], b::LOGICAL_OR, false, false, "other", plain);
    simple!(r, &["logical_xor", "logical_xor_"], b::LOGICAL_XOR, false, false, "other", plain);
    simple!(r, &["bitwise_and", "bitwise_and_", "__and__", "__iand__"], b::BITWISE_AND, true, true, "other", integral_only);
    simple!(r, &["bitwise_or", "bitwise_or_", "__or__", "__ior__"], b::BITWISE_OR, true, true, "other", integral_only);
    simple!(r, &["bitwise_xor", "bitwise_xor_", "__xor__", "__ixor__"], b::BITWISE_XOR, true, true, "other", integral_only);
    simple!(r, &["bitwise_left_shift", "bitwise_left_shift_", "__lshift__", "__ilshift__"], b::BITWISE_LEFT_SHIFT, true, true, "other", integral_only);
    simple!(r, &["bitwise_right_shift", "bitwise_right_shift_", "__rshift__", "__irshift__"], b::BITWISE_RIGHT_SHIFT, true, true, "other", integral_only);
    simple!(r, &["gcd", "gcd_"], b::GCD, false, false, "other", integral_only);
    simple!(r, &["lcm", "lcm_"], b::LCM, false, false, "other", integral_only);
}

fn register_math(r: &mut Registry) {
    simple!(r, &["atan2", "atan2_", "arctan2", "arctan2_"], b::ATAN2, false, false, "other", real_binary);
    simple!(r, &["hypot", "hypot_"], b::HYPOT, false, false, "other", real_binary);
    simple!(r, &["copysign", "copysign_"], b::COPYSIGN, false, true, "other", real_binary);
    simple!(r, &["nextafter", "nextafter_"], b::NEXTAFTER, false, false, "other", real_binary);
    simple!(r, &["logaddexp"], b::LOGADDEXP, false, false, "other", real_binary);
    simple!(r, &["logaddexp2"], b::LOGADDEXP2, false, false, "other", real_binary);
    simple!(r, &["xlogy", "xlogy_", "special.xlogy"], b::XLOGY, true, true, "other", real_binary);
    simple!(r, &["special.xlog1py"], b::XLOG1PY, true, true, "other", real_binary);
    simple!(r, &["special.zeta"], b::ZETA, true, true, "other", real_binary);
    simple!(r, &["igamma", "igamma_", "special.gammainc"], b::IGAMMA, false, false, "other", real_binary);
    simple!(r, &["igammac", "igammac_", "special.gammaincc"], b::IGAMMAC, false, false, "other", real_binary);
    r.add_all(&["ldexp", "ldexp_"], |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        run_t(a, &x, |x| x.ldexp(&y))
    });
    r.add_all(&["heaviside", "heaviside_"], |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "values")?;
        run_t(a, &x, |x| x.heaviside(&y))
    });
}

fn register_ternary(r: &mut Registry) {
    r.add("where", |a| {
        let c = a.tensor(0, "condition")?;
        if a.n_pos() == 1 {
            return Err(Error::unsupported("where", "where(condition) with one argument (use nonzero)"));
        }
        let x = a.tensor_or_scalar(1, "input")?;
        let y = a.tensor_or_scalar(2, "other")?;
        t(ternary::where_op(&c, x.operand(), y.operand())?)
    });
    r.add_all(&["clamp", "clamp_", "clip", "clip_"], |a| {
        let x = a.tensor(0, "input")?;
        let min = opt_tensor_or_scalar(a, 1, "min")?;
        let max = opt_tensor_or_scalar(a, 2, "max")?;
        run_t(a, &x, |x| ternary::clamp_op(x, min.as_ref().map(|m| m.operand()), max.as_ref().map(|m| m.operand())))
    });
    r.add_all(&["clamp_min", "clamp_min_"], |a| {
        let x = a.tensor(0, "input")?;
        let m = a.tensor_or_scalar(1, "min")?;
        run_t(a, &x, |x| ternary::clamp_op(x, Some(m.operand()), None))
    });
    r.add_all(&["clamp_max", "clamp_max_"], |a| {
        let x = a.tensor(0, "input")?;
        let m = a.tensor_or_scalar(1, "max")?;
        run_t(a, &x, |x| ternary::clamp_op(x, None, Some(m.operand())))
    });
    r.add_all(&["lerp", "lerp_"], |a| {
        let x = a.tensor(0, "input")?;
        let end = a.tensor(1, "end")?;
        let w = a.tensor_or_scalar(2, "weight")?;
        run_t(a, &x, |x| ternary::lerp_op(x, &end, w.operand()))
    });
    r.add_all(&["addcmul", "addcmul_", "addcdiv", "addcdiv_"], |a| {
        let x = a.tensor(0, "input")?;
        let t1 = a.tensor(1, "tensor1")?;
        let t2 = a.tensor(2, "tensor2")?;
        let v = a.opt_scalar(3, "value")?.unwrap_or(Scalar::Int(1));
        let mul = a.op().starts_with("addcmul");
        run_t(a, &x, |x| if mul { ternary::addcmul_op(x, &t1, &t2, v) } else { ternary::addcdiv_op(x, &t1, &t2, v) })
    });
    r.add_all(&["masked_fill", "masked_fill_"], |a| {
        let x = a.tensor(0, "input")?;
        let mask = a.tensor(1, "mask")?;
        let v = a.tensor_or_scalar(2, "value")?;
        if a.op() == "masked_fill_" {
            return t(ternary::masked_fill_inplace(&x, &mask, v.operand())?);
        }
        t(ternary::masked_fill_op(&x, &mask, v.operand())?)
    });
}

fn opt_tensor_or_scalar(a: &mut Args, i: usize, name: &str) -> Result<Option<TensorOrScalar>> {
    match a.get_some(i, name) {
        None => Ok(None),
        Some(Value::Tensor(t)) => Ok(Some(TensorOrScalar::Tensor(t))),
        Some(v) => match v.as_scalar() {
            Some(s) => Ok(Some(TensorOrScalar::Scalar(s))),
            None => Err(Error::value(a.op(), format!("argument '{name}' must be a Tensor or a number, not {}", v.kind()))),
        },
    }
}

fn register_reflected(r: &mut Registry) {
    r.add("__radd__", |a| reflected(a, |x, y| b::add_alpha(x, y, None)));
    r.add("__rsub__", |a| reflected(a, |x, y| b::sub_alpha(x, y, None)));
    r.add("__rmul__", |a| reflected(a, |x, y| binary(&b::MUL, x, y)));
    r.add_all(&["__rdiv__", "__rtruediv__"], |a| reflected(a, |x, y| binary(&b::DIV, x, y)));
    r.add("__rfloordiv__", |a| reflected(a, b::floor_divide_op));
    r.add("__rmod__", |a| reflected(a, b::remainder_op));
    r.add("__rpow__", |a| reflected(a, b::pow_op));
    r.add("__rand__", |a| reflected(a, |x, y| integral_only(&b::BITWISE_AND, x, y)));
    r.add("__ror__", |a| reflected(a, |x, y| integral_only(&b::BITWISE_OR, x, y)));
    r.add("__rxor__", |a| reflected(a, |x, y| integral_only(&b::BITWISE_XOR, x, y)));
    r.add("__rlshift__", |a| reflected(a, |x, y| integral_only(&b::BITWISE_LEFT_SHIFT, x, y)));
    r.add("__rrshift__", |a| reflected(a, |x, y| integral_only(&b::BITWISE_RIGHT_SHIFT, x, y)));
}

//! Registry entries for numeric helpers: statistics (`cov`, `corrcoef`), finite differences and
//! integration (`diff`, `gradient`, `trapezoid`), counting (`isin`, `bincount`, `histogram`),
//! index arithmetic, segment reductions, `_chunk_cat`, `renorm`, `frexp`, `complex`, `polar`.

use super::{Args, Registry, Value};
use crate::ops::counting::{self, Bins, DimBins};
use crate::ops::difference::{self, Spacing};
use crate::ops::segment_reduce::{self, SegmentReduce};
use crate::ops::trapezoid::{self as trap, Spacing as TrapSpacing};
use crate::ops::{chunk_cat, complex_build, cov, frexp, index_math, renorm};
use crate::tensor::Tensor;
use crate::{DType, Error, Result};

/// Keyword-only arguments are read with a position no call reaches.
const KW: usize = usize::MAX;

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// A tensor argument that may also be a Python number (isin's elements and test elements).
fn tensor_or_number(a: &mut Args, i: usize, name: &str) -> Result<Tensor> {
    match a.tensor_or_scalar(i, name)? {
        super::TensorOrScalar::Tensor(x) => Ok(x),
        super::TensorOrScalar::Scalar(s) => Tensor::scalar_tensor(s, s.dtype(), crate::Device::Cpu),
    }
}

/// `torch.gradient`'s `spacing`: unspecified, a number, or a list of numbers or tensors.
/// The flag tells a list (which must give one spacing per dim) from a single value.
fn gradient_spacing(a: &mut Args) -> Result<(Vec<Spacing>, bool)> {
    let op = a.op().to_string();
    let one = |v: &Value| -> Result<Spacing> {
        match v {
            Value::Tensor(t) if t.ndim() == 0 => Ok(Spacing::Step(t.item()?.to_f64())),
            Value::Tensor(t) => Ok(Spacing::Coords(t.clone())),
            o => o.as_scalar().map(|s| Spacing::Step(s.to_f64())).ok_or_else(|| Error::value(&op, format!("argument 'spacing' must be a number, a list of numbers or a list of Tensors, not {}", o.kind()))),
        }
    };
    match a.get_some(KW, "spacing") {
        None => Ok((Vec::new(), false)),
        Some(Value::List(l)) => Ok((l.iter().map(one).collect::<Result<_>>()?, true)),
        Some(v) => Ok((vec![one(&v)?], false)),
    }
}

/// trapezoid's `x` (positional) or `dx` (keyword), and `dim`.
fn trap_args(a: &mut Args) -> Result<(Tensor, Option<Tensor>, f64, i64)> {
    let y = a.tensor(0, "y")?;
    let x = a.opt_tensor(1, "x")?;
    let dx = a.opt_float(KW, "dx")?;
    if x.is_some() && dx.is_some() {
        return Err(Error::value(a.op(), "received an invalid combination of arguments: both x and dx given"));
    }
    let dim = a.int_or(KW, "dim", -1)?;
    Ok((y, x, dx.unwrap_or(1.0), dim))
}

/// `dtype=`, `device=` and the ignored `layout=` of the `*_indices` factories.
fn index_factory(a: &mut Args) -> Result<(DType, crate::Device)> {
    let dt = a.opt_dtype(KW, "dtype")?.unwrap_or(DType::I64);
    let dev = a.opt_device(KW, "device")?.unwrap_or_default();
    a.ignore(&["layout", "pin_memory", "requires_grad"]);
    Ok((dt, dev))
}

pub(super) fn register(r: &mut Registry) {
    r.add("cov", |a| {
        let x = a.tensor(0, "input")?;
        let correction = a.int_or(KW, "correction", 1)?;
        let fw = a.opt_tensor(KW, "fweights")?;
        let aw = a.opt_tensor(KW, "aweights")?;
        t(cov::cov(&x, correction, fw.as_ref(), aw.as_ref())?)
    });
    r.add("corrcoef", |a| t(cov::corrcoef(&a.tensor(0, "input")?)?));
    r.add("diff", |a| {
        let x = a.tensor(0, "input")?;
        let n = a.int_or(1, "n", 1)?;
        let dim = a.int_or(2, "dim", -1)?;
        let pre = a.opt_tensor(3, "prepend")?;
        let app = a.opt_tensor(4, "append")?;
        t(difference::diff(&x, n, dim, pre.as_ref(), app.as_ref())?)
    });
    r.add("gradient", |a| {
        let x = a.tensor(0, "input")?;
        let (spacing, listed) = gradient_spacing(a)?;
        let dims = a.opt_ints(KW, "dim")?;
        let edge = a.int_or(KW, "edge_order", 1)?;
        match &dims {
            None if listed && spacing.len() != x.ndim() => {
                return Err(Error::value(
                    a.op(),
                    format!("torch.gradient expected spacing to be unspecified, a scalar, or a list of length equal to 'self.dim() = {}', since dim argument was not given, but got a list of length {}", x.ndim(), spacing.len()),
                ))
            }
            Some(d) if listed && spacing.len() != d.len() => {
                return Err(Error::value(
                    a.op(),
                    format!("torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim arguments to have the same length, but got a spacing argument of length {} and a dim argument of length {}.", spacing.len(), d.len()),
                ))
            }
            _ => {}
        }
        Ok(Value::from(difference::gradient(&x, &spacing, dims.as_deref(), edge)?))
    });
    r.add("sum_to_size", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.int_list_or_varargs(1, "size")?;
        let size = crate::shape::check_sizes(a.op(), &size)?;
        t(x.sum_to_size(&size)?)
    });
    r.add_all(&["trapezoid", "trapz"], |a| {
        let (y, x, dx, dim) = trap_args(a)?;
        let s = match &x {
            Some(x) => TrapSpacing::X(x),
            None => TrapSpacing::Dx(dx),
        };
        t(trap::trapezoid(&y, s, dim)?)
    });
    r.add("cumulative_trapezoid", |a| {
        let (y, x, dx, dim) = trap_args(a)?;
        let s = match &x {
            Some(x) => TrapSpacing::X(x),
            None => TrapSpacing::Dx(dx),
        };
        t(trap::cumulative_trapezoid(&y, s, dim)?)
    });
    r.add("_chunk_cat", |a| {
        let ts = a.tensors(0, "tensors")?;
        let dim = a.int(1, "dim")?;
        let k = a.int(2, "num_chunks")?;
        t(chunk_cat::chunk_cat(&ts, dim, k)?)
    });
    r.add("renorm", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.float(1, "p")?;
        let dim = a.int(2, "dim")?;
        let maxnorm = a.float(3, "maxnorm")?;
        t(renorm::renorm(&x, p, dim, maxnorm)?)
    });
    r.add("frexp", |a| {
        let (m, e) = frexp::frexp(&a.tensor(0, "input")?)?;
        Ok(Value::from(vec![m, e]))
    });
    r.add("isin", |a| {
        let x = tensor_or_number(a, 0, "elements")?;
        let test = tensor_or_number(a, 1, "test_elements")?;
        // assume_unique only lets PyTorch pick a faster algorithm; the answer is the same
        a.bool_or(KW, "assume_unique", false)?;
        let invert = a.bool_or(KW, "invert", false)?;
        t(counting::isin(&x, &test, invert)?)
    });
    r.add("bincount", |a| {
        let x = a.tensor(0, "input")?;
        let w = a.opt_tensor(1, "weights")?;
        let minlength = a.int_or(2, "minlength", 0)?;
        t(counting::bincount(&x, w.as_ref(), minlength)?)
    });
    r.add("histogram", |a| {
        let x = a.tensor(0, "input")?;
        let range = match a.get_some(KW, "range") {
            Some(Value::List(l)) if l.len() == 2 => {
                let f = |v: &Value| v.as_scalar().map(|s| s.to_f64());
                match (f(&l[0]), f(&l[1])) {
                    (Some(lo), Some(hi)) => Some((lo, hi)),
                    _ => return Err(Error::value(a.op(), "argument 'range' must be a tuple of two floats")),
                }
            }
            Some(v) => return Err(Error::value(a.op(), format!("argument 'range' must be a tuple of two floats, not {}", v.kind()))),
            None => None,
        };
        let w = a.opt_tensor(KW, "weight")?;
        let density = a.bool_or(KW, "density", false)?;
        let (h, e) = match a.get(1, "bins") {
            Some(Value::Tensor(b)) => counting::histogram(&x, Bins::Edges(&b), w.as_ref(), density)?,
            Some(Value::Int(n)) => counting::histogram(&x, Bins::Count(n, range), w.as_ref(), density)?,
            None => counting::histogram(&x, Bins::Count(100, range), w.as_ref(), density)?,
            Some(v) => return Err(Error::value(a.op(), format!("argument 'bins' must be int or Tensor, not {}", v.kind()))),
        };
        Ok(Value::from(vec![h, e]))
    });
    r.add("histogramdd", |a| {
        let x = a.tensor(0, "input")?;
        let d = if x.ndim() == 0 { 0 } else { x.shape()[x.ndim() - 1] };
        let bins: Vec<DimBins> = match a.get(1, "bins") {
            Some(Value::Int(n)) => vec![DimBins::Count(n); d],
            Some(Value::List(l)) => l
                .into_iter()
                .map(|v| match v {
                    Value::Int(n) => Ok(DimBins::Count(n)),
                    Value::Tensor(t) => Ok(DimBins::Edges(t)),
                    o => Err(Error::value(a.op(), format!("argument 'bins' must be an int, a list of ints or a list of Tensors, not a list of {}", o.kind()))),
                })
                .collect::<Result<_>>()?,
            Some(v) => return Err(Error::value(a.op(), format!("argument 'bins' must be an int, a list of ints or a list of Tensors, not {}", v.kind()))),
            None => return Err(Error::value(a.op(), "missing required argument 'bins'")),
        };
        let range = match a.get_some(KW, "range") {
            Some(Value::List(l)) => Some(
                l.iter()
                    .map(|v| v.as_scalar().map(|s| s.to_f64()).ok_or_else(|| Error::value(a.op(), "argument 'range' must be a list of floats")))
                    .collect::<Result<Vec<f64>>>()?,
            ),
            Some(v) => return Err(Error::value(a.op(), format!("argument 'range' must be a list of floats, not {}", v.kind()))),
            None => None,
        };
        let w = a.opt_tensor(KW, "weight")?;
        let density = a.bool_or(KW, "density", false)?;
        let (h, e) = counting::histogramdd(&x, &bins, range.as_deref(), w.as_ref(), density)?;
        Ok(Value::List(vec![Value::Tensor(h), Value::from(e)]))
    });
    r.add("unravel_index", |a| {
        let i = a.tensor(0, "indices")?;
        let shape = a.ints(1, "shape")?;
        Ok(Value::from(index_math::unravel_index(&i, &shape)?))
    });
    r.add_all(&["triu_indices", "tril_indices"], |a| {
        let row = a.int(0, "row")?;
        let col = a.int(1, "col")?;
        let offset = a.int_or(2, "offset", 0)?;
        let (dt, dev) = index_factory(a)?;
        t(if a.op() == "triu_indices" {
            index_math::triu_indices(row, col, offset, dt, dev)?
        } else {
            index_math::tril_indices(row, col, offset, dt, dev)?
        })
    });
    r.add("_segment_reduce", |a| {
        let x = a.tensor(0, "data")?;
        let reduce = match a.opt_str(1, "reduce")? {
            Some(s) => SegmentReduce::parse(&s)?,
            None => return Err(Error::value(a.op(), "missing required argument 'reduce'")),
        };
        let lengths = a.opt_tensor(KW, "lengths")?;
        let offsets = a.opt_tensor(KW, "offsets")?;
        if a.opt_tensor(KW, "indices")?.is_some() {
            return Err(Error::unsupported(a.op(), "indices= (PyTorch does not implement it either)"));
        }
        let axis = a.int_or(KW, "axis", 0)?;
        // `unsafe` only skips PyTorch's checks; they are cheap here and always run
        a.bool_or(KW, "unsafe", false)?;
        let initial = a.opt_float(KW, "initial")?;
        let lengths = match (lengths, offsets) {
            (Some(l), None) => l,
            (None, Some(o)) => segment_reduce::lengths_from_offsets(&o)?,
            _ => return Err(Error::value(a.op(), "Either lengths or offsets must be defined")),
        };
        t(segment_reduce::segment_reduce(&x, reduce, &lengths, axis, initial)?)
    });
    r.add("complex", |a| {
        let re = a.tensor(0, "real")?;
        let im = a.tensor(1, "imag")?;
        t(complex_build::complex(&re, &im)?)
    });
    r.add("polar", |a| {
        let abs = a.tensor(0, "abs")?;
        let angle = a.tensor(1, "angle")?;
        t(complex_build::polar(&abs, &angle)?)
    });
}

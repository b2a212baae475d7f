//! Registry entries for the reduce family: reductions, scans, sorting and selection, softmax.

use super::{Args, Registry, Value};
use crate::dtype::DType;
use crate::ops::reduce::order::Interpolation;
use crate::ops::reduce::{maximum_of, minimum_of};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Keyword-only arguments are read with a position no call reaches.
const KW: usize = usize::MAX;

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

fn pair((a, b): (Tensor, Tensor)) -> Result<Value> {
    Ok(Value::List(vec![Value::Tensor(a), Value::Tensor(b)]))
}

/// A (values, indices) result written into `out=(values, indices)` when given: PyTorch's
/// overlap check first, then the dtypes; an out tensor of another shape is not resized yet.
fn pair_out(a: &mut Args, input: &Tensor, v: Tensor, i: Tensor) -> Result<Value> {
    let Some(out) = a.get_some(KW, "out") else { return pair((v, i)) };
    let op = a.op().to_string();
    let outs = match out {
        Value::List(l) if l.len() == 2 => l.into_iter().map(|x| x.into_tensor()).collect::<Result<Vec<_>>>()?,
        o => return Err(Error::value(op, format!("argument 'out' must be a tuple of two Tensors, not {}", o.kind()))),
    };
    if outs.iter().any(|o| o.shares_storage(input)) || outs[0].shares_storage(&outs[1]) {
        return Err(Error::value(
            op,
            "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() the tensor before performing the operation.",
        ));
    }
    for (o, r) in outs.iter().zip([&v, &i]) {
        if o.dtype() != r.dtype() {
            return Err(Error::dtype(&op, format!("Expected out tensor to have dtype {}, but got {} instead", r.dtype().name(), o.dtype().name())));
        }
        if o.shape() != r.shape() {
            return Err(Error::unsupported(&op, "resizing an out= tensor"));
        }
    }
    outs[0].copy_(&v)?;
    outs[1].copy_(&i)?;
    Ok(Value::List(outs.into_iter().map(Value::Tensor).collect()))
}

fn ints_of(a: &Args, name: &str, v: &Value) -> Result<Vec<i64>> {
    v.to_ints(a.op(), name)
}

/// `sum`-style arguments: `(input, dim=None, keepdim=False, *, dtype=None)`.
fn dims_keep_dtype(a: &mut Args) -> Result<(Tensor, Option<Vec<i64>>, bool, Option<DType>)> {
    let x = a.tensor(0, "input")?;
    let dims = a.opt_ints(1, "dim")?;
    let keep = a.bool_or(2, "keepdim", false)?;
    let dt = a.opt_dtype(3, "dtype")?;
    Ok((x, dims, keep, dt))
}

/// `var`/`std` arguments in all three PyTorch overloads: `(input, unbiased)`,
/// `(input, dim, unbiased, keepdim)` and `(input, dim, *, correction, keepdim)`.
fn var_args(a: &mut Args) -> Result<(Tensor, Option<Vec<i64>>, f64, bool)> {
    let x = a.tensor(0, "input")?;
    let (dims, mut unbiased) = match a.get_some(1, "dim") {
        Some(Value::Bool(b)) => (None, Some(b)),
        Some(v) => (Some(ints_of(a, "dim", &v)?), None),
        None => (None, None),
    };
    if unbiased.is_none() {
        unbiased = match a.get_some(2, "unbiased") {
            Some(Value::Bool(b)) => Some(b),
            Some(Value::Int(i)) => Some(i != 0),
            Some(v) => return Err(Error::value(a.op(), format!("argument 'unbiased' must be bool, not {}", v.kind()))),
            None => None,
        };
    }
    let keep = a.bool_or(3, "keepdim", false)?;
    let correction = a.opt_float(KW, "correction")?;
    if correction.is_some() && unbiased.is_some() {
        return Err(Error::value(a.op(), "cannot specify both correction and unbiased arguments"));
    }
    let c = correction.unwrap_or(if unbiased == Some(false) { 0.0 } else { 1.0 });
    Ok((x, dims, c, keep))
}

/// `max(input)`, `max(input, dim, keepdim)` and `max(input, other)` under one name.
fn max_min(a: &mut Args, max: bool) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let second = if a.n_pos() > 1 { a.get(1, "dim") } else { a.get_some(1, "other").or_else(|| a.get_some(1, "dim")) };
    match second {
        None => t(if max { x.max()? } else { x.min()? }),
        Some(Value::Tensor(o)) => t(if max { maximum_of(&x, &o)? } else { minimum_of(&x, &o)? }),
        Some(Value::Int(d)) => {
            let keep = a.bool_or(2, "keepdim", false)?;
            pair(if max { x.max_dim(d, keep)? } else { x.min_dim(d, keep)? })
        }
        Some(v) => Err(Error::value(a.op(), format!("argument 'dim' must be int, not {}", v.kind()))),
    }
}

/// `median(input)` / `median(input, dim, keepdim)` (and `nanmedian`).
fn median(a: &mut Args, nan: bool) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    match a.opt_int(1, "dim")? {
        None => t(if nan { x.nanmedian()? } else { x.median()? }),
        Some(d) => {
            let keep = a.bool_or(2, "keepdim", false)?;
            pair(if nan { x.nanmedian_dim(d, keep)? } else { x.median_dim(d, keep)? })
        }
    }
}

fn quantile(a: &mut Args, nan: bool) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let (q, scalar) = match a.get(1, "q") {
        Some(Value::Tensor(q)) => {
            if q.ndim() > 1 {
                return Err(Error::value(a.op(), "quantile() q must be a scalar or 1D tensor"));
            }
            if q.dtype() != x.dtype() {
                return Err(Error::dtype(a.op(), "quantile() q tensor must be same dtype as the input tensor"));
            }
            (q.to_f64_vec()?, q.ndim() == 0)
        }
        Some(v) => match v.as_scalar() {
            Some(s) => (vec![s.to_f64()], true),
            None => return Err(Error::value(a.op(), format!("argument 'q' must be a float or Tensor, not {}", v.kind()))),
        },
        None => return Err(Error::value(a.op(), "missing required argument 'q'")),
    };
    let dim = a.opt_int(2, "dim")?;
    let keep = a.bool_or(3, "keepdim", false)?;
    let interp = Interpolation::parse(&a.opt_str(KW, "interpolation")?.unwrap_or_else(|| "linear".into()))?;
    t(if nan { x.nanquantile(&q, scalar, dim, keep, interp)? } else { x.quantile(&q, scalar, dim, keep, interp)? })
}

fn unique_result(u: crate::ops::sort::Unique, inverse: bool, counts: bool) -> Result<Value> {
    if !inverse && !counts {
        return t(u.values);
    }
    let mut v = vec![Value::Tensor(u.values)];
    if inverse {
        v.push(Value::Tensor(u.inverse));
    }
    if counts {
        v.push(Value::Tensor(u.counts));
    }
    Ok(Value::List(v))
}

/// A tensor argument that may also be a Python number (searchsorted's and bucketize's values).
fn tensor_or_number(a: &mut Args, i: usize, name: &str) -> Result<Tensor> {
    match a.tensor_or_scalar(i, name)? {
        super::TensorOrScalar::Tensor(x) => Ok(x),
        super::TensorOrScalar::Scalar(s) => Tensor::scalar_tensor(s, s.dtype(), crate::Device::Cpu),
    }
}

/// PyTorch's implicit softmax dim for `nn.functional.softmax(x)` without `dim`.
fn softmax_dim(a: &mut Args, x: &Tensor) -> Result<i64> {
    Ok(match a.opt_int(1, "dim")? {
        Some(d) => d,
        None => {
            if matches!(x.ndim(), 0 | 1 | 3) {
                0
            } else {
                1
            }
        }
    })
}

/// `torch.masked`'s input: `x` where `mask` (broadcast to `x`'s shape) is true, `fill` elsewhere.
fn masked_input(a: &mut Args, x: &Tensor, fill: f64) -> Result<Tensor> {
    let m = a.opt_tensor(KW, "mask")?;
    fill_masked(x, m, fill)
}

/// A mask as bool, broadcast to `x`'s shape.
fn bool_mask(m: Tensor, x: &Tensor) -> Result<Tensor> {
    let m = if m.dtype() == DType::Bool { m } else { m.ne_scalar(0)? };
    m.broadcast_to(x.shape())
}

/// `x` where `mask` is true (all of it without a mask), `fill` elsewhere.
fn fill_masked(x: &Tensor, mask: Option<Tensor>, fill: f64) -> Result<Tensor> {
    let Some(m) = mask else { return Ok(x.clone()) };
    let m = bool_mask(m, x)?;
    let f = if x.dtype().is_integral() {
        // infinities become the dtype's extremes
        let v = if fill == f64::INFINITY { i64::MAX } else if fill == f64::NEG_INFINITY { i64::MIN } else { fill as i64 };
        let v = match x.dtype() {
            DType::I32 => v.clamp(i32::MIN as i64, i32::MAX as i64),
            DType::I16 => v.clamp(i16::MIN as i64, i16::MAX as i64),
            DType::I8 => v.clamp(i8::MIN as i64, i8::MAX as i64),
            DType::U8 => v.clamp(0, 255),
            DType::Bool => v.clamp(0, 1),
            _ => v,
        };
        Tensor::scalar_tensor(v, x.dtype(), x.device())?
    } else {
        Tensor::scalar_tensor(fill, x.dtype(), x.device())?
    };
    m.where_(x, &f)
}

/// The masked reductions' `(input, dim=None, *, keepdim=False, dtype=None)` arguments; the
/// input is converted to `dtype` first.
fn masked_reduce_args(a: &mut Args) -> Result<(Tensor, Option<Vec<i64>>, bool)> {
    let x = a.tensor(0, "input")?;
    let dims = a.opt_ints(1, "dim")?;
    let keep = a.bool_or(KW, "keepdim", false)?;
    let x = match a.opt_dtype(KW, "dtype")? {
        Some(dt) => x.to_dtype(dt)?,
        None => x,
    };
    Ok((x, dims, keep))
}

/// `torch.masked.var` / `std(input, dim=None, unbiased=None, *, correction=None, keepdim=False,
/// dtype=None, mask=None)`: the mean and the squared deviations over the unmasked elements only;
/// integer inputs compute in float32. Fully masked slices give NaN (a count of zero).
fn masked_var_std(a: &mut Args) -> Result<Value> {
    let take_sqrt = a.op() == "masked.std";
    let x = a.tensor(0, "input")?;
    let dims = a.opt_ints(1, "dim")?.filter(|d| !d.is_empty());
    let unbiased = match a.get_some(2, "unbiased") {
        Some(Value::Bool(b)) => Some(b),
        Some(v) => return Err(Error::value(a.op(), format!("argument 'unbiased' must be bool, not {}", v.kind()))),
        None => None,
    };
    let correction = a.opt_float(KW, "correction")?;
    if unbiased.is_some() && correction.is_some() {
        return Err(Error::value(a.op(), "Only one of unbiased and correction may be given"));
    }
    let correction = correction.unwrap_or(if unbiased == Some(false) { 0.0 } else { 1.0 });
    let keep = a.bool_or(KW, "keepdim", false)?;
    let dt = match a.opt_dtype(KW, "dtype")? {
        Some(d) => d,
        None if x.dtype().is_float() || x.dtype().is_complex() => x.dtype(),
        None => DType::F32,
    };
    let compute = if dt.is_float() || dt.is_complex() { dt } else { DType::F32 };
    let mask = a.opt_tensor(KW, "mask")?.map(|m| bool_mask(m, &x)).transpose()?;
    let d = dims.as_deref();
    let (count, total) = match &mask {
        None => (x.ones_like()?.to_dtype(DType::I64)?.sum_dims(d, true, None)?, x.to_dtype(dt)?.sum_dims(d, true, None)?),
        Some(m) => {
            let zero = Tensor::scalar_tensor(0i64, dt, x.device())?;
            (m.sum_dims(d, true, None)?, m.where_(&x.to_dtype(dt)?, &zero)?.sum_dims(d, true, None)?)
        }
    };
    let dev = x.sub(&total.div(&count)?)?;
    let sq = dev.mul(&dev)?.to_dtype(compute)?;
    let sq = match &mask {
        None => sq,
        Some(m) => m.where_(&sq, &Tensor::scalar_tensor(0i64, compute, x.device())?)?,
    };
    let ss = sq.sum_dims(d, keep, None)?;
    let count = count.reshape_to(ss.shape())?;
    let count = if correction != 0.0 { count.to_dtype(compute)?.sub_scalar(correction)?.clamp_min(0.0)? } else { count };
    let out = ss.div(&count)?.to_dtype(dt)?;
    t(if take_sqrt { out.sqrt()? } else { out })
}

fn register_masked(r: &mut Registry) {
    r.add("masked.sum", |a| {
        let (x, dims, keep) = masked_reduce_args(a)?;
        let m = masked_input(a, &x, 0.0)?;
        t(m.sum_dims(dims.as_deref(), keep, None)?)
    });
    r.add("masked.prod", |a| {
        let (x, dims, keep) = masked_reduce_args(a)?;
        let m = masked_input(a, &x, 1.0)?;
        let all: Vec<i64> = (0..m.ndim() as i64).collect();
        let dims = match dims {
            Some(d) if !d.is_empty() => d,
            _ => all,
        };
        let mut out = m;
        for &d in &dims {
            out = out.prod_dim(Some(d), true, None)?;
        }
        if !keep && out.ndim() > 0 {
            out = out.squeeze_dims(&dims)?;
        }
        t(out)
    });
    r.add_all(&["masked.amax", "masked.amin"], |a| {
        let (x, dims, keep) = masked_reduce_args(a)?;
        let max = a.op() == "masked.amax";
        let m = masked_input(a, &x, if max { f64::NEG_INFINITY } else { f64::INFINITY })?;
        let d = dims.unwrap_or_default();
        t(if max { m.amax(&d, keep)? } else { m.amin(&d, keep)? })
    });
    r.add_all(&["masked.argmax", "masked.argmin"], |a| {
        let x = a.tensor(0, "input")?;
        let dim = a.opt_int(1, "dim")?;
        let keep = a.bool_or(KW, "keepdim", false)?;
        let max = a.op() == "masked.argmax";
        // the indices come back in `dtype` (the input's by default), as torch.masked does
        let dt = a.opt_dtype(KW, "dtype")?.unwrap_or(x.dtype());
        let m = masked_input(a, &x, if max { f64::NEG_INFINITY } else { f64::INFINITY })?;
        t(if max { m.argmax(dim, keep)? } else { m.argmin(dim, keep)? }.to_dtype(dt)?)
    });
    r.add("masked.mean", |a| {
        let (x, dims, keep) = masked_reduce_args(a)?;
        let mask = a.opt_tensor(KW, "mask")?;
        match mask {
            None => t(x.mean_dims(dims.as_deref(), keep, None)?),
            Some(mk) => {
                let mb = if mk.dtype() == DType::Bool { mk } else { mk.ne_scalar(0)? }.broadcast_to(x.shape())?;
                let z = Tensor::scalar_tensor(0i64, x.dtype(), x.device())?;
                let total = mb.where_(&x, &z)?.sum_dims(dims.as_deref(), keep, None)?;
                let count = mb.sum_dims(dims.as_deref(), keep, None)?;
                t(total.div(&count)?)
            }
        }
    });
    r.add("masked.logsumexp", |a| {
        let x = a.tensor(0, "input")?;
        let dims = a.opt_ints(1, "dim")?;
        let keep = a.bool_or(KW, "keepdim", false)?;
        // computed in floating point, then cast to `dtype` (the input's by default)
        let dt = a.opt_dtype(KW, "dtype")?.unwrap_or(x.dtype());
        let m = masked_input(a, &x, f64::NEG_INFINITY)?;
        t(m.logsumexp(&dims.unwrap_or_default(), keep)?.to_dtype(dt)?)
    });
    r.add_all(&["masked.var", "masked.std"], masked_var_std);
    r.add("masked.normalize", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.float(1, "ord")?;
        let d = a.int(2, "dim")?;
        let eps = a.float_or(KW, "eps", 1e-12)?;
        let dt = a.opt_dtype(KW, "dtype")?.unwrap_or(x.dtype());
        let mask = a.opt_tensor(KW, "mask")?;
        let num = fill_masked(&x, mask.clone(), 0.0)?;
        let nx = fill_masked(&x, mask, if p == f64::NEG_INFINITY { f64::INFINITY } else { 0.0 })?;
        let nrm = nx.norm_p(p, Some(&[d]), true, Some(dt))?;
        let denom = nrm.clamp_min(eps)?;
        t(num.div(&denom)?)
    });
    r.add("masked.logaddexp", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        let dt = a.opt_dtype(KW, "dtype")?.unwrap_or(x.dtype());
        let (mx, my) = (a.opt_tensor(KW, "input_mask")?, a.opt_tensor(KW, "other_mask")?);
        if mx.is_none() && my.is_none() {
            return t(x.logaddexp(&y)?.to_dtype(dt)?);
        }
        // Masked-out elements are -inf, so logaddexp(x, -inf) = x; the cases are picked with
        // `where` instead, so that no -inf enters a differentiable op (its derivatives would be
        // NaN, and 0 * NaN survives the masking in second derivatives).
        let shape = crate::shape::broadcast_all("masked.logaddexp", &[x.shape(), y.shape()])?;
        let ones = || Tensor::ones_on(&shape, DType::Bool, x.device());
        let mx = match mx {
            Some(m) => bool_mask(m, &x)?.broadcast_to(&shape)?,
            None => ones()?,
        };
        let my = match my {
            Some(m) => bool_mask(m, &y)?.broadcast_to(&shape)?,
            None => ones()?,
        };
        let both = mx.logical_and(&my)?;
        let zero = Tensor::scalar_tensor(0i64, x.dtype(), x.device())?;
        let ninf = Tensor::scalar_tensor(f64::NEG_INFINITY, x.dtype(), x.device())?;
        let full = both.where_(&x, &zero)?.logaddexp(&both.where_(&y, &zero)?)?;
        let one_side = mx.where_(&x.broadcast_to(&shape)?, &my.where_(&y.broadcast_to(&shape)?, &ninf)?)?;
        t(both.where_(&full, &one_side)?.to_dtype(dt)?)
    });
    r.add("masked.norm", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.float(1, "ord")?;
        let dims = a.opt_ints(2, "dim")?;
        let keep = a.bool_or(KW, "keepdim", false)?;
        let dt = a.opt_dtype(KW, "dtype")?;
        let m = masked_input(a, &x, if p == f64::NEG_INFINITY { f64::INFINITY } else { 0.0 })?;
        t(m.norm_p(p, dims.as_deref(), keep, dt)?)
    });
    r.add_all(&["masked.cumsum", "masked.cumprod"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let dt = a.opt_dtype(KW, "dtype")?;
        let sum = a.op() == "masked.cumsum";
        let m = masked_input(a, &x, if sum { 0.0 } else { 1.0 })?;
        t(if sum { m.cumsum(d, dt)? } else { m.cumprod(d, dt)? })
    });
    r.add_all(&["masked.softmax", "masked.log_softmax", "masked.softmin"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let dt = a.opt_dtype(KW, "dtype")?;
        let op = a.op().to_string();
        let m = masked_input(a, &x, if op == "masked.softmin" { f64::INFINITY } else { f64::NEG_INFINITY })?;
        t(match op.as_str() {
            "masked.softmax" => m.softmax(d, dt)?,
            "masked.log_softmax" => m.log_softmax(d, dt)?,
            _ => m.softmin(d, dt)?,
        })
    });
    r.add("masked.median", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int_or(1, "dim", -1)?;
        let keep = a.bool_or(KW, "keepdim", false)?;
        let x = match a.opt_dtype(KW, "dtype")? {
            Some(dt) => x.to_dtype(dt)?,
            None => x,
        };
        let xf = if x.dtype().is_float() { x.clone() } else { x.to_dtype(DType::F32)? };
        let m = masked_input(a, &xf, f64::NAN)?;
        t(m.nanmedian_dim(d, keep)?.0)
    });
}

/// Registers this family's ops.
pub(crate) fn register(r: &mut Registry) {
    register_masked(r);
    // sums and products
    r.add("sum", |a| {
        let (x, dims, keep, dt) = dims_keep_dtype(a)?;
        t(x.sum_dims(dims.as_deref(), keep, dt)?)
    });
    r.add("nansum", |a| {
        let (x, dims, keep, dt) = dims_keep_dtype(a)?;
        t(x.nansum_dims(dims.as_deref(), keep, dt)?)
    });
    r.add("mean", |a| {
        let (x, dims, keep, dt) = dims_keep_dtype(a)?;
        t(x.mean_dims(dims.as_deref(), keep, dt)?)
    });
    r.add("nanmean", |a| {
        let (x, dims, keep, dt) = dims_keep_dtype(a)?;
        t(x.nanmean_dims(dims.as_deref(), keep, dt)?)
    });
    r.add("prod", |a| {
        let x = a.tensor(0, "input")?;
        let dim = a.opt_int(1, "dim")?;
        let keep = a.bool_or(2, "keepdim", false)?;
        let dt = a.opt_dtype(3, "dtype")?;
        t(x.prod_dim(dim, keep, dt)?)
    });
    // statistics
    r.add("var", |a| {
        let (x, d, c, k) = var_args(a)?;
        t(x.var_dims(d.as_deref(), c, k)?)
    });
    r.add("std", |a| {
        let (x, d, c, k) = var_args(a)?;
        t(x.std_dims(d.as_deref(), c, k)?)
    });
    r.add("var_mean", |a| {
        let (x, d, c, k) = var_args(a)?;
        pair(x.var_mean(d.as_deref(), c, k)?)
    });
    r.add("std_mean", |a| {
        let (x, d, c, k) = var_args(a)?;
        pair(x.std_mean(d.as_deref(), c, k)?)
    });
    // extremes
    r.add("max", |a| max_min(a, true));
    r.add("min", |a| max_min(a, false));
    r.add_all(&["amax", "amin"], |a| {
        let x = a.tensor(0, "input")?;
        let dims = a.opt_ints(1, "dim")?.unwrap_or_default();
        let keep = a.bool_or(2, "keepdim", false)?;
        t(if a.op() == "amax" { x.amax(&dims, keep)? } else { x.amin(&dims, keep)? })
    });
    r.add("aminmax", |a| {
        let x = a.tensor(0, "input")?;
        let dim = a.opt_int(KW, "dim")?;
        let keep = a.bool_or(KW, "keepdim", false)?;
        pair(x.aminmax(dim, keep)?)
    });
    r.add_all(&["argmax", "argmin"], |a| {
        let x = a.tensor(0, "input")?;
        let dim = a.opt_int(1, "dim")?;
        let keep = a.bool_or(2, "keepdim", false)?;
        t(if a.op() == "argmax" { x.argmax(dim, keep)? } else { x.argmin(dim, keep)? })
    });
    // logical
    r.add_all(&["all", "any"], |a| {
        let x = a.tensor(0, "input")?;
        let dims = a.opt_ints(1, "dim")?;
        let keep = a.bool_or(2, "keepdim", false)?;
        t(if a.op() == "all" { x.all_dims(dims.as_deref(), keep)? } else { x.any_dims(dims.as_deref(), keep)? })
    });
    r.add("count_nonzero", |a| {
        let x = a.tensor(0, "input")?;
        let dims = a.opt_ints(1, "dim")?;
        t(x.count_nonzero(dims.as_deref())?)
    });
    // norms
    r.add_all(&["logsumexp", "special.logsumexp"], |a| {
        let x = a.tensor(0, "input")?;
        let dims = a.opt_ints(1, "dim")?.unwrap_or_default();
        let keep = a.bool_or(2, "keepdim", false)?;
        t(x.logsumexp(&dims, keep)?)
    });
    r.add("dist", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        let p = a.float_or(2, "p", 2.0)?;
        t(x.dist(&y, p)?)
    });
    // order statistics
    r.add("median", |a| median(a, false));
    r.add("nanmedian", |a| median(a, true));
    r.add("mode", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int_or(1, "dim", -1)?;
        let keep = a.bool_or(2, "keepdim", false)?;
        pair(x.mode(d, keep)?)
    });
    r.add("kthvalue", |a| {
        let x = a.tensor(0, "input")?;
        let k = a.int(1, "k")?;
        let d = a.int_or(2, "dim", -1)?;
        let keep = a.bool_or(3, "keepdim", false)?;
        let (v, i) = x.kthvalue(k, d, keep)?;
        pair_out(a, &x, v, i)
    });
    r.add("quantile", |a| quantile(a, false));
    r.add("nanquantile", |a| quantile(a, true));
    // scans
    r.add_all(&["cumsum", "cumprod"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let dt = a.opt_dtype(KW, "dtype")?;
        t(if a.op() == "cumsum" { x.cumsum(d, dt)? } else { x.cumprod(d, dt)? })
    });
    r.add_all(&["cummax", "cummin"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        pair(if a.op() == "cummax" { x.cummax(d)? } else { x.cummin(d)? })
    });
    r.add("logcumsumexp", |a| {
        let x = a.tensor(0, "input")?;
        t(x.logcumsumexp(a.int(1, "dim")?)?)
    });
    // sorting and selection
    r.add_all(&["sort", "argsort"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int_or(1, "dim", -1)?;
        let desc = a.bool_or(2, "descending", false)?;
        // always stable, which every `stable` value allows
        let _ = a.bool_or(3, "stable", false)?;
        if a.op() == "sort" {
            pair(x.sort(d, desc)?)
        } else {
            t(x.argsort(d, desc)?)
        }
    });
    r.add("msort", |a| t(a.tensor(0, "input")?.msort()?));
    r.add("topk", |a| {
        let x = a.tensor(0, "input")?;
        let k = a.int(1, "k")?;
        let d = a.int_or(2, "dim", -1)?;
        let largest = a.bool_or(3, "largest", true)?;
        // results always come sorted, which `sorted=False` allows
        let _ = a.bool_or(4, "sorted", true)?;
        pair(x.topk(k, d, largest)?)
    });
    r.add("unique", |a| {
        let x = a.tensor(0, "input")?;
        // always sorted, which `sorted=False` allows
        let _ = a.bool_or(1, "sorted", true)?;
        let inv = a.bool_or(2, "return_inverse", false)?;
        let cnt = a.bool_or(3, "return_counts", false)?;
        let dim = a.opt_int(4, "dim")?;
        unique_result(x.unique(dim)?, inv, cnt)
    });
    r.add("unique_consecutive", |a| {
        let x = a.tensor(0, "input")?;
        let inv = a.bool_or(1, "return_inverse", false)?;
        let cnt = a.bool_or(2, "return_counts", false)?;
        let dim = a.opt_int(3, "dim")?;
        unique_result(x.unique_consecutive(dim)?, inv, cnt)
    });
    r.add("searchsorted", |a| {
        let seq = a.tensor(0, "sorted_sequence")?;
        let v = tensor_or_number(a, 1, "input")?;
        let i32_ = a.bool_or(KW, "out_int32", false)?;
        let right = a.bool_or(KW, "right", false)?;
        let side = a.opt_str(KW, "side")?;
        let right = match side.as_deref() {
            None => right,
            Some("right") => true,
            Some("left") if right => {
                return Err(Error::value("searchsorted", "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"))
            }
            Some("left") => false,
            Some(s) => return Err(Error::value("searchsorted", format!("torch.searchsorted(): side can only be 'left' or 'right' but got {s}"))),
        };
        let sorter = a.opt_tensor(KW, "sorter")?;
        t(seq.searchsorted(&v, i32_, right, sorter.as_ref())?)
    });
    r.add("bucketize", |a| {
        let x = tensor_or_number(a, 0, "input")?;
        let b = a.tensor(1, "boundaries")?;
        let i32_ = a.bool_or(KW, "out_int32", false)?;
        let right = a.bool_or(KW, "right", false)?;
        t(x.bucketize(&b, i32_, right)?)
    });
    r.add("histc", |a| {
        let x = a.tensor(0, "input")?;
        let bins = a.int_or(1, "bins", 100)?;
        let lo = a.float_or(2, "min", 0.0)?;
        let hi = a.float_or(3, "max", 0.0)?;
        t(x.histc(bins, lo, hi)?)
    });
    // softmax family
    r.add_all(&["softmax", "special.softmax", "log_softmax", "special.log_softmax"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let dt = a.opt_dtype(2, "dtype")?;
        t(if a.op().ends_with("log_softmax") { x.log_softmax(d, dt)? } else { x.softmax(d, dt)? })
    });
    r.add_all(&["nn.functional.softmax", "nn.functional.log_softmax", "nn.functional.softmin"], |a| {
        let x = a.tensor(0, "input")?;
        let d = softmax_dim(a, &x)?;
        let _ = a.opt_int(2, "_stacklevel")?;
        let dt = a.opt_dtype(3, "dtype")?;
        t(match a.op() {
            "nn.functional.softmax" => x.softmax(d, dt)?,
            "nn.functional.log_softmax" => x.log_softmax(d, dt)?,
            _ => x.softmin(d, dt)?,
        })
    });
    r.add_all(&["_safe_softmax", "torch.ops.aten._safe_softmax.default"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let dt = a.opt_dtype(2, "dtype")?;
        t(x.safe_softmax(d, dt)?)
    });
    r.add_all(&["_softmax_backward_data", "_log_softmax_backward_data"], |a| {
        let g = a.tensor(0, "grad_output")?;
        let y = a.tensor(1, "output")?;
        let d = a.int(2, "dim")?;
        let dt = a.opt_dtype(3, "input_dtype")?.ok_or_else(|| Error::value(a.op(), "missing required argument 'input_dtype'"))?;
        t(if a.op() == "_softmax_backward_data" {
            crate::ops::softmax::softmax_backward_data(&g, &y, d, dt)?
        } else {
            crate::ops::softmax::log_softmax_backward_data(&g, &y, d, dt)?
        })
    });
}

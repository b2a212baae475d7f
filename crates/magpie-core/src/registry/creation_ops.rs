//! Registry entries for creation, random and dtype-conversion ops.

use super::{Args, Registry, Value};
use crate::device::Device;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{default_dtype, Error, Result, Scalar};

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// The `dtype=`/`device=` keywords of factory functions; `requires_grad`, `layout`, `pin_memory` accepted.
struct Factory {
    dtype: Option<DType>,
    device: Device,
    requires_grad: bool,
    pin_memory: bool,
}

fn factory(a: &mut Args, first: usize) -> Result<Factory> {
    let dtype = a.opt_dtype(first, "dtype")?;
    let device = a.opt_device(first.saturating_add(2), "device")?.unwrap_or_default();
    let requires_grad = a.bool_or(usize::MAX, "requires_grad", false)?;
    let pin_memory = a.bool_or(usize::MAX, "pin_memory", false)?;
    a.ignore(&["layout", "memory_format"]);
    Ok(Factory { dtype, device, requires_grad, pin_memory })
}

fn finish(t: Tensor, f: &Factory) -> Result<Value> {
    // `pin_memory=True`: the new CPU tensor in page-locked memory (PyTorch's error for a GPU one)
    let t = if f.pin_memory { t.pin_memory()? } else { t };
    if f.requires_grad {
        t.requires_grad_(true)?;
    }
    Ok(Value::Tensor(t))
}

fn sizes(a: &mut Args, i: usize) -> Result<Vec<usize>> {
    let s = a.int_list_or_varargs(i, "size")?;
    crate::shape::check_sizes(a.op(), &s)
}

/// A scalar or a 0-d tensor argument (linspace's tensor overload).
fn scalar_arg(a: &mut Args, i: usize, name: &str) -> Result<Scalar> {
    match a.get(i, name) {
        Some(Value::Tensor(x)) => {
            if x.ndim() != 0 {
                return Err(Error::value(a.op(), format!("{name} must be a 0-dimensional tensor, got {} dims", x.ndim())));
            }
            x.item()
        }
        Some(v) => v.as_scalar().ok_or_else(|| Error::value(a.op(), format!("argument '{name}' must be a number"))),
        None => Err(Error::value(a.op(), format!("missing required argument '{name}'"))),
    }
}

fn like(a: &mut Args) -> Result<(Tensor, DType, Device, Flags)> {
    let x = a.tensor(0, "input")?;
    let dt = a.opt_dtype(usize::MAX, "dtype")?.unwrap_or(x.dtype());
    let dev = a.opt_device(usize::MAX, "device")?.unwrap_or(x.device());
    let rg = flags(a)?;
    a.ignore(&["layout", "memory_format"]);
    Ok((x, dt, dev, rg))
}

/// `requires_grad=` and `pin_memory=` of a factory whose dtype and device come from elsewhere
/// (`*_like`, `new_*`, `empty_strided`).
#[derive(Clone, Copy)]
pub(super) struct Flags {
    requires_grad: bool,
    pin_memory: bool,
}

pub(super) fn flags(a: &mut Args) -> Result<Flags> {
    let requires_grad = a.bool_or(usize::MAX, "requires_grad", false)?;
    let pin_memory = a.bool_or(usize::MAX, "pin_memory", false)?;
    Ok(Flags { requires_grad, pin_memory })
}

/// The new tensor pinned (`pin_memory=True`: PyTorch's error for a CUDA one or without CUDA) and
/// marked as requiring grad, as asked.
pub(super) fn with_rg(t: Tensor, f: Flags) -> Result<Value> {
    let t = if f.pin_memory { t.pin_memory()? } else { t };
    if f.requires_grad {
        t.requires_grad_(true)?;
    }
    Ok(Value::Tensor(t))
}

fn conversion(name: &'static str, d: DType) -> (&'static str, DType) {
    (name, d)
}

/// Registers this family's ops.
pub(crate) fn register(r: &mut Registry) {
    r.add_all(&["zeros", "ones", "empty"], |a| {
        let s = sizes(a, 0)?;
        let f = factory(a, usize::MAX)?;
        let dt = f.dtype.unwrap_or(default_dtype());
        let x = if a.op() == "ones" { Tensor::ones_on(&s, dt, f.device)? } else { Tensor::zeros_on(&s, dt, f.device)? };
        finish(x, &f)
    });
    r.add("full", |a| {
        let s = crate::shape::check_sizes("full", &a.ints(0, "size")?)?;
        let v = a.scalar(1, "fill_value")?;
        let f = factory(a, usize::MAX)?;
        let x = match f.dtype {
            Some(d) => Tensor::full_on(&s, v, d, f.device)?,
            None => Tensor::full(&s, v)?,
        };
        finish(x, &f)
    });
    r.add_all(&["zeros_like", "ones_like", "empty_like"], |a| {
        let (x, dt, dev, rg) = like(a)?;
        let out = if a.op() == "ones_like" { Tensor::ones_on(x.shape(), dt, dev)? } else { Tensor::zeros_on(x.shape(), dt, dev)? };
        with_rg(out, rg)
    });
    r.add("full_like", |a| {
        let v = a.scalar(1, "fill_value")?;
        let (x, dt, dev, rg) = like(a)?;
        with_rg(Tensor::full_on(x.shape(), v, dt, dev)?, rg)
    });
    r.add_all(&["new_zeros", "new_ones", "new_empty"], |a| {
        let x = a.tensor(0, "input")?;
        let s = sizes(a, 1)?;
        let dt = a.opt_dtype(usize::MAX, "dtype")?.unwrap_or(x.dtype());
        let dev = a.opt_device(usize::MAX, "device")?.unwrap_or(x.device());
        let rg = flags(a)?;
        a.ignore(&["layout"]);
        let out = if a.op() == "new_ones" { Tensor::ones_on(&s, dt, dev)? } else { Tensor::zeros_on(&s, dt, dev)? };
        with_rg(out, rg)
    });
    r.add("new_full", |a| {
        let x = a.tensor(0, "input")?;
        let s = crate::shape::check_sizes("new_full", &a.ints(1, "size")?)?;
        let v = a.scalar(2, "fill_value")?;
        let dt = a.opt_dtype(usize::MAX, "dtype")?.unwrap_or(x.dtype());
        let dev = a.opt_device(usize::MAX, "device")?.unwrap_or(x.device());
        let rg = flags(a)?;
        a.ignore(&["layout"]);
        with_rg(Tensor::full_on(&s, v, dt, dev)?, rg)
    });
    r.add_all(&["empty_strided", "new_empty_strided"], |a| {
        let off = if a.op() == "new_empty_strided" { 1 } else { 0 };
        let base = if off == 1 { Some(a.tensor(0, "input")?) } else { None };
        let op = a.op().to_string();
        let size = crate::shape::check_sizes(&op, &a.ints(off, "size")?)?;
        let stride = crate::shape::check_sizes(&op, &a.ints(off + 1, "stride")?)?;
        if size.len() != stride.len() {
            return Err(Error::shape(a.op(), format!("mismatch in length of strides and shape ({} vs {})", stride.len(), size.len())));
        }
        let dt = a.opt_dtype(usize::MAX, "dtype")?.or(base.as_ref().map(|b| b.dtype())).unwrap_or(default_dtype());
        let dev = a.opt_device(usize::MAX, "device")?.unwrap_or_default();
        let rg = flags(a)?;
        a.ignore(&["layout"]);
        let l = crate::Layout { shape: size.clone(), strides: stride, offset: 0 };
        let (_, hi) = l.storage_span();
        let flat = Tensor::zeros_on(&[hi], dt, dev)?;
        let sz: Vec<i64> = l.shape.iter().map(|&v| v as i64).collect();
        let st: Vec<i64> = l.strides.iter().map(|&v| v as i64).collect();
        with_rg(flat.as_strided(&sz, &st, Some(0))?.detach(), rg)
    });
    r.add("empty_permuted", |a| {
        let s = crate::shape::check_sizes("empty_permuted", &a.ints(0, "size")?)?;
        let perm = a.ints(1, "physical_layout")?;
        let f = factory(a, usize::MAX)?;
        let dt = f.dtype.unwrap_or(default_dtype());
        // physical order `perm`: allocate permuted, view back in logical order
        let wrapped = crate::shape::wrap_dims("empty_permuted", &perm, s.len())?;
        if wrapped.len() != s.len() {
            return Err(Error::value("empty_permuted", "physical_layout must be a permutation of the dims"));
        }
        let phys: Vec<usize> = wrapped.iter().map(|&d| s[d]).collect();
        let mut inv = vec![0i64; s.len()];
        for (i, &d) in wrapped.iter().enumerate() {
            inv[d] = i as i64;
        }
        let x = Tensor::zeros_on(&phys, dt, f.device)?.permute(&inv)?.detach();
        finish(x, &f)
    });
    r.add("scalar_tensor", |a| {
        let v = a.scalar(0, "s")?;
        let f = factory(a, usize::MAX)?;
        finish(Tensor::scalar_tensor(v, f.dtype.unwrap_or(default_dtype()), f.device)?, &f)
    });
    r.add("eye", |a| {
        let n = a.int(0, "n")?;
        let m = a.opt_int(1, "m")?.unwrap_or(n);
        if n < 0 || m < 0 {
            return Err(Error::value("eye", format!("n and m must be non-negative, got {n} and {m}")));
        }
        let f = factory(a, usize::MAX)?;
        finish(Tensor::eye_on(n as usize, m as usize, f.dtype.unwrap_or(default_dtype()), f.device)?, &f)
    });
    r.add("arange", |a| {
        let x0 = scalar_arg(a, 0, "start")?;
        let (start, end, step) = match (a.opt_scalar(1, "end")?, a.opt_scalar(2, "step")?) {
            (None, s) => (Scalar::Int(0), x0, s.unwrap_or(Scalar::Int(1))),
            (Some(e), s) => (x0, e, s.unwrap_or(Scalar::Int(1))),
        };
        let f = factory(a, usize::MAX)?;
        let integral = start.is_integral() && end.is_integral() && step.is_integral();
        let dt = f.dtype.unwrap_or(if integral { DType::I64 } else { default_dtype() });
        finish(Tensor::arange_on(start, end, step, dt, f.device)?, &f)
    });
    r.add_all(&["linspace", "logspace"], |a| {
        let start = scalar_arg(a, 0, "start")?;
        let end = scalar_arg(a, 1, "end")?;
        let steps = a.int(2, "steps")?;
        let base = if a.op() == "logspace" { a.float_or(3, "base", 10.0)? } else { 10.0 };
        let f = factory(a, usize::MAX)?;
        let dt = f.dtype.unwrap_or(default_dtype());
        let x = if a.op() == "linspace" {
            Tensor::linspace_on(start.to_f64(), end.to_f64(), steps, dt, f.device)?
        } else {
            Tensor::logspace_on(start.to_f64(), end.to_f64(), steps, base, dt, f.device)?
        };
        finish(x, &f)
    });
    // random
    r.add_all(&["rand", "randn"], |a| {
        let s = sizes(a, 0)?;
        let f = factory(a, usize::MAX)?;
        a.ignore(&["generator"]);
        let dt = f.dtype.unwrap_or(default_dtype());
        let x = if a.op() == "rand" { Tensor::rand_on(&s, dt, f.device)? } else { Tensor::randn_on(&s, dt, f.device)? };
        finish(x, &f)
    });
    r.add_all(&["rand_like", "randn_like"], |a| {
        let (x, dt, dev, rg) = like(a)?;
        let out = if a.op() == "rand_like" { Tensor::rand_on(x.shape(), dt, dev)? } else { Tensor::randn_on(x.shape(), dt, dev)? };
        with_rg(out, rg)
    });
    r.add("randint", |a| {
        let x0 = a.int(0, "low")?;
        let (low, high, size) = match a.get(1, "high") {
            Some(Value::Int(h)) => (x0, h, a.ints(2, "size")?),
            Some(Value::List(_)) => (0, x0, a.ints(1, "size")?),
            _ => (0, x0, a.ints(usize::MAX, "size")?),
        };
        let s = crate::shape::check_sizes("randint", &size)?;
        let f = factory(a, usize::MAX)?;
        a.ignore(&["generator"]);
        finish(Tensor::randint_on(low, high, &s, f.dtype.unwrap_or(DType::I64), f.device)?, &f)
    });
    r.add("randint_like", |a| {
        let x0 = a.int(1, "low")?;
        let (low, high) = match a.opt_int(2, "high")? {
            Some(h) => (x0, h),
            None => (0, x0),
        };
        let (x, dt, dev, rg) = like(a)?;
        with_rg(Tensor::randint_on(low, high, x.shape(), dt, dev)?, rg)
    });
    r.add("randperm", |a| {
        let n = a.int(0, "n")?;
        if n < 0 {
            return Err(Error::value("randperm", format!("n must be non-negative, got {n}")));
        }
        let f = factory(a, usize::MAX)?;
        a.ignore(&["generator"]);
        finish(Tensor::randperm_on(n as usize, f.dtype.unwrap_or(DType::I64), f.device)?, &f)
    });
    r.add("bernoulli", |a| {
        let x = a.tensor(0, "input")?;
        a.ignore(&["generator"]);
        match a.opt_float(1, "p")? {
            Some(p) => t(x.bernoulli_p(p)?),
            None => t(x.bernoulli()?),
        }
    });
    r.add("multinomial", |a| {
        let x = a.tensor(0, "input")?;
        let n = a.int(1, "num_samples")?;
        if n <= 0 {
            return Err(Error::value("multinomial", "cannot sample n_sample <= 0 samples"));
        }
        let rep = a.bool_or(2, "replacement", false)?;
        a.ignore(&["generator"]);
        let out = a.opt_tensor(usize::MAX, "out")?;
        if let Some(o) = &out {
            if o.dtype() != DType::I64 {
                return Err(Error::dtype("multinomial", format!("multinomial expects Long tensor out, got: {}", o.dtype().name())));
            }
            if o.shares_storage(&x) {
                return Err(Error::value("multinomial", "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() the tensor before performing the operation."));
            }
        }
        let r = x.multinomial(n as usize, rep)?;
        match out {
            Some(o) if o.shape() == r.shape() => {
                o.copy_(&r)?;
                t(o)
            }
            Some(_) => Err(Error::unsupported("multinomial", "resizing an out= tensor")),
            None => t(r),
        }
    });
    r.add("normal", |a| {
        // normal(mean: Tensor|float, std: Tensor|float, size=None)
        let mean = a.get(0, "mean");
        let std = a.get(1, "std");
        a.ignore(&["generator"]);
        match (mean, std) {
            (Some(Value::Tensor(m)), s) => {
                let s = match s {
                    Some(Value::Tensor(s)) => s,
                    Some(v) => Tensor::scalar_tensor(v.as_scalar().unwrap_or(Scalar::Float(1.0)), m.dtype(), m.device())?,
                    None => Tensor::scalar_tensor(1.0, m.dtype(), m.device())?,
                };
                normal_tensors(&m, &s)
            }
            (Some(m), Some(Value::Tensor(s))) => {
                let mv = m.as_scalar().ok_or_else(|| Error::value("normal", "mean must be a number or a tensor"))?;
                let m = Tensor::scalar_tensor(mv, s.dtype(), s.device())?;
                normal_tensors(&m, &s)
            }
            (Some(m), Some(s)) => {
                let (mv, sv) = (m.as_scalar(), s.as_scalar());
                let (Some(mv), Some(sv)) = (mv, sv) else { return Err(Error::value("normal", "mean and std must be numbers or tensors")) };
                let size = crate::shape::check_sizes("normal", &a.ints(2, "size")?)?;
                let f = factory(a, usize::MAX)?;
                let x = Tensor::zeros_on(&size, f.dtype.unwrap_or(default_dtype()), f.device)?;
                finish(x.normal_(mv.to_f64(), sv.to_f64())?, &f)
            }
            _ => Err(Error::value("normal", "normal() needs mean and std")),
        }
    });
    r.add("normal_", |a| {
        let x = a.tensor(0, "input")?;
        let m = a.float_or(1, "mean", 0.0)?;
        let s = a.float_or(2, "std", 1.0)?;
        a.ignore(&["generator"]);
        t(x.normal_(m, s)?)
    });
    r.add("uniform_", |a| {
        let x = a.tensor(0, "input")?;
        let lo = a.float_or(1, "from", 0.0)?;
        let hi = a.float_or(2, "to", 1.0)?;
        a.ignore(&["generator"]);
        t(x.uniform_(lo, hi)?)
    });
    r.add("exponential_", |a| {
        let x = a.tensor(0, "input")?;
        let l = a.float_or(1, "lambd", 1.0)?;
        a.ignore(&["generator"]);
        t(x.exponential_(l)?)
    });
    r.add("cauchy_", |a| {
        let x = a.tensor(0, "input")?;
        let m = a.float_or(1, "median", 0.0)?;
        let s = a.float_or(2, "sigma", 1.0)?;
        a.ignore(&["generator"]);
        t(x.cauchy_(m, s)?)
    });
    r.add("log_normal_", |a| {
        let x = a.tensor(0, "input")?;
        let m = a.float_or(1, "mean", 1.0)?;
        let s = a.float_or(2, "std", 2.0)?;
        a.ignore(&["generator"]);
        t(x.log_normal_(m, s)?)
    });
    r.add("geometric_", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.float(1, "p")?;
        a.ignore(&["generator"]);
        t(x.geometric_(p)?)
    });
    // conversions
    for (name, d) in [
        conversion("bfloat16", DType::BF16),
        conversion("bool", DType::Bool),
        conversion("byte", DType::U8),
        conversion("char", DType::I8),
        conversion("double", DType::F64),
        conversion("float", DType::F32),
        conversion("half", DType::F16),
        conversion("int", DType::I32),
        conversion("long", DType::I64),
        conversion("short", DType::I16),
        conversion("cdouble", DType::C128),
        conversion("cfloat", DType::C64),
    ] {
        let _ = d;
        r.add(name, |a| {
            let x = a.tensor(0, "input")?;
            a.ignore(&["memory_format"]);
            let d = DType::parse(a.op())?;
            t(x.to_dtype(d)?)
        });
    }
    r.add("to", |a| {
        // to(device=None, dtype=None, non_blocking=False, copy=False, memory_format=...), or to(dtype), or to(other)
        let x = a.tensor(0, "input")?;
        let mut dtype = None;
        let mut device = None;
        let mut k = 1;
        loop {
            match a.get(k, "") {
                Some(Value::DType(d)) => dtype = Some(d),
                Some(Value::Str(s)) => device = Some(Device::parse(&s)?),
                Some(Value::Device(d)) => device = Some(d),
                Some(Value::Tensor(o)) => {
                    dtype = Some(o.dtype());
                    device = Some(o.device());
                }
                _ => break,
            }
            k += 1;
        }
        let non_blocking = a.bool_or(k, "non_blocking", false)?;
        let copy = a.bool_or(k + 1, "copy", false)?;
        if let Some(d) = a.opt_dtype(usize::MAX, "dtype")? {
            dtype = Some(d);
        }
        if let Some(d) = a.opt_device(usize::MAX, "device")? {
            device = Some(d);
        }
        a.ignore(&["memory_format"]);
        let mut y = x.to_device_with(device.unwrap_or(x.device()), non_blocking)?;
        y = y.to_dtype(dtype.unwrap_or(y.dtype()))?;
        if copy && y.shares_storage(&x) {
            y = y.copy()?;
        }
        t(y)
    });
    r.add("fill", |a| {
        let x = a.tensor(0, "input")?;
        let v = match a.get(1, "value") {
            Some(Value::Tensor(v)) => {
                if v.ndim() != 0 {
                    return Err(Error::value("fill", format!("fill only supports 0-dimension value tensor but got tensor with {} dimensions.", v.ndim())));
                }
                crate::ops::index::FillValue::Tensor(v)
            }
            Some(v) => crate::ops::index::FillValue::Scalar(v.as_scalar().ok_or_else(|| Error::value("fill", "value must be a number"))?),
            None => return Err(Error::value("fill", "missing value")),
        };
        t(x.fill(&v)?)
    });
    r.add("fill_", |a| {
        let x = a.tensor(0, "input")?;
        let v = a.scalar(1, "value")?;
        t(x.fill_(v)?)
    });
    r.add("zero_", |a| t(a.tensor(0, "input")?.zero_()?));
}

fn normal_tensors(m: &Tensor, s: &Tensor) -> Result<Value> {
    let shape = crate::shape::broadcast_shapes("normal", m.shape(), s.shape())?;
    let sv: Vec<f64> = s.broadcast_to(&shape)?.to_vec()?;
    if sv.iter().any(|&x| x < 0.0) {
        return Err(Error::value("normal", "normal expects all elements of std >= 0.0"));
    }
    let dt = crate::dtype::promote_types(m.dtype(), s.dtype())?;
    let z = Tensor::zeros_on(&shape, dt, m.device())?.normal_(0.0, 1.0)?;
    let _ng = crate::autograd::no_grad();
    t(z.mul(&s.to_dtype(dt)?)?.add(&m.to_dtype(dt)?)?)
}

//! Registry entries for the nn op family (`nn.functional.*` names and their ATen aliases).

use super::{Args, Registry, Value};

#[path = "nn_layers.rs"]
mod layers;
#[path = "nn_losses.rs"]
mod losses;
use crate::ops::nn;
use crate::tensor::Tensor;
use crate::{Error, Result};

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// An int-or-list argument; absent or None gives `default`.
fn ints_or(a: &mut Args, i: usize, name: &str, default: &[i64]) -> Result<Vec<i64>> {
    Ok(a.opt_ints(i, name)?.unwrap_or_else(|| default.to_vec()))
}

/// `output_size` of adaptive pooling: ints or None entries (keep the input size).
fn output_size(a: &mut Args, i: usize) -> Result<Vec<Option<i64>>> {
    match a.get(i, "output_size") {
        Some(Value::Int(v)) => Ok(vec![Some(v)]),
        Some(Value::None) => Ok(vec![None]),
        Some(Value::List(l)) => l
            .iter()
            .map(|x| match x {
                Value::Int(v) => Ok(Some(*v)),
                Value::None => Ok(None),
                o => Err(Error::value(a.op(), format!("output_size must be ints, not {}", o.kind()))),
            })
            .collect(),
        Some(v) => Err(Error::value(a.op(), format!("output_size must be ints, not {}", v.kind()))),
        None => Err(Error::value(a.op(), "missing required argument 'output_size'")),
    }
}

/// A float-or-list argument (`scale_factor`).
fn opt_floats(a: &mut Args, i: usize, name: &str) -> Result<Option<Vec<f64>>> {
    match a.get_some(i, name) {
        None => Ok(None),
        Some(Value::Float(f)) => Ok(Some(vec![f])),
        Some(Value::Int(v)) => Ok(Some(vec![v as f64])),
        Some(Value::List(l)) => l
            .iter()
            .map(|x| match x {
                Value::Float(f) => Ok(*f),
                Value::Int(v) => Ok(*v as f64),
                o => Err(Error::value(a.op(), format!("{name} must be floats, not {}", o.kind()))),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(v) => Err(Error::value(a.op(), format!("{name} must be floats, not {}", v.kind()))),
    }
}

fn opt_bool(a: &mut Args, i: usize, name: &str) -> Result<Option<bool>> {
    match a.get_some(i, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(Value::Int(v)) => Ok(Some(v != 0)),
        Some(v) => Err(Error::value(a.op(), format!("{name} must be bool, not {}", v.kind()))),
    }
}

fn pair(v: (Tensor, Tensor), both: bool) -> Result<Value> {
    if both {
        Ok(Value::List(vec![Value::Tensor(v.0), Value::Tensor(v.1)]))
    } else {
        Ok(Value::Tensor(v.0))
    }
}

fn avg_pool(a: &mut Args, nd: usize) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let k = a.ints(1, "kernel_size")?;
    let s = ints_or(a, 2, "stride", &[])?;
    let p = ints_or(a, 3, "padding", &[0])?;
    let ceil = a.bool_or(4, "ceil_mode", false)?;
    let cip = a.bool_or(5, "count_include_pad", true)?;
    let dov = if nd > 1 { a.opt_int(6, "divisor_override")? } else { None };
    t(nn::avg_pool(&x, nd, &k, &s, &p, ceil, cip, dov)?)
}

fn max_pool(a: &mut Args, nd: usize, with_indices: bool) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let k = a.ints(1, "kernel_size")?;
    let s = ints_or(a, 2, "stride", &[])?;
    let p = ints_or(a, 3, "padding", &[0])?;
    let d = ints_or(a, 4, "dilation", &[1])?;
    let ceil = a.bool_or(5, "ceil_mode", false)?;
    let ri = with_indices || a.bool_or(6, "return_indices", false)?;
    pair(nn::max_pool(&x, nd, &k, &s, &p, &d, ceil)?, ri)
}

fn adaptive_max(a: &mut Args, nd: usize, with_indices: bool) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let o = output_size(a, 1)?;
    let ri = with_indices || a.bool_or(2, "return_indices", false)?;
    pair(nn::adaptive_max_pool(&x, nd, &o)?, ri)
}

fn max_unpool(a: &mut Args, nd: usize) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let idx = a.tensor(1, "indices")?;
    let k = a.ints(2, "kernel_size")?;
    let s = ints_or(a, 3, "stride", &[])?;
    let p = ints_or(a, 4, "padding", &[0])?;
    let o = a.opt_ints(5, "output_size")?;
    t(nn::max_unpool(&x, &idx, nd, &k, &s, &p, o.as_deref())?)
}

/// Registers this family's ops.
pub(crate) fn register(r: &mut Registry) {
    layers::register(r);
    losses::register(r);
    r.add("nn.functional.avg_pool1d", |a| avg_pool(a, 1));
    r.add("nn.functional.avg_pool2d", |a| avg_pool(a, 2));
    r.add("nn.functional.avg_pool3d", |a| avg_pool(a, 3));
    r.add("nn.functional.max_pool1d", |a| max_pool(a, 1, false));
    r.add("nn.functional.max_pool2d", |a| max_pool(a, 2, false));
    r.add("nn.functional.max_pool3d", |a| max_pool(a, 3, false));
    r.add("nn.functional.max_pool1d_with_indices", |a| max_pool(a, 1, true));
    r.add("nn.functional.max_pool2d_with_indices", |a| max_pool(a, 2, true));
    r.add("max_pool2d_with_indices_backward", |a| {
        let g = a.tensor(0, "grad_output")?;
        let x = a.tensor(1, "self")?;
        let k = a.ints(2, "kernel_size")?;
        let s = ints_or(a, 3, "stride", &[])?;
        let p = ints_or(a, 4, "padding", &[0])?;
        let d = ints_or(a, 5, "dilation", &[1])?;
        let ceil = a.bool_or(6, "ceil_mode", false)?;
        let idx = a.tensor(7, "indices")?;
        t(nn::max_pool2d_with_indices_backward(&g, &x, &k, &s, &p, &d, ceil, &idx)?)
    });
    r.add("nn.functional.max_pool3d_with_indices", |a| max_pool(a, 3, true));
    r.add("nn.functional.adaptive_avg_pool1d", |a| {
        let x = a.tensor(0, "input")?;
        let o = output_size(a, 1)?;
        t(nn::adaptive_avg_pool(&x, 1, &o)?)
    });
    r.add("nn.functional.adaptive_avg_pool2d", |a| {
        let x = a.tensor(0, "input")?;
        let o = output_size(a, 1)?;
        t(nn::adaptive_avg_pool(&x, 2, &o)?)
    });
    r.add("nn.functional.adaptive_avg_pool3d", |a| {
        let x = a.tensor(0, "input")?;
        let o = output_size(a, 1)?;
        t(nn::adaptive_avg_pool(&x, 3, &o)?)
    });
    r.add("nn.functional.adaptive_max_pool1d", |a| adaptive_max(a, 1, false));
    r.add("nn.functional.adaptive_max_pool2d", |a| adaptive_max(a, 2, false));
    r.add("nn.functional.adaptive_max_pool3d", |a| adaptive_max(a, 3, false));
    r.add("nn.functional.max_unpool1d", |a| max_unpool(a, 1));
    r.add("nn.functional.max_unpool2d", |a| max_unpool(a, 2));
    r.add("nn.functional.max_unpool3d", |a| max_unpool(a, 3));
    r.add("nn.functional.interpolate", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.opt_ints(1, "size")?;
        let sf = opt_floats(a, 2, "scale_factor")?;
        let mode = a.opt_str(3, "mode")?.unwrap_or_else(|| "nearest".into());
        let ac = opt_bool(a, 4, "align_corners")?;
        let rsf = opt_bool(a, 5, "recompute_scale_factor")?;
        let aa = a.bool_or(6, "antialias", false)?;
        t(nn::interpolate(&x, size.as_deref(), sf.as_deref(), &mode, ac, rsf, aa)?)
    });
    r.add_all(&["_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa"], |a| {
        let x = a.tensor(0, "input")?;
        let size = a.opt_ints(1, "output_size")?;
        let ac = a.bool_or(2, "align_corners", false)?;
        let sf = opt_floats(a, 3, "scale_factors")?;
        let cubic = a.op() == "_upsample_bicubic2d_aa";
        t(nn::upsample_aa(&x, size.as_deref(), ac, sf.as_deref(), cubic)?)
    });
    r.add("nn.functional.upsample", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.opt_ints(1, "size")?;
        let sf = opt_floats(a, 2, "scale_factor")?;
        let mode = a.opt_str(3, "mode")?.unwrap_or_else(|| "nearest".into());
        let ac = opt_bool(a, 4, "align_corners")?;
        t(nn::interpolate(&x, size.as_deref(), sf.as_deref(), &mode, ac, None, false)?)
    });
    r.add("nn.functional.upsample_nearest", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.opt_ints(1, "size")?;
        let sf = opt_floats(a, 2, "scale_factor")?;
        t(nn::interpolate(&x, size.as_deref(), sf.as_deref(), "nearest", None, None, false)?)
    });
    r.add("nn.functional.upsample_bilinear", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.opt_ints(1, "size")?;
        let sf = opt_floats(a, 2, "scale_factor")?;
        t(nn::interpolate(&x, size.as_deref(), sf.as_deref(), "bilinear", Some(true), None, false)?)
    });
}

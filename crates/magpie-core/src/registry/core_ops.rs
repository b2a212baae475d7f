//! Registry entries for the core ops (creation, conversion, views, arithmetic, reductions); the
//! elementwise math functions are in `unary_ops`.

use super::{Registry, Value};
use crate::tensor::Tensor;
use crate::Result;

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// Registers the core ops.
pub(crate) fn register(r: &mut Registry) {
    r.add("clone", |a| {
        let x = a.tensor(0, "input")?;
        a.ignore(&["memory_format"]);
        t(x.copy()?)
    });
    r.add("contiguous", |a| {
        let x = a.tensor(0, "input")?;
        a.ignore(&["memory_format"]);
        t(x.contiguous()?)
    });
    // `device=` is deprecated in PyTorch (the current accelerator is used): accepted, not used
    r.add("pin_memory", |a| {
        let x = a.tensor(0, "input")?;
        let _device = a.opt_device(1, "device")?;
        t(x.pin_memory()?)
    });
    r.add("is_pinned", |a| {
        let x = a.tensor(0, "input")?;
        let _device = a.opt_device(1, "device")?;
        Ok(Value::Bool(x.is_pinned()))
    });
    r.add("item", |a| Ok(a.tensor(0, "input")?.item()?.into()));
    // views
    r.add_all(&["view", "reshape"], |a| {
        let x = a.tensor(0, "input")?;
        let s = a.int_list_or_varargs(1, "shape")?;
        t(if a.op() == "view" { x.view(&s)? } else { x.reshape(&s)? })
    });
    r.add_all(&["transpose", "swapaxes", "swapdims"], |a| {
        let x = a.tensor(0, "input")?;
        t(x.transpose(a.int(1, "dim0")?, a.int(2, "dim1")?)?)
    });
    r.add("t", |a| t(a.tensor(0, "input")?.t()?));
    r.add("mT", |a| t(a.tensor(0, "input")?.mt()?));
    r.add("permute", |a| {
        let x = a.tensor(0, "input")?;
        t(x.permute(&a.int_list_or_varargs(1, "dims")?)?)
    });
    r.add("narrow", |a| {
        let x = a.tensor(0, "input")?;
        let dim = a.int(1, "dim")?;
        // `narrow.Tensor`: PyTorch also takes `start` as a 0-d integer tensor
        let start = match a.get(2, "start") {
            Some(Value::Tensor(s)) => {
                if s.ndim() != 0 || !s.dtype().is_int() {
                    return Err(crate::Error::value("narrow", "start must be an 0-dim integral Tensor."));
                }
                s.item()?.to_i64()
            }
            _ => a.int(2, "start")?,
        };
        t(x.narrow(dim, start, a.int(3, "length")?)?)
    });
    r.add("select", |a| {
        let x = a.tensor(0, "input")?;
        t(x.select(a.int(1, "dim")?, a.int(2, "index")?)?)
    });
    r.add_all(&["expand", "broadcast_to"], |a| {
        let x = a.tensor(0, "input")?;
        t(x.expand(&a.int_list_or_varargs(1, "size")?)?)
    });
    r.add("expand_as", |a| {
        let x = a.tensor(0, "input")?;
        t(x.expand_as(&a.tensor(1, "other")?)?)
    });
    r.add("unsqueeze", |a| {
        let x = a.tensor(0, "input")?;
        t(x.unsqueeze(a.int(1, "dim")?)?)
    });
    r.add("squeeze", |a| {
        let x = a.tensor(0, "input")?;
        match a.opt_ints(1, "dim")? {
            None => t(x.squeeze()?),
            Some(d) => t(x.squeeze_dims(&d)?),
        }
    });
    r.add("flatten", |a| {
        let x = a.tensor(0, "input")?;
        t(x.flatten(a.int_or(1, "start_dim", 0)?, a.int_or(2, "end_dim", -1)?)?)
    });
    r.add("unflatten", |a| {
        let x = a.tensor(0, "input")?;
        t(x.unflatten(a.int(1, "dim")?, &a.ints(2, "sizes")?)?)
    });
    r.add("unfold", |a| {
        let x = a.tensor(0, "input")?;
        t(x.unfold(a.int(1, "dimension")?, a.int(2, "size")?, a.int(3, "step")?)?)
    });
    r.add("diagonal", |a| {
        let x = a.tensor(0, "input")?;
        t(x.diagonal(a.int_or(1, "offset", 0)?, a.int_or(2, "dim1", 0)?, a.int_or(3, "dim2", 1)?)?)
    });
    r.add("as_strided", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.ints(1, "size")?;
        let stride = a.ints(2, "stride")?;
        let off = a.opt_int(3, "storage_offset")?;
        t(x.as_strided(&size, &stride, off)?)
    });
    r.add("resize_", |a| {
        let x = a.tensor(0, "input")?;
        t(x.resize_(&a.ints(1, "size")?)?)
    });
    r.add("resize_as_", |a| {
        let x = a.tensor(0, "input")?;
        t(x.resize_as_(&a.tensor(1, "the_template")?)?)
    });
    r.add_all(&["movedim", "moveaxis"], |a| {
        let x = a.tensor(0, "input")?;
        t(x.movedim(&a.ints(1, "source")?, &a.ints(2, "destination")?)?)
    });
}

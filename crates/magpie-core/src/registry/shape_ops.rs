//! Registry entries for the shape and index op families: joining and splitting, reordering,
//! the `*_copy` / `*_scatter` variants, gather / scatter / index_* ops, Python indexing, padding.

use super::{Args, Registry, Value};
use crate::ops::index::FillValue;
use crate::ops::indexing::{self, TensorIndex};
use crate::ops::pad::PadMode;
use crate::ops::shape_ops::{self as so, Sections};
use crate::tensor::Tensor;
use crate::{Error, Result, Scalar};

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}
fn list(v: Vec<Tensor>) -> Result<Value> {
    Ok(Value::from(v))
}

/// Handles an `out=` keyword: the result is copied into `out` when it may be written
/// (same dtype and shape, no memory shared with an input), as PyTorch's out= variants do.
fn with_out(a: &mut Args, inputs: &[&Tensor], r: Value) -> Result<Value> {
    let Some(out) = a.opt_tensor(usize::MAX, "out")? else { return Ok(r) };
    let op = a.op().to_string();
    if inputs.iter().any(|i| i.shares_storage(&out)) {
        return Err(Error::value(
            op,
            "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() the tensor before performing the operation.",
        ));
    }
    let Value::Tensor(r) = r else { return Err(Error::unsupported(op, "out= for multi-output ops")) };
    if out.dtype() != r.dtype() {
        return Err(Error::dtype(op, format!("Expected out tensor to have dtype {}, but got {} instead", r.dtype().name(), out.dtype().name())));
    }
    if out.shape() != r.shape() {
        return Err(Error::unsupported(op, "resizing an out= tensor"));
    }
    out.copy_(&r)?;
    Ok(Value::Tensor(out))
}

/// Tensors given either as one list argument or as varargs from position `i`.
fn tensors_or_varargs(a: &mut Args, i: usize, name: &str) -> Result<Vec<Tensor>> {
    if a.n_pos() > i + 1 || matches!(a.get(i, name), Some(Value::Tensor(_))) {
        return a
            .rest(i)
            .into_iter()
            .map(|v| match v {
                Value::Tensor(t) => Ok(t),
                o => Err(Error::value(a.op(), format!("expected Tensors, got {}", o.kind()))),
            })
            .collect();
    }
    if a.n_pos() <= i && a.get(i, name).is_none() {
        return Ok(Vec::new());
    }
    a.tensors(i, name)
}

fn sections(a: &mut Args, i: usize, name: &str) -> Result<Sections> {
    match a.get(i, name) {
        Some(Value::Int(n)) => Ok(Sections::Count(n)),
        Some(Value::List(l)) => Ok(Sections::Indices(
            l.iter()
                .map(|v| match v {
                    Value::Int(x) => Ok(*x),
                    o => Err(Error::value(a.op(), format!("indices must be ints, got {}", o.kind()))),
                })
                .collect::<Result<_>>()?,
        )),
        Some(Value::Tensor(x)) => {
            if x.dtype() != crate::DType::I64 {
                return Err(Error::dtype(a.op(), format!("tensor_split expected tensor_indices_or_sections to have dtype of long, but got {}", x.dtype().name())));
            }
            match x.ndim() {
                0 => Ok(Sections::Count(x.item()?.to_i64())),
                1 => Ok(Sections::Indices(x.to_vec()?)),
                n => Err(Error::value(a.op(), format!("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional tensor, but got a tensor with {n} dims"))),
            }
        }
        Some(v) => Err(Error::value(a.op(), format!("received an invalid combination of arguments: {name} must be an int or a list of ints, not {}", v.kind()))),
        None => Err(Error::value(a.op(), format!("missing required argument '{name}'"))),
    }
}

fn fill_value(a: &mut Args, i: usize, name: &str) -> Result<FillValue> {
    match a.get(i, name) {
        Some(Value::Tensor(x)) => Ok(FillValue::Tensor(x)),
        Some(v) => v.as_scalar().map(FillValue::Scalar).ok_or_else(|| Error::value(a.op(), format!("argument '{name}' must be a number or a 0-d tensor"))),
        None => Err(Error::value(a.op(), format!("missing required argument '{name}'"))),
    }
}

/// A list of optional index tensors (`index_put`'s `indices`).
fn opt_tensor_list(a: &mut Args, i: usize, name: &str) -> Result<Vec<Option<Tensor>>> {
    match a.get(i, name) {
        Some(Value::List(l)) => l
            .into_iter()
            .map(|v| match v {
                Value::Tensor(t) => Ok(Some(t)),
                Value::None => Ok(None),
                o => Err(Error::value(a.op(), format!("indices must be tensors or None, got {}", o.kind()))),
            })
            .collect(),
        Some(Value::Tensor(t)) => Ok(vec![Some(t)]),
        Some(v) => Err(Error::value(a.op(), format!("argument '{name}' must be a list of tensors, not {}", v.kind()))),
        None => Err(Error::value(a.op(), format!("missing required argument '{name}'"))),
    }
}

/// A nested list of ints or bools as a tensor (`x[[0, 2]]`).
fn list_to_tensor(op: &str, l: &[Value]) -> Result<Tensor> {
    fn flat(op: &str, v: &Value, shape: &mut Vec<usize>, depth: usize, out: &mut Vec<Value>) -> Result<()> {
        match v {
            Value::List(items) => {
                if shape.len() <= depth {
                    shape.push(items.len());
                } else if shape[depth] != items.len() {
                    return Err(Error::value(op, "ragged nested list used as an index"));
                }
                for x in items {
                    flat(op, x, shape, depth + 1, out)?;
                }
                Ok(())
            }
            Value::Int(_) | Value::Bool(_) => {
                out.push(v.clone());
                Ok(())
            }
            o => Err(Error::index(op, format!("only integers, slices, None, Ellipsis, bools and tensors are valid indices, got {}", o.kind()))),
        }
    }
    let mut shape = Vec::new();
    let mut vals = Vec::new();
    flat(op, &Value::List(l.to_vec()), &mut shape, 0, &mut vals)?;
    if !vals.is_empty() && vals.iter().all(|v| matches!(v, Value::Bool(_))) {
        let b: Vec<bool> = vals.iter().map(|v| matches!(v, Value::Bool(true))).collect();
        return Tensor::from_vec(b, &shape);
    }
    let i: Vec<i64> = vals.iter().map(|v| match v { Value::Int(x) => *x, Value::Bool(b) => *b as i64, _ => 0 }).collect();
    Tensor::from_vec(i, &shape)
}

/// A Python index expression as a list of [`TensorIndex`] (a list of plain ints is one index
/// tensor, as PyTorch's `treatSequenceAsTuple` decides; a list with slices, None, ... is a tuple).
fn parse_index(op: &str, v: Value) -> Result<Vec<TensorIndex>> {
    fn one(op: &str, v: Value) -> Result<TensorIndex> {
        Ok(match v {
            Value::Int(i) => TensorIndex::Int(i),
            Value::Bool(b) => TensorIndex::Bool(b),
            Value::None => TensorIndex::None,
            Value::Ellipsis => TensorIndex::Ellipsis,
            Value::Slice(s, e, st) => TensorIndex::Slice(s, e, st),
            Value::Tensor(t) => TensorIndex::Tensor(t),
            Value::List(l) => TensorIndex::Tensor(list_to_tensor(op, &l)?),
            o => return Err(Error::index(op, format!("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices (got {})", o.kind()))),
        })
    }
    match v {
        Value::List(items) => {
            let tuple = items.iter().any(|x| matches!(x, Value::List(_) | Value::Slice(..) | Value::Ellipsis | Value::None | Value::Tensor(_)));
            if tuple {
                items.into_iter().map(|x| one(op, x)).collect()
            } else {
                Ok(vec![TensorIndex::Tensor(list_to_tensor(op, &items)?)])
            }
        }
        v => Ok(vec![one(op, v)?]),
    }
}

/// Indices clamped into range (the `_unsafe_masked_index` ops read only where the mask is true).
fn clamp_indices(x: &Tensor, idx: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
    idx.iter()
        .enumerate()
        .map(|(d, i)| match i {
            None => Ok(None),
            Some(i) => {
                let n = *x.shape().get(d).unwrap_or(&1) as i64;
                let v: Vec<i64> = i.to_vec::<i64>()?.into_iter().map(|k| k.clamp(-n, (n - 1).max(-n))).collect();
                Ok(Some(Tensor::from_vec(v, i.shape())?))
            }
        })
        .collect()
}

fn atleast(a: &mut Args, f: fn(&Tensor) -> Result<Tensor>) -> Result<Value> {
    match a.get(0, "input") {
        Some(Value::Tensor(x)) if a.n_pos() <= 1 => t(f(&x)?),
        _ => {
            let ts = tensors_or_varargs(a, 0, "tensors")?;
            list(ts.iter().map(f).collect::<Result<_>>()?)
        }
    }
}

/// Registers this family's ops.
pub(crate) fn register(r: &mut Registry) {
    register_join_split(r);
    register_reorder(r);
    register_index(r);
    register_pad(r);
}

fn register_join_split(r: &mut Registry) {
    r.add_all(&["cat", "concat", "concatenate"], |a| {
        let ts = a.tensors(0, "tensors")?;
        let d = a.int_or(1, "dim", 0)?;
        let out = so::cat(&ts, d)?;
        let refs: Vec<&Tensor> = ts.iter().collect();
        with_out(a, &refs, Value::Tensor(out))
    });
    r.add("stack", |a| {
        let ts = a.tensors(0, "tensors")?;
        t(so::stack(&ts, a.int_or(1, "dim", 0)?)?)
    });
    r.add("hstack", |a| t(so::hstack(&a.tensors(0, "tensors")?)?));
    r.add("vstack", |a| t(so::vstack(&a.tensors(0, "tensors")?)?));
    r.add("dstack", |a| t(so::dstack(&a.tensors(0, "tensors")?)?));
    r.add("column_stack", |a| t(so::column_stack(&a.tensors(0, "tensors")?)?));
    r.add_all(&["split", "unsafe_split"], |a| {
        let x = a.tensor(0, "input")?;
        let v = a.get(1, "split_size_or_sections").or_else(|| a.get(1, "split_size"));
        let d = a.int_or(2, "dim", 0)?;
        // unsafe_split's pieces may be written in place (not multi-output views)
        let safe = a.op() == "split";
        match v {
            Some(Value::Int(s)) => list(if safe { x.split(s, d)? } else { x.unsafe_split(s, d)? }),
            Some(Value::List(l)) => {
                let s: Vec<i64> = l.iter().map(|v| if let Value::Int(i) = v { Ok(*i) } else { Err(Error::value("split", "sizes must be ints")) }).collect::<Result<_>>()?;
                list(if safe { x.split_with_sizes(&s, d)? } else { x.unsafe_split_with_sizes(&s, d)? })
            }
            _ => Err(Error::value("split", "split_size_or_sections must be an int or a list of ints")),
        }
    });
    r.add_all(&["split_with_sizes", "unsafe_split_with_sizes"], |a| {
        let x = a.tensor(0, "input")?;
        let (s, d) = (a.ints(1, "split_sizes")?, a.int_or(2, "dim", 0)?);
        list(if a.op() == "split_with_sizes" { x.split_with_sizes(&s, d)? } else { x.unsafe_split_with_sizes(&s, d)? })
    });
    r.add("split_with_sizes_copy", |a| {
        let x = a.tensor(0, "input")?;
        list(x.split_with_sizes_copy(&a.ints(1, "split_sizes")?, a.int_or(2, "dim", 0)?)?)
    });
    r.add_all(&["chunk", "unsafe_chunk"], |a| {
        let x = a.tensor(0, "input")?;
        let (c, d) = (a.int(1, "chunks")?, a.int_or(2, "dim", 0)?);
        list(if a.op() == "chunk" { x.chunk(c, d)? } else { x.unsafe_chunk(c, d)? })
    });
    r.add("tensor_split", |a| {
        let x = a.tensor(0, "input")?;
        let s = match a.get(1, "indices_or_sections") {
            Some(_) => sections(a, 1, "indices_or_sections")?,
            None => match a.get(1, "sections") {
                Some(_) => sections(a, 1, "sections")?,
                None => match a.get(1, "indices") {
                    Some(_) => sections(a, 1, "indices")?,
                    None => sections(a, 1, "tensor_indices_or_sections")?,
                },
            },
        };
        list(x.tensor_split(&s, a.int_or(2, "dim", 0)?)?)
    });
    r.add("hsplit", |a| {
        let x = a.tensor(0, "input")?;
        list(x.hsplit(&sections(a, 1, "indices_or_sections")?)?)
    });
    r.add("vsplit", |a| {
        let x = a.tensor(0, "input")?;
        list(x.vsplit(&sections(a, 1, "indices_or_sections")?)?)
    });
    r.add("dsplit", |a| {
        let x = a.tensor(0, "input")?;
        list(x.dsplit(&sections(a, 1, "indices_or_sections")?)?)
    });
    r.add("unbind", |a| {
        let x = a.tensor(0, "input")?;
        list(x.unbind(a.int_or(1, "dim", 0)?)?)
    });
    r.add("unbind_copy", |a| {
        let x = a.tensor(0, "input")?;
        list(x.unbind_copy(a.int_or(1, "dim", 0)?)?)
    });
    r.add("block_diag", |a| t(so::block_diag(&tensors_or_varargs(a, 0, "tensors")?)?));
    r.add("cartesian_prod", |a| t(so::cartesian_prod(&tensors_or_varargs(a, 0, "tensors")?)?));
    r.add("combinations", |a| {
        let x = a.tensor(0, "input")?;
        t(x.combinations(a.int_or(1, "r", 2)?, a.bool_or(2, "with_replacement", false)?)?)
    });
    r.add("meshgrid", |a| {
        let ts = tensors_or_varargs(a, 0, "tensors")?;
        let ix = a.opt_str(usize::MAX, "indexing")?.unwrap_or_else(|| "ij".to_string());
        list(so::meshgrid(&ts, &ix)?)
    });
    r.add("broadcast_tensors", |a| list(so::broadcast_tensors(&tensors_or_varargs(a, 0, "tensors")?)?));
    r.add("broadcast_shapes", |a| {
        let mut shapes = Vec::new();
        for v in a.rest(0) {
            shapes.push(match v {
                Value::Int(i) => crate::shape::check_sizes("broadcast_shapes", &[i])?,
                Value::List(l) => {
                    let s: Vec<i64> = l.iter().map(|x| if let Value::Int(i) = x { Ok(*i) } else { Err(Error::value("broadcast_shapes", "shapes must be ints")) }).collect::<Result<_>>()?;
                    crate::shape::check_sizes("broadcast_shapes", &s)?
                }
                o => return Err(Error::value("broadcast_shapes", format!("expected a shape, got {}", o.kind()))),
            });
        }
        let s = so::broadcast_shapes(&shapes)?;
        Ok(Value::List(s.into_iter().map(|x| Value::Int(x as i64)).collect()))
    });
    r.add("atleast_1d", |a| atleast(a, Tensor::atleast_1d));
    r.add("atleast_2d", |a| atleast(a, Tensor::atleast_2d));
    r.add("atleast_3d", |a| atleast(a, Tensor::atleast_3d));
}

fn register_reorder(r: &mut Registry) {
    r.add("flip", |a| {
        let x = a.tensor(0, "input")?;
        t(x.flip(&a.int_list_or_varargs(1, "dims")?)?)
    });
    r.add("fliplr", |a| t(a.tensor(0, "input")?.fliplr()?));
    r.add("flipud", |a| t(a.tensor(0, "input")?.flipud()?));
    r.add("roll", |a| {
        let x = a.tensor(0, "input")?;
        let s = a.ints(1, "shifts")?;
        let d = a.opt_ints(2, "dims")?.unwrap_or_default();
        t(x.roll(&s, &d)?)
    });
    r.add("rot90", |a| {
        let x = a.tensor(0, "input")?;
        let k = a.int_or(1, "k", 1)?;
        let d = a.opt_ints(2, "dims")?.unwrap_or_else(|| vec![0, 1]);
        t(x.rot90(k, &d)?)
    });
    r.add("repeat", |a| {
        let x = a.tensor(0, "input")?;
        t(x.repeat(&a.int_list_or_varargs(1, "repeats")?)?)
    });
    r.add("tile", |a| {
        let x = a.tensor(0, "input")?;
        t(x.tile(&a.int_list_or_varargs(1, "dims")?)?)
    });
    r.add("repeat_interleave", |a| {
        let x = a.tensor(0, "input")?;
        let rep = a.get_some(1, "repeats");
        let d = a.opt_int(2, "dim")?;
        let _ = a.opt_int(3, "output_size")?;
        match rep {
            None => {
                if !x.dtype().is_int() || x.ndim() > 1 {
                    return Err(Error::value("repeat_interleave", "repeats must be a 0-dim or 1-dim integer tensor"));
                }
                t(so::repeat_counts("repeat_interleave", &x.to_vec::<i64>()?)?)
            }
            Some(Value::Int(n)) => t(x.repeat_interleave(n, d)?),
            Some(Value::Tensor(rt)) => t(x.repeat_interleave_tensor(&rt, d)?),
            Some(v) => Err(Error::value("repeat_interleave", format!("repeats must be an int or a tensor, not {}", v.kind()))),
        }
    });
    r.add("tril", |a| {
        let x = a.tensor(0, "input")?;
        t(x.tril(a.int_or(1, "diagonal", 0)?)?)
    });
    r.add("triu", |a| {
        let x = a.tensor(0, "input")?;
        t(x.triu(a.int_or(1, "diagonal", 0)?)?)
    });
    r.add("diag", |a| {
        let x = a.tensor(0, "input")?;
        t(x.diag(a.int_or(1, "diagonal", 0)?)?)
    });
    r.add("diag_embed", |a| {
        let x = a.tensor(0, "input")?;
        t(x.diag_embed(a.int_or(1, "offset", 0)?, a.int_or(2, "dim1", -2)?, a.int_or(3, "dim2", -1)?)?)
    });
    r.add("diagflat", |a| {
        let x = a.tensor(0, "input")?;
        t(x.diagflat(a.int_or(1, "offset", 0)?)?)
    });
    r.add("diagonal_scatter", |a| {
        let x = a.tensor(0, "input")?;
        let s = a.tensor(1, "src")?;
        t(x.diagonal_scatter(&s, a.int_or(2, "offset", 0)?, a.int_or(3, "dim1", 0)?, a.int_or(4, "dim2", 1)?)?)
    });
    r.add("select_scatter", |a| {
        let x = a.tensor(0, "input")?;
        let s = a.tensor(1, "src")?;
        t(x.select_scatter(&s, a.int(2, "dim")?, a.int(3, "index")?)?)
    });
    r.add("slice_scatter", |a| {
        let x = a.tensor(0, "input")?;
        let s = a.tensor(1, "src")?;
        t(x.slice_scatter(&s, a.int_or(2, "dim", 0)?, a.opt_int(3, "start")?, a.opt_int(4, "end")?, a.int_or(5, "step", 1)?)?)
    });
    r.add("as_strided_scatter", |a| {
        let x = a.tensor(0, "input")?;
        let s = a.tensor(1, "src")?;
        t(x.as_strided_scatter(&s, &a.ints(2, "size")?, &a.ints(3, "stride")?, a.opt_int(4, "storage_offset")?)?)
    });
    // `fill` / `fill_` are registered by creation_ops (registered after this family, so its
    // entries win); `Tensor::fill` here is the differentiable form with a 0-d tensor value.
    r.add("T", |a| t(a.tensor(0, "input")?.t_all()?));
    r.add("H", |a| t(a.tensor(0, "input")?.h()?));
    r.add("mH", |a| t(a.tensor(0, "input")?.mh()?));
    r.add_all(&["adjoint"], |a| t(a.tensor(0, "input")?.mh()?));
    r.add("slice", |a| {
        let x = a.tensor(0, "input")?;
        t(x.slice(a.int_or(1, "dim", 0)?, a.opt_int(2, "start")?, a.opt_int(3, "end")?, a.int_or(4, "step", 1)?)?)
    });
    r.add("ravel", |a| t(a.tensor(0, "input")?.ravel()?));
    r.add("view_as", |a| {
        let x = a.tensor(0, "input")?;
        t(x.view_as(&a.tensor(1, "other")?)?)
    });
    r.add("reshape_as", |a| {
        let x = a.tensor(0, "input")?;
        t(x.reshape_as(&a.tensor(1, "other")?)?)
    });
    // *_copy variants
    r.add("view_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.view_copy(&a.int_list_or_varargs(1, "size")?)?)
    });
    r.add("permute_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.permute_copy(&a.int_list_or_varargs(1, "dims")?)?)
    });
    r.add("t_copy", |a| t(a.tensor(0, "input")?.t_copy()?));
    r.add("transpose_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.transpose_copy(a.int(1, "dim0")?, a.int(2, "dim1")?)?)
    });
    r.add("unsqueeze_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.unsqueeze_copy(a.int(1, "dim")?)?)
    });
    r.add("squeeze_copy", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.opt_ints(1, "dim")?;
        t(x.squeeze_copy(d.as_deref())?)
    });
    r.add("expand_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.expand_copy(&a.int_list_or_varargs(1, "size")?)?)
    });
    r.add("diagonal_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.diagonal_copy(a.int_or(1, "offset", 0)?, a.int_or(2, "dim1", 0)?, a.int_or(3, "dim2", 1)?)?)
    });
    r.add("alias_copy", |a| t(a.tensor(0, "input")?.alias_copy()?));
    r.add("unfold_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.unfold_copy(a.int(1, "dimension")?, a.int(2, "size")?, a.int(3, "step")?)?)
    });
    r.add("narrow_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.narrow_copy(a.int(1, "dim")?, a.int(2, "start")?, a.int(3, "length")?)?)
    });
    r.add("as_strided_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.as_strided_copy(&a.ints(1, "size")?, &a.ints(2, "stride")?, a.opt_int(3, "storage_offset")?)?)
    });
}

fn register_index(r: &mut Registry) {
    r.add("gather", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let i = a.tensor(2, "index")?;
        if a.bool_or(3, "sparse_grad", false)? {
            return Err(Error::unsupported("gather", "sparse_grad=True"));
        }
        let out = x.gather(d, &i)?;
        with_out(a, &[&x, &i], Value::Tensor(out))
    });
    r.add("scatter", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let i = a.tensor(2, "index")?;
        let src = match a.get(3, "src") {
            Some(v) => Some(v),
            None => a.get(3, "value"),
        };
        let reduce = a.opt_str(4, "reduce")?;
        match (src, reduce) {
            (Some(Value::Tensor(s)), None) => t(x.scatter(d, &i, &s)?),
            (Some(Value::Tensor(s)), Some(rd)) => t(x.scatter_with_reduce(d, &i, &s, &rd)?),
            (Some(v), rd) => {
                let s = v.as_scalar().ok_or_else(|| Error::value("scatter", "src must be a tensor or a number"))?;
                match rd {
                    None => t(x.scatter_value(d, &i, s)?),
                    Some(rd) => {
                        let st = Tensor::scalar_tensor(s, x.dtype(), x.device())?.broadcast_to(i.shape())?;
                        t(x.scatter_with_reduce(d, &i, &st, &rd)?)
                    }
                }
            }
            (None, _) => Err(Error::value("scatter", "missing required argument 'src'")),
        }
    });
    r.add("scatter_add", |a| {
        let x = a.tensor(0, "input")?;
        t(x.scatter_add(a.int(1, "dim")?, &a.tensor(2, "index")?, &a.tensor(3, "src")?)?)
    });
    r.add("scatter_reduce", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let i = a.tensor(2, "index")?;
        let s = a.tensor(3, "src")?;
        let rd = a.opt_str(4, "reduce")?.ok_or_else(|| Error::value("scatter_reduce", "missing required argument 'reduce'"))?;
        t(x.scatter_reduce(d, &i, &s, &rd, a.bool_or(5, "include_self", true)?)?)
    });
    r.add("index_select", |a| {
        let x = a.tensor(0, "input")?;
        let i = a.tensor(2, "index")?;
        let out = x.index_select(a.int(1, "dim")?, &i)?;
        with_out(a, &[&x, &i], Value::Tensor(out))
    });
    r.add("index_add", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let i = a.tensor(2, "index")?;
        let s = a.tensor(3, "source")?;
        let alpha = a.opt_scalar(4, "alpha")?.unwrap_or(Scalar::Int(1));
        t(x.index_add(d, &i, &s, alpha)?)
    });
    r.add("index_copy", |a| {
        let x = a.tensor(0, "input")?;
        t(x.index_copy(a.int(1, "dim")?, &a.tensor(2, "index")?, &a.tensor(3, "source")?)?)
    });
    r.add("index_fill", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let i = a.tensor(2, "index")?;
        t(x.index_fill(d, &i, &fill_value(a, 3, "value")?)?)
    });
    r.add("index_reduce", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int(1, "dim")?;
        let i = a.tensor(2, "index")?;
        let s = a.tensor(3, "source")?;
        let rd = a.opt_str(4, "reduce")?.ok_or_else(|| Error::value("index_reduce", "missing required argument 'reduce'"))?;
        t(x.index_reduce(d, &i, &s, &rd, a.bool_or(5, "include_self", true)?)?)
    });
    r.add("index_put", |a| {
        let x = a.tensor(0, "input")?;
        let idx = opt_tensor_list(a, 1, "indices")?;
        let v = a.tensor(2, "values")?;
        t(indexing::index_put(&x, &idx, &v, a.bool_or(3, "accumulate", false)?)?)
    });
    r.add("index_put_", |a| {
        let x = a.tensor(0, "input")?;
        let idx = opt_tensor_list(a, 1, "indices")?;
        let v = a.tensor(2, "values")?;
        let ti: Vec<TensorIndex> = idx.into_iter().map(|i| i.map_or(TensorIndex::Slice(None, None, None), TensorIndex::Tensor)).collect();
        t(x.index_put_acc_(&ti, &v, a.bool_or(3, "accumulate", false)?)?)
    });
    r.add("_unsafe_masked_index", |a| {
        let x = a.tensor(0, "input")?;
        let m = a.tensor(1, "mask")?;
        let idx = opt_tensor_list(a, 2, "indices")?;
        let fill = a.scalar(3, "fill")?;
        let v = indexing::index(&x, &clamp_indices(&x, &idx)?)?;
        let f = Tensor::scalar_tensor(fill, x.dtype(), x.device())?;
        t(m.where_(&v, &f)?)
    });
    r.add("_unsafe_masked_index_put_accumulate", |a| {
        let x = a.tensor(0, "input")?;
        let m = a.tensor(1, "mask")?;
        let idx = opt_tensor_list(a, 2, "indices")?;
        let v = a.tensor(3, "values")?;
        let z = Tensor::zeros_on(&[], v.dtype(), v.device())?;
        let vm = m.where_(&v, &z)?;
        t(indexing::index_put(&x, &clamp_indices(&x, &idx)?, &vm, true)?)
    });
    r.add("__getitem__", |a| {
        let x = a.tensor(0, "input")?;
        let ix = a.get(1, "indices").ok_or_else(|| Error::value("__getitem__", "missing index"))?;
        t(x.index(&parse_index("__getitem__", ix)?)?)
    });
    r.add("masked_select", |a| {
        let x = a.tensor(0, "input")?;
        let m = a.tensor(1, "mask")?;
        let out = x.masked_select(&m)?;
        with_out(a, &[&x, &m], Value::Tensor(out))
    });
    r.add("masked_scatter", |a| {
        let x = a.tensor(0, "input")?;
        t(x.masked_scatter(&a.tensor(1, "mask")?, &a.tensor(2, "source")?)?)
    });
    r.add("nonzero", |a| {
        let x = a.tensor(0, "input")?;
        if a.bool_or(usize::MAX, "as_tuple", false)? {
            list(x.nonzero_tuple()?)
        } else {
            t(x.nonzero()?)
        }
    });
    r.add("nonzero_static", |a| {
        let x = a.tensor(0, "input")?;
        let size = a.int(usize::MAX, "size")?;
        t(x.nonzero_static(size, a.int_or(usize::MAX, "fill_value", -1)?)?)
    });
    r.add("argwhere", |a| t(a.tensor(0, "input")?.argwhere()?));
    r.add("take", |a| {
        let x = a.tensor(0, "input")?;
        let i = a.tensor(1, "index")?;
        let out = x.take(&i)?;
        with_out(a, &[&x, &i], Value::Tensor(out))
    });
    r.add("take_along_dim", |a| {
        let x = a.tensor(0, "input")?;
        let i = a.tensor(1, "indices")?;
        t(x.take_along_dim(&i, a.opt_int(2, "dim")?)?)
    });
    r.add("put", |a| {
        let x = a.tensor(0, "input")?;
        let i = a.tensor(1, "index")?;
        let s = a.tensor(2, "source")?;
        t(x.put(&i, &s, a.bool_or(3, "accumulate", false)?)?)
    });
}

fn register_pad(r: &mut Registry) {
    r.add("constant_pad_nd", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.ints(1, "pad")?;
        let v = a.opt_scalar(2, "value")?.unwrap_or(Scalar::Int(0));
        t(x.constant_pad_nd(&p, v)?)
    });
    r.add("nn.functional.pad", |a| {
        let x = a.tensor(0, "input")?;
        let p = a.ints(1, "pad")?;
        let mode = PadMode::parse(&a.opt_str(2, "mode")?.unwrap_or_else(|| "constant".into()))?;
        let v = a.opt_float(3, "value")?;
        t(x.pad(&p, mode, v)?)
    });
    r.add("nn.functional.pixel_shuffle", |a| {
        let x = a.tensor(0, "input")?;
        t(x.pixel_shuffle(a.int(1, "upscale_factor")?)?)
    });
    r.add("nn.functional.pixel_unshuffle", |a| {
        let x = a.tensor(0, "input")?;
        t(x.pixel_unshuffle(a.int(1, "downscale_factor")?)?)
    });
    r.add_all(&["nn.functional.channel_shuffle", "channel_shuffle", "native_channel_shuffle"], |a| {
        let x = a.tensor(0, "input")?;
        t(x.channel_shuffle(a.int(1, "groups")?)?)
    });
}

//! [`default_collate`]: PyTorch's rules for turning a list of samples into one batch.

use crate::sample::Sample;
use magpie_core::ops::shape_ops::stack;
use magpie_core::{Error, Result, Tensor};
use std::sync::Arc;

/// A collate function: a list of samples to one batch (`collate_fn=` of `DataLoader`).
pub type CollateFn = Arc<dyn Fn(Vec<Sample>) -> Result<Sample> + Send + Sync>;

const OP: &str = "default_collate";

/// `torch.utils.data.default_collate`: tensors are stacked along a new first dim (they must have
/// equal shapes), ints become an int64 tensor, floats a float64 tensor, bools a bool tensor,
/// strings stay a list of strings, maps are collated per key and lists and tuples per position
/// (both come back as lists, as in PyTorch). A batch whose samples do not share one structure is
/// an error naming what differed.
///
/// ```
/// use magpie_data::{default_collate, Sample};
/// use magpie_core::{DType, Tensor};
/// let a = Sample::Tuple(vec![Tensor::from_vec(vec![1f32, 2.0], &[2])?.into(), Sample::Int(0)]);
/// let b = Sample::Tuple(vec![Tensor::from_vec(vec![3f32, 4.0], &[2])?.into(), Sample::Int(1)]);
/// let batch = default_collate(vec![a, b])?;
/// let parts = batch.as_list().unwrap();
/// assert_eq!(parts[0].as_tensor().unwrap().shape(), &[2, 2]);
/// assert_eq!(parts[1].as_tensor().unwrap().dtype(), DType::I64);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn default_collate(batch: Vec<Sample>) -> Result<Sample> {
    let first = batch.first().ok_or_else(|| Error::value(OP, "the batch is empty"))?;
    let kind = first.kind();
    if let Some((i, s)) = batch.iter().enumerate().find(|(_, s)| s.kind() != kind) {
        return Err(Error::value(OP, format!("the batch mixes {kind} (entry 0) and {} (entry {i}); every sample must have the same structure", s.kind())));
    }
    match first {
        Sample::Tensor(_) => {
            let ts: Vec<Tensor> = batch.into_iter().filter_map(Sample::into_tensor).collect();
            Ok(Sample::Tensor(stack(&ts, 0)?))
        }
        Sample::Int(_) => {
            let v: Vec<i64> = batch.iter().filter_map(Sample::as_int).collect();
            let n = v.len();
            Ok(Sample::Tensor(Tensor::from_vec(v, &[n])?))
        }
        Sample::Float(_) => {
            let v: Vec<f64> = batch.iter().filter_map(Sample::as_float).collect();
            let n = v.len();
            Ok(Sample::Tensor(Tensor::from_vec(v, &[n])?))
        }
        Sample::Bool(_) => {
            let v: Vec<bool> = batch.iter().filter_map(|s| if let Sample::Bool(b) = s { Some(*b) } else { None }).collect();
            let n = v.len();
            Ok(Sample::Tensor(Tensor::from_vec(v, &[n])?))
        }
        Sample::Str(_) => Ok(Sample::List(batch)),
        Sample::List(_) | Sample::Tuple(_) => {
            let rows: Vec<Vec<Sample>> = batch.into_iter().filter_map(Sample::into_list).collect();
            let size = rows[0].len();
            if rows.iter().any(|r| r.len() != size) {
                let sizes: Vec<usize> = rows.iter().map(Vec::len).collect();
                return Err(Error::value(OP, format!("each element in list of batch should be of equal size (got sizes {sizes:?})")));
            }
            let mut cols: Vec<Vec<Sample>> = (0..size).map(|_| Vec::with_capacity(rows.len())).collect();
            for row in rows {
                for (c, v) in cols.iter_mut().zip(row) {
                    c.push(v);
                }
            }
            let out = cols.into_iter().enumerate().map(|(i, c)| default_collate(c).map_err(|e| nest(e, &format!("position {i}")))).collect::<Result<Vec<_>>>()?;
            Ok(Sample::List(out))
        }
        Sample::Map(_) => {
            let maps: Vec<Vec<(String, Sample)>> = batch.into_iter().filter_map(|s| if let Sample::Map(m) = s { Some(m) } else { None }).collect();
            let keys: Vec<String> = maps[0].iter().map(|(k, _)| k.clone()).collect();
            let mut cols: Vec<Vec<Sample>> = (0..keys.len()).map(|_| Vec::with_capacity(maps.len())).collect();
            for (i, m) in maps.into_iter().enumerate() {
                if m.len() != keys.len() || m.iter().any(|(k, _)| !keys.contains(k)) {
                    let got: Vec<&String> = m.iter().map(|(k, _)| k).collect();
                    return Err(Error::value(OP, format!("the dict at entry {i} has keys {got:?}, entry 0 has {keys:?}")));
                }
                let mut m = m;
                for (j, k) in keys.iter().enumerate() {
                    let pos = m.iter().position(|(mk, _)| mk == k).ok_or_else(|| Error::value(OP, format!("the dict at entry {i} has no key {k:?}")))?;
                    cols[j].push(m.swap_remove(pos).1);
                }
            }
            let out = keys.into_iter().zip(cols).map(|(k, c)| {
                let v = default_collate(c).map_err(|e| nest(e, &format!("key {k:?}")))?;
                Ok((k, v))
            }).collect::<Result<Vec<_>>>()?;
            Ok(Sample::Map(out))
        }
    }
}

/// Says where in the structure an inner collation failed, keeping the error's kind.
fn nest(e: Error, at: &str) -> Error {
    with_context(e, &format!("at {at}"))
}

/// An error with `prefix: ` before its message, keeping its kind and op.
pub(crate) fn with_context(e: Error, prefix: &str) -> Error {
    let wrap = |m: String| format!("{prefix}: {m}");
    match e {
        Error::Shape { op, msg } => Error::Shape { op, msg: wrap(msg) },
        Error::DType { op, msg } => Error::DType { op, msg: wrap(msg) },
        Error::Index { op, msg } => Error::Index { op, msg: wrap(msg) },
        Error::Value { op, msg } => Error::Value { op, msg: wrap(msg) },
        Error::Device { op, msg } => Error::Device { op, msg: wrap(msg) },
        Error::Autograd { op, msg } => Error::Autograd { op, msg: wrap(msg) },
        Error::Unsupported { op, msg } => Error::Unsupported { op, msg: wrap(msg) },
        Error::Io { op, msg } => Error::Io { op, msg: wrap(msg) },
    }
}

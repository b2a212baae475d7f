//! Helpers shared by the distributions: broadcasting, probs/logits conversion, dtype limits.

use magpie_core::ops::shape_ops::broadcast_tensors;
use magpie_core::{DType, Error, Result, Tensor};

/// `torch.distributions.utils.broadcast_all`: the parameters broadcast to one shape.
pub fn broadcast_all(op: &str, ts: &[&Tensor]) -> Result<Vec<Tensor>> {
    for t in ts {
        if !t.dtype().is_float() {
            return Err(Error::dtype(op, format!("{op}: parameters must be floating-point tensors, got {}", t.dtype())));
        }
    }
    let owned: Vec<Tensor> = ts.iter().map(|t| (*t).clone()).collect();
    broadcast_tensors(&owned)
}

/// A scalar tensor of `like`'s dtype and device.
pub fn scalar_like(like: &Tensor, v: f64) -> Result<Tensor> {
    Tensor::scalar_tensor(v, like.dtype(), like.device())
}

/// A tensor of `shape` filled with `v`, in `like`'s dtype and device.
pub fn full_like_shape(like: &Tensor, shape: &[usize], v: f64) -> Result<Tensor> {
    Tensor::full_on(shape, v, like.dtype(), like.device())
}

/// `torch.finfo(dtype).eps`.
pub fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON,
        DType::F16 => 0.0009765625,
        DType::BF16 => 0.0078125,
        _ => f32::EPSILON as f64,
    }
}

/// `torch.finfo(dtype).tiny`.
pub fn tiny(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::MIN_POSITIVE,
        DType::F16 => 6.103515625e-05,
        _ => f32::MIN_POSITIVE as f64,
    }
}

/// `clamp_probs`: probabilities kept inside `[eps, 1 - eps]`.
pub fn clamp_probs(p: &Tensor) -> Result<Tensor> {
    let e = eps(p.dtype());
    p.clamp(Some(e), Some(1.0 - e))
}

/// `probs_to_logits(probs, is_binary)`.
pub fn probs_to_logits(p: &Tensor, is_binary: bool) -> Result<Tensor> {
    let c = clamp_probs(p)?;
    if is_binary {
        c.log()?.sub(&c.neg()?.log1p()?)
    } else {
        c.log()
    }
}

/// `logits_to_probs(logits, is_binary)`.
pub fn logits_to_probs(l: &Tensor, is_binary: bool) -> Result<Tensor> {
    if is_binary {
        l.sigmoid()
    } else {
        l.softmax(-1, None)
    }
}

/// `_sum_rightmost(value, dim)`: sums the rightmost `dim` dimensions.
pub fn sum_rightmost(v: &Tensor, dim: usize) -> Result<Tensor> {
    if dim == 0 {
        return Ok(v.clone());
    }
    // ascending order: magpie-core's sum backward re-inserts the dims in the order given
    let dims: Vec<i64> = (1..=dim as i64).rev().map(|i| -i).collect();
    v.sum_dims(Some(&dims[..]), false, None)
}

/// `shape` as PyTorch prints a tuple: `(2,)`, `(2, 3)`, `()`.
pub fn tuple(shape: &[usize]) -> String {
    match shape.len() {
        0 => "()".into(),
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// A tensor as an f-string prints it: a 0-d tensor as its number, others as `tensor([...])`.
pub fn fmt_value(t: &Tensor) -> String {
    if t.ndim() == 0 {
        if let Ok(v) = t.to_f64_vec() {
            return format!("{:?}", v[0]);
        }
    }
    format!("{t}")
}

/// `sample_shape + batch_shape + event_shape`.
pub fn extended(sample_shape: &[usize], batch: &[usize], event: &[usize]) -> Vec<usize> {
    let mut s = sample_shape.to_vec();
    s.extend_from_slice(batch);
    s.extend_from_slice(event);
    s
}

/// `shape` as the `i64` list `expand`/`reshape` take.
pub fn i64s(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// Expands `t` to `shape` (a view).
pub fn expand_to(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    t.expand(&i64s(shape))
}

//! Shape arithmetic shared by every op: dim wrapping, broadcasting, element counts.

use crate::{Error, Result};

/// Wraps a possibly negative dim into `0..ndim` (a 0-d tensor accepts dims -1 and 0, like PyTorch).
pub fn wrap_dim(op: &str, dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        return Err(Error::index(
            op,
            format!("Dimension out of range (expected to be in range of [{}, {}], but got {dim})", -n, n - 1),
        ));
    }
    Ok(if dim < 0 { (dim + n) as usize } else { dim as usize })
}

/// Wraps a list of dims, rejecting repeats.
pub fn wrap_dims(op: &str, dims: &[i64], ndim: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let w = wrap_dim(op, d, ndim)?;
        if out.contains(&w) {
            return Err(Error::value(op, format!("dim {w} appears multiple times in the list of dims")));
        }
        out.push(w);
    }
    Ok(out)
}

/// The number of elements of a shape (1 for a 0-d shape).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The broadcast shape of two shapes, PyTorch's rules (align right, 1 stretches).
pub fn broadcast_shapes(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::shape(
                op,
                format!(
                    "The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i} (shapes {a:?} and {b:?})"
                ),
            ));
        };
    }
    Ok(out)
}

/// The broadcast shape of many shapes.
pub fn broadcast_all(op: &str, shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let mut out: Vec<usize> = Vec::new();
    for s in shapes {
        out = broadcast_shapes(op, &out, s)?;
    }
    Ok(out)
}

/// Resolves a `view`/`reshape` size list with at most one `-1` against `numel` elements.
pub fn infer_size(op: &str, size: &[i64], numel: usize) -> Result<Vec<usize>> {
    let mut infer = None;
    let mut known: usize = 1;
    for (i, &s) in size.iter().enumerate() {
        if s == -1 {
            if infer.is_some() {
                return Err(Error::value(op, "only one dimension can be inferred"));
            }
            infer = Some(i);
        } else if s < 0 {
            return Err(Error::value(op, format!("invalid shape dimension {s}")));
        } else {
            known = known.checked_mul(s as usize).ok_or_else(|| Error::value(op, "shape is too large"))?;
        }
    }
    let mut out: Vec<usize> = size.iter().map(|&s| s.max(0) as usize).collect();
    match infer {
        Some(i) => {
            if known == 0 || numel % known != 0 {
                return Err(Error::shape(op, format!("shape '{size:?}' is invalid for input of size {numel}")));
            }
            out[i] = numel / known;
        }
        None => {
            if known != numel {
                return Err(Error::shape(op, format!("shape '{size:?}' is invalid for input of size {numel}")));
            }
        }
    }
    Ok(out)
}

/// Checks that sizes are non-negative and converts them.
pub fn check_sizes(op: &str, size: &[i64]) -> Result<Vec<usize>> {
    size.iter()
        .map(|&s| {
            if s < 0 {
                Err(Error::value(op, format!("negative dimension {s} in size {size:?}")))
            } else {
                Ok(s as usize)
            }
        })
        .collect()
}

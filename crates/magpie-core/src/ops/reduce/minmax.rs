//! Extremes: `amax`, `amin`, `aminmax`, `max`/`min` (over everything, over a dim with indices,
//! and elementwise between two tensors), `argmax`, `argmin`. NaN propagates (it is the
//! greatest and the least value), ties pick the first index.

use super::select::take_reduced;
use super::{check_nonempty, map_lines, one_dim, reduce_dims, reduce_rows, reduced_shape};
use crate::autograd::{self, Saved};
use crate::dtype::DType;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// The extreme of a line (max when `max`), the first NaN if there is one.
#[inline]
fn extreme<K: PartialOrd + Copy>(r: &[K], max: bool) -> K {
    let mut m = r[0];
    #[allow(clippy::eq_op)]
    if m != m {
        return m;
    }
    for &v in &r[1..] {
        #[allow(clippy::eq_op)]
        if v != v {
            return v;
        }
        if (max && v > m) || (!max && v < m) {
            m = v;
        }
    }
    m
}

/// The index of a line's extreme: the first NaN, else the first occurrence of the max (min).
#[inline]
pub(crate) fn arg_extreme<K: PartialOrd + Copy>(r: &[K], max: bool) -> usize {
    let mut best = 0;
    let mut m = r[0];
    #[allow(clippy::eq_op)]
    if m != m {
        return 0;
    }
    for (i, &v) in r.iter().enumerate().skip(1) {
        #[allow(clippy::eq_op)]
        if v != v {
            return i;
        }
        if (max && v > m) || (!max && v < m) {
            m = v;
            best = i;
        }
    }
    best
}

fn check_real(op: &str, t: &Tensor) -> Result<()> {
    if t.dtype().is_complex() {
        return Err(Error::dtype(op, format!("{op}(): does not support complex input")));
    }
    Ok(())
}

/// The extreme over `d` (already wrapped), values only, no autograd.
fn extreme_values(op: &str, x: &Tensor, d: &[usize], keepdim: bool, max: bool) -> Result<Tensor> {
    let shape = reduced_shape(x.shape(), d, keepdim);
    if let Some(o) = super::cuda_reduce(x, d, if max { super::RedOp::Max } else { super::RedOp::Min }, 1.0, &shape)? {
        return Ok(o);
    }
    crate::with_key!(op, x.dtype(), K, {
        crate::with_dtype!(x.dtype(), T, {
            let (v, _) = reduce_rows::<K, T>(x, d, |r| T::cast_from(extreme(r, max)))?;
            Tensor::from_vec(v, &shape)
        })
    })
}

/// `(g / count) * mask` with `mask = (x == out)`: the gradient split evenly over the ties,
/// as PyTorch's `amax`/`amin` backward. With `nan_aware`, NaN outputs select the NaN inputs
/// (PyTorch's `evenly_distribute_backward`, used by `max()`/`min()`/`median()`).
pub(crate) fn even_backward(x: &Tensor, out: &Tensor, g: &Tensor, d: &[usize], keepdim: bool, nan_aware: bool) -> Result<Tensor> {
    let (mut o, mut g) = (out.clone(), g.clone());
    if !keepdim {
        for &dd in d {
            o = o.unsqueeze(dd as i64)?;
            g = g.unsqueeze(dd as i64)?;
        }
    }
    let mut mask = x.eq(&o)?;
    if nan_aware {
        // `v != v` marks NaNs on any device
        let both = x.ne(x)?.to_dtype(DType::U8)?.mul(&o.ne(&o)?.to_dtype(DType::U8)?)?;
        mask = mask.to_dtype(DType::U8)?.add(&both)?.ne_scalar(0)?;
    }
    let dims: Vec<i64> = d.iter().map(|&v| v as i64).collect();
    let m = mask.to_dtype(g.dtype())?;
    let count = if x.ndim() == 0 { m.clone() } else { m.sum_dims(Some(&dims), true, None)? };
    g.div(&count)?.mul(&m)
}

fn amax_amin(op: &'static str, x: &Tensor, dims: &[i64], keepdim: bool, max: bool) -> Result<Tensor> {
    check_real(op, x)?;
    let d = reduce_dims(op, x, Some(dims))?;
    check_nonempty(op, x, &d, false)?;
    let out = extreme_values(op, x, &d, keepdim, max)?;
    let sx = Saved::new(op, x);
    let dc = d.clone();
    autograd::record(if max { "Amax" } else { "Amin" }, &[x], &[out.clone()], move |ctx, g| {
        Ok(vec![Some(even_backward(&sx.get()?, &ctx.output(0)?, &g[0], &dc, keepdim, false)?)])
    });
    Ok(out)
}

/// Indices of the extremes along one dim (int64), `keepdim` as PyTorch's `argmax(dim=)`.
fn arg_along(op: &str, x: &Tensor, dim: usize, keepdim: bool, max: bool) -> Result<Tensor> {
    let shape = if x.ndim() == 0 { vec![] } else { reduced_shape(x.shape(), &[dim], keepdim) };
    if let Some((_, idx)) = super::cuda_arg_reduce(x, &[dim], max, &shape, false)? {
        return Ok(idx);
    }
    let idx = crate::with_key!(op, x.dtype(), K, {
        map_lines::<K, i64>(x, dim, 1, |l, o| o[0] = arg_extreme(l, max) as i64)?
    });
    if keepdim || x.ndim() == 0 {
        Ok(idx)
    } else {
        idx.squeeze_dims(&[dim as i64])
    }
}

fn max_min_dim(op: &str, x: &Tensor, dim: i64, keepdim: bool, max: bool) -> Result<(Tensor, Tensor)> {
    check_real(op, x)?;
    let d = one_dim(op, x, dim)?;
    if x.ndim() > 0 {
        check_nonempty(op, x, &[d], false)?;
    }
    let idx = arg_along(op, x, d, keepdim, max)?;
    let vals = take_reduced(x, d, &idx, keepdim)?;
    Ok((vals, idx))
}

fn max_min_all(op: &'static str, x: &Tensor, max: bool) -> Result<Tensor> {
    check_real(op, x)?;
    let d = reduce_dims(op, x, None)?;
    check_nonempty(op, x, &d, true)?;
    let out = extreme_values(op, x, &d, false, max)?;
    let sx = Saved::new(op, x);
    autograd::record(if max { "Max" } else { "Min" }, &[x], &[out.clone()], move |ctx, g| {
        Ok(vec![Some(even_backward(&sx.get()?, &ctx.output(0)?, &g[0], &d, false, true)?)])
    });
    Ok(out)
}

fn argmax_argmin(op: &str, x: &Tensor, dim: Option<i64>, keepdim: bool, max: bool) -> Result<Tensor> {
    check_real(op, x)?;
    match dim {
        Some(dm) => {
            let d = one_dim(op, x, dm)?;
            if x.ndim() > 0 {
                check_nonempty(op, x, &[d], false)?;
            }
            arg_along(op, x, d, keepdim, max)
        }
        None => {
            check_nonempty(op, x, &[], true)?;
            let flat = x.detach().reshape(&[-1])?;
            let r = arg_along(op, &flat, 0, false, max)?;
            if keepdim {
                r.reshape_to(&vec![1; x.ndim()])
            } else {
                Ok(r)
            }
        }
    }
}

/// `torch.maximum(a, b)` (what `torch.max(a, b)` dispatches to).
pub fn maximum_of(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.maximum(b)
}

/// `torch.minimum(a, b)` (what `torch.min(a, b)` dispatches to).
pub fn minimum_of(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.minimum(b)
}

impl Tensor {
    /// `torch.amax(x, dim, keepdim)`: the max over `dims` (all when empty); the gradient is
    /// split evenly between ties.
    pub fn amax(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        amax_amin("amax", self, dims, keepdim, true)
    }
    /// `torch.amin(x, dim, keepdim)`.
    pub fn amin(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        amax_amin("amin", self, dims, keepdim, false)
    }
    /// `torch.aminmax(x, dim=, keepdim=)`: `(min, max)` over one dim or everything.
    pub fn aminmax(&self, dim: Option<i64>, keepdim: bool) -> Result<(Tensor, Tensor)> {
        check_real("aminmax", self)?;
        let d = match dim {
            Some(x) => reduce_dims("aminmax", self, Some(&[x]))?,
            None => reduce_dims("aminmax", self, None)?,
        };
        if self.numel() == 0 && (dim.is_none() || d.iter().any(|&i| self.shape()[i] == 0)) {
            return Err(Error::index("aminmax", "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."));
        }
        let (lo, hi) = match dim {
            Some(x) => (self.amin(&[x], keepdim)?, self.amax(&[x], keepdim)?),
            None => (self.amin(&[], false)?, self.amax(&[], false)?),
        };
        if keepdim && dim.is_none() {
            let ones = vec![1usize; self.ndim()];
            return Ok((lo.reshape_to(&ones)?, hi.reshape_to(&ones)?));
        }
        Ok((lo, hi))
    }
    /// `torch.max(x)`: the largest element (NaN if any), as a 0-d tensor.
    pub fn max(&self) -> Result<Tensor> {
        max_min_all("max", self, true)
    }
    /// `torch.min(x)`.
    pub fn min(&self) -> Result<Tensor> {
        max_min_all("min", self, false)
    }
    /// `torch.max(x, dim, keepdim)`: `(values, indices)`; ties give the first index.
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        max_min_dim("max", self, dim, keepdim, true)
    }
    /// `torch.min(x, dim, keepdim)`: `(values, indices)`.
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        max_min_dim("min", self, dim, keepdim, false)
    }
    /// `torch.argmax(x, dim, keepdim)`; `dim` None looks at the flattened tensor.
    pub fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        argmax_argmin("argmax", self, dim, keepdim, true)
    }
    /// `torch.argmin(x, dim, keepdim)`.
    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        argmax_argmin("argmin", self, dim, keepdim, false)
    }
}

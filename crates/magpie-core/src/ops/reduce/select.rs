//! Picking elements along one dim by index (`take_along_dim`) and its adjoint (adding into
//! a zero tensor at those indices): the gradient path of every value-selecting op here
//! (`max(dim)`, `sort`, `topk`, `kthvalue`, `median`, `mode`, `cummax`, ...).

use crate::autograd;
use crate::backend::cpu;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Splits a shape around `dim` into (outer, size, inner) element counts (0-d is `[1]`).
fn split(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    if shape.is_empty() {
        return (1, 1, 1);
    }
    (shape[..dim].iter().product(), shape[dim], shape[dim + 1..].iter().product())
}

fn check(op: &str, x: &[usize], idx: &[usize], dim: usize) -> Result<()> {
    let ok = x.len() == idx.len() && x.iter().zip(idx).enumerate().all(|(i, (a, b))| i == dim || a == b);
    if !ok && !(x.is_empty() && idx.len() <= 1) && !(idx.is_empty() && x.len() <= 1) {
        return Err(Error::shape(op, format!("index shape {idx:?} does not match input shape {x:?} outside dim {dim}")));
    }
    Ok(())
}

/// `out[.., k, ..] = x[.., idx[.., k, ..], ..]` along `dim`; `idx` (int64) has `x`'s shape
/// except along `dim`. Differentiable in `x` (the gradient adds back at the indices).
pub(crate) fn gather_dim(x: &Tensor, dim: usize, idx: &Tensor) -> Result<Tensor> {
    check("gather", x.shape(), idx.shape(), dim)?;
    let (outer, n, inner) = split(x.shape(), dim);
    let (_, m, _) = split(idx.shape(), dim);
    if let Some(out) = cuda_gather(x, dim, idx)? {
        let (shape, idx_c) = (x.shape().to_vec(), idx.clone());
        autograd::record("Gather", &[x], &[out.clone()], move |_, g| Ok(vec![Some(scatter_add_dim(&shape, dim, &idx_c, &g[0])?)]));
        return Ok(out);
    }
    let iv: Vec<i64> = cpu::to_vec(idx)?;
    if iv.iter().any(|&i| i < 0 || i as usize >= n) {
        return Err(Error::index("gather", format!("index out of range for dimension of size {n}")));
    }
    let out = crate::with_dtype!(x.dtype(), T, {
        let v = cpu::read(x, |xs: &[T]| {
            let mut o = Vec::with_capacity(iv.len());
            for a in 0..outer {
                for k in 0..m {
                    for i in 0..inner {
                        let j = iv[(a * m + k) * inner + i] as usize;
                        o.push(xs[(a * n + j) * inner + i]);
                    }
                }
            }
            o
        })?;
        Tensor::from_vec(v, idx.shape())?
    });
    let (shape, idx_c) = (x.shape().to_vec(), idx.clone());
    autograd::record("Gather", &[x], &[out.clone()], move |_, g| Ok(vec![Some(scatter_add_dim(&shape, dim, &idx_c, &g[0])?)]));
    Ok(out)
}

/// A zero tensor of `shape` with `src` added at `idx` along `dim` (repeated indices add up).
/// Differentiable in `src` (its gradient is `gather_dim`).
pub(crate) fn scatter_add_dim(shape: &[usize], dim: usize, idx: &Tensor, src: &Tensor) -> Result<Tensor> {
    check("scatter_add", shape, idx.shape(), dim)?;
    let (outer, n, inner) = split(shape, dim);
    let (_, m, _) = split(idx.shape(), dim);
    let src_b = {
        let _ng = autograd::no_grad();
        src.broadcast_to(idx.shape())?
    };
    let native = cuda_scatter_add(shape, dim, idx, &src_b)?;
    let out = if let Some(o) = native { o } else { crate::with_dtype!(src.dtype(), T, {
        let iv: Vec<i64> = cpu::to_vec(idx)?;
        let sv: Vec<T> = cpu::to_vec(&src_b)?;
        let mut o = vec![T::default(); crate::shape::numel(shape)];
        for a in 0..outer {
            for k in 0..m {
                for i in 0..inner {
                    let p = (a * m + k) * inner + i;
                    let j = iv[p];
                    if j < 0 || j as usize >= n {
                        return Err(Error::index("scatter_add", format!("index {j} out of range for dimension of size {n}")));
                    }
                    let q = (a * n + j as usize) * inner + i;
                    o[q] = T::from_c128(o[q].to_c128() + sv[p].to_c128());
                }
            }
        }
        Tensor::from_vec(o, shape)?
    }) };
    let idx_c = idx.clone();
    let src_shape = src.shape().to_vec();
    autograd::record("ScatterAdd", &[src], &[out.clone()], move |_, g| {
        Ok(vec![Some(gather_dim(&g[0], dim, &idx_c)?.sum_to_size(&src_shape)?)])
    });
    Ok(out)
}

/// `x.gather(dim, idx)` for values picked by a reduction that may drop `dim` (`keepdim` false):
/// the indices are unsqueezed, the values gathered and the dim squeezed again.
pub(crate) fn take_reduced(x: &Tensor, dim: usize, idx: &Tensor, keepdim: bool) -> Result<Tensor> {
    if x.ndim() == 0 && x.device().is_cuda() {
        // a 0-d tensor's only element (the index is 0): a copy, as the gather kernels take dims
        return x.copy();
    }
    if keepdim || x.ndim() == 0 {
        return gather_dim(x, dim, idx);
    }
    let i = idx.unsqueeze(dim as i64)?;
    gather_dim(x, dim, &i)?.squeeze_dims(&[dim as i64])
}

/// `gather_dim` by the CUDA kernel when `x` and `idx` are CUDA tensors it handles.
fn cuda_gather(x: &Tensor, dim: usize, idx: &Tensor) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() && x.ndim() > 0 && idx.ndim() == x.ndim() {
        return crate::backend::cuda::index::gather(x, dim, idx);
    }
    let _ = (x, dim, idx);
    Ok(None)
}

/// The forward of `scatter_add_dim` by the CUDA kernel (into zeros) when it applies.
fn cuda_scatter_add(shape: &[usize], dim: usize, idx: &Tensor, src: &Tensor) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if src.device().is_cuda() && !shape.is_empty() && idx.ndim() == shape.len() {
        let zeros = Tensor::zeros_on(shape, src.dtype(), src.device())?;
        return crate::backend::cuda::index::scatter_add(&zeros, dim, idx, src);
    }
    let _ = (shape, dim, idx, src);
    Ok(None)
}

//! Per-row gather and scatter-add with fixed indices: `take_rows(x, idx)` picks
//! `x[r, idx[r, j]]`, `put_rows` adds values back at those positions. Each is the other's
//! adjoint, which gives max pooling, max unpooling and embeddings their gradients (to any order).

use super::util::{from_real, real_vec, with_real};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

/// Row-wise indices: `rows` rows of `per_row` indices into rows of `n_src` elements.
#[derive(Clone, Debug)]
pub(crate) struct RowIdx {
    pub rows: usize,
    pub per_row: usize,
    pub n_src: usize,
    pub idx: Vec<usize>,
}

/// `out[r, j] = x[r, idx[r, j]]`, with `x` viewed as `[rows, n_src]`; the result has `out_shape`.
pub(crate) fn take_rows(x: &Tensor, ix: Arc<RowIdx>, out_shape: &[usize]) -> Result<Tensor> {
    if x.numel() != ix.rows * ix.n_src || crate::shape::numel(out_shape) != ix.rows * ix.per_row {
        return Err(Error::shape("gather", format!("tensor {:?} does not fit {} rows of {}", x.shape(), ix.rows, ix.n_src)));
    }
    let native = crate::backend::cuda::rows::take_rows(x, ix.per_row, ix.n_src, &ix.idx, out_shape)?;
    let out = if let Some(o) = native { o } else { take_rows_host(x, &ix, out_shape)? };
    let (ix2, in_shape) = (ix.clone(), x.shape().to_vec());
    autograd::record("Gather", &[x], &[out.clone()], move |_, g| Ok(vec![Some(put_rows(&g[0], ix2.clone(), &in_shape, false)?)]));
    Ok(out)
}

/// [`take_rows`] on the host (CPU tensors, and the fallback for dtypes without a CUDA kernel).
fn take_rows_host(x: &Tensor, ix: &RowIdx, out_shape: &[usize]) -> Result<Tensor> {
    let out = crate::with_dtype!(x.dtype(), T, {
        let v: Vec<T> = x.to_vec()?;
        let mut o = Vec::with_capacity(ix.idx.len());
        for r in 0..ix.rows {
            let src = &v[r * ix.n_src..(r + 1) * ix.n_src];
            o.extend(ix.idx[r * ix.per_row..(r + 1) * ix.per_row].iter().map(|&i| src[i]));
        }
        Tensor::from_vec(o, out_shape)?
    });
    crate::backend::cuda::host_result("host:take_rows", out, x.device())
}

/// `out[r, idx[r, j]] += g[r, j]` into zeros of `out_shape` (`[rows, n_src]` elements); with
/// `assign` the last write wins instead (max_unpool). The gradient is `take_rows` either way.
pub(crate) fn put_rows(g: &Tensor, ix: Arc<RowIdx>, out_shape: &[usize], assign: bool) -> Result<Tensor> {
    if g.numel() != ix.rows * ix.per_row || crate::shape::numel(out_shape) != ix.rows * ix.n_src {
        return Err(Error::shape("scatter_add", format!("tensor {:?} does not fit {} rows of {}", g.shape(), ix.rows, ix.per_row)));
    }
    let native = crate::backend::cuda::rows::put_rows(g, ix.rows, ix.per_row, ix.n_src, &ix.idx, out_shape, assign)?;
    let out = if let Some(o) = native { o } else { put_rows_host(g, &ix, out_shape, assign)? };
    let (ix2, g_shape) = (ix.clone(), g.shape().to_vec());
    autograd::record("ScatterAdd", &[g], &[out.clone()], move |_, gg| Ok(vec![Some(take_rows(&gg[0], ix2.clone(), &g_shape)?)]));
    Ok(out)
}

/// [`put_rows`] on the host (CPU tensors, and the fallback for dtypes without a CUDA kernel).
fn put_rows_host(g: &Tensor, ix: &RowIdx, out_shape: &[usize], assign: bool) -> Result<Tensor> {
    let out = if g.dtype().is_float() {
        with_real!(g.dtype(), R, {
            let v = real_vec::<R>(g)?;
            let mut o = vec![R::default(); ix.rows * ix.n_src];
            for r in 0..ix.rows {
                for j in 0..ix.per_row {
                    let p = r * ix.n_src + ix.idx[r * ix.per_row + j];
                    if assign {
                        o[p] = v[r * ix.per_row + j];
                    } else {
                        o[p] += v[r * ix.per_row + j];
                    }
                }
            }
            from_real(o, out_shape, g.dtype())?
        })
    } else {
        let v: Vec<i64> = g.to_vec()?;
        let mut o = vec![0i64; ix.rows * ix.n_src];
        for r in 0..ix.rows {
            for j in 0..ix.per_row {
                let p = r * ix.n_src + ix.idx[r * ix.per_row + j];
                o[p] = if assign { v[r * ix.per_row + j] } else { o[p].wrapping_add(v[r * ix.per_row + j]) };
            }
        }
        let _ng = autograd::no_grad();
        Tensor::from_vec(o, out_shape)?.to_dtype(g.dtype())?
    };
    crate::backend::cuda::host_result("host:put_rows", out, g.device())
}

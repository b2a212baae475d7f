//! The CPU kernels of `embedding`: whole rows copied out of the table, and their adjoint, rows
//! added back into a zero table. Each records the other as its backward, so embeddings have
//! gradients to any order.
//!
//! The padding row follows PyTorch: the lookup returns it like any row, but the table's gradient
//! skips it. `take(.., zero = Some(p))` and `put(.., skip = Some(p))` are exact adjoints; the
//! embedding itself is `take(.., zero = None)` recorded with `put(.., skip = pad)` as its backward.

use crate::autograd;
use crate::backend::cpu::{self, rows::PAR_MIN};
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;
use std::sync::Arc;

/// Row indices into a table of `n` rows of `d` elements.
#[derive(Debug)]
pub(crate) struct Lookup {
    pub rows: Vec<usize>,
    pub n: usize,
    pub d: usize,
}

/// `out[i, :] = w[rows[i], :]` as a tensor of `out_shape` (`[.., d]`); rows equal to `zero` are
/// zeros instead. Recorded with `put` (skipping `grad_skip`) as the backward.
pub(crate) fn take(w: &Tensor, lk: Arc<Lookup>, zero: Option<usize>, grad_skip: Option<usize>, out_shape: &[usize]) -> Result<Tensor> {
    let (l, d) = (lk.rows.len(), lk.d);
    if w.numel() != lk.n * d || crate::shape::numel(out_shape) != l * d {
        return Err(Error::shape("embedding", format!("table {:?} does not hold {} rows of {d}", w.shape(), lk.n)));
    }
    let out = crate::with_dtype!(w.dtype(), T, {
        let mut o: Vec<T> = vec![T::default(); l * d];
        cpu::read::<T, _>(w, |src| {
            let copy = |(i, dst): (usize, &mut [T])| {
                let r = lk.rows[i];
                if Some(r) != zero {
                    dst.copy_from_slice(&src[r * d..(r + 1) * d]);
                }
            };
            if d == 0 {
            } else if l * d >= PAR_MIN {
                o.par_chunks_mut(d).enumerate().for_each(copy);
            } else {
                o.chunks_mut(d).enumerate().for_each(copy);
            }
        })?;
        Tensor::from_vec(o, out_shape)?
    });
    let out = crate::backend::cuda::host_result("host:embedding", out, w.device())?;
    let table = w.shape().to_vec();
    autograd::record("Embedding", &[w], &[out.clone()], move |_, g| Ok(vec![Some(put(&g[0], lk.clone(), grad_skip, &table)?)]));
    Ok(out)
}

/// The table gradient: zeros of `table_shape` (`[n, d]`) with `g[i, :]` added into row
/// `rows[i]`, in index order (as PyTorch's CPU kernel); rows equal to `skip` get nothing.
pub(crate) fn put(g: &Tensor, lk: Arc<Lookup>, skip: Option<usize>, table_shape: &[usize]) -> Result<Tensor> {
    let (l, d, n) = (lk.rows.len(), lk.d, lk.n);
    if g.numel() != l * d || crate::shape::numel(table_shape) != n * d {
        return Err(Error::shape("embedding_backward", format!("gradient {:?} does not hold {l} rows of {d}", g.shape())));
    }
    if !g.dtype().is_float() {
        return Err(Error::dtype("embedding_backward", format!("\"embedding_backward\" not implemented for '{}'", g.dtype().name())));
    }
    let out = super::util::with_real!(g.dtype(), R, {
        let mut o: Vec<R> = vec![0.0; n * d];
        cpu::read::<R, _>(g, |src| {
            // each task owns a block of table rows and scans every index for its rows
            let fill = |(b, blk): (usize, &mut [R]), rows_per: usize| {
                let lo = b * rows_per;
                for (i, &r) in lk.rows.iter().enumerate() {
                    if r >= lo && r < lo + rows_per && Some(r) != skip {
                        let dst = &mut blk[(r - lo) * d..(r - lo + 1) * d];
                        for (a, &v) in dst.iter_mut().zip(&src[i * d..(i + 1) * d]) {
                            *a += v;
                        }
                    }
                }
            };
            if d == 0 || n == 0 {
            } else if l * d >= PAR_MIN && rayon::current_num_threads() > 1 {
                let rows_per = n.div_ceil(rayon::current_num_threads());
                o.par_chunks_mut(rows_per * d).enumerate().for_each(|c| fill(c, rows_per));
            } else {
                fill((0, &mut o[..]), n);
            }
        })?;
        super::util::from_real(o, table_shape, g.dtype())?
    });
    let out = crate::backend::cuda::host_result("host:embedding_backward", out, g.device())?;
    let gshape = g.shape().to_vec();
    autograd::record("EmbeddingBackward", &[g], &[out.clone()], move |_, gg| Ok(vec![Some(take(&gg[0], lk.clone(), skip, skip, &gshape)?)]));
    Ok(out)
}

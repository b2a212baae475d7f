//! Reductions over dims, split by concept: sums and products, statistics, min/max and arg
//! reductions, logical reductions, norms, order statistics; plus the line helpers they share.

mod elem;
mod logical;
mod minmax;
mod norm;
pub mod order;
mod quickselect;
pub(crate) mod select;
mod stats;
mod sum;

pub(crate) use elem::{abs, isnan, sgn};
pub use minmax::{maximum_of, minimum_of};
pub use sum::{pairwise_sum, pairwise_sum_f32};

use crate::autograd;
use crate::backend::cpu;
use crate::element::Element;
use crate::shape::{wrap_dim, wrap_dims};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// The folding operations with native CUDA kernels (backend/cuda/reduce.rs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
}

/// `op` over `dims` of `t` by the CUDA kernels, when `t` is a CUDA tensor whose dtype has one
/// (results times `scale`, in `t`'s dtype, contiguous with `shape`); None sends the caller to
/// its CPU path.
pub(crate) fn cuda_reduce(t: &Tensor, dims: &[usize], op: RedOp, scale: f64, shape: &[usize]) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if t.device().is_cuda() {
        return crate::backend::cuda::reduce::reduce(t, dims, op, scale, shape);
    }
    let _ = (t, dims, op, scale, shape);
    Ok(None)
}

/// argmax / argmin (`max`) over `dims` of a CUDA tensor: (values if `values`, i64 indices)
/// shaped `shape`; None sends the caller to its CPU path.
pub(crate) fn cuda_arg_reduce(t: &Tensor, dims: &[usize], max: bool, shape: &[usize], values: bool) -> Result<Option<(Option<Tensor>, Tensor)>> {
    #[cfg(feature = "cuda")]
    if t.device().is_cuda() {
        return crate::backend::cuda::reduce::arg_reduce(t, dims, max, shape, values);
    }
    let _ = (t, dims, max, shape, values);
    Ok(None)
}

/// Most dims a reduction accepts (PyTorch keeps reduced dims in a 64-bit mask).
const MAX_DIMS: usize = 64;

/// The dims to reduce (all when `dims` is None or empty, as PyTorch's `dim=None` / `dim=[]`).
pub(crate) fn reduce_dims(op: &str, t: &Tensor, dims: Option<&[i64]>) -> Result<Vec<usize>> {
    if t.ndim() > MAX_DIMS {
        return Err(Error::value(op, format!("only tensors with up to {MAX_DIMS} dims are supported")));
    }
    if t.ndim() == 0 {
        // A 0-d tensor accepts dim 0 / -1 and reduces nothing.
        wrap_dims(op, dims.unwrap_or(&[]), 0)?;
        return Ok(Vec::new());
    }
    match dims {
        None => Ok((0..t.ndim()).collect()),
        Some([]) => Ok((0..t.ndim()).collect()),
        Some(d) => {
            // ascending, so that backward rules re-inserting reduced dims with `unsqueeze` (and
            // kernels walking them) see the same order however the caller listed them
            let mut v = wrap_dims(op, d, t.ndim())?;
            v.sort_unstable();
            Ok(v)
        }
    }
}

/// The output shape of a reduction over `dims`.
pub(crate) fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, &s) in shape.iter().enumerate() {
        if dims.contains(&i) {
            if keepdim {
                out.push(1);
            }
        } else {
            out.push(s);
        }
    }
    out
}

/// Number of elements each output of a reduction over `dims` folds.
pub(crate) fn reduced_count(shape: &[usize], dims: &[usize]) -> usize {
    dims.iter().map(|&d| shape[d]).product()
}

/// Fails (like PyTorch's `amax`/`argmax`) when a reduction without identity meets an empty dim.
pub(crate) fn check_nonempty(op: &str, t: &Tensor, dims: &[usize], all: bool) -> Result<()> {
    if t.numel() != 0 {
        return Ok(());
    }
    if all {
        return Err(Error::index(
            op,
            format!("{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."),
        ));
    }
    for &d in dims {
        if t.shape()[d] == 0 {
            return Err(Error::index(op, format!("{op}(): Expected reduction dim {d} to have non-zero size.")));
        }
    }
    Ok(())
}

/// Runs `f` over each output position's reduced elements: the input is permuted so the reduced
/// dims come last and gathered row-major (no copy when they already are), then each row of
/// `inner` elements is folded by `f`, in parallel when large.
pub fn reduce_rows<T: Element, O: Element>(
    t: &Tensor,
    dims: &[usize],
    f: impl Fn(&[T]) -> O + Sync + Send,
) -> Result<(Vec<O>, usize)> {
    let keep: Vec<usize> = (0..t.ndim()).filter(|d| !dims.contains(d)).collect();
    let perm: Vec<i64> = keep.iter().chain(dims.iter()).map(|&d| d as i64).collect();
    let inner: usize = dims.iter().map(|&d| t.shape()[d]).product();
    let outer: usize = keep.iter().map(|&d| t.shape()[d]).product();
    let p = {
        let _ng = autograd::no_grad();
        if t.ndim() == 0 { t.clone() } else { t.permute(&perm)? }
    };
    let out = cpu::read(&p, |x: &[T]| {
        use rayon::prelude::*;
        if inner == 0 {
            return (0..outer).map(|_| f(&[])).collect::<Vec<O>>();
        }
        use crate::backend::cpu::simd::with_best as simd;
        if outer * inner >= 1 << 15 && outer > 1 {
            // a group of rows per task, so the feature check and task overhead amortize
            let rows = ((1 << 14) / inner).max(1);
            let mut out: Vec<O> = Vec::with_capacity(outer);
            out.par_extend(x.par_chunks(rows * inner).flat_map_iter(|block| simd(|| block.chunks(inner).map(&f).collect::<Vec<O>>())));
            out
        } else {
            simd(|| x.chunks(inner).map(&f).collect())
        }
    })?;
    Ok((out, inner))
}

/// The lines of `t` along `dim` (0-d tensors are one line of one element), each mapped by
/// `f(line, out)` to `m` output elements; the result has `t`'s shape with `dim` of size `m`.
/// Lines are read without a copy when `dim` is the last dim of a contiguous tensor.
pub(crate) fn map_lines<T: Element, O: Element>(
    t: &Tensor,
    dim: usize,
    m: usize,
    f: impl Fn(&[T], &mut [O]) + Sync + Send,
) -> Result<Tensor> {
    let t1 = if t.ndim() == 0 { t.detach().reshape(&[1])? } else { t.detach() };
    let nd = t1.ndim();
    let n = t1.shape()[dim];
    let moved = t1.movedim(&[dim as i64], &[nd as i64 - 1])?;
    let lines: usize = moved.shape()[..nd - 1].iter().product();
    let mut out = vec![O::default(); lines * m];
    cpu::read(&moved, |x: &[T]| {
        use rayon::prelude::*;
        if n == 0 || m == 0 {
            if m > 0 {
                out.chunks_mut(m).for_each(|o| f(&[], o));
            }
            return;
        }
        if lines > 1 && lines * n.max(m) >= 1 << 14 {
            out.par_chunks_mut(m).zip(x.par_chunks(n)).for_each(|(o, l)| f(l, o));
        } else {
            out.chunks_mut(m).zip(x.chunks(n)).for_each(|(o, l)| f(l, o));
        }
    })?;
    let mut shape = moved.shape().to_vec();
    shape[nd - 1] = m;
    let r = Tensor::from_vec(out, &shape)?.movedim(&[nd as i64 - 1], &[dim as i64])?.contiguous()?;
    if t.ndim() == 0 && m == 1 {
        return r.reshape(&[]);
    }
    Ok(r)
}

/// Wraps `dim` for an op over one dim of `t` (0-d tensors take 0 and -1).
pub(crate) fn one_dim(op: &str, t: &Tensor, dim: i64) -> Result<usize> {
    wrap_dim(op, dim, t.ndim())
}

/// The size of `dim` of `t`, 1 for a 0-d tensor.
pub(crate) fn dim_size(t: &Tensor, dim: usize) -> usize {
    if t.ndim() == 0 { 1 } else { t.shape()[dim] }
}

/// Orders values as PyTorch's sorts do: NaN is greater than everything, NaNs equal each other.
#[inline]
pub(crate) fn nan_lt<K: PartialOrd + Copy>(a: K, b: K) -> bool {
    #[allow(clippy::eq_op)]
    let (an, bn) = (a != a, b != b);
    if an {
        false
    } else if bn {
        true
    } else {
        a < b
    }
}

/// A total order for sorting with NaN last (ties compare equal, so stable sorts keep order).
#[inline]
pub(crate) fn nan_cmp<K: PartialOrd + Copy>(a: &K, b: &K) -> std::cmp::Ordering {
    if nan_lt(*a, *b) {
        std::cmp::Ordering::Less
    } else if nan_lt(*b, *a) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}

/// Runs `$body` with `$K` = `i64` for integral dtypes and `f64` for floating ones (exact for
/// every real dtype), so order-based kernels are written once; complex is an error.
#[macro_export]
#[doc(hidden)]
macro_rules! with_key {
    ($op:expr, $dtype:expr, $K:ident, $body:block) => {{
        let d = $dtype;
        if d.is_complex() {
            return Err($crate::Error::unsupported($op, "complex inputs"));
        }
        if d.is_integral() {
            type $K = i64;
            $body
        } else {
            type $K = f64;
            $body
        }
    }};
}

/// The stable sorting permutation of a line (NaN last ascending, first descending; ties keep
/// their order, as PyTorch's `stable=True`).
pub(crate) fn sort_perm<K: PartialOrd + Copy>(l: &[K], descending: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..l.len()).collect();
    if descending {
        idx.sort_by(|&a, &b| nan_cmp(&l[b], &l[a]));
    } else {
        idx.sort_by(|&a, &b| nan_cmp(&l[a], &l[b]));
    }
    idx
}

/// `(values, indices)` of a stable sort of `x` along `dim` (values differentiable).
pub(crate) fn sort_along(op: &str, x: &Tensor, dim: usize, descending: bool) -> Result<(Tensor, Tensor)> {
    let n = dim_size(x, dim);
    if let Some(r) = crate::ops::sort_cuda::sorted_lines(op, x, dim, descending, crate::ops::sort_cuda::Pick::Prefix(n))? {
        return Ok(r);
    }
    let idx = crate::with_key!(op, x.dtype(), K, {
        map_lines::<K, i64>(x, dim, n, |l, o| {
            for (d, s) in o.iter_mut().zip(sort_perm(l, descending)) {
                *d = s as i64;
            }
        })?
    });
    Ok((select::gather_dim(x, dim, &idx)?, idx))
}

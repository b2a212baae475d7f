//! Elementwise maps over one or two strided inputs (two with broadcasting), parallel when large.
//!
//! Inputs that are dense in some dim order with the same strides (contiguous, or the same
//! transpose of contiguous tensors) are mapped slot by slot in storage order and the result
//! keeps their strides, as PyTorch's TensorIterator does; everything else is gathered to
//! row-major first.
//! Broadcast and other strided binary operands are read in place through their strides
//! (dims coalesced), never gathered to the broadcast size.

use super::access::{read, to_vec};
use crate::element::Element;
use crate::layout::Layout;
use crate::shape::broadcast_shapes;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Below this many elements a map runs on one thread (thread wake-up costs more than it saves).
const PAR_MIN: usize = 1 << 15;
/// Elements per parallel task: big enough to amortize scheduling, small enough to balance.
const CHUNK: usize = 1 << 14;

/// Fills `n` outputs with `f(i_range, out_chunk)`, in parallel chunks when large, without
/// initializing the memory first.
fn fill<O: Element>(n: usize, f: impl Fn(usize, &mut [MaybeUninit<O>]) + Sync + Send) -> Vec<O> {
    let mut out: Vec<O> = Vec::with_capacity(n);
    crate::storage::advise_huge_pages(&mut out);
    let spare = &mut out.spare_capacity_mut()[..n];
    if n < PAR_MIN {
        super::simd::with_best(|| f(0, spare));
    } else {
        spare.par_chunks_mut(CHUNK).enumerate().for_each(|(k, c)| super::simd::with_best(|| f(k * CHUNK, c)));
    }
    // SAFETY: `f` writes every element of every chunk (each caller's loop covers its chunk).
    unsafe { out.set_len(n) };
    out
}

/// `out[i] = f(x[i])`, parallel over chunks when large.
pub fn par_map<I: Element, O: Element>(x: &[I], f: impl Fn(I) -> O + Sync + Send) -> Vec<O> {
    fill(x.len(), |start, out| {
        let n = out.len();
        for (o, &v) in out.iter_mut().zip(&x[start..start + n]) {
            o.write(f(v));
        }
    })
}

/// `out[i] = f(x[i], y[i])`, parallel over chunks when large.
fn par_zip<A: Element, B: Element, O: Element>(x: &[A], y: &[B], f: impl Fn(A, B) -> O + Sync + Send) -> Vec<O> {
    fill(x.len(), |start, out| {
        let n = out.len();
        for ((o, &p), &q) in out.iter_mut().zip(&x[start..start + n]).zip(&y[start..start + n]) {
            o.write(f(p, q));
        }
    })
}

/// Runs `f` on the storage slots a dense layout of `t` covers (in storage order), if `t` is of
/// type `T` and dense; `None` otherwise.
fn read_dense<T: Element, R>(t: &Tensor, f: impl FnOnce(&[T]) -> R) -> Result<Option<R>> {
    let l = t.layout();
    if t.dtype() != T::DTYPE || !l.is_dense() {
        return Ok(None);
    }
    let (lo, hi) = l.storage_span();
    let g = t.storage().read();
    let s = match &*g {
        Storage::Cpu(c) => c,
        Storage::Cuda(_) => return Err(crate::backend::cuda::cpu_only("read")),
    };
    let v = T::slice(s).ok_or_else(|| Error::dtype("read", "storage dtype mismatch"))?;
    Ok(Some(f(&v[lo..hi])))
}

/// The layout of a result that keeps a dense input's strides, at offset 0.
fn same_order(l: &Layout) -> Layout {
    let lo = l.storage_span().0;
    Layout { shape: l.shape.clone(), strides: l.strides.clone(), offset: l.offset - lo }
}

/// A new tensor `f(t)` computed in type `I`, stored as `O` (keeping `t`'s memory order when dense).
pub fn map_unary<I: Element, O: Element>(t: &Tensor, f: impl Fn(I) -> O + Sync + Send) -> Result<Tensor> {
    if !t.is_contiguous() {
        if let Some(out) = read_dense(t, |x: &[I]| par_map(x, &f))? {
            return Tensor::from_vec_layout(out, same_order(t.layout()));
        }
    }
    let out = read(t, |x: &[I]| par_map(x, &f))?;
    Tensor::from_vec(out, t.shape())
}

/// A new tensor from a block kernel `k(x_block, out_block)` over `t`'s elements as `T` (cast
/// first if `t` is of another type), in parallel blocks when large, keeping `t`'s memory order
/// when dense. For kernels that must be compiled as one `simd_kernel!` function to vectorize.
pub fn map_unary_block<T: Element>(t: &Tensor, k: impl Fn(&[T], &mut [MaybeUninit<T>]) + Sync + Send) -> Result<Tensor> {
    let run = |x: &[T]| fill(x.len(), |start, out| k(&x[start..start + out.len()], out));
    if !t.is_contiguous() {
        if let Some(out) = read_dense(t, run)? {
            return Tensor::from_vec_layout(out, same_order(t.layout()));
        }
    }
    let out = read(t, run)?;
    Tensor::from_vec(out, t.shape())
}

/// [`map_unary_block`] for two inputs of the same shape: `k(a_block, b_block, out_block)`.
/// Inputs in the same dense memory order are read in place (the result keeps it); others are
/// gathered row-major first.
pub fn map_binary_block<T: Element>(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    k: impl Fn(&[T], &[T], &mut [MaybeUninit<T>]) + Sync + Send,
) -> Result<Tensor> {
    if a.shape() != b.shape() {
        return Err(Error::shape(op, format!("shapes {:?} and {:?} differ", a.shape(), b.shape())));
    }
    let run = |x: &[T], y: &[T]| fill(x.len(), |start, out| k(&x[start..start + out.len()], &y[start..start + out.len()], out));
    if a.strides() == b.strides() && !(a.is_contiguous() && b.is_contiguous()) {
        if let Some(Some(out)) = read_dense(a, |x: &[T]| read_dense(b, |y: &[T]| run(x, y)))?.transpose()? {
            return Tensor::from_vec_layout(out, same_order(a.layout()));
        }
    }
    let out = read(a, |x: &[T]| read(b, |y: &[T]| run(x, y)))??;
    Tensor::from_vec(out, a.shape())
}

/// `f` applied to the elements of `t` as `I`, results collected row-major into a vector.
pub fn map_unary_into<I: Element, O: Element>(t: &Tensor, f: impl Fn(I) -> O + Sync + Send) -> Result<Vec<O>> {
    read(t, |x: &[I]| par_map(x, &f))
}

/// A new tensor `f(a, b)` over the broadcast shape, inputs read as `A` and `B`.
pub fn map_binary<A: Element, B: Element, O: Element>(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(A, B) -> O + Sync + Send,
) -> Result<Tensor> {
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let same_shape = a.shape() == shape.as_slice() && b.shape() == shape.as_slice();
    // same dense memory order: map storage slots directly, keep the order
    if same_shape && a.strides() == b.strides() && !(a.is_contiguous() && b.is_contiguous()) {
        let r = read_dense(a, |x: &[A]| read_dense(b, |y: &[B]| par_zip(x, y, &f)))?;
        if let Some(Some(out)) = r.transpose()? {
            return Tensor::from_vec_layout(out, same_order(a.layout()));
        }
    }
    if same_shape && a.is_contiguous() && b.is_contiguous() {
        let out: Vec<O> = read(a, |x: &[A]| read(b, |y: &[B]| par_zip(x, y, &f)))??;
        return Tensor::from_vec(out, &shape);
    }
    // everything else (broadcasting, strided views): read operands in place through their strides
    let out = with_operand(a, &shape, |xa: &[A], la: &Layout| {
        with_operand(b, &shape, |xb: &[B], lb: &Layout| strided_map(&shape, xa, la, xb, lb, &f))
    })??;
    Tensor::from_vec(out, &shape)
}

/// Runs `f` on `t`'s elements as `&[T]` with a layout broadcast to `shape`: the storage itself
/// when it already holds `T`, else a cast contiguous copy of `t`.
fn with_operand<T: Element, R>(t: &Tensor, shape: &[usize], f: impl FnOnce(&[T], &Layout) -> R) -> Result<R> {
    {
        let guard = t.storage().read();
        let s = match &*guard {
            Storage::Cpu(c) => c,
            Storage::Cuda(_) => return Err(crate::backend::cuda::cpu_only("read")),
        };
        if let Some(v) = T::slice(s) {
            return Ok(f(v, &broadcast_layout(t.layout(), shape)));
        }
    }
    let v: Vec<T> = to_vec(t)?;
    Ok(f(&v, &broadcast_layout(&Layout::contiguous(t.shape()), shape)))
}

/// `l` viewed with `shape` (right-aligned; stretched and missing dims get stride 0).
fn broadcast_layout(l: &Layout, shape: &[usize]) -> Layout {
    let lead = shape.len() - l.ndim();
    let strides = (0..shape.len())
        .map(|d| if d < lead || (l.shape[d - lead] == 1 && shape[d] != 1) { 0 } else { l.strides[d - lead] })
        .collect();
    Layout { shape: shape.to_vec(), strides, offset: l.offset }
}

/// Drops size-1 dims and merges dims that are contiguous with their inner neighbour in both
/// layouts, so that a dense or row-broadcast map runs as few long rows.
fn coalesce(shape: &[usize], sa: &[usize], sb: &[usize]) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let (mut s, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue;
        }
        if let (Some(&ls), Some(&la), Some(&lb)) = (s.last(), a.last(), b.last()) {
            if la == sa[d] * shape[d] && lb == sb[d] * shape[d] {
                let n = s.len() - 1;
                s[n] = ls * shape[d];
                a[n] = sa[d];
                b[n] = sb[d];
                continue;
            }
        }
        s.push(shape[d]);
        a.push(sa[d]);
        b.push(sb[d]);
    }
    (s, a, b)
}

/// Fills `o` with `f` over one row of `o.len()` elements starting at storage positions `pa`, `pb`.
#[inline]
fn map_row<A: Element, B: Element, O: Element>(
    o: &mut [O],
    xa: &[A],
    pa: usize,
    ia: usize,
    xb: &[B],
    pb: usize,
    ib: usize,
    f: &(impl Fn(A, B) -> O + Sync + Send),
) {
    let n = o.len();
    match (ia, ib) {
        (1, 1) => {
            for ((o, &p), &q) in o.iter_mut().zip(&xa[pa..pa + n]).zip(&xb[pb..pb + n]) {
                *o = f(p, q);
            }
        }
        (1, 0) => {
            let q = xb[pb];
            for (o, &p) in o.iter_mut().zip(&xa[pa..pa + n]) {
                *o = f(p, q);
            }
        }
        (0, 1) => {
            let p = xa[pa];
            for (o, &q) in o.iter_mut().zip(&xb[pb..pb + n]) {
                *o = f(p, q);
            }
        }
        _ => {
            for (k, o) in o.iter_mut().enumerate() {
                *o = f(xa[pa + k * ia], xb[pb + k * ib]);
            }
        }
    }
}

fn strided_map<A: Element, B: Element, O: Element>(
    shape: &[usize],
    xa: &[A],
    la: &Layout,
    xb: &[B],
    lb: &Layout,
    f: &(impl Fn(A, B) -> O + Sync + Send),
) -> Vec<O> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Vec::new();
    }
    let (s, sa, sb) = coalesce(shape, &la.strides, &lb.strides);
    let mut out = vec![O::default(); n];
    let nd = s.len();
    if nd == 0 {
        out[0] = f(xa[la.offset], xb[lb.offset]);
        return out;
    }
    let inner = s[nd - 1];
    let (ia, ib) = (sa[nd - 1], sb[nd - 1]);
    let rows = n / inner;
    let row_start = |r: usize| -> (usize, usize) {
        let (mut rem, mut pa, mut pb) = (r, la.offset, lb.offset);
        for d in (0..nd - 1).rev() {
            let i = rem % s[d];
            rem /= s[d];
            pa += i * sa[d];
            pb += i * sb[d];
        }
        (pa, pb)
    };
    if n < PAR_MIN {
        for (r, o) in out.chunks_mut(inner).enumerate() {
            let (pa, pb) = row_start(r);
            map_row(o, xa, pa, ia, xb, pb, ib, f);
        }
    } else if rows >= 64 {
        out.par_chunks_mut(inner).enumerate().for_each(|(r, o)| {
            let (pa, pb) = row_start(r);
            map_row(o, xa, pa, ia, xb, pb, ib, f);
        });
    } else {
        // few long rows: split each row into pieces
        const PIECE: usize = 1 << 14;
        for (r, row) in out.chunks_mut(inner).enumerate() {
            let (pa, pb) = row_start(r);
            row.par_chunks_mut(PIECE).enumerate().for_each(|(k, o)| {
                let off = k * PIECE;
                map_row(o, xa, pa + off * ia, ia, xb, pb + off * ib, ib, f);
            });
        }
    }
    out
}

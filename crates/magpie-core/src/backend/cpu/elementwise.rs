//! Elementwise maps over one or two strided inputs (two with broadcasting), parallel when large.
//!
//! Inputs that are dense in some dim order with the same strides (contiguous, or the same
//! transpose of contiguous tensors) are mapped slot by slot in storage order and the result
//! keeps their strides, as PyTorch's TensorIterator does; everything else is gathered to
//! row-major first.

use super::access::read;
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
    let spare = &mut out.spare_capacity_mut()[..n];
    if n < PAR_MIN {
        f(0, spare);
    } else {
        spare.par_chunks_mut(CHUNK).enumerate().for_each(|(k, c)| f(k * CHUNK, c));
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
        Storage::Cuda(c) => match *c {},
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
    let out: Vec<O> = if same_shape {
        read(a, |x: &[A]| read(b, |y: &[B]| par_zip(x, y, &f)))??
    } else if b.numel() == 1 {
        let q = read(b, |y: &[B]| y[0])?;
        let ab = a.broadcast_to(&shape)?;
        read(&ab, |x: &[A]| par_map(x, |p| f(p, q)))?
    } else if a.numel() == 1 {
        let p = read(a, |x: &[A]| x[0])?;
        let bb = b.broadcast_to(&shape)?;
        read(&bb, |y: &[B]| par_map(y, |q| f(p, q)))?
    } else {
        let ab = a.broadcast_to(&shape)?;
        let bb = b.broadcast_to(&shape)?;
        read(&ab, |x: &[A]| read(&bb, |y: &[B]| par_zip(x, y, &f)))??
    };
    Tensor::from_vec(out, &shape)
}

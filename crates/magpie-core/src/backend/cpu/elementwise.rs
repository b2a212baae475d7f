//! Elementwise maps over one or two strided inputs (two with broadcasting), parallel when large.

use super::access::read;
use crate::element::Element;
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;
use crate::Result;
use rayon::prelude::*;

/// Below this many elements a map runs on one thread (thread wake-up costs more than it saves).
const PAR_MIN: usize = 1 << 15;

/// `out[i] = f(x[i])`, parallel over chunks when large.
pub fn par_map<I: Element, O: Element>(x: &[I], f: impl Fn(I) -> O + Sync + Send) -> Vec<O> {
    if x.len() < PAR_MIN {
        return x.iter().map(|&v| f(v)).collect();
    }
    let mut out = vec![O::default(); x.len()];
    out.par_chunks_mut(1 << 14).zip(x.par_chunks(1 << 14)).for_each(|(o, i)| {
        for (o, &i) in o.iter_mut().zip(i) {
            *o = f(i);
        }
    });
    out
}

/// A new contiguous tensor `f(t)` computed in type `I`, stored as `O`.
pub fn map_unary<I: Element, O: Element>(t: &Tensor, f: impl Fn(I) -> O + Sync + Send) -> Result<Tensor> {
    let out = read(t, |x: &[I]| par_map(x, &f))?;
    Tensor::from_vec(out, t.shape())
}

/// `f` applied to the elements of `t` as `I`, results collected into a vector.
pub fn map_unary_into<I: Element, O: Element>(t: &Tensor, f: impl Fn(I) -> O + Sync + Send) -> Result<Vec<O>> {
    read(t, |x: &[I]| par_map(x, &f))
}

/// A new contiguous tensor `f(a, b)` over the broadcast shape, inputs read as `A` and `B`.
pub fn map_binary<A: Element, B: Element, O: Element>(
    op: &str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(A, B) -> O + Sync + Send,
) -> Result<Tensor> {
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let n: usize = shape.iter().product();
    let out: Vec<O> = if a.shape() == shape.as_slice() && b.shape() == shape.as_slice() {
        read(a, |x: &[A]| {
            read(b, |y: &[B]| {
                if n < PAR_MIN {
                    x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect()
                } else {
                    let mut out = vec![O::default(); n];
                    out.par_chunks_mut(1 << 14)
                        .zip(x.par_chunks(1 << 14).zip(y.par_chunks(1 << 14)))
                        .for_each(|(o, (x, y))| {
                            for ((o, &p), &q) in o.iter_mut().zip(x).zip(y) {
                                *o = f(p, q);
                            }
                        });
                    out
                }
            })
        })??
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
        read(&ab, |x: &[A]| read(&bb, |y: &[B]| x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect::<Vec<O>>()))??
    };
    Tensor::from_vec(out, &shape)
}

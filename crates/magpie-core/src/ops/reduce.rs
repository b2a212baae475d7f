//! Reductions over dims: `sum`, `mean`, and `sum_to_size` (how broadcasting gradients are reduced).

use crate::autograd;
use crate::backend::cpu;
use crate::dtype::DType;
use crate::element::Element;
use crate::shape::wrap_dims;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// The dims to reduce (all when `dims` is None or empty, as PyTorch's `dim=None` / `dim=[]`).
pub(crate) fn reduce_dims(op: &str, t: &Tensor, dims: Option<&[i64]>) -> Result<Vec<usize>> {
    if t.ndim() == 0 {
        // A 0-d tensor accepts dim 0 / -1 and reduces nothing.
        wrap_dims(op, dims.unwrap_or(&[]), 0)?;
        return Ok(Vec::new());
    }
    match dims {
        None => Ok((0..t.ndim()).collect()),
        Some([]) => Ok((0..t.ndim()).collect()),
        Some(d) => wrap_dims(op, d, t.ndim()),
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

/// Runs `f` over each output position's reduced elements: the input is permuted so the reduced
/// dims come last and gathered row-major, then each row of `inner` elements is folded by `f`.
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
        if outer * inner >= 1 << 15 && outer > 1 {
            x.par_chunks(inner).map(&f).collect()
        } else {
            x.chunks(inner).map(&f).collect()
        }
    })?;
    Ok((out, inner))
}

impl Tensor {
    /// `torch.sum(x, dim, keepdim, dtype)`; `dims` None sums everything. Integers and bool sum as int64.
    pub fn sum_dims(&self, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let d = reduce_dims("sum", self, dims)?;
        let out_dt = dtype.unwrap_or(if self.dtype().is_integral() { DType::I64 } else { self.dtype() });
        let src = if out_dt != self.dtype() { self.to_dtype(out_dt)? } else { self.clone() };
        let shape = reduced_shape(self.shape(), &d, keepdim);
        let out = match out_dt {
            d2 if d2.is_integral() => crate::with_dtype!(d2, T, {
                let (v, _) = reduce_rows::<i64, T>(&src, &d, |r| T::from_i64(r.iter().fold(0i64, |a, &b| a.wrapping_add(b))))?;
                Tensor::from_vec(v, &shape)?
            }),
            DType::F64 => {
                let (v, _) = reduce_rows::<f64, f64>(&src, &d, |r| pairwise_sum(r))?;
                Tensor::from_vec(v, &shape)?
            }
            d2 if d2.is_complex() => crate::with_dtype!(d2, T, {
                let (v, _) = reduce_rows::<num_complex::Complex64, T>(&src, &d, |r| T::from_c128(r.iter().sum()))?;
                Tensor::from_vec(v, &shape)?
            }),
            d2 => crate::with_dtype!(d2, T, {
                let (v, _) = reduce_rows::<f32, T>(&src, &d, |r| T::from_f64(pairwise_sum_f32(r) as f64))?;
                Tensor::from_vec(v, &shape)?
            }),
        };
        let in_shape = self.shape().to_vec();
        let (dims_c, kd) = (d.clone(), keepdim);
        autograd::record("Sum", &[&src], &[out.clone()], move |_, g| {
            let mut g = g[0].clone();
            if !kd {
                for &dd in &dims_c {
                    g = g.unsqueeze(dd as i64)?;
                }
            }
            Ok(vec![Some(g.broadcast_to(&in_shape)?.copy()?)])
        });
        Ok(out)
    }
    /// `x.sum()`: the sum of all elements as a 0-d tensor.
    pub fn sum(&self) -> Result<Tensor> {
        self.sum_dims(None, false, None)
    }
    /// `torch.mean(x, dim, keepdim, dtype)`: floating and complex inputs only, as in PyTorch.
    pub fn mean_dims(&self, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let dt = dtype.unwrap_or(self.dtype());
        if !(dt.is_float() || dt.is_complex()) {
            return Err(Error::dtype(
                "mean",
                format!("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}", dt.name()),
            ));
        }
        let d = reduce_dims("mean", self, dims)?;
        let n: usize = d.iter().map(|&i| self.shape()[i]).product();
        self.sum_dims(dims, keepdim, Some(dt))?.div_scalar(n as f64)
    }
    /// `x.mean()` over all elements.
    pub fn mean(&self) -> Result<Tensor> {
        self.mean_dims(None, false, None)
    }
    /// `x.sum_to_size(shape)`: sums broadcast dims away so the result has `shape` (the
    /// adjoint of broadcasting).
    pub fn sum_to_size(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let nd = self.ndim();
        if shape.len() > nd {
            return Err(Error::shape("sum_to_size", format!("size {shape:?} is not expandable to size {:?}", self.shape())));
        }
        let lead = nd - shape.len();
        let mut dims: Vec<i64> = (0..lead as i64).collect();
        for (i, &s) in shape.iter().enumerate() {
            let have = self.shape()[lead + i];
            if s == 1 && have != 1 {
                dims.push((lead + i) as i64);
            } else if s != have {
                return Err(Error::shape("sum_to_size", format!("size {shape:?} is not expandable to size {:?}", self.shape())));
            }
        }
        let s = self.sum_dims(Some(&dims), true, None)?;
        let target: Vec<i64> = shape.iter().map(|&x| x as i64).collect();
        s.reshape(&target)
    }
}

/// Pairwise (cascade) summation in f64: accurate and vectorizable.
pub fn pairwise_sum(x: &[f64]) -> f64 {
    if x.len() <= 64 {
        let mut acc = [0f64; 4];
        let chunks = x.chunks_exact(4);
        let rem = chunks.remainder();
        for c in chunks {
            for k in 0..4 {
                acc[k] += c[k];
            }
        }
        let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        for &v in rem {
            s += v;
        }
        return s;
    }
    let m = x.len() / 2;
    pairwise_sum(&x[..m]) + pairwise_sum(&x[m..])
}

/// Pairwise summation of f32 values, accumulating in f32 like PyTorch's CPU kernels.
pub fn pairwise_sum_f32(x: &[f32]) -> f32 {
    if x.len() <= 128 {
        let mut acc = [0f32; 8];
        let chunks = x.chunks_exact(8);
        let rem = chunks.remainder();
        for c in chunks {
            for k in 0..8 {
                acc[k] += c[k];
            }
        }
        let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for &v in rem {
            s += v;
        }
        return s;
    }
    let m = x.len() / 2;
    pairwise_sum_f32(&x[..m]) + pairwise_sum_f32(&x[m..])
}

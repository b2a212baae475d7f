//! Sums and products: `sum`, `nansum`, `mean`, `nanmean`, `prod`, and `sum_to_size` (how
//! broadcasting gradients are reduced).

use crate::autograd::{self, Saved};
use crate::backend::cpu;
use crate::dtype::DType;
use crate::element::Element;
use super::{reduce_dims, reduce_rows, reduced_shape};
use crate::tensor::Tensor;
use crate::{Error, Result};

impl Tensor {
    /// `torch.sum(x, dim, keepdim, dtype)`; `dims` None sums everything. Integers and bool sum as int64.
    pub fn sum_dims(&self, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let _prof = crate::profiler::op("sum", &[self]);
        if let Some(c) = crate::amp::opt_dtype("sum", self, dtype)? {
            return c.args.0.sum_dims(dims, keepdim, c.args.1);
        }
        let d = reduce_dims("sum", self, dims)?;
        let out_dt = dtype.unwrap_or(if self.dtype().is_integral() { DType::I64 } else { self.dtype() });
        let src = if out_dt != self.dtype() { self.to_dtype(out_dt)? } else { self.clone() };
        let shape = reduced_shape(self.shape(), &d, keepdim);
        let out = match super::cuda_reduce(&src, &d, super::RedOp::Sum, 1.0, &shape)? {
            Some(o) => o,
            None => match out_dt {
            DType::F32 if fast_sum_applies(&src, &d) => Tensor::from_vec(fast_sum_f32(&src, &d)?, &shape)?,
            d2 if d2.is_integral() => crate::with_dtype!(d2, T, {
                let (v, _) = reduce_rows::<i64, T>(&src, &d, |r| T::from_i64(r.iter().fold(0i64, |a, &b| a.wrapping_add(b))))?;
                Tensor::from_vec(v, &shape)?
            }),
            DType::F64 => {
                let (v, _) = reduce_rows::<f64, f64>(&src, &d, par_sum_f64)?;
                Tensor::from_vec(v, &shape)?
            }
            d2 if d2.is_complex() => crate::with_dtype!(d2, T, {
                let (v, _) = reduce_rows::<num_complex::Complex64, T>(&src, &d, |r| T::from_c128(r.iter().sum()))?;
                Tensor::from_vec(v, &shape)?
            }),
            d2 => crate::with_dtype!(d2, T, {
                let (v, _) = reduce_rows::<f32, T>(&src, &d, |r| T::from_f64(par_sum_f32(r) as f64))?;
                Tensor::from_vec(v, &shape)?
            }),
            },
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
        let _prof = crate::profiler::op("mean", &[self]);
        let dt = dtype.unwrap_or(self.dtype());
        if !(dt.is_float() || dt.is_complex()) {
            return Err(Error::dtype(
                "mean",
                format!("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}", dt.name()),
            ));
        }
        let d = reduce_dims("mean", self, dims)?;
        let n: usize = d.iter().map(|&i| self.shape()[i]).product();
        if self.device().is_cuda() && dt.is_float() {
            // one pass: the kernel scales the sums
            let src = if dt != self.dtype() { self.to_dtype(dt)? } else { self.clone() };
            let shape = reduced_shape(self.shape(), &d, keepdim);
            if let Some(out) = super::cuda_reduce(&src, &d, super::RedOp::Sum, 1.0 / n as f64, &shape)? {
                let in_shape = self.shape().to_vec();
                autograd::record("Mean", &[&src], &[out.clone()], move |_, g| {
                    let mut g = g[0].clone();
                    if !keepdim {
                        for &dd in &d {
                            g = g.unsqueeze(dd as i64)?;
                        }
                    }
                    Ok(vec![Some(g.broadcast_to(&in_shape)?.div_scalar(n as f64)?)])
                });
                return Ok(out);
            }
        }
        self.sum_dims(dims, keepdim, Some(dt))?.div_scalar(n as f64)
    }
    /// `x.mean()` over all elements.
    pub fn mean(&self) -> Result<Tensor> {
        self.mean_dims(None, false, None)
    }
    /// `torch.nansum(x, dim, keepdim, dtype)`: `sum` with NaNs counted as zero.
    pub fn nansum_dims(&self, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::dtype("nansum", "nansum does not support complex inputs"));
        }
        if self.dtype().is_integral() {
            return self.sum_dims(dims, keepdim, dtype);
        }
        let zero = Tensor::scalar_tensor(0i64, self.dtype(), self.device())?;
        super::isnan(self)?.where_(&zero, self)?.sum_dims(dims, keepdim, dtype)
    }
    /// `torch.nanmean(x, dim, keepdim, dtype)`: the mean of the non-NaN elements.
    pub fn nanmean_dims(&self, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        if !(self.dtype().is_float() || self.dtype().is_complex()) {
            return Err(Error::dtype(
                "nanmean",
                format!("nanmean(): expected input to have floating point or complex dtype but got {}", self.dtype().name()),
            ));
        }
        let count = self.eq(self)?.sum_dims(dims, keepdim, None)?;
        self.nansum_dims(dims, keepdim, dtype)?.div(&count)
    }
    /// `torch.prod(x, dim, keepdim, dtype)`: the product over one dim, or over all elements when
    /// `dim` is None. Integers and bool multiply as int64; the empty product is 1.
    pub fn prod_dim(&self, dim: Option<i64>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let _prof = crate::profiler::op("prod", &[self]);
        if let Some(c) = crate::amp::opt_dtype("prod", self, dtype)? {
            return c.args.0.prod_dim(dim, keepdim, c.args.1);
        }
        let out_dt = dtype.unwrap_or(if self.dtype().is_integral() { DType::I64 } else { self.dtype() });
        let src = if out_dt != self.dtype() { self.to_dtype(out_dt)? } else { self.clone() };
        let d = match dim {
            Some(x) => reduce_dims("prod", self, Some(&[x]))?,
            None => reduce_dims("prod", self, None)?,
        };
        let shape = reduced_shape(self.shape(), &d, keepdim && dim.is_some());
        let native = super::cuda_reduce(&src, &d, super::RedOp::Prod, 1.0, &shape)?;
        let out = if let Some(o) = native { o } else { crate::with_dtype!(out_dt, T, {
            let v: Vec<T> = if out_dt.is_integral() {
                reduce_rows::<i64, T>(&src, &d, |r| T::from_i64(r.iter().fold(1i64, |a, &b| a.wrapping_mul(b))))?.0
            } else if out_dt.is_complex() {
                reduce_rows::<num_complex::Complex64, T>(&src, &d, |r| T::from_c128(r.iter().product()))?.0
            } else {
                reduce_rows::<f64, T>(&src, &d, |r| T::from_f64(r.iter().product()))?.0
            };
            Tensor::from_vec(v, &shape)?
        }) };
        if !(out_dt.is_float() || out_dt.is_complex()) || !src.requires_grad() {
            return Ok(out);
        }
        let sx = Saved::new("prod", &src);
        let (dims_c, kd) = (d.clone(), keepdim && dim.is_some());
        autograd::record("Prod", &[&src], &[out.clone()], move |ctx, g| {
            let x = sx.get()?;
            let o = ctx.output(0)?;
            let (mut g, mut o) = (g[0].clone(), o);
            if !kd {
                for &dd in &dims_c {
                    g = g.unsqueeze(dd as i64)?;
                    o = o.unsqueeze(dd as i64)?;
                }
            }
            // the branch needs the values on the host (a CUDA input is downloaded)
            let xh = if x.device().is_cuda() { x.detach().to_device(crate::Device::Cpu)? } else { x.clone() };
            let has_zero = cpu::read(&xh, |v: &[num_complex::Complex64]| v.iter().any(|z| z.re == 0.0 && z.im == 0.0))?;
            if !has_zero {
                // d/dx_i prod = prod / x_i when nothing is zero (and this stays differentiable)
                return Ok(vec![Some(g.mul(&o.div(&x)?)?)]);
            }
            // With zeros: the product of all the other elements of each line, exactly.
            let excl = if x.ndim() == 0 {
                x.ones_like()?
            } else if dims_c.len() == 1 {
                crate::backend::cuda::or_on_cpu(&x, |x| prod_others(x, dims_c[0]))?
            } else {
                crate::backend::cuda::or_on_cpu(&x.reshape(&[-1])?, |x| prod_others(x, 0))?.reshape_to(x.shape())?
            };
            Ok(vec![Some(g.mul(&excl)?)])
        });
        Ok(out)
    }
    /// `x.sum_to_size(shape)`: sums broadcast dims away so the result has `shape` (the
    /// adjoint of broadcasting).
    pub fn sum_to_size(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        if self.device().is_cuda() {
            // CUDA tensors: natively once sums have a CUDA kernel, else on the CPU (autograd needs it)
            return crate::backend::cuda::or_on_cpu(self, |t| t.sum_to_size_here(shape));
        }
        self.sum_to_size_here(shape)
    }
    fn sum_to_size_here(&self, shape: &[usize]) -> Result<Tensor> {
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

/// For each element, the product of the other elements of its line along `dim` (prefix and
/// suffix products, so zeros are handled exactly).
fn prod_others(x: &Tensor, dim: usize) -> Result<Tensor> {
    let n = super::dim_size(x, dim);
    crate::with_dtype!(x.dtype(), T, {
        super::map_lines::<num_complex::Complex64, T>(x, dim, n, |l, o| {
            let one = num_complex::Complex64::new(1.0, 0.0);
            let mut acc = one;
            for i in 0..l.len() {
                o[i] = T::from_c128(acc);
                acc *= l[i];
            }
            acc = one;
            for i in (0..l.len()).rev() {
                o[i] = T::from_c128(o[i].to_c128() * acc);
                acc *= l[i];
            }
        })
    })
}

/// True when `src` is a contiguous f32 CPU tensor whose reduced dims form one run `a..b`: then
/// the sum is a row sum (`b` = ndim) or column sums of `[outer, red, inner]` blocks, read in
/// place with SIMD kernels instead of permuted and gathered.
fn fast_sum_applies(src: &Tensor, d: &[usize]) -> bool {
    if src.dtype() != DType::F32 || src.device() != crate::Device::Cpu || !src.is_contiguous() || d.is_empty() {
        return false;
    }
    let mut s = d.to_vec();
    s.sort_unstable();
    s.windows(2).all(|w| w[1] == w[0] + 1)
}

/// The sums of [`fast_sum_applies`]' case, row-major over the kept dims.
fn fast_sum_f32(src: &Tensor, d: &[usize]) -> Result<Vec<f32>> {
    let (a, b) = (*d.iter().min().unwrap_or(&0), d.iter().max().map_or(0, |m| m + 1));
    let sh = src.shape();
    let outer: usize = sh[..a].iter().product();
    let red: usize = sh[a..b].iter().product();
    let inner: usize = sh[b..].iter().product();
    let mut out = vec![0f32; outer * inner];
    cpu::read(src, |x: &[f32]| {
        if inner == 1 {
            cpu::rows::row_sums(x, red, &mut out);
        } else if red == 0 {
        } else if outer == 1 {
            cpu::rows::col_sums(x, red, inner, &mut out, true);
        } else {
            use rayon::prelude::*;
            let par = outer * red * inner >= cpu::rows::PAR_MIN;
            let f = |(o, blk): (&mut [f32], &[f32])| cpu::rows::col_sums(blk, red, inner, o, false);
            if par {
                out.par_chunks_mut(inner).zip(x.par_chunks(red * inner)).for_each(f);
            } else {
                out.chunks_mut(inner).zip(x.chunks(red * inner)).for_each(f);
            }
        }
    })?;
    Ok(out)
}

/// Below this many elements one row is summed on one thread.
const PAR_ROW: usize = 1 << 18;

/// `pairwise_sum` of one long row split over threads (a whole-tensor `sum()` is one row).
fn par_sum_f64(x: &[f64]) -> f64 {
    use rayon::prelude::*;
    if x.len() < PAR_ROW {
        return pairwise_sum(x);
    }
    let parts: Vec<f64> = x.par_chunks(1 << 15).map(pairwise_sum).collect();
    pairwise_sum(&parts)
}

/// `pairwise_sum_f32` of one long row split over threads.
fn par_sum_f32(x: &[f32]) -> f32 {
    use rayon::prelude::*;
    if x.len() < PAR_ROW {
        return pairwise_sum_f32(x);
    }
    let parts: Vec<f32> = x.par_chunks(1 << 15).map(pairwise_sum_f32).collect();
    pairwise_sum_f32(&parts)
}

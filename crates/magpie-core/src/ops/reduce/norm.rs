//! Norm-like reductions: `logsumexp`, vector `norm` (p, inf, -inf, 0, fro), `dist`.

use super::{abs, isnan, reduce_dims, reduce_rows, reduced_shape, sgn};
use crate::autograd::{self, no_grad, Saved};
use crate::dtype::DType;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// The p-norm of a line in f64 (NaN propagates through the inf norms too).
fn pnorm(r: &[f64], p: f64) -> f64 {
    if p == f64::INFINITY || p == f64::NEG_INFINITY {
        let mut m = if p > 0.0 { 0.0 } else { f64::INFINITY };
        for &v in r {
            let a = v.abs();
            if a.is_nan() {
                return a;
            }
            if (p > 0.0 && a > m) || (p < 0.0 && a < m) {
                m = a;
            }
        }
        m
    } else if p == 0.0 {
        r.iter().filter(|&&v| v != 0.0).count() as f64
    } else if p == 1.0 {
        r.iter().map(|v| v.abs()).sum()
    } else if p == 2.0 {
        r.iter().map(|v| v * v).sum::<f64>().sqrt()
    } else {
        r.iter().map(|v| v.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// PyTorch's `norm_backward` with `g` and `norm` already shaped like the input (keepdim).
fn norm_backward(x: &Tensor, norm: &Tensor, g: &Tensor, p: f64, dims: &[i64]) -> Result<Tensor> {
    let zero = Tensor::scalar_tensor(0i64, x.dtype(), x.device())?;
    if p == 0.0 {
        return x.zeros_like()?.mul(g);
    }
    if p == 1.0 {
        return sgn(x)?.mul(g);
    }
    if p == 2.0 {
        return norm.eq_scalar(0)?.where_(&zero, &x.div(norm)?)?.mul(g);
    }
    if p.is_infinite() {
        let a = abs(x)?;
        let mask = a.eq(norm)?.to_dtype(DType::U8)?.add(&isnan(&a)?.to_dtype(DType::U8)?)?.ne_scalar(0)?.to_dtype(x.dtype())?;
        let count = if x.ndim() == 0 { mask.clone() } else { mask.sum_dims(Some(dims), true, None)? };
        return sgn(x)?.mul(&g.div(&count)?.mul(&mask)?);
    }
    if p < 1.0 {
        let scaled = sgn(x)?.mul(&x.eq_scalar(0)?.where_(&zero, &abs(x)?.pow_scalar(p - 1.0)?)?)?;
        return scaled.mul(g)?.mul(&norm.pow_scalar(1.0 - p)?);
    }
    let scaled = if p < 2.0 { sgn(x)?.mul(&abs(x)?.pow_scalar(p - 1.0)?)? } else { x.mul(&abs(x)?.pow_scalar(p - 2.0)?)? };
    let scale = norm.eq_scalar(0)?.where_(&zero, &g.div(&norm.pow_scalar(p - 1.0)?)?)?;
    scaled.mul(&scale)
}

impl Tensor {
    /// `torch.logsumexp(x, dim, keepdim)`: `log(sum(exp(x)))` computed stably (the max is
    /// subtracted first); integer inputs give the default float dtype.
    pub fn logsumexp(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let _prof = crate::profiler::op("logsumexp", &[self]);
        if let Some(c) = crate::amp::tensors("logsumexp", &[self])? {
            return c.args[0].logsumexp(dims, keepdim);
        }
        let x = if self.dtype().is_integral() { self.to_dtype(crate::default_dtype())? } else { self.clone() };
        let d = reduce_dims("logsumexp", &x, Some(dims))?;
        let di: Vec<i64> = d.iter().map(|&v| v as i64).collect();
        if x.numel() == 0 {
            return x.exp()?.sum_dims(Some(&di), keepdim, None)?.log();
        }
        let m = {
            let _ng = no_grad();
            let m = if x.ndim() == 0 { x.detach() } else { x.detach().amax(&di, true)? };
            // an infinite max would give inf - inf; shift by 0 there instead
            let inf = m.eq_scalar(f64::INFINITY)?.to_dtype(DType::U8)?.add(&m.eq_scalar(f64::NEG_INFINITY)?.to_dtype(DType::U8)?)?.ne_scalar(0)?;
            inf.where_(&Tensor::scalar_tensor(0i64, m.dtype(), m.device())?, &m)?
        };
        let s = x.sub(&m)?.exp()?;
        let s = if x.ndim() == 0 { s } else { s.sum_dims(Some(&di), keepdim, None)? };
        let m_out = if keepdim || x.ndim() == 0 { m } else { m.squeeze_dims(&di)? };
        s.log()?.add(&m_out)
    }

    /// `torch.norm(x, p, dim, keepdim, dtype)` for vector p-norms (`p` may be ±inf or 0; `"fro"`
    /// is p = 2). Reduces over `dims` (all when None).
    pub fn norm_p(&self, p: f64, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
        let op = "norm";
        if !(self.dtype().is_float() || self.dtype().is_complex()) {
            return Err(Error::dtype(op, format!("linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}", self.dtype().name())));
        }
        if self.dtype().is_complex() {
            return Err(Error::unsupported(op, "complex inputs"));
        }
        let x = match dtype {
            Some(dt) if dt != self.dtype() => self.to_dtype(dt)?,
            _ => self.clone(),
        };
        let d = reduce_dims(op, &x, dims)?;
        if p.is_infinite() && x.numel() == 0 && (dims.is_none_or(|v| v.is_empty()) || d.iter().any(|&i| x.shape()[i] == 0)) {
            return Err(Error::index(op, "linalg.vector_norm cannot compute the inf norm on an empty tensor because the operation does not have an identity"));
        }
        let shape = reduced_shape(x.shape(), &d, keepdim);
        let out = if x.device().is_cuda() {
            // the reductions of linalg.vector_norm, in float32 for half inputs (rounded once)
            let xc = if matches!(x.dtype(), DType::BF16 | DType::F16) { x.to_dtype(DType::F32)? } else { x.clone() };
            crate::ops::linalg::norm_on_device(&xc, p, &d, keepdim)?.to_dtype(x.dtype())?
        } else {
            crate::with_dtype!(x.dtype(), T, {
                let (v, _) = reduce_rows::<f64, T>(&x, &d, |r| T::from_f64(pnorm(r, p)))?;
                Tensor::from_vec(v, &shape)?
            })
        };
        let sx = Saved::new(op, &x);
        let di: Vec<i64> = d.iter().map(|&v| v as i64).collect();
        autograd::record("Norm", &[&x], &[out.clone()], move |ctx, g| {
            let (mut g, mut o) = (g[0].clone(), ctx.output(0)?);
            if !keepdim {
                for &dd in &di {
                    g = g.unsqueeze(dd)?;
                    o = o.unsqueeze(dd)?;
                }
            }
            Ok(vec![Some(norm_backward(&sx.get()?, &o, &g, p, &di)?)])
        });
        Ok(out)
    }

    /// `torch.dist(a, b, p)`: the p-norm of `a - b` (broadcast).
    pub fn dist(&self, other: &Tensor, p: f64) -> Result<Tensor> {
        let _prof = crate::profiler::op("dist", &[self, other]);
        if let Some(c) = crate::amp::tensors("dist", &[self, other])? {
            return c.args[0].dist(&c.args[1], p);
        }
        self.sub(other)?.norm_p(p, None, false, None)
    }
}

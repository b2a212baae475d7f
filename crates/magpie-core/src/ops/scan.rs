//! Scans along a dim: `cumsum`, `cumprod`, `cummax`, `cummin`, `logcumsumexp`.

use crate::autograd::{self, Saved};
use crate::dtype::DType;
use crate::element::Element;
use crate::ops::reduce::{dim_size, map_lines, one_dim};
use crate::ops::scan_cuda::{scan_lines, Scan};
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::Complex64;

/// Integer and bool scans accumulate in int64 unless a dtype is given (PyTorch's rule).
fn scan_dtype(x: &Tensor, dtype: Option<DType>) -> DType {
    dtype.unwrap_or(if x.dtype().is_integral() { DType::I64 } else { x.dtype() })
}

/// Inclusive prefix sums along `dim` (suffix sums when `reverse`); differentiable, each
/// direction's gradient being the other direction.
fn cumsum_dir(x: &Tensor, dim: usize, reverse: bool) -> Result<Tensor> {
    let n = dim_size(x, dim);
    let dt = x.dtype();
    let out = if let Some((o, _)) = scan_lines("cumsum", x, dim, Scan::Sum, reverse)? {
        o
    } else {
        crate::with_dtype!(dt, T, {
        if dt.is_integral() {
            map_lines::<i64, T>(x, dim, n, |l, o| {
                let mut acc = 0i64;
                let mut step = |i: usize| {
                    acc = acc.wrapping_add(l[i]);
                    o[i] = T::from_i64(acc);
                };
                if reverse { (0..l.len()).rev().for_each(&mut step) } else { (0..l.len()).for_each(&mut step) }
            })?
        } else if dt.is_complex() {
            map_lines::<Complex64, T>(x, dim, n, |l, o| {
                let mut acc = Complex64::new(0.0, 0.0);
                let mut step = |i: usize| {
                    acc += l[i];
                    o[i] = T::from_c128(acc);
                };
                if reverse { (0..l.len()).rev().for_each(&mut step) } else { (0..l.len()).for_each(&mut step) }
            })?
        } else {
            map_lines::<f64, T>(x, dim, n, |l, o| {
                let mut acc = 0f64;
                let mut step = |i: usize| {
                    acc += l[i];
                    o[i] = T::from_f64(acc);
                };
                if reverse { (0..l.len()).rev().for_each(&mut step) } else { (0..l.len()).for_each(&mut step) }
            })?
        }
    })
    };
    autograd::record("Cumsum", &[x], &[out.clone()], move |_, g| Ok(vec![Some(cumsum_dir(&g[0], dim, !reverse)?)]));
    Ok(out)
}

/// Inclusive log-sum-exp scan (reversed when `reverse`), stable: `out_i = logaddexp(out_{i-1}, x_i)`.
fn logcumsumexp_dir(x: &Tensor, dim: usize, reverse: bool) -> Result<Tensor> {
    let n = dim_size(x, dim);
    let cuda = scan_lines("logcumsumexp", x, dim, Scan::LogSumExp, reverse)?;
    let out = if let Some((o, _)) = cuda {
        o
    } else {
        crate::with_dtype!(x.dtype(), T, {
        map_lines::<f64, T>(x, dim, n, |l, o| {
            let mut acc = f64::NEG_INFINITY;
            let mut step = |i: usize| {
                let v = l[i];
                let (hi, lo) = if acc > v { (acc, v) } else { (v, acc) };
                acc = if hi == f64::NEG_INFINITY || lo == f64::NEG_INFINITY && !hi.is_nan() {
                    hi
                } else if hi.is_nan() || lo.is_nan() {
                    f64::NAN
                } else if hi == f64::INFINITY {
                    hi
                } else {
                    hi + (lo - hi).exp().ln_1p()
                };
                o[i] = T::from_f64(acc);
            };
            if reverse { (0..l.len()).rev().for_each(&mut step) } else { (0..l.len()).for_each(&mut step) }
        })?
    })
    };
    let sx = Saved::new("logcumsumexp", x);
    autograd::record("Logcumsumexp", &[x], &[out.clone()], move |ctx, g| {
        // PyTorch's stable form: split the gradient by sign and scan its logs the other way.
        let (x, o, g) = (sx.get()?, ctx.output(0)?, g[0].clone());
        let low = if g.dtype() == DType::F64 { f64::MIN } else { f32::MIN as f64 };
        let lowest = Tensor::scalar_tensor(low, g.dtype(), g.device())?;
        let log_abs = crate::ops::reduce::abs(&g)?.log()?;
        let pos = g.gt_scalar(0)?.where_(&log_abs, &lowest)?;
        let neg = g.lt_scalar(0)?.where_(&log_abs, &lowest)?;
        let out_pos = logcumsumexp_dir(&pos.sub(&o)?, dim, !reverse)?.add(&x)?.exp()?;
        let out_neg = logcumsumexp_dir(&neg.sub(&o)?, dim, !reverse)?.add(&x)?.exp()?;
        Ok(vec![Some(out_pos.sub(&out_neg)?)])
    });
    Ok(out)
}

/// The gradient of `cumprod` where the line holds zeros: exact, O(n) per line.
fn cumprod_grad_lines(x: &Tensor, g: &Tensor, dim: usize) -> Result<Tensor> {
    let n = dim_size(x, dim);
    if x.ndim() == 0 {
        return Ok(g.clone());
    }
    let xm = x.detach().movedim(&[dim as i64], &[-1])?.contiguous()?;
    let gm = g.detach().movedim(&[dim as i64], &[-1])?.contiguous()?;
    let xv: Vec<f64> = xm.to_vec()?;
    let gv: Vec<f64> = gm.to_vec()?;
    let mut out = vec![0f64; xv.len()];
    if n > 0 {
        for ((o, l), gl) in out.chunks_mut(n).zip(xv.chunks(n)).zip(gv.chunks(n)) {
            let z = l.iter().position(|&v| v == 0.0).unwrap_or(n);
            // prefix products
            let mut pre = vec![1f64; n + 1];
            for i in 0..n {
                pre[i + 1] = pre[i] * l[i];
            }
            // before the first zero: sum_{k>=i} g_k out_k / x_i
            let mut acc = 0.0;
            for k in (0..n).rev() {
                acc += gl[k] * pre[k + 1];
                if k < z {
                    o[k] = acc / l[k];
                }
            }
            if z < n {
                // at the first zero: sum_{k>=z} g_k * prod_{j<=k, j!=z} x_j
                let mut p = pre[z];
                let mut s = gl[z] * p;
                for k in z + 1..n {
                    p *= l[k];
                    s += gl[k] * p;
                }
                o[z] = s;
            }
        }
    }
    let r = crate::with_dtype!(x.dtype(), T, { Tensor::from_vec(out.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>(), xm.shape())? });
    let nd = xm.ndim() as i64;
    let r = r.movedim(&[nd - 1], &[dim as i64])?.contiguous()?;
    // computed on the host from downloaded values: back to x's device, counted as a fallback
    crate::backend::cuda::host_result("host:cumprod_backward", r, x.device())
}

fn cumprod_impl(x: &Tensor, dim: usize) -> Result<Tensor> {
    let n = dim_size(x, dim);
    let dt = x.dtype();
    let out = if let Some((o, _)) = scan_lines("cumprod", x, dim, Scan::Prod, false)? {
        o
    } else {
        crate::with_dtype!(dt, T, {
        if dt.is_integral() {
            map_lines::<i64, T>(x, dim, n, |l, o| {
                let mut acc = 1i64;
                for i in 0..l.len() {
                    acc = acc.wrapping_mul(l[i]);
                    o[i] = T::from_i64(acc);
                }
            })?
        } else if dt.is_complex() {
            map_lines::<Complex64, T>(x, dim, n, |l, o| {
                let mut acc = Complex64::new(1.0, 0.0);
                for i in 0..l.len() {
                    acc *= l[i];
                    o[i] = T::from_c128(acc);
                }
            })?
        } else {
            map_lines::<f64, T>(x, dim, n, |l, o| {
                let mut acc = 1f64;
                for i in 0..l.len() {
                    acc *= l[i];
                    o[i] = T::from_f64(acc);
                }
            })?
        }
    })
    };
    let sx = Saved::new("cumprod", x);
    autograd::record("Cumprod", &[x], &[out.clone()], move |ctx, g| {
        let x = sx.get()?;
        // counted with a sum, which has a CUDA kernel (`any` reduces on the host)
        let has_zero = x.eq_scalar(0)?.to_dtype(DType::F64)?.sum()?.item()?.to_f64() > 0.0;
        if !has_zero {
            // sum_{k>=i} g_k out_k / x_i, differentiable
            let o = ctx.output(0)?;
            return Ok(vec![Some(cumsum_dir(&g[0].mul(&o)?, dim, true)?.div(&x)?)]);
        }
        if x.dtype().is_complex() {
            return Err(Error::unsupported("cumprod", "gradient of complex cumprod with zeros"));
        }
        Ok(vec![Some(cumprod_grad_lines(&x, &g[0], dim)?)])
    });
    Ok(out)
}

/// Running extreme and the index where it was last reached (`>=` / `<=`, as PyTorch), NaN sticking.
fn cum_extreme(op: &str, x: &Tensor, dim: i64, max: bool) -> Result<(Tensor, Tensor)> {
    let d = one_dim(op, x, dim)?;
    let n = dim_size(x, d);
    let kind = if max { Scan::Max } else { Scan::Min };
    if let Some((vals, Some(idx))) = scan_lines(op, x, d, kind, false)? {
        return Ok((vals, idx));
    }
    let idx = crate::with_key!(op, x.dtype(), K, {
        map_lines::<K, i64>(x, d, n, |l, o| {
            let mut best = 0usize;
            for i in 0..l.len() {
                let (v, b) = (l[i], l[best]);
                #[allow(clippy::eq_op)]
                let take = if b != b { v != v } else { v != v || (max && v >= b) || (!max && v <= b) };
                if take {
                    best = i;
                }
                o[i] = best as i64;
            }
        })?
    });
    let vals = crate::ops::reduce::select::gather_dim(x, d, &idx)?;
    Ok((vals, idx))
}

impl Tensor {
    /// `torch.cumsum(x, dim, dtype=)`: inclusive prefix sums (integers accumulate as int64).
    pub fn cumsum(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let _prof = crate::profiler::op("cumsum", &[self]);
        if let Some(c) = crate::amp::opt_dtype("cumsum", self, dtype)? {
            return c.args.0.cumsum(dim, c.args.1);
        }
        let d = one_dim("cumsum", self, dim)?;
        let x = self.to_dtype(scan_dtype(self, dtype))?;
        cumsum_dir(&x, d, false)
    }
    /// `torch.cumprod(x, dim, dtype=)`: inclusive prefix products.
    pub fn cumprod(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let _prof = crate::profiler::op("cumprod", &[self]);
        if let Some(c) = crate::amp::opt_dtype("cumprod", self, dtype)? {
            return c.args.0.cumprod(dim, c.args.1);
        }
        let d = one_dim("cumprod", self, dim)?;
        let x = self.to_dtype(scan_dtype(self, dtype))?;
        cumprod_impl(&x, d)
    }
    /// `torch.cummax(x, dim)`: `(values, indices)` of the running maximum.
    pub fn cummax(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        cum_extreme("cummax", self, dim, true)
    }
    /// `torch.cummin(x, dim)`: `(values, indices)` of the running minimum.
    pub fn cummin(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        cum_extreme("cummin", self, dim, false)
    }
    /// `torch.logcumsumexp(x, dim)`: `log(cumsum(exp(x)))` computed stably (floating inputs).
    pub fn logcumsumexp(&self, dim: i64) -> Result<Tensor> {
        let d = one_dim("logcumsumexp", self, dim)?;
        if !self.dtype().is_float() {
            return Err(Error::dtype("logcumsumexp", format!("\"logcumsumexp\" not implemented for '{}'", self.dtype().name())));
        }
        logcumsumexp_dir(self, d, false)
    }
}


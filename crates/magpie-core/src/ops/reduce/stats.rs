//! Spread statistics: `var`, `std`, `var_mean`, `std_mean` with Bessel-style `correction`.

use super::{reduce_dims, reduce_rows, reduced_count, reduced_shape};
use crate::autograd::{self, Saved};
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};

fn var_std(op: &'static str, x: &Tensor, dims: Option<&[i64]>, correction: f64, keepdim: bool, std: bool) -> Result<Tensor> {
    let dt = x.dtype();
    if !(dt.is_float() || dt.is_complex()) {
        return Err(Error::dtype(op, format!("{op}(): std and var only support floating point and complex dtypes, got {}", dt.name())));
    }
    if dt.is_complex() {
        return Err(Error::unsupported(op, "complex inputs"));
    }
    let d = reduce_dims(op, x, dims)?;
    let shape = reduced_shape(x.shape(), &d, keepdim);
    let n = reduced_count(x.shape(), &d);
    let denom = (n as f64 - correction).max(0.0);
    let out = if x.device().is_cuda() {
        var_on_device(x, &d, &shape, denom, std)?
    } else {
        crate::with_dtype!(dt, T, {
        // Two passes in f64 per output: accurate without Welford's per-element division.
        // read in place (no f64 copy of the input), accumulate in f64
        let (v, _) = reduce_rows::<T, T>(x, &d, |r| {
            let mean = r.iter().map(|v| v.to_f64()).sum::<f64>() / r.len() as f64;
            let ss: f64 = r.iter().map(|&v| (v.to_f64() - mean) * (v.to_f64() - mean)).sum();
            let var = ss / denom;
            T::from_f64(if std { var.sqrt() } else { var })
        })?;
        Tensor::from_vec(v, &shape)?
        })
    };
    let sx = Saved::new(op, x);
    let dims_c: Vec<i64> = d.iter().map(|&v| v as i64).collect();
    autograd::record(if std { "Std" } else { "Var" }, &[x], &[out.clone()], move |ctx, g| {
        let (mut x, mut g, mut o) = (sx.get()?, g[0].clone(), ctx.output(0)?);
        // half CPU tensors: the gradient in float32, rounded once (the engine casts it back)
        if crate::ops::acc::half_cpu(&[&x, &g, &o]).is_some() {
            use crate::ops::acc::up;
            (x, g, o) = (up(&x)?, up(&g)?, up(&o)?);
        }
        if !keepdim {
            for &dd in &dims_c {
                g = g.unsqueeze(dd)?;
                o = o.unsqueeze(dd)?;
            }
        }
        if std {
            // d std = d var / (2 std), taken as 0 where std == 0 (PyTorch's convention)
            let z = Tensor::scalar_tensor(0i64, g.dtype(), g.device())?;
            g = o.eq_scalar(0)?.where_(&z, &g.div(&o.mul_scalar(2.0)?)?)?;
        }
        let mean = if x.ndim() == 0 { x.clone() } else { x.mean_dims(Some(&dims_c), true, None)? };
        Ok(vec![Some(g.mul(&x.sub(&mean)?)?.mul_scalar(2.0 / denom)?)])
    });
    Ok(out)
}

/// The value of [`var_std`] with tensor ops on `x`'s device (no history): two passes, the mean
/// then the summed squared deviations, in float32 for half inputs (rounded once at the end).
fn var_on_device(x: &Tensor, d: &[usize], shape: &[usize], denom: f64, std: bool) -> Result<Tensor> {
    let _ng = autograd::no_grad();
    let dt = x.dtype();
    let xc = if dt == crate::DType::F64 || dt == crate::DType::F32 { x.detach() } else { x.to_dtype(crate::DType::F32)? };
    let ss = if xc.ndim() == 0 {
        let dev = xc.sub(&xc)?;
        dev.mul(&dev)?
    } else {
        let di: Vec<i64> = d.iter().map(|&v| v as i64).collect();
        let mean = xc.mean_dims(Some(&di), true, None)?;
        let dev = xc.sub(&mean)?;
        dev.mul(&dev)?.sum_dims(Some(&di), false, None)?
    };
    let v = ss.div_scalar(denom)?;
    let v = if std { v.sqrt()? } else { v };
    v.reshape_to(shape)?.to_dtype(dt)
}

impl Tensor {
    /// `torch.var(x, dim, correction=, keepdim=)`: `sum((x - mean)^2) / max(0, N - correction)`
    /// (`correction` 1 is `unbiased=True`).
    pub fn var_dims(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<Tensor> {
        var_std("var", self, dims, correction, keepdim, false)
    }
    /// `torch.std(x, dim, correction=, keepdim=)`: the square root of `var`.
    pub fn std_dims(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<Tensor> {
        var_std("std", self, dims, correction, keepdim, true)
    }
    /// `torch.var_mean(x, dim, correction=, keepdim=)`: `(var, mean)`.
    pub fn var_mean(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let v = var_std("var_mean", self, dims, correction, keepdim, false)?;
        Ok((v, self.mean_dims(dims, keepdim, None)?))
    }
    /// `torch.std_mean(x, dim, correction=, keepdim=)`: `(std, mean)`.
    pub fn std_mean(&self, dims: Option<&[i64]>, correction: f64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let s = var_std("std_mean", self, dims, correction, keepdim, true)?;
        Ok((s, self.mean_dims(dims, keepdim, None)?))
    }
}

//! Small helpers shared by the nn ops: compute types for raw kernels, and composite building
//! blocks (abs, relu, clamp, max, log_softmax, p-norms) written with where/mul/sum so that they
//! differentiate through existing ops.

use crate::autograd;
use crate::dtype::DType;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// A real compute type of the raw kernels (f32 for every float dtype but f64, as PyTorch's opmath).
pub(crate) trait Real: Element + num_traits::Float + std::ops::AddAssign + Send + Sync {}
impl Real for f32 {}
impl Real for f64 {}

/// Runs `$body` with `$R` = f64 for float64 and f32 for every other dtype.
macro_rules! with_real {
    ($dtype:expr, $R:ident, $body:block) => {{
        if $dtype == $crate::dtype::DType::F64 {
            type $R = f64;
            $body
        } else {
            type $R = f32;
            $body
        }
    }};
}
pub(crate) use with_real;

/// Fails unless `t` has a floating dtype (what most nn kernels take).
pub(crate) fn check_float(op: &str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::dtype(op, format!("\"{op}\" not implemented for '{}'", t.dtype().name())));
    }
    Ok(())
}

/// A contiguous vector of `t`'s values in the compute type `R`.
pub(crate) fn real_vec<R: Real>(t: &Tensor) -> Result<Vec<R>> {
    t.to_vec::<R>()
}

/// A tensor from compute-type values, cast back to `dtype` (no autograd record).
pub(crate) fn from_real<R: Real>(v: Vec<R>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let t = Tensor::from_vec(v, shape)?;
    if dtype == t.dtype() {
        return Ok(t);
    }
    let _ng = autograd::no_grad();
    t.to_dtype(dtype)
}

impl Tensor {
    /// `x.abs()` as a composite (gradient `sign(x)`, 0 at 0 like PyTorch).
    pub(crate) fn nn_abs(&self) -> Result<Tensor> {
        let z = self.zeros_like()?;
        let neg = self.lt_scalar(0)?;
        let pos = self.gt_scalar(0)?;
        let a = neg.where_(&self.neg()?, &z)?;
        pos.where_(self, &a)
    }
    /// `x.clamp_min(v)` as a composite (gradient passes where `x >= v`, as PyTorch's clamp).
    pub(crate) fn nn_clamp_min(&self, v: f64) -> Result<Tensor> {
        let c = self.full_like(v)?;
        self.lt_scalar(v)?.where_(&c, self)
    }
    /// `x.clamp_max(v)` as a composite.
    pub(crate) fn nn_clamp_max(&self, v: f64) -> Result<Tensor> {
        let c = self.full_like(v)?;
        self.gt_scalar(v)?.where_(&c, self)
    }
    /// `relu(x)`.
    pub(crate) fn nn_relu(&self) -> Result<Tensor> {
        let z = self.zeros_like()?;
        self.gt_scalar(0)?.where_(self, &z)
    }
    /// Elementwise `min(a, b)` (gradient to `a` on ties).
    pub(crate) fn nn_minimum(&self, b: &Tensor) -> Result<Tensor> {
        self.le(b)?.where_(self, b)
    }
    /// The max over `dim` with keepdim, not differentiated (a shift for stable log-sum-exp).
    pub(crate) fn nn_amax_nograd(&self, dim: usize) -> Result<Tensor> {
        let _ng = autograd::no_grad();
        let mut shape = self.shape().to_vec();
        if shape.is_empty() {
            return Ok(self.detach());
        }
        shape[dim] = 1;
        let (v, _) = crate::ops::reduce::reduce_rows::<f64, f64>(self, &[dim], |r| {
            let m = r.iter().fold(f64::NEG_INFINITY, |a, &b| if b > a || b.is_nan() { b } else { a });
            if m.is_infinite() { 0.0 } else { m }
        })?;
        from_real::<f64>(v, &shape, self.dtype())
    }
    /// `log_softmax(x, dim)` as a composite: `x - m - log(sum(exp(x - m)))`.
    pub(crate) fn nn_log_softmax(&self, dim: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return self.sub(self);
        }
        let d = crate::shape::wrap_dim("log_softmax", dim, self.ndim())?;
        let m = self.nn_amax_nograd(d)?;
        let s = self.sub(&m)?;
        let lse = s.exp()?.sum_dims(Some(&[d as i64]), true, None)?.log()?;
        s.sub(&lse)
    }
    /// `softmax(x, dim)` as a composite.
    pub(crate) fn nn_softmax(&self, dim: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return self.ones_like();
        }
        let d = crate::shape::wrap_dim("softmax", dim, self.ndim())?;
        let m = self.nn_amax_nograd(d)?;
        let e = self.sub(&m)?.exp()?;
        let s = e.sum_dims(Some(&[d as i64]), true, None)?;
        e.div(&s)
    }
    /// `log(1 + exp(x))` computed stably: `max(x, 0) + log(1 + exp(-|x|))`.
    pub(crate) fn nn_softplus(&self) -> Result<Tensor> {
        let e = self.nn_abs()?.neg()?.exp()?.add_scalar(1.0)?.log()?;
        self.nn_relu()?.add(&e)
    }
    /// The vector p-norm over `dims` (`linalg.vector_norm`), as a composite.
    pub(crate) fn nn_norm(&self, p: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let a = self.nn_abs()?;
        if p == 2.0 {
            return self.mul(self)?.sum_dims(Some(dims), keepdim, None)?.sqrt();
        }
        if p == 1.0 {
            return a.sum_dims(Some(dims), keepdim, None);
        }
        if p.is_infinite() {
            return nn_reduce_extreme(&a, dims, keepdim, p > 0.0);
        }
        if p == 0.0 {
            let nz = self.ne_scalar(0)?.to_dtype(self.dtype())?;
            return nz.sum_dims(Some(dims), keepdim, None);
        }
        a.pow_scalar(p)?.sum_dims(Some(dims), keepdim, None)?.pow_scalar(1.0 / p)
    }
}

/// Max (or min) over `dims` as a composite: the gradient goes (split evenly) to the extreme
/// elements, as PyTorch's amax/amin.
pub(crate) fn nn_reduce_extreme(x: &Tensor, dims: &[i64], keepdim: bool, max: bool) -> Result<Tensor> {
    let d = crate::ops::reduce::reduce_dims("amax", x, Some(dims))?;
    let mut shape = crate::ops::reduce::reduced_shape(x.shape(), &d, true);
    if x.ndim() == 0 {
        shape = vec![];
    }
    let m = {
        let _ng = autograd::no_grad();
        let (v, _) = crate::ops::reduce::reduce_rows::<f64, f64>(x, &d, |r| {
            let init = if max { f64::NEG_INFINITY } else { f64::INFINITY };
            r.iter().fold(init, |a, &b| if b.is_nan() || a.is_nan() { f64::NAN } else if (max && b > a) || (!max && b < a) { b } else { a })
        })?;
        from_real::<f64>(v, &shape, x.dtype())?
    };
    // the mask of extreme elements, normalised so that the gradient is shared among ties
    let mask = x.eq(&m)?.to_dtype(x.dtype())?;
    let cnt = mask.sum_dims(Some(&d.iter().map(|&v| v as i64).collect::<Vec<_>>()), true, None)?;
    let w = mask.div(&cnt)?;
    let out = x.mul(&w)?.sum_dims(Some(&d.iter().map(|&v| v as i64).collect::<Vec<_>>()), true, None)?;
    // keep NaN / inf values exactly (x * w would turn inf * 0 into NaN)
    let out = {
        let isfin = m.sub(&m)?.eq_scalar(0)?;
        isfin.where_(&out, &m)?
    };
    if keepdim {
        Ok(out)
    } else {
        let dd: Vec<i64> = d.iter().map(|&v| v as i64).collect();
        out.squeeze_dims(&dd)
    }
}

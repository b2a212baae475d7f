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

// Short names the nn ops use, over the shared op families.
impl Tensor {
    /// `x.abs()`.
    pub(crate) fn nn_abs(&self) -> Result<Tensor> {
        self.abs()
    }
    /// `x.clamp_min(v)`.
    pub(crate) fn nn_clamp_min(&self, v: f64) -> Result<Tensor> {
        self.clamp_min(v)
    }
    /// `x.clamp_max(v)`.
    pub(crate) fn nn_clamp_max(&self, v: f64) -> Result<Tensor> {
        self.clamp_max(v)
    }
    /// Elementwise `min(a, b)` with the gradient to `a` on ties (what the distance losses want).
    pub(crate) fn nn_minimum(&self, b: &Tensor) -> Result<Tensor> {
        self.le(b)?.where_(self, b)
    }
    /// `log_softmax(x, dim)`.
    pub(crate) fn nn_log_softmax(&self, dim: i64) -> Result<Tensor> {
        self.log_softmax(dim, None)
    }
    /// `log(1 + exp(x))` computed stably: `max(x, 0) + log(1 + exp(-|x|))` (no threshold).
    pub(crate) fn nn_softplus(&self) -> Result<Tensor> {
        let e = self.abs()?.neg()?.exp()?.log1p()?;
        self.relu()?.add(&e)
    }
    /// The vector p-norm over `dims` (`linalg.vector_norm`).
    pub(crate) fn nn_norm(&self, p: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        crate::ops::linalg::vector_norm(self, p, Some(dims), keepdim, None)
    }
}

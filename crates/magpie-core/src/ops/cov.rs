//! `torch.cov` and `torch.corrcoef`: covariance and correlation matrices of observations,
//! composed from differentiable ops (so autograd and every device come with them).

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.cov(input, *, correction=1, fweights=None, aweights=None)`: the covariance of the
/// variables (rows) of `input` over its observations (columns); a 1-d input is one variable.
///
/// ```
/// use magpie_core::{ops::cov::cov, Tensor};
/// let x = Tensor::from_vec(vec![1f32, 2., 4.], &[3])?;
/// let c = cov(&x, 1, None, None)?;
/// assert!((c.to_vec::<f32>()?[0] - 7.0 / 3.0).abs() < 1e-6);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn cov(input: &Tensor, correction: i64, fweights: Option<&Tensor>, aweights: Option<&Tensor>) -> Result<Tensor> {
    const OP: &str = "cov";
    if input.ndim() > 2 {
        return Err(Error::value(OP, format!("cov(): expected input to have two or fewer dimensions but got an input with {} dimensions", input.ndim())));
    }
    // integer inputs give floats, as PyTorch's true division does
    let x = if input.dtype().is_integral() || input.dtype().is_bool() { input.to_dtype(crate::default_dtype())? } else { input.clone() };
    let x = if x.ndim() < 2 { x.reshape(&[1, -1])? } else { x };
    let n_obs = x.shape()[1];
    let mut w: Option<Tensor> = None;
    if let Some(f) = fweights {
        if f.ndim() > 1 {
            return Err(Error::value(OP, format!("cov(): expected fweights to have one or fewer dimensions but got fweights with {} dimensions", f.ndim())));
        }
        if !f.dtype().is_integral() {
            return Err(Error::dtype(OP, format!("cov(): expected fweights to have integral dtype but got fweights with {} dtype", f.dtype().name())));
        }
        if f.numel() != n_obs {
            return Err(Error::value(OP, format!("cov(): expected fweights to have the same numel as there are observations in the input but got {} != {}", f.numel(), n_obs)));
        }
        if f.numel() > 0 && f.to_f64_vec()?.iter().any(|&v| v < 0.0) {
            return Err(Error::value(OP, "cov(): fweights cannot be negative"));
        }
        w = Some(f.clone());
    }
    if let Some(a) = aweights {
        if a.ndim() > 1 {
            return Err(Error::value(OP, format!("cov(): expected aweights to have one or fewer dimensions but got aweights with {} dimensions", a.ndim())));
        }
        if !a.dtype().is_float() {
            return Err(Error::dtype(OP, format!("cov(): expected aweights to have floating point dtype but got aweights with {} dtype", a.dtype().name())));
        }
        if a.numel() != n_obs {
            return Err(Error::value(OP, format!("cov(): expected aweights to have the same numel as there are observations in the input but got {} != {}", a.numel(), n_obs)));
        }
        if a.numel() > 0 && a.to_f64_vec()?.iter().any(|&v| v < 0.0) {
            return Err(Error::value(OP, "cov(): aweights cannot be negative"));
        }
        w = Some(match w {
            Some(f) => f.mul(a)?,
            None => a.clone(),
        });
    }
    let dev = x.device();
    let (avg, w_sum) = match &w {
        Some(w) => {
            let w_sum = w.sum()?;
            if w_sum.to_f64_vec()?[0] == 0.0 {
                return Err(Error::value(OP, "cov(): weights sum to zero, can't be normalized"));
            }
            (x.mul(w)?.sum_dims(Some(&[1]), false, None)?.div(&w_sum)?, w_sum)
        }
        None => {
            let w_sum = Tensor::scalar_tensor(n_obs as i64, DType::I64, dev)?;
            (x.sum_dims(Some(&[1]), false, None)?.div(&w_sum)?, w_sum)
        }
    };
    let norm = match (&w, aweights) {
        (Some(w), Some(a)) if correction != 0 => w_sum.sub(&w.mul(a)?.sum()?.mul_scalar(correction)?.div(&w_sum)?)?,
        _ => w_sum.sub_scalar(correction)?,
    };
    // no degrees of freedom left: PyTorch warns and divides by zero
    let norm = if norm.to_f64_vec()?[0] <= 0.0 { norm.zeros_like()? } else { norm };
    let xc = x.sub(&avg.unsqueeze(1)?)?;
    let xw = match &w {
        Some(w) => xc.mul(w)?,
        None => xc.clone(),
    };
    let c = xc.mm(&xw.t()?.conj()?)?;
    c.div(&norm)?.squeeze()
}

/// `torch.corrcoef(input)`: Pearson correlation coefficients of the rows of `input`,
/// clipped to `[-1, 1]`.
///
/// ```
/// use magpie_core::{ops::cov::corrcoef, Tensor};
/// let x = Tensor::from_vec(vec![1f32, 2., 3., 2., 4., 6.], &[2, 3])?;
/// let r = corrcoef(&x)?;
/// assert_eq!(r.to_vec::<f32>()?, vec![1., 1., 1., 1.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn corrcoef(input: &Tensor) -> Result<Tensor> {
    if input.ndim() > 2 {
        return Err(Error::value("corrcoef", format!("corrcoef(): expected input to have two or fewer dimensions but got an input with {} dimensions", input.ndim())));
    }
    let c = cov(input, 1, None, None)?;
    if c.ndim() == 0 {
        // one variable: 1, or NaN where the variance is 0, NaN or infinite
        return c.div(&c);
    }
    let d = c.diagonal(0, 0, 1)?;
    let sd = d.sqrt()?;
    let c = c.div(&sd.reshape(&[-1, 1])?)?.div(&sd.reshape(&[1, -1])?)?;
    c.clamp(Some(-1.0), Some(1.0))
}

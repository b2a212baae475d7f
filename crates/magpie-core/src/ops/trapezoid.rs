//! The trapezoidal rule: `torch.trapezoid` (alias `trapz`) and `torch.cumulative_trapezoid`,
//! over sample coordinates or a constant spacing, composed from slices and sums.

use crate::shape::wrap_dim;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Where the samples of `y` lie along the integrated dim.
#[derive(Clone, Debug)]
pub enum Spacing<'a> {
    /// Samples `dx` apart.
    Dx(f64),
    /// Sample coordinates: 1-d (as long as the dim) or broadcastable to `y`.
    X(&'a Tensor),
}

/// The widths between consecutive samples, shaped to broadcast against `y[1:] + y[:-1]`.
fn widths(op: &str, y: &Tensor, x: &Tensor, dim: usize) -> Result<Tensor> {
    let x = if x.dtype().is_integral() || x.dtype().is_bool() { x.to_dtype(crate::default_dtype())? } else { x.clone() };
    if x.ndim() == 1 {
        if x.numel() != y.shape()[dim] {
            return Err(Error::shape(
                op,
                format!("trapezoid: There must be one `x` value for each sample point, but got {} x values and {} samples", x.numel(), y.shape()[dim]),
            ));
        }
        let mut shape = vec![1i64; y.ndim()];
        shape[dim] = x.numel() as i64;
        let x = x.reshape(&shape)?;
        let n = x.numel() as i64;
        return x.narrow(dim as i64, 1, n - 1)?.sub(&x.narrow(dim as i64, 0, n - 1)?);
    }
    crate::ops::difference::diff(&x, 1, dim as i64 - y.ndim() as i64, None, None)
}

/// `y[1:] + y[:-1]` along `dim`.
fn pair_sums(y: &Tensor, dim: usize) -> Result<Tensor> {
    let n = y.shape()[dim] as i64;
    y.narrow(dim as i64, 1, n - 1)?.add(&y.narrow(dim as i64, 0, n - 1)?)
}

fn as_float(y: &Tensor) -> Result<Tensor> {
    if y.dtype().is_integral() || y.dtype().is_bool() {
        y.to_dtype(crate::default_dtype())
    } else {
        Ok(y.clone())
    }
}

/// `torch.trapezoid(y, x=None, *, dx=None, dim=-1)`: the integral of `y` along `dim`.
///
/// ```
/// use magpie_core::{ops::trapezoid::{trapezoid, Spacing}, Tensor};
/// let y = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?;
/// assert_eq!(trapezoid(&y, Spacing::Dx(1.0), -1)?.to_vec::<f32>()?, vec![4.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn trapezoid(y: &Tensor, spacing: Spacing, dim: i64) -> Result<Tensor> {
    const OP: &str = "trapezoid";
    if y.ndim() == 0 {
        return Err(Error::index(OP, format!("Dimension out of range (expected to be in range of [-1, 0], but got {dim})")));
    }
    let d = wrap_dim(OP, dim, y.ndim())?;
    let y = as_float(y)?;
    if y.shape()[d] == 0 {
        return y.sum_dims(Some(&[d as i64]), false, None);
    }
    match spacing {
        Spacing::Dx(dx) => {
            let ends = y.select(d as i64, 0)?.add(&y.select(d as i64, -1)?)?.mul_scalar(0.5)?;
            y.sum_dims(Some(&[d as i64]), false, None)?.sub(&ends)?.mul_scalar(dx)
        }
        Spacing::X(x) => {
            let w = widths(OP, &y, x, d)?;
            w.mul(&pair_sums(&y, d)?)?.sum_dims(Some(&[d as i64]), false, None)?.div_scalar(2.0)
        }
    }
}

/// `torch.cumulative_trapezoid(y, x=None, *, dx=None, dim=-1)`: the running integral of `y`
/// along `dim` (one element shorter than `y` there).
///
/// ```
/// use magpie_core::{ops::trapezoid::{cumulative_trapezoid, Spacing}, Tensor};
/// let y = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?;
/// assert_eq!(cumulative_trapezoid(&y, Spacing::Dx(1.0), -1)?.to_vec::<f32>()?, vec![1.5, 4.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn cumulative_trapezoid(y: &Tensor, spacing: Spacing, dim: i64) -> Result<Tensor> {
    const OP: &str = "cumulative_trapezoid";
    if y.ndim() == 0 {
        return Err(Error::index(OP, format!("Dimension out of range (expected to be in range of [-1, 0], but got {dim})")));
    }
    let d = wrap_dim(OP, dim, y.ndim())?;
    let y = as_float(y)?;
    if y.shape()[d] == 0 {
        return Ok(y);
    }
    match spacing {
        Spacing::Dx(dx) => pair_sums(&y, d)?.mul_scalar(dx / 2.0)?.cumsum(d as i64, None),
        Spacing::X(x) => {
            let w = widths(OP, &y, x, d)?;
            w.mul(&pair_sums(&y, d)?)?.cumsum(d as i64, None)?.div_scalar(2.0)
        }
    }
}

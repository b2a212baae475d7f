//! `Normal(loc, scale)`.

use std::f64::consts::{PI, SQRT_2};

use magpie_core::{Result, Tensor};

use crate::constraints::{positive, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::util::{broadcast_all, expand_to};

/// `torch.distributions.Normal(loc, scale)`.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_distributions::{Distribution, Normal};
/// let d = Normal::new(&Tensor::scalar(0f64), &Tensor::scalar(1f64))?;
/// let lp = d.log_prob(&Tensor::scalar(0f64))?.to_f64_vec()?[0];
/// assert!((lp + 0.9189385332046727).abs() < 1e-12);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Normal {
    /// Mean.
    pub loc: Tensor,
    /// Standard deviation.
    pub scale: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl Normal {
    /// A normal distribution; `loc` and `scale` broadcast to the batch shape.
    pub fn new(loc: &Tensor, scale: &Tensor) -> Result<Normal> {
        let p = broadcast_all("Normal", &[loc, scale])?;
        let d = Normal { batch: p[0].shape().to_vec(), loc: p[0].clone(), scale: p[1].clone(), validate: default_validate_args() };
        check_params(&d, &[("loc", &d.loc, Constraint::Real), ("scale", &d.scale, positive())])?;
        Ok(d)
    }

    /// Without validation and without broadcasting (parameters already of one shape).
    pub(crate) fn unchecked(loc: &Tensor, scale: &Tensor) -> Normal {
        Normal { batch: loc.shape().to_vec(), loc: loc.clone(), scale: scale.clone(), validate: false }
    }
}

impl Distribution for Normal {
    dist_common!("Normal");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("loc", self.loc.clone()), ("scale", self.scale.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::Real)
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        let eps = Tensor::randn_on(&shape, self.loc.dtype(), self.loc.device())?;
        self.loc.add(&eps.mul(&self.scale)?)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let var = self.scale.square()?;
        let z = value.sub(&self.loc)?.square()?.div(&var.mul_scalar(2.0)?)?;
        z.neg()?.sub(&self.scale.log()?)?.sub_scalar((2.0 * PI).sqrt().ln())
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        value.sub(&self.loc)?.div(&self.scale.mul_scalar(SQRT_2)?)?.erf()?.add_scalar(1.0)?.mul_scalar(0.5)
    }
    fn icdf(&self, value: &Tensor) -> Result<Tensor> {
        self.loc.add(&self.scale.mul(&value.mul_scalar(2.0)?.sub_scalar(1.0)?.erfinv()?)?.mul_scalar(SQRT_2)?)
    }
    fn entropy(&self) -> Result<Tensor> {
        self.scale.log()?.add_scalar(0.5 + 0.5 * (2.0 * PI).ln())
    }
    fn mean(&self) -> Result<Tensor> {
        Ok(self.loc.clone())
    }
    fn mode(&self) -> Result<Tensor> {
        Ok(self.loc.clone())
    }
    fn variance(&self) -> Result<Tensor> {
        self.scale.square()
    }
    fn stddev(&self) -> Result<Tensor> {
        Ok(self.scale.clone())
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Normal { loc: expand_to(&self.loc, batch_shape)?, scale: expand_to(&self.scale, batch_shape)?, batch: batch_shape.to_vec(), validate: self.validate }))
    }
}

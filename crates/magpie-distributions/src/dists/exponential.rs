//! `Exponential(rate)`.

use magpie_core::{Result, Tensor};

use crate::constraints::{nonnegative, positive, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::util::expand_to;

/// `torch.distributions.Exponential(rate)`.
#[derive(Clone)]
pub struct Exponential {
    /// Rate (1 / mean).
    pub rate: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl Exponential {
    /// An exponential distribution.
    pub fn new(rate: &Tensor) -> Result<Exponential> {
        let p = crate::util::broadcast_all("Exponential", &[rate])?;
        let d = Exponential { batch: p[0].shape().to_vec(), rate: p[0].clone(), validate: default_validate_args() };
        check_params(&d, &[("rate", &d.rate, positive())])?;
        Ok(d)
    }
}

impl Distribution for Exponential {
    dist_common!("Exponential");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("rate", self.rate.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(nonnegative())
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        // -log(1 - u) with u in [0, 1) is a standard exponential draw
        let u = Tensor::rand_on(&shape, self.rate.dtype(), self.rate.device())?;
        u.neg()?.log1p()?.neg()?.div(&self.rate)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        self.rate.log()?.sub(&self.rate.mul(value)?)
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        self.rate.neg()?.mul(value)?.exp()?.neg()?.add_scalar(1.0)
    }
    fn icdf(&self, value: &Tensor) -> Result<Tensor> {
        value.neg()?.log1p()?.neg()?.div(&self.rate)
    }
    fn entropy(&self) -> Result<Tensor> {
        self.rate.log()?.neg()?.add_scalar(1.0)
    }
    fn mean(&self) -> Result<Tensor> {
        self.rate.reciprocal()
    }
    fn mode(&self) -> Result<Tensor> {
        self.rate.zeros_like()
    }
    fn variance(&self) -> Result<Tensor> {
        self.rate.pow_scalar(-2.0)
    }
    fn stddev(&self) -> Result<Tensor> {
        self.rate.reciprocal()
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Exponential { rate: expand_to(&self.rate, batch_shape)?, batch: batch_shape.to_vec(), validate: self.validate }))
    }
}

//! `Gamma(concentration, rate)`, reparameterized through `_standard_gamma`.

use magpie_core::autograd::Function;
use magpie_core::{Result, Tensor};

use crate::constraints::{nonnegative, positive, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::gamma_grad::StandardGamma;
use crate::util::{broadcast_all, expand_to, tiny};

/// `torch.distributions.Gamma(concentration, rate)`.
#[derive(Clone)]
pub struct Gamma {
    /// Shape parameter alpha.
    pub concentration: Tensor,
    /// Rate parameter beta (1 / scale).
    pub rate: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl Gamma {
    /// A gamma distribution; parameters broadcast to the batch shape.
    pub fn new(concentration: &Tensor, rate: &Tensor) -> Result<Gamma> {
        let p = broadcast_all("Gamma", &[concentration, rate])?;
        let d = Gamma { batch: p[0].shape().to_vec(), concentration: p[0].clone(), rate: p[1].clone(), validate: default_validate_args() };
        check_params(&d, &[("concentration", &d.concentration, positive()), ("rate", &d.rate, positive())])?;
        Ok(d)
    }
}

/// `_standard_gamma(alpha)` with its implicit-reparameterization gradient.
pub fn standard_gamma(alpha: &Tensor) -> Result<Tensor> {
    Ok(StandardGamma.apply(&[alpha.contiguous()?])?.remove(0))
}

impl Distribution for Gamma {
    dist_common!("Gamma");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("concentration", self.concentration.clone()), ("rate", self.rate.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(nonnegative())
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        let x = standard_gamma(&expand_to(&self.concentration, &shape)?)?;
        x.div(&expand_to(&self.rate, &shape)?)?.clamp_min(tiny(self.rate.dtype()))
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let c = &self.concentration;
        let a = c.xlogy(&self.rate)?.add(&c.sub_scalar(1.0)?.xlogy(value)?)?;
        a.sub(&self.rate.mul(value)?)?.sub(&c.lgamma()?)
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        self.concentration.igamma(&self.rate.mul(value)?)
    }
    fn entropy(&self) -> Result<Tensor> {
        let c = &self.concentration;
        c.sub(&self.rate.log()?)?.add(&c.lgamma()?)?.add(&c.neg()?.add_scalar(1.0)?.mul(&c.digamma()?)?)
    }
    fn mean(&self) -> Result<Tensor> {
        self.concentration.div(&self.rate)
    }
    fn mode(&self) -> Result<Tensor> {
        self.concentration.sub_scalar(1.0)?.div(&self.rate)?.clamp_min(0.0)
    }
    fn variance(&self) -> Result<Tensor> {
        self.concentration.div(&self.rate.square()?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Gamma {
            concentration: expand_to(&self.concentration, batch_shape)?,
            rate: expand_to(&self.rate, batch_shape)?,
            batch: batch_shape.to_vec(),
            validate: self.validate,
        }))
    }
}

//! `Poisson(rate)`.

use magpie_core::{Result, Tensor};

use crate::constraints::{nonnegative, nonnegative_integer, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::samplers::{poisson_one, to_tensor, HostRng};
use crate::util::expand_to;

/// `torch.distributions.Poisson(rate)`.
#[derive(Clone)]
pub struct Poisson {
    /// Rate (the mean).
    pub rate: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl Poisson {
    /// A Poisson distribution.
    pub fn new(rate: &Tensor) -> Result<Poisson> {
        let p = crate::util::broadcast_all("Poisson", &[rate])?;
        let d = Poisson { batch: p[0].shape().to_vec(), rate: p[0].clone(), validate: default_validate_args() };
        check_params(&d, &[("rate", &d.rate, nonnegative())])?;
        Ok(d)
    }
}

impl Distribution for Poisson {
    dist_common!("Poisson");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("rate", self.rate.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(nonnegative_integer())
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        let rates = expand_to(&self.rate, &shape)?.to_f64_vec()?;
        let mut rng = HostRng::new();
        let v = rates.iter().map(|&l| poisson_one(&mut rng, l)).collect();
        to_tensor(v, &shape, self.rate.dtype(), self.rate.device())
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        value.xlogy(&self.rate)?.sub(&self.rate)?.sub(&value.add_scalar(1.0)?.lgamma()?)
    }
    fn mean(&self) -> Result<Tensor> {
        Ok(self.rate.clone())
    }
    fn mode(&self) -> Result<Tensor> {
        self.rate.floor()
    }
    fn variance(&self) -> Result<Tensor> {
        Ok(self.rate.clone())
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Poisson { rate: expand_to(&self.rate, batch_shape)?, batch: batch_shape.to_vec(), validate: self.validate }))
    }
}

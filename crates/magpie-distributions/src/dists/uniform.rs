//! `Uniform(low, high)`.

use magpie_core::{Error, Result, Tensor};

use crate::constraints::{Bound, Constraint};
use crate::distribution::{all_true, check_expand, default_validate_args, maybe_validate, Distribution};
use crate::util::{broadcast_all, expand_to};

/// `torch.distributions.Uniform(low, high)`: uniform on `[low, high)`.
#[derive(Clone)]
pub struct Uniform {
    /// Lower end (inclusive).
    pub low: Tensor,
    /// Upper end (exclusive).
    pub high: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl Uniform {
    /// A uniform distribution; `low < high` is checked when validating.
    pub fn new(low: &Tensor, high: &Tensor) -> Result<Uniform> {
        let p = broadcast_all("Uniform", &[low, high])?;
        let d = Uniform { batch: p[0].shape().to_vec(), low: p[0].clone(), high: p[1].clone(), validate: default_validate_args() };
        if d.validate && !all_true(&d.low.lt(&d.high)?)? {
            return Err(Error::value("Uniform", "Uniform is not defined when low>= high"));
        }
        Ok(d)
    }
}

impl Distribution for Uniform {
    dist_common!("Uniform");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("low", self.low.clone()), ("high", self.high.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::Interval(Bound::Tensor(self.low.clone()), Bound::Tensor(self.high.clone())))
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        let u = Tensor::rand_on(&shape, self.low.dtype(), self.low.device())?;
        self.low.add(&u.mul(&self.high.sub(&self.low)?)?)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let inside = self.low.le(value)?.logical_and(&self.high.gt(value)?)?.to_dtype(self.low.dtype())?;
        inside.log()?.sub(&self.high.sub(&self.low)?.log()?)
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        value.sub(&self.low)?.div(&self.high.sub(&self.low)?)?.clamp(Some(0.0), Some(1.0))
    }
    fn icdf(&self, value: &Tensor) -> Result<Tensor> {
        value.mul(&self.high.sub(&self.low)?)?.add(&self.low)
    }
    fn entropy(&self) -> Result<Tensor> {
        self.high.sub(&self.low)?.log()
    }
    fn mean(&self) -> Result<Tensor> {
        self.low.add(&self.high)?.mul_scalar(0.5)
    }
    fn mode(&self) -> Result<Tensor> {
        self.low.full_like(f64::NAN)
    }
    fn variance(&self) -> Result<Tensor> {
        self.high.sub(&self.low)?.square()?.div_scalar(12.0)
    }
    fn stddev(&self) -> Result<Tensor> {
        self.high.sub(&self.low)?.div_scalar(12f64.sqrt())
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Uniform { low: expand_to(&self.low, batch_shape)?, high: expand_to(&self.high, batch_shape)?, batch: batch_shape.to_vec(), validate: self.validate }))
    }
}

//! `Independent(base, reinterpreted_batch_ndims)`.

use magpie_core::{Error, Result, Tensor};

use crate::constraints::Constraint;
use crate::distribution::{check_expand, default_validate_args, maybe_validate, Distribution};
use crate::util::{extended, sum_rightmost};

/// `torch.distributions.Independent`: the rightmost `reinterpreted_batch_ndims` batch
/// dimensions of `base` become event dimensions (log-probabilities summed over them).
#[derive(Clone)]
pub struct Independent {
    /// The wrapped distribution.
    pub base: Box<dyn Distribution>,
    /// How many batch dimensions are reinterpreted.
    pub reinterpreted_batch_ndims: usize,
    batch: Vec<usize>,
    event: Vec<usize>,
    validate: bool,
}

impl Independent {
    /// Wraps `base`.
    pub fn new(base: Box<dyn Distribution>, reinterpreted_batch_ndims: usize) -> Result<Independent> {
        let bs = base.batch_shape();
        if reinterpreted_batch_ndims > bs.len() {
            return Err(Error::value(
                "Independent",
                format!("Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual {} vs {}", reinterpreted_batch_ndims, bs.len()),
            ));
        }
        let k = bs.len() - reinterpreted_batch_ndims;
        let batch = bs[..k].to_vec();
        let event = extended(&[], &bs[k..], base.event_shape());
        Ok(Independent { base, reinterpreted_batch_ndims, batch, event, validate: default_validate_args() })
    }
}

impl Distribution for Independent {
    dist_common!("Independent");
    fn event_shape(&self) -> &[usize] {
        &self.event
    }
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        Vec::new()
    }
    fn repr(&self) -> String {
        format!("Independent({}, {})", self.base.repr(), self.reinterpreted_batch_ndims)
    }
    fn support(&self) -> Result<Constraint> {
        let s = self.base.support()?;
        Ok(if self.reinterpreted_batch_ndims == 0 { s } else { Constraint::Independent(Box::new(s), self.reinterpreted_batch_ndims) })
    }
    fn has_rsample(&self) -> bool {
        self.base.has_rsample()
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        self.base.sample(sample_shape)
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        self.base.rsample(sample_shape)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        sum_rightmost(&self.base.log_prob(value)?, self.reinterpreted_batch_ndims)
    }
    fn entropy(&self) -> Result<Tensor> {
        sum_rightmost(&self.base.entropy()?, self.reinterpreted_batch_ndims)
    }
    fn mean(&self) -> Result<Tensor> {
        self.base.mean()
    }
    fn mode(&self) -> Result<Tensor> {
        self.base.mode()
    }
    fn variance(&self) -> Result<Tensor> {
        self.base.variance()
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        let bs = self.base.batch_shape();
        let inner = extended(batch_shape, &bs[bs.len() - self.reinterpreted_batch_ndims..], &[]);
        let base = self.base.expand(&inner)?;
        Ok(Box::new(Independent { base, reinterpreted_batch_ndims: self.reinterpreted_batch_ndims, batch: batch_shape.to_vec(), event: self.event.clone(), validate: self.validate }))
    }
}

//! `Bernoulli(probs | logits)`.

use magpie_core::{Result, Tensor};

use crate::constraints::{unit_interval, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::dists::probs::{bce_with_logits, ProbsLogits};

/// `torch.distributions.Bernoulli(probs=None, logits=None)`.
#[derive(Clone)]
pub struct Bernoulli {
    /// The parameter in both forms.
    pub p: ProbsLogits,
    batch: Vec<usize>,
    validate: bool,
}

impl Bernoulli {
    /// From exactly one of `probs` and `logits` (PyTorch's error otherwise).
    pub fn new(probs: Option<&Tensor>, logits: Option<&Tensor>) -> Result<Bernoulli> {
        let p = ProbsLogits::new("Bernoulli", probs, logits, true)?;
        let d = Bernoulli { batch: p.probs.shape().to_vec(), p, validate: default_validate_args() };
        let (name, t) = d.p.given();
        let c = if d.p.from_probs { unit_interval() } else { Constraint::Real };
        check_params(&d, &[(name, &t, c)])?;
        Ok(d)
    }
    /// `Bernoulli(probs=p)`.
    pub fn from_probs(probs: &Tensor) -> Result<Bernoulli> {
        Bernoulli::new(Some(probs), None)
    }
    /// `Bernoulli(logits=l)`.
    pub fn from_logits(logits: &Tensor) -> Result<Bernoulli> {
        Bernoulli::new(None, Some(logits))
    }
    /// `probs`.
    pub fn probs(&self) -> &Tensor {
        &self.p.probs
    }
    /// `logits`.
    pub fn logits(&self) -> &Tensor {
        &self.p.logits
    }
}

impl Distribution for Bernoulli {
    dist_common!("Bernoulli");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![self.p.given()]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::Boolean)
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        crate::util::expand_to(&self.p.probs.detach(), &shape)?.contiguous()?.bernoulli()
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        bce_with_logits(&self.p.logits, value)?.neg()
    }
    fn entropy(&self) -> Result<Tensor> {
        bce_with_logits(&self.p.logits, &self.p.probs)
    }
    fn mean(&self) -> Result<Tensor> {
        Ok(self.p.probs.clone())
    }
    fn mode(&self) -> Result<Tensor> {
        let p = &self.p.probs;
        let m = p.ge_scalar(0.5)?.to_dtype(p.dtype())?;
        p.eq_scalar(0.5)?.where_(&p.full_like(f64::NAN)?, &m)
    }
    fn variance(&self) -> Result<Tensor> {
        self.p.probs.mul(&self.p.probs.neg()?.add_scalar(1.0)?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Bernoulli { p: self.p.expand(batch_shape)?, batch: batch_shape.to_vec(), validate: self.validate }))
    }
}

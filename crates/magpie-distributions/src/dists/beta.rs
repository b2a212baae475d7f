//! `Beta(concentration1, concentration0)`, a two-component Dirichlet as in PyTorch.

use magpie_core::ops::shape_ops::stack;
use magpie_core::{Result, Tensor};

use crate::constraints::{positive, unit_interval, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::dists::Dirichlet;
use crate::util::{broadcast_all, expand_to};

/// `torch.distributions.Beta(concentration1, concentration0)`.
#[derive(Clone)]
pub struct Beta {
    /// alpha (the weight of 1).
    pub concentration1: Tensor,
    /// beta (the weight of 0).
    pub concentration0: Tensor,
    dirichlet: Dirichlet,
    batch: Vec<usize>,
    validate: bool,
}

impl Beta {
    /// A beta distribution; parameters broadcast to the batch shape.
    pub fn new(concentration1: &Tensor, concentration0: &Tensor) -> Result<Beta> {
        let p = broadcast_all("Beta", &[concentration1, concentration0])?;
        // PyTorch builds the inner Dirichlet first, so its check (and message) comes first
        Dirichlet::new(&stack(&[p[0].clone(), p[1].clone()], -1)?)?;
        let d = Beta::build(&p[0], &p[1], default_validate_args())?;
        check_params(&d, &[("concentration1", &d.concentration1, positive()), ("concentration0", &d.concentration0, positive())])?;
        Ok(d)
    }

    fn build(c1: &Tensor, c0: &Tensor, validate: bool) -> Result<Beta> {
        let dirichlet = Dirichlet::unchecked(&stack(&[c1.clone(), c0.clone()], -1)?);
        Ok(Beta { concentration1: c1.clone(), concentration0: c0.clone(), dirichlet, batch: c1.shape().to_vec(), validate })
    }
}

impl Distribution for Beta {
    dist_common!("Beta");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        // PyTorch's repr lists only parameters stored on the object itself, and this one's
        // live on an inner distribution: `{}()`
        Vec::new()
    }
    fn support(&self) -> Result<Constraint> {
        Ok(unit_interval())
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        self.dirichlet.rsample(sample_shape)?.select(-1, 0)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let ht = stack(&[value.clone(), value.neg()?.add_scalar(1.0)?], -1)?;
        self.dirichlet.log_prob(&ht)
    }
    fn entropy(&self) -> Result<Tensor> {
        self.dirichlet.entropy()
    }
    fn mean(&self) -> Result<Tensor> {
        self.concentration1.div(&self.concentration1.add(&self.concentration0)?)
    }
    fn mode(&self) -> Result<Tensor> {
        self.dirichlet.mode()?.select(-1, 0)
    }
    fn variance(&self) -> Result<Tensor> {
        let total = self.concentration1.add(&self.concentration0)?;
        self.concentration1.mul(&self.concentration0)?.div(&total.square()?.mul(&total.add_scalar(1.0)?)?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Beta::build(&expand_to(&self.concentration1, batch_shape)?, &expand_to(&self.concentration0, batch_shape)?, self.validate)?))
    }
}

//! `Dirichlet(concentration)`, reparameterized through `_Dirichlet` (`_dirichlet_grad`).

use magpie_core::autograd::Function;
use magpie_core::{Error, Result, Tensor};

use crate::constraints::{positive, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::gamma_grad::DirichletSample;
use crate::util::{expand_to, extended};

/// `torch.distributions.Dirichlet(concentration)`: event shape `[k]`.
#[derive(Clone)]
pub struct Dirichlet {
    /// Concentrations, `[..., k]`.
    pub concentration: Tensor,
    batch: Vec<usize>,
    event: Vec<usize>,
    validate: bool,
}

impl Dirichlet {
    /// A Dirichlet distribution over the last dimension of `concentration`.
    pub fn new(concentration: &Tensor) -> Result<Dirichlet> {
        if concentration.ndim() < 1 {
            return Err(Error::value("Dirichlet", "`concentration` parameter must be at least one-dimensional."));
        }
        if !concentration.dtype().is_float() {
            return Err(Error::dtype("Dirichlet", "Dirichlet: concentration must be a floating-point tensor"));
        }
        let s = concentration.shape();
        let d = Dirichlet {
            concentration: concentration.clone(),
            batch: s[..s.len() - 1].to_vec(),
            event: vec![s[s.len() - 1]],
            validate: default_validate_args(),
        };
        check_params(&d, &[("concentration", &d.concentration, Constraint::Independent(Box::new(positive()), 1))])?;
        Ok(d)
    }

    /// Without validation (the inner distribution of `Beta`, which checks its own arguments);
    /// `concentration` has at least one dimension.
    pub(crate) fn unchecked(concentration: &Tensor) -> Dirichlet {
        let s = concentration.shape();
        let k = s.len().saturating_sub(1);
        Dirichlet { concentration: concentration.clone(), batch: s[..k].to_vec(), event: s[k..].to_vec(), validate: false }
    }
}

impl Distribution for Dirichlet {
    dist_common!("Dirichlet");
    fn event_shape(&self) -> &[usize] {
        &self.event
    }
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("concentration", self.concentration.clone())]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::Simplex)
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        let c = expand_to(&self.concentration, &shape)?.contiguous()?;
        Ok(DirichletSample.apply(&[c])?.remove(0))
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let c = &self.concentration;
        let a = c.sub_scalar(1.0)?.xlogy(value)?.sum_dims(Some(&[-1]), false, None)?;
        a.add(&c.sum_dims(Some(&[-1]), false, None)?.lgamma()?)?.sub(&c.lgamma()?.sum_dims(Some(&[-1]), false, None)?)
    }
    fn entropy(&self) -> Result<Tensor> {
        let c = &self.concentration;
        let k = self.event[0] as f64;
        let a0 = c.sum_dims(Some(&[-1]), false, None)?;
        let t = c.lgamma()?.sum_dims(Some(&[-1]), false, None)?.sub(&a0.lgamma()?)?;
        let t = t.sub(&a0.neg()?.add_scalar(k)?.mul(&a0.digamma()?)?)?;
        t.sub(&c.sub_scalar(1.0)?.mul(&c.digamma()?)?.sum_dims(Some(&[-1]), false, None)?)
    }
    fn mean(&self) -> Result<Tensor> {
        self.concentration.div(&self.concentration.sum_dims(Some(&[-1]), true, None)?)
    }
    fn mode(&self) -> Result<Tensor> {
        let cm1 = self.concentration.sub_scalar(1.0)?.clamp_min(0.0)?;
        let mode = cm1.div(&cm1.sum_dims(Some(&[-1]), true, None)?)?;
        // where every concentration is below 1, the mode sits at the vertex of the largest one
        let below = self.concentration.lt_scalar(1.0)?.all_dims(Some(&[-1]), true)?;
        let k = self.event[0] as i64;
        let onehot = magpie_core::ops::nn::embedding::one_hot(&self.concentration.argmax(Some(-1), false)?, k)?.to_dtype(mode.dtype())?;
        below.expand_as(&mode)?.where_(&onehot, &mode)
    }
    fn variance(&self) -> Result<Tensor> {
        let c = &self.concentration;
        let c0 = c.sum_dims(Some(&[-1]), true, None)?;
        c.mul(&c0.sub(c)?)?.div(&c0.square()?.mul(&c0.add_scalar(1.0)?)?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Dirichlet {
            concentration: expand_to(&self.concentration, &extended(&[], batch_shape, &self.event))?,
            batch: batch_shape.to_vec(),
            event: self.event.clone(),
            validate: self.validate,
        }))
    }
}

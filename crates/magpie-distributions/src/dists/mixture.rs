//! `MixtureSameFamily(mixture_distribution, component_distribution)`.

use magpie_core::{Error, Result, Tensor};

use crate::constraints::Constraint;
use crate::distribution::{check_expand, default_validate_args, maybe_validate, size_str, Distribution};
use crate::dists::Categorical;
use crate::util::{extended, i64s};

/// `torch.distributions.MixtureSameFamily`: a `Categorical` over the rightmost batch
/// dimension of the component distribution.
#[derive(Clone)]
pub struct MixtureSameFamily {
    /// The mixing weights.
    pub mixture: Categorical,
    /// The components; their last batch dimension indexes the mixture.
    pub component: Box<dyn Distribution>,
    batch: Vec<usize>,
    event: Vec<usize>,
    validate: bool,
}

impl MixtureSameFamily {
    /// Checks the shapes as PyTorch does.
    pub fn new(mixture: Categorical, component: Box<dyn Distribution>) -> Result<MixtureSameFamily> {
        let op = "MixtureSameFamily";
        let mdbs = mixture.batch_shape().to_vec();
        let cdbs = component.batch_shape().to_vec();
        if cdbs.is_empty() {
            return Err(Error::value(op, "`component_distribution` must have at least one batch dimension"));
        }
        let cb = &cdbs[..cdbs.len() - 1];
        let ok = mdbs.len() <= cb.len() && mdbs.iter().rev().zip(cb.iter().rev()).all(|(m, c)| m == c || *m == 1 || *c == 1);
        if !ok {
            return Err(Error::value(
                op,
                format!("`mixture_distribution.batch_shape` ({}) is not compatible with `component_distribution.batch_shape`({})", size_str(&mdbs), size_str(&cdbs)),
            ));
        }
        let km = mixture.num_events();
        let kc = cdbs[cdbs.len() - 1];
        if km != kc {
            return Err(Error::value(op, format!("`mixture_distribution component` ({km}) does not equal `component_distribution.batch_shape[-1]` ({kc})")));
        }
        Ok(MixtureSameFamily { batch: cb.to_vec(), event: component.event_shape().to_vec(), mixture, component, validate: default_validate_args() })
    }

    // x.unsqueeze(-1 - event_ndims): a mixture dimension for the components
    fn pad(&self, x: &Tensor) -> Result<Tensor> {
        x.unsqueeze(-1 - self.event.len() as i64)
    }

    // mixture probabilities shaped to broadcast against component statistics
    fn pad_mixture(&self, p: &Tensor) -> Result<Tensor> {
        let mut shape = p.shape().to_vec();
        shape.extend(std::iter::repeat_n(1, self.event.len()));
        p.reshape(&i64s(&shape))
    }
}

impl Distribution for MixtureSameFamily {
    dist_common!("MixtureSameFamily");
    fn event_shape(&self) -> &[usize] {
        &self.event
    }
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        Vec::new()
    }
    fn repr(&self) -> String {
        format!("MixtureSameFamily(\n  {},\n  {})", self.mixture.repr(), self.component.repr())
    }
    fn support(&self) -> Result<Constraint> {
        self.component.support()
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let _g = magpie_core::autograd::no_grad();
        let ne = self.event.len();
        let mix = self.mixture.sample(sample_shape)?; // sample_shape + batch
        let comp = self.component.sample(sample_shape)?; // sample_shape + batch + [k] + event
        let mut idx_shape = mix.shape().to_vec();
        idx_shape.push(1);
        idx_shape.extend(std::iter::repeat_n(1, ne));
        let mut full = extended(sample_shape, &self.batch, &[1]);
        full.extend_from_slice(&self.event);
        let idx = mix.reshape(&i64s(&idx_shape))?.expand(&i64s(&full))?.contiguous()?;
        let dim = -1 - ne as i64;
        comp.gather(dim, &idx)?.squeeze_dims(&[dim])
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let x = self.pad(value)?;
        let lp = self.component.log_prob(&x)?;
        let lm = self.mixture.logits().log_softmax(-1, None)?;
        lp.add(&lm)?.logsumexp(&[-1], false)
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let c = self.component.cdf(&self.pad(value)?)?;
        c.mul(self.mixture.probs())?.sum_dims(Some(&[-1]), false, None)
    }
    fn mean(&self) -> Result<Tensor> {
        let p = self.pad_mixture(self.mixture.probs())?;
        p.mul(&self.component.mean()?)?.sum_dims(Some(&[-1 - self.event.len() as i64]), false, None)
    }
    fn variance(&self) -> Result<Tensor> {
        let d = -1 - self.event.len() as i64;
        let p = self.pad_mixture(self.mixture.probs())?;
        let cond_var = p.mul(&self.component.variance()?)?.sum_dims(Some(&[d]), false, None)?;
        let m = self.pad(&self.mean()?)?;
        let var_mean = p.mul(&self.component.mean()?.sub(&m)?.square()?)?.sum_dims(Some(&[d]), false, None)?;
        cond_var.add(&var_mean)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        let k = self.mixture.num_events();
        let comp = self.component.expand(&extended(batch_shape, &[k], &[]))?;
        let mix = self.mixture.expand(batch_shape)?;
        let mix = mix.as_any().downcast_ref::<Categorical>().cloned().ok_or_else(|| Error::value("MixtureSameFamily.expand", "mixture is not Categorical"))?;
        Ok(Box::new(MixtureSameFamily { mixture: mix, component: comp, batch: batch_shape.to_vec(), event: self.event.clone(), validate: self.validate }))
    }
}

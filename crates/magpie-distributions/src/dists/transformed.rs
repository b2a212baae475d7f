//! `TransformedDistribution(base, transforms)` and `LogNormal` (a Normal through `exp`).

use std::sync::Arc;

use magpie_core::{Error, Result, Tensor};

use crate::constraints::{positive, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::dists::{Independent, Normal};
use crate::transforms::{ComposeTransform, ExpTransform, Transform};
use crate::util::{broadcast_all, expand_to, extended, sum_rightmost};

/// `torch.distributions.TransformedDistribution`: samples of `base` pushed through the
/// transforms; `log_prob` by the change-of-variables formula.
#[derive(Clone)]
pub struct TransformedDistribution {
    /// The base distribution (wrapped in `Independent` when the transforms need more event dims).
    pub base: Box<dyn Distribution>,
    /// The transforms, applied in order.
    pub transforms: Vec<Arc<dyn Transform>>,
    batch: Vec<usize>,
    event: Vec<usize>,
    validate: bool,
}

impl TransformedDistribution {
    /// `TransformedDistribution(base, transforms)`.
    pub fn new(base: Box<dyn Distribution>, transforms: Vec<Arc<dyn Transform>>) -> Result<TransformedDistribution> {
        let compose = ComposeTransform::new(transforms.clone());
        let t_event = compose.event_dim();
        let base_event = base.event_shape().len();
        let shape = extended(&[], base.batch_shape(), base.event_shape());
        if shape.len() < t_event {
            return Err(Error::value(
                "TransformedDistribution",
                format!("base_distribution needs to have shape with size at least {t_event}, but got {:?}.", shape),
            ));
        }
        let base = if t_event > base_event { Box::new(Independent::new(base, t_event - base_event)?) as Box<dyn Distribution> } else { base };
        let event_dim = t_event.max(base_event);
        let k = shape.len() - event_dim;
        Ok(TransformedDistribution { base, transforms, batch: shape[..k].to_vec(), event: shape[k..].to_vec(), validate: default_validate_args() })
    }

    fn compose(&self) -> ComposeTransform {
        ComposeTransform::new(self.transforms.clone())
    }

    // 1 - cdf where the composed transform decreases
    fn monotonize(&self, v: &Tensor) -> Result<Tensor> {
        let s = self.compose().sign(v)?;
        let flipped = v.neg()?.add_scalar(1.0)?;
        s.gt_scalar(0.0)?.where_(v, &flipped)
    }
}

impl Distribution for TransformedDistribution {
    dist_common!("TransformedDistribution");
    fn event_shape(&self) -> &[usize] {
        &self.event
    }
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        Vec::new()
    }
    fn repr(&self) -> String {
        format!("TransformedDistribution({})", self.base.repr())
    }
    fn support(&self) -> Result<Constraint> {
        let c = self.compose().codomain();
        let ed = self.event.len();
        let cd = c.event_dim();
        Ok(if ed > cd { Constraint::Independent(Box::new(c), ed - cd) } else { c })
    }
    fn has_rsample(&self) -> bool {
        self.base.has_rsample()
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let _g = magpie_core::autograd::no_grad();
        let x = self.base.sample(sample_shape)?;
        self.compose().forward(&x)
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let x = self.base.rsample(sample_shape)?;
        self.compose().forward(&x)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let ed = self.event.len();
        let mut y = value.clone();
        let mut lp: Option<Tensor> = None;
        for t in self.transforms.iter().rev() {
            let x = t.inverse(&y)?;
            let term = sum_rightmost(&t.log_abs_det_jacobian(&x, &y)?, ed - t.domain().event_dim())?;
            lp = Some(match lp {
                None => term.neg()?,
                Some(a) => a.sub(&term)?,
            });
            y = x;
        }
        let base = sum_rightmost(&self.base.log_prob(&y)?, ed - self.base.event_shape().len())?;
        match lp {
            None => Ok(base),
            Some(a) => a.add(&base),
        }
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        let x = self.compose().inverse(value)?;
        if self.validate {
            self.base.validate_sample(&x)?;
        }
        self.monotonize(&self.base.cdf(&x)?)
    }
    fn icdf(&self, value: &Tensor) -> Result<Tensor> {
        let v = self.monotonize(value)?;
        self.compose().forward(&self.base.icdf(&v)?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        let shape = extended(&[], batch_shape, &self.event);
        let be = self.base.event_shape().len();
        let base = self.base.expand(&shape[..shape.len() - be])?;
        Ok(Box::new(TransformedDistribution { base, transforms: self.transforms.clone(), batch: batch_shape.to_vec(), event: self.event.clone(), validate: self.validate }))
    }
}

/// `torch.distributions.LogNormal(loc, scale)`: `exp(Normal(loc, scale))`.
#[derive(Clone)]
pub struct LogNormal {
    /// The underlying `TransformedDistribution(Normal(loc, scale), [ExpTransform])`.
    pub transformed: TransformedDistribution,
    /// The normal's mean.
    pub loc: Tensor,
    /// The normal's standard deviation.
    pub scale: Tensor,
    batch: Vec<usize>,
    validate: bool,
}

impl LogNormal {
    /// A log-normal distribution.
    pub fn new(loc: &Tensor, scale: &Tensor) -> Result<LogNormal> {
        let p = broadcast_all("LogNormal", &[loc, scale])?;
        let d = LogNormal::build(&p[0], &p[1], default_validate_args())?;
        check_params(&d, &[("loc", &d.loc, Constraint::Real), ("scale", &d.scale, positive())])?;
        Ok(d)
    }

    fn build(loc: &Tensor, scale: &Tensor, validate: bool) -> Result<LogNormal> {
        let normal = Normal::unchecked(loc, scale);
        let mut transformed = TransformedDistribution::new(Box::new(normal), vec![Arc::new(ExpTransform)])?;
        transformed.validate = false;
        Ok(LogNormal { transformed, loc: loc.clone(), scale: scale.clone(), batch: loc.shape().to_vec(), validate })
    }

    /// The base normal distribution.
    pub fn base(&self) -> Normal {
        Normal::unchecked(&self.loc, &self.scale)
    }
}

impl Distribution for LogNormal {
    dist_common!("LogNormal");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        // PyTorch's repr lists only parameters stored on the object itself, and this one's
        // live on an inner distribution: `{}()`
        Vec::new()
    }
    fn support(&self) -> Result<Constraint> {
        Ok(positive())
    }
    fn has_rsample(&self) -> bool {
        true
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        self.transformed.sample(sample_shape)
    }
    fn rsample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        self.transformed.rsample(sample_shape)
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        self.transformed.log_prob(value)
    }
    fn cdf(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        self.transformed.cdf(value)
    }
    fn icdf(&self, value: &Tensor) -> Result<Tensor> {
        self.transformed.icdf(value)
    }
    fn entropy(&self) -> Result<Tensor> {
        self.base().entropy()?.add(&self.loc)
    }
    fn mean(&self) -> Result<Tensor> {
        self.loc.add(&self.scale.square()?.mul_scalar(0.5)?)?.exp()
    }
    fn mode(&self) -> Result<Tensor> {
        self.loc.sub(&self.scale.square()?)?.exp()
    }
    fn variance(&self) -> Result<Tensor> {
        let s2 = self.scale.square()?;
        s2.expm1()?.mul(&self.loc.mul_scalar(2.0)?.add(&s2)?.exp()?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(LogNormal::build(&expand_to(&self.loc, batch_shape)?, &expand_to(&self.scale, batch_shape)?, self.validate)?))
    }
}

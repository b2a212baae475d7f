//! `Categorical(probs | logits)` and `OneHotCategorical`.

use magpie_core::ops::nn::embedding::one_hot;
use magpie_core::{DType, Error, Result, Tensor};

use crate::constraints::{Bound, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::dists::probs::ProbsLogits;
use crate::util::{extended, i64s};

/// `torch.distributions.Categorical(probs=None, logits=None)`: indices `0..k` over the last
/// dimension (normalized); values are integer class indices.
#[derive(Clone)]
pub struct Categorical {
    /// The parameter in both forms (`probs` sum to 1, `logits` are normalized log-probs).
    pub p: ProbsLogits,
    batch: Vec<usize>,
    validate: bool,
}

impl Categorical {
    /// From exactly one of `probs` and `logits` (at least one-dimensional).
    pub fn new(probs: Option<&Tensor>, logits: Option<&Tensor>) -> Result<Categorical> {
        for t in [probs, logits].into_iter().flatten() {
            if t.ndim() < 1 {
                let n = if probs.is_some() { "probs" } else { "logits" };
                return Err(Error::value("Categorical", format!("`{n}` parameter must be at least one-dimensional.")));
            }
        }
        let p = ProbsLogits::new("Categorical", probs, logits, false)?;
        let s = p.probs.shape();
        let d = Categorical { batch: s[..s.len() - 1].to_vec(), p, validate: default_validate_args() };
        let c = if d.p.from_probs { Constraint::Simplex } else { Constraint::Independent(Box::new(Constraint::Real), 1) };
        let (name, t) = d.p.given();
        check_params(&d, &[(name, &t, c)])?;
        Ok(d)
    }
    /// `Categorical(probs=p)` (normalized over the last dimension).
    pub fn from_probs(probs: &Tensor) -> Result<Categorical> {
        Categorical::new(Some(probs), None)
    }
    /// `Categorical(logits=l)`.
    pub fn from_logits(logits: &Tensor) -> Result<Categorical> {
        Categorical::new(None, Some(logits))
    }
    /// `probs`.
    pub fn probs(&self) -> &Tensor {
        &self.p.probs
    }
    /// `logits`.
    pub fn logits(&self) -> &Tensor {
        &self.p.logits
    }
    /// `_num_events`: the number of categories.
    pub fn num_events(&self) -> usize {
        self.p.probs.shape().last().copied().unwrap_or(0)
    }
}

impl Distribution for Categorical {
    dist_common!("Categorical");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![self.p.given()]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::IntegerInterval(Bound::Num(0.0), Bound::Num(self.num_events() as f64 - 1.0)))
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let k = self.num_events();
        let n: usize = sample_shape.iter().product();
        let rows = self.p.probs.detach().reshape(&[-1, k as i64])?;
        // [batch, n] -> [n, batch] -> sample_shape + batch_shape
        let s = rows.multinomial(n, true)?.transpose(0, 1)?.contiguous()?;
        s.reshape(&i64s(&self.extended_shape(sample_shape)))
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let v = value.to_dtype(DType::I64)?.unsqueeze(-1)?;
        let l = &self.p.logits;
        let mut vs = magpie_core::ops::shape_ops::broadcast_shapes(&[v.shape()[..v.ndim() - 1].to_vec(), self.batch.clone()])?;
        let lshape = extended(&[], &vs, &[self.num_events()]);
        vs.push(1);
        l.expand(&i64s(&lshape))?.gather(-1, &v.expand(&i64s(&vs))?.contiguous()?)?.squeeze_dims(&[-1])
    }
    fn entropy(&self) -> Result<Tensor> {
        let min = if self.p.logits.dtype() == DType::F64 { f64::MIN } else { f32::MIN as f64 };
        let l = self.p.logits.clamp_min(min)?;
        l.mul(&self.p.probs)?.sum_dims(Some(&[-1]), false, None)?.neg()
    }
    fn mean(&self) -> Result<Tensor> {
        Tensor::full_on(&self.batch, f64::NAN, self.p.probs.dtype(), self.p.probs.device())
    }
    fn mode(&self) -> Result<Tensor> {
        self.p.probs.argmax(Some(-1), false)
    }
    fn variance(&self) -> Result<Tensor> {
        Tensor::full_on(&self.batch, f64::NAN, self.p.probs.dtype(), self.p.probs.device())
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        Ok(Box::new(self.expand_cat(batch_shape)?))
    }
}

impl Categorical {
    fn expand_cat(&self, batch_shape: &[usize]) -> Result<Categorical> {
        check_expand(self, batch_shape)?;
        let shape = extended(&[], batch_shape, &[self.num_events()]);
        Ok(Categorical { p: self.p.expand(&shape)?, batch: batch_shape.to_vec(), validate: self.validate })
    }
}

/// `torch.distributions.OneHotCategorical(probs=None, logits=None)`: one-hot vectors,
/// event shape `[k]`.
#[derive(Clone)]
pub struct OneHotCategorical {
    /// The underlying categorical distribution.
    pub categorical: Categorical,
    batch: Vec<usize>,
    event: Vec<usize>,
    validate: bool,
}

impl OneHotCategorical {
    /// From exactly one of `probs` and `logits`.
    pub fn new(probs: Option<&Tensor>, logits: Option<&Tensor>) -> Result<OneHotCategorical> {
        // as in PyTorch, the inner Categorical checks the parameters (and names itself)
        let c = Categorical::new(probs, logits)?;
        Ok(OneHotCategorical { batch: c.batch.clone(), event: vec![c.num_events()], validate: c.validate, categorical: c })
    }
    /// `OneHotCategorical(probs=p)`.
    pub fn from_probs(probs: &Tensor) -> Result<OneHotCategorical> {
        OneHotCategorical::new(Some(probs), None)
    }
    /// `OneHotCategorical(logits=l)`.
    pub fn from_logits(logits: &Tensor) -> Result<OneHotCategorical> {
        OneHotCategorical::new(None, Some(logits))
    }
}

impl Distribution for OneHotCategorical {
    dist_common!("OneHotCategorical");
    fn event_shape(&self) -> &[usize] {
        &self.event
    }
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        // PyTorch's repr lists only parameters stored on the object itself, and this one's
        // live on an inner distribution: `{}()`
        Vec::new()
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::OneHot)
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let idx = self.categorical.sample(sample_shape)?;
        one_hot(&idx, self.event[0] as i64)?.to_dtype(self.categorical.p.probs.dtype())
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let (_, idx) = value.max_dim(-1, false)?;
        let c = Categorical { validate: false, ..self.categorical.clone() };
        c.log_prob(&idx)
    }
    fn entropy(&self) -> Result<Tensor> {
        self.categorical.entropy()
    }
    fn mean(&self) -> Result<Tensor> {
        Ok(self.categorical.p.probs.clone())
    }
    fn mode(&self) -> Result<Tensor> {
        one_hot(&self.categorical.mode()?, self.event[0] as i64)?.to_dtype(self.categorical.p.probs.dtype())
    }
    fn variance(&self) -> Result<Tensor> {
        let p = &self.categorical.p.probs;
        p.mul(&p.neg()?.add_scalar(1.0)?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        let c = self.categorical.expand_cat(batch_shape)?;
        Ok(Box::new(OneHotCategorical { batch: batch_shape.to_vec(), event: self.event.clone(), validate: self.validate, categorical: c }))
    }
}

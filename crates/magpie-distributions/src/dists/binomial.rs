//! `Binomial(total_count, probs | logits)`.

use magpie_core::{Error, Result, Tensor};

use crate::constraints::{nonnegative_integer, unit_interval, Bound, Constraint};
use crate::distribution::{check_expand, check_params, default_validate_args, maybe_validate, Distribution};
use crate::dists::probs::ProbsLogits;
use crate::samplers::{binomial_one, to_tensor, HostRng};
use crate::util::{broadcast_all, expand_to};

/// `torch.distributions.Binomial(total_count=1, probs=None, logits=None)`.
#[derive(Clone)]
pub struct Binomial {
    /// Number of trials (a float tensor of whole numbers).
    pub total_count: Tensor,
    /// The success probability in both forms.
    pub p: ProbsLogits,
    batch: Vec<usize>,
    validate: bool,
}

// (x.clamp(min=0) + x - x.clamp(max=0)) / 2: max(x, 0) with a gradient of 1/2 at 0, as PyTorch
fn clamp_by_zero(x: &Tensor) -> Result<Tensor> {
    x.clamp_min(0.0)?.add(x)?.sub(&x.clamp(None, Some(0.0))?)?.mul_scalar(0.5)
}

impl Binomial {
    /// From `total_count` and exactly one of `probs` and `logits`.
    pub fn new(total_count: &Tensor, probs: Option<&Tensor>, logits: Option<&Tensor>) -> Result<Binomial> {
        let p = ProbsLogits::new("Binomial", probs, logits, true)?;
        let tc = if total_count.dtype().is_float() { total_count.clone() } else { total_count.to_dtype(p.probs.dtype())? };
        let (name, given) = p.given();
        let b = broadcast_all("Binomial", &[&tc, &given])?;
        let p = ProbsLogits::new("Binomial", p.from_probs.then_some(&b[1]), (!p.from_probs).then_some(&b[1]), true)?;
        let d = Binomial { batch: b[0].shape().to_vec(), total_count: b[0].clone(), p, validate: default_validate_args() };
        let c = if d.p.from_probs { unit_interval() } else { Constraint::Real };
        check_params(&d, &[("total_count", &d.total_count, nonnegative_integer()), (name, &b[1], c)])?;
        Ok(d)
    }
    /// `Binomial(total_count, probs=p)`.
    pub fn from_probs(total_count: &Tensor, probs: &Tensor) -> Result<Binomial> {
        Binomial::new(total_count, Some(probs), None)
    }
    /// `Binomial(total_count, logits=l)`.
    pub fn from_logits(total_count: &Tensor, logits: &Tensor) -> Result<Binomial> {
        Binomial::new(total_count, None, Some(logits))
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

impl Distribution for Binomial {
    dist_common!("Binomial");
    fn params(&self) -> Vec<(&'static str, Tensor)> {
        vec![("total_count", self.total_count.clone()), self.p.given()]
    }
    fn support(&self) -> Result<Constraint> {
        Ok(Constraint::IntegerInterval(Bound::Num(0.0), Bound::Tensor(self.total_count.clone())))
    }
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let shape = self.extended_shape(sample_shape);
        let n = expand_to(&self.total_count, &shape)?.to_f64_vec()?;
        let p = expand_to(&self.p.probs, &shape)?.to_f64_vec()?;
        let mut rng = HostRng::new();
        let v = n.iter().zip(&p).map(|(&n, &p)| binomial_one(&mut rng, n, p)).collect();
        to_tensor(v, &shape, self.p.probs.dtype(), self.p.probs.device())
    }
    fn log_prob(&self, value: &Tensor) -> Result<Tensor> {
        maybe_validate(self, value)?;
        let n = &self.total_count;
        let l = &self.p.logits;
        let lf_n = n.add_scalar(1.0)?.lgamma()?;
        let lf_k = value.add_scalar(1.0)?.lgamma()?;
        let lf_nmk = n.sub(value)?.add_scalar(1.0)?.lgamma()?;
        // n * max(l, 0) + n * log1p(exp(-|l|)) - log n!, the log normalizer written stably
        let norm = n.mul(&clamp_by_zero(l)?)?.add(&n.mul(&l.abs()?.neg()?.exp()?.log1p()?)?)?.sub(&lf_n)?;
        value.mul(l)?.sub(&lf_k)?.sub(&lf_nmk)?.sub(&norm)
    }
    fn entropy(&self) -> Result<Tensor> {
        let n = self.total_count.to_f64_vec()?;
        let max = n.iter().cloned().fold(0.0, f64::max);
        if n.iter().any(|&x| x != max) {
            return Err(Error::unsupported("Binomial.entropy", "Inhomogeneous total count not supported by `entropy`."));
        }
        // -sum_k p(k) log p(k) over the enumerated support
        let k = max as usize + 1;
        let mut shape = vec![k];
        shape.extend(std::iter::repeat_n(1, self.batch.len()));
        let values = Tensor::arange_on(0.0.into(), (k as f64).into(), 1.0.into(), self.p.probs.dtype(), self.p.probs.device())?.reshape(&crate::util::i64s(&shape))?;
        let values = expand_to(&values, &crate::util::extended(&[k], &self.batch, &[]))?;
        let lp = self.log_prob(&values)?;
        lp.exp()?.mul(&lp)?.sum_dims(Some(&[0]), false, None)?.neg()
    }
    fn mean(&self) -> Result<Tensor> {
        self.total_count.mul(&self.p.probs)
    }
    fn mode(&self) -> Result<Tensor> {
        let m = self.total_count.add_scalar(1.0)?.mul(&self.p.probs)?.floor()?;
        m.minimum(&self.total_count)
    }
    fn variance(&self) -> Result<Tensor> {
        self.total_count.mul(&self.p.probs)?.mul(&self.p.probs.neg()?.add_scalar(1.0)?)
    }
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>> {
        check_expand(self, batch_shape)?;
        Ok(Box::new(Binomial {
            total_count: expand_to(&self.total_count, batch_shape)?,
            p: self.p.expand(batch_shape)?,
            batch: batch_shape.to_vec(),
            validate: self.validate,
        }))
    }
}

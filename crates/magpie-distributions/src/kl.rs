//! `kl_divergence(p, q)` and its registry keyed by the pair of distribution types, with
//! PyTorch's registered formulas for the distributions of this crate.

use std::any::TypeId;
use std::collections::HashMap;
use std::f64::consts::PI;
use std::sync::{Arc, OnceLock, RwLock};

use magpie_core::ops::linalg::solve_triangular;
use magpie_core::ops::shape_ops::broadcast_shapes;
use magpie_core::{Error, Result, Tensor};

use crate::distribution::{all_true, Distribution};
use crate::dists::mvn::batch_mahalanobis;
use crate::dists::*;
use crate::util::{expand_to, extended, sum_rightmost};

type KlFn = Arc<dyn Fn(&dyn Distribution, &dyn Distribution) -> Result<Tensor> + Send + Sync>;

fn registry() -> &'static RwLock<HashMap<(TypeId, TypeId), KlFn>> {
    static R: OnceLock<RwLock<HashMap<(TypeId, TypeId), KlFn>>> = OnceLock::new();
    R.get_or_init(|| {
        let mut m = HashMap::new();
        builtins(&mut m);
        RwLock::new(m)
    })
}

fn wrap<P: Distribution, Q: Distribution>(f: impl Fn(&P, &Q) -> Result<Tensor> + Send + Sync + 'static) -> KlFn {
    Arc::new(move |p: &dyn Distribution, q: &dyn Distribution| {
        match (p.as_any().downcast_ref::<P>(), q.as_any().downcast_ref::<Q>()) {
            (Some(p), Some(q)) => f(p, q),
            _ => Err(Error::value("kl_divergence", "registry entry called with the wrong types")),
        }
    })
}

/// `@register_kl(P, Q)`: adds (or replaces) the formula for the pair of types.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_distributions::{kl_divergence, register_kl, Distribution, Normal, Poisson};
/// register_kl(|p: &Normal, _q: &Poisson| p.loc.full_like(f64::INFINITY));
/// let p = Normal::new(&Tensor::scalar(0f64), &Tensor::scalar(1f64))?;
/// let q = Poisson::new(&Tensor::scalar(1f64))?;
/// assert_eq!(kl_divergence(&p, &q)?.to_f64_vec()?, vec![f64::INFINITY]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn register_kl<P: Distribution, Q: Distribution>(f: impl Fn(&P, &Q) -> Result<Tensor> + Send + Sync + 'static) {
    let mut r = registry().write().unwrap_or_else(|e| e.into_inner());
    r.insert((TypeId::of::<P>(), TypeId::of::<Q>()), wrap(f));
}

/// `torch.distributions.kl_divergence(p, q)`: KL(p || q) over the batch; PyTorch's
/// NotImplementedError wording for a pair without a formula.
pub fn kl_divergence(p: &dyn Distribution, q: &dyn Distribution) -> Result<Tensor> {
    let key = (p.as_any().type_id(), q.as_any().type_id());
    let f = {
        let r = registry().read().unwrap_or_else(|e| e.into_inner());
        r.get(&key).cloned()
    };
    match f {
        Some(f) => f(p, q),
        None => Err(Error::unsupported(
            "kl_divergence",
            format!("No KL(p || q) is implemented for p type {} and q type {}", p.name(), q.name()),
        )),
    }
}

fn put<P: Distribution, Q: Distribution>(m: &mut HashMap<(TypeId, TypeId), KlFn>, f: impl Fn(&P, &Q) -> Result<Tensor> + Send + Sync + 'static) {
    m.insert((TypeId::of::<P>(), TypeId::of::<Q>()), wrap(f));
}

fn inf_like(t: &Tensor) -> Result<Tensor> {
    t.full_like(f64::INFINITY)
}

// result[mask] = v
fn set_where(r: &Tensor, mask: &Tensor, v: f64) -> Result<Tensor> {
    let shape = broadcast_shapes(&[r.shape().to_vec(), mask.shape().to_vec()])?;
    let r = expand_to(r, &shape)?;
    mask.expand(&crate::util::i64s(&shape))?.where_(&r.full_like(v)?, &r)
}

fn x_log_x(t: &Tensor) -> Result<Tensor> {
    t.mul(&t.log()?)
}

fn one_minus(t: &Tensor) -> Result<Tensor> {
    t.neg()?.add_scalar(1.0)
}

const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

fn kl_normal_normal(p: &Normal, q: &Normal) -> Result<Tensor> {
    let var_ratio = p.scale.div(&q.scale)?.square()?;
    let t1 = p.loc.sub(&q.loc)?.div(&q.scale)?.square()?;
    var_ratio.add(&t1)?.sub_scalar(1.0)?.sub(&var_ratio.log()?)?.mul_scalar(0.5)
}

fn kl_categorical(p: &Categorical, q: &Categorical) -> Result<Tensor> {
    let t = p.probs().mul(&p.logits().sub(q.logits())?)?;
    let t = set_where(&t, &q.probs().eq_scalar(0.0)?, f64::INFINITY)?;
    let t = set_where(&t, &p.probs().eq_scalar(0.0)?, 0.0)?;
    t.sum_dims(Some(&[-1]), false, None)
}

fn kl_gamma_gamma(p: &Gamma, q: &Gamma) -> Result<Tensor> {
    let t1 = q.concentration.mul(&p.rate.div(&q.rate)?.log()?)?;
    let t2 = q.concentration.lgamma()?.sub(&p.concentration.lgamma()?)?;
    let t3 = p.concentration.sub(&q.concentration)?.mul(&p.concentration.digamma()?)?;
    let t4 = q.rate.sub(&p.rate)?.mul(&p.concentration.div(&p.rate)?)?;
    t1.add(&t2)?.add(&t3)?.add(&t4)
}

fn builtins(m: &mut HashMap<(TypeId, TypeId), KlFn>) {
    // same family
    put(m, |p: &Bernoulli, q: &Bernoulli| {
        let sp = |t: &Tensor| t.softplus(1.0, 20.0);
        let t1 = p.probs().mul(&sp(&q.logits().neg()?)?.sub(&sp(&p.logits().neg()?)?)?)?;
        let t1 = set_where(&t1, &q.probs().eq_scalar(0.0)?, f64::INFINITY)?;
        let t1 = set_where(&t1, &p.probs().eq_scalar(0.0)?, 0.0)?;
        let t2 = one_minus(p.probs())?.mul(&sp(q.logits())?.sub(&sp(p.logits())?)?)?;
        let t2 = set_where(&t2, &q.probs().eq_scalar(1.0)?, f64::INFINITY)?;
        let t2 = set_where(&t2, &p.probs().eq_scalar(1.0)?, 0.0)?;
        t1.add(&t2)
    });
    put(m, |p: &Beta, q: &Beta| {
        let sp = p.concentration1.add(&p.concentration0)?;
        let sq = q.concentration1.add(&q.concentration0)?;
        let t1 = q.concentration1.lgamma()?.add(&q.concentration0.lgamma()?)?.add(&sp.lgamma()?)?;
        let t2 = p.concentration1.lgamma()?.add(&p.concentration0.lgamma()?)?.add(&sq.lgamma()?)?;
        let t3 = p.concentration1.sub(&q.concentration1)?.mul(&p.concentration1.digamma()?)?;
        let t4 = p.concentration0.sub(&q.concentration0)?.mul(&p.concentration0.digamma()?)?;
        let t5 = sq.sub(&sp)?.mul(&sp.digamma()?)?;
        t1.sub(&t2)?.add(&t3)?.add(&t4)?.add(&t5)
    });
    put(m, |p: &Binomial, q: &Binomial| {
        if all_true(&p.total_count.lt(&q.total_count)?.logical_not()?)? {
            let kl = p.probs().mul(&p.logits().sub(q.logits())?)?.add(&p.probs().neg()?.log1p()?)?.sub(&q.probs().neg()?.log1p()?)?;
            let kl = p.total_count.mul(&kl)?;
            set_where(&kl, &p.total_count.gt(&q.total_count)?, f64::INFINITY)
        } else {
            Err(Error::unsupported("kl_divergence", "KL between Binomials where q.total_count > p.total_count is not implemented"))
        }
    });
    put(m, kl_categorical);
    put(m, |p: &OneHotCategorical, q: &OneHotCategorical| kl_categorical(&p.categorical, &q.categorical));
    put(m, |p: &Dirichlet, q: &Dirichlet| {
        let sum = |t: &Tensor| t.sum_dims(Some(&[-1]), false, None);
        let sp = sum(&p.concentration)?;
        let sq = sum(&q.concentration)?;
        let t1 = sp.lgamma()?.sub(&sq.lgamma()?)?;
        let t2 = sum(&p.concentration.lgamma()?.sub(&q.concentration.lgamma()?)?)?;
        let t3 = p.concentration.sub(&q.concentration)?;
        let t4 = p.concentration.digamma()?.sub(&sp.digamma()?.unsqueeze(-1)?)?;
        t1.sub(&t2)?.add(&sum(&t3.mul(&t4)?)?)
    });
    put(m, |p: &Exponential, q: &Exponential| {
        let r = q.rate.div(&p.rate)?;
        r.log()?.neg()?.add(&r)?.sub_scalar(1.0)
    });
    put(m, kl_gamma_gamma);
    put(m, |p: &Laplace, q: &Laplace| {
        let sr = p.scale.div(&q.scale)?;
        let d = p.loc.sub(&q.loc)?.abs()?;
        let t3 = sr.mul(&d.neg()?.div(&p.scale)?.exp()?)?;
        sr.log()?.neg()?.add(&d.div(&q.scale)?)?.add(&t3)?.sub_scalar(1.0)
    });
    put(m, |p: &MultivariateNormal, q: &MultivariateNormal| {
        if p.event_shape() != q.event_shape() {
            return Err(Error::value("kl_divergence", "KL-divergence between two Multivariate Normals with different event shapes cannot be computed"));
        }
        let hld = |l: &Tensor| l.diagonal(0, -2, -1)?.log()?.sum_dims(Some(&[-1]), false, None);
        let half1 = hld(&q.scale_tril)?.sub(&hld(&p.scale_tril)?)?;
        let (ps, qs) = (p.scale_tril.shape(), q.scale_tril.shape());
        let b = broadcast_shapes(&[qs[..qs.len() - 2].to_vec(), ps[..ps.len() - 2].to_vec()])?;
        let n = p.event_shape()[0];
        let full = extended(&[], &b, &[n, n]);
        let ql = expand_to(&q.scale_tril, &full)?.contiguous()?;
        let pl = expand_to(&p.scale_tril, &full)?.contiguous()?;
        let term2 = solve_triangular(&ql, &pl, false, true, false)?.square()?.sum_dims(Some(&[-2, -1]), false, None)?;
        let term3 = batch_mahalanobis(&q.scale_tril, &q.loc.sub(&p.loc)?)?;
        half1.add(&term2.add(&term3)?.sub_scalar(n as f64)?.mul_scalar(0.5)?)
    });
    put(m, kl_normal_normal);
    put(m, |p: &Poisson, q: &Poisson| p.rate.mul(&p.rate.log()?.sub(&q.rate.log()?)?)?.sub(&p.rate.sub(&q.rate)?));
    put(m, |p: &Uniform, q: &Uniform| {
        let r = q.high.sub(&q.low)?.div(&p.high.sub(&p.low)?)?.log()?;
        set_where(&r, &q.low.gt(&p.low)?.logical_or(&q.high.lt(&p.high)?)?, f64::INFINITY)
    });
    put(m, |p: &Independent, q: &Independent| {
        if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims {
            return Err(Error::unsupported("kl_divergence", "Independent distributions with different reinterpreted_batch_ndims"));
        }
        sum_rightmost(&kl_divergence(p.base.as_ref(), q.base.as_ref())?, p.reinterpreted_batch_ndims)
    });
    put(m, |p: &TransformedDistribution, q: &TransformedDistribution| {
        let keys = |t: &TransformedDistribution| -> Result<Vec<String>> { t.transforms.iter().map(|x| x.key()).collect() };
        if keys(p)? != keys(q)? || p.event_shape() != q.event_shape() {
            return Err(Error::unsupported("kl_divergence", "TransformedDistributions with different transforms or event shapes"));
        }
        kl_divergence(p.base.as_ref(), q.base.as_ref())
    });
    put(m, |p: &LogNormal, q: &LogNormal| kl_normal_normal(&p.base(), &q.base()));

    // across families
    put(m, |p: &Bernoulli, q: &Poisson| p.entropy()?.neg()?.sub(&p.probs().mul(&q.rate.log()?)?.sub(&q.rate)?));
    put(m, |p: &Beta, q: &Exponential| {
        let m = p.concentration1.div(&p.concentration1.add(&p.concentration0)?)?;
        p.entropy()?.neg()?.sub(&q.rate.log()?)?.add(&q.rate.mul(&m)?)
    });
    put(m, |p: &Beta, q: &Gamma| {
        let total = p.concentration1.add(&p.concentration0)?;
        let t1 = p.entropy()?.neg()?;
        let t2 = q.concentration.lgamma()?.sub(&q.concentration.mul(&q.rate.log()?)?)?;
        let t3 = q.concentration.sub_scalar(1.0)?.mul(&p.concentration1.digamma()?.sub(&total.digamma()?)?)?;
        let t4 = q.rate.mul(&p.concentration1)?.div(&total)?;
        t1.add(&t2)?.sub(&t3)?.add(&t4)
    });
    put(m, |p: &Beta, q: &Normal| {
        let total = p.concentration1.add(&p.concentration0)?;
        let e = p.concentration1.div(&total)?;
        let var = q.scale.square()?;
        let t1 = p.entropy()?.neg()?;
        let t2 = var.mul_scalar(2.0 * PI)?.log()?.mul_scalar(0.5)?;
        let t3 = e.mul(&one_minus(&e)?)?.div(&total.add_scalar(1.0)?)?.add(&e.square()?)?.mul_scalar(0.5)?;
        let t4 = q.loc.mul(&e)?;
        let t5 = q.loc.square()?.mul_scalar(0.5)?;
        t1.add(&t2)?.add(&t3.sub(&t4)?.add(&t5)?.div(&var)?)
    });
    put(m, |p: &Beta, q: &Uniform| {
        let r = p.entropy()?.neg()?.add(&q.high.sub(&q.low)?.log()?)?;
        set_where(&r, &q.low.gt_scalar(0.0)?.logical_or(&q.high.lt_scalar(1.0)?)?, f64::INFINITY)
    });
    put(m, |p: &Exponential, _q: &Beta| inf_like(&p.rate));
    put(m, |p: &Exponential, _q: &Uniform| inf_like(&p.rate));
    put(m, |p: &Exponential, q: &Gamma| {
        let ratio = q.rate.div(&p.rate)?;
        let t1 = q.concentration.neg()?.mul(&ratio.log()?)?;
        t1.add(&ratio)?.add(&q.concentration.lgamma()?)?.add(&q.concentration.mul_scalar(EULER_GAMMA)?)?.sub_scalar(1.0 + EULER_GAMMA)
    });
    put(m, |p: &Exponential, q: &Normal| {
        let var = q.scale.square()?;
        let r2 = p.rate.square()?;
        let t1 = r2.mul(&var)?.mul_scalar(2.0 * PI)?.log()?.mul_scalar(0.5)?;
        let t2 = r2.reciprocal()?;
        let t3 = q.loc.div(&p.rate)?;
        let t4 = q.loc.square()?.mul_scalar(0.5)?;
        t1.sub_scalar(1.0)?.add(&t2.sub(&t3)?.add(&t4)?.div(&var)?)
    });
    put(m, |p: &Gamma, _q: &Beta| inf_like(&p.concentration));
    put(m, |p: &Gamma, _q: &Uniform| inf_like(&p.concentration));
    put(m, |p: &Gamma, q: &Exponential| p.entropy()?.neg()?.sub(&q.rate.log()?)?.add(&q.rate.mul(&p.concentration)?.div(&p.rate)?));
    put(m, |p: &Gamma, q: &Normal| {
        let var = q.scale.square()?;
        let b2 = p.rate.square()?;
        let c = &p.concentration;
        let t1 = b2.mul(&var)?.mul_scalar(2.0 * PI)?.log()?.mul_scalar(0.5)?.sub(c)?.sub(&c.lgamma()?)?;
        let t2 = c.square()?.add(c)?.mul_scalar(0.5)?.div(&b2)?;
        let t3 = q.loc.mul(c)?.div(&p.rate)?;
        let t4 = q.loc.square()?.mul_scalar(0.5)?;
        t1.add(&c.sub_scalar(1.0)?.mul(&c.digamma()?)?)?.add(&t2.sub(&t3)?.add(&t4)?.div(&var)?)
    });
    put(m, |p: &Laplace, _q: &Beta| inf_like(&p.loc));
    put(m, |p: &Laplace, _q: &Exponential| inf_like(&p.loc));
    put(m, |p: &Laplace, _q: &Gamma| inf_like(&p.loc));
    put(m, |p: &Laplace, _q: &Uniform| inf_like(&p.loc));
    put(m, |p: &Laplace, q: &Normal| {
        let var = q.scale.square()?;
        let r = p.scale.square()?.div(&var)?;
        let t1 = r.mul_scalar(2.0 / PI)?.log()?.mul_scalar(0.5)?;
        let t2 = p.loc.square()?.mul_scalar(0.5)?;
        let t3 = p.loc.mul(&q.loc)?;
        let t4 = q.loc.square()?.mul_scalar(0.5)?;
        t1.neg()?.add(&r)?.add(&t2.sub(&t3)?.add(&t4)?.div(&var)?)?.sub_scalar(1.0)
    });
    put(m, |p: &Normal, _q: &Beta| inf_like(&p.loc));
    put(m, |p: &Normal, _q: &Exponential| inf_like(&p.loc));
    put(m, |p: &Normal, _q: &Gamma| inf_like(&p.loc));
    put(m, |p: &Normal, _q: &Uniform| inf_like(&p.loc));
    put(m, |p: &Normal, q: &Laplace| {
        let d = p.loc.sub(&q.loc)?;
        let sr = p.scale.div(&q.scale)?;
        let dr = d.div(&p.scale)?;
        let t1 = sr.log()?;
        let t2 = p.scale.mul(&dr.square()?.mul_scalar(-0.5)?.exp()?)?.mul_scalar((2.0 / PI).sqrt())?;
        let t3 = d.mul(&dr.mul_scalar(0.5f64.sqrt())?.erf()?)?;
        t1.neg()?.add(&t2.add(&t3)?.div(&q.scale)?)?.sub_scalar(0.5 * (1.0 + (0.5 * PI).ln()))
    });
    put(m, |p: &Poisson, _q: &Bernoulli| inf_like(&p.rate));
    put(m, |p: &Poisson, _q: &Binomial| inf_like(&p.rate));
    put(m, |p: &Uniform, q: &Beta| {
        let c = p.high.sub(&p.low)?;
        let t1 = c.log()?;
        let t2 = q.concentration1.sub_scalar(1.0)?.mul(&x_log_x(&p.high)?.sub(&x_log_x(&p.low)?)?.sub(&c)?)?.div(&c)?;
        let t3 = q.concentration0.sub_scalar(1.0)?.mul(&x_log_x(&one_minus(&p.high)?)?.sub(&x_log_x(&one_minus(&p.low)?)?)?.add(&c)?)?.div(&c)?;
        let t4 = q.concentration1.lgamma()?.add(&q.concentration0.lgamma()?)?.sub(&q.concentration1.add(&q.concentration0)?.lgamma()?)?;
        let r = t3.add(&t4)?.sub(&t1)?.sub(&t2)?;
        set_where(&r, &p.high.gt_scalar(1.0)?.logical_or(&p.low.lt_scalar(0.0)?)?, f64::INFINITY)
    });
    put(m, |p: &Uniform, q: &Exponential| {
        let r = q.rate.mul(&p.high.add(&p.low)?)?.mul_scalar(0.5)?.sub(&p.high.sub(&p.low)?.mul(&q.rate)?.log()?)?;
        set_where(&r, &p.low.lt_scalar(0.0)?, f64::INFINITY)
    });
    put(m, |p: &Uniform, q: &Gamma| {
        let c = p.high.sub(&p.low)?;
        let t1 = c.log()?;
        let t2 = q.concentration.lgamma()?.sub(&q.concentration.mul(&q.rate.log()?)?)?;
        let t3 = one_minus(&q.concentration)?.mul(&x_log_x(&p.high)?.sub(&x_log_x(&p.low)?)?.sub(&c)?)?.div(&c)?;
        let t4 = q.rate.mul(&p.high.add(&p.low)?)?.mul_scalar(0.5)?;
        let r = t1.neg()?.add(&t2)?.add(&t3)?.add(&t4)?;
        set_where(&r, &p.low.lt_scalar(0.0)?, f64::INFINITY)
    });
    put(m, |p: &Uniform, q: &Normal| {
        let c = p.high.sub(&p.low)?;
        let t1 = q.scale.mul_scalar((2.0 * PI).sqrt())?.div(&c)?.log()?;
        let t2 = c.square()?.div_scalar(12.0)?;
        let t3 = p.high.add(&p.low)?.sub(&q.loc.mul_scalar(2.0)?)?.mul_scalar(0.5)?.square()?;
        t1.add(&t2.add(&t3)?.mul_scalar(0.5)?.div(&q.scale.square()?)?)
    });
}

//! The API around the numbers: shapes, broadcasting, expand, validation switches and
//! messages, the KL registry (unregistered pairs, user registration), transforms.

use std::sync::Arc;

use magpie_core::{Error, Tensor};
use magpie_distributions::*;

fn t(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

fn s(v: f64) -> Tensor {
    Tensor::scalar(v)
}

fn msg(e: Error) -> String {
    match e {
        Error::Value { msg, .. } | Error::Unsupported { msg, .. } | Error::Shape { msg, .. } => msg,
        other => other.to_string(),
    }
}

#[test]
fn shapes_and_broadcasting() {
    let d = Normal::new(&t(&[0.0, 1.0, 2.0]), &Tensor::from_vec(vec![1.0, 2.0], &[2, 1]).unwrap()).unwrap();
    assert_eq!(d.batch_shape(), &[2, 3]);
    assert_eq!(d.event_shape(), &[] as &[usize]);
    assert_eq!(d.sample(&[4]).unwrap().shape(), &[4, 2, 3]);
    assert_eq!(d.log_prob(&s(0.5)).unwrap().shape(), &[2, 3]);
    assert_eq!(d.log_prob(&Tensor::zeros(&[5, 1, 3]).unwrap()).unwrap().shape(), &[5, 2, 3]);
    let mvn = MultivariateNormal::from_covariance(&Tensor::zeros(&[4, 3]).unwrap(), &Tensor::eye_on(3, 3, magpie_core::DType::F32, magpie_core::Device::Cpu).unwrap()).unwrap();
    assert_eq!((mvn.batch_shape(), mvn.event_shape()), (&[4usize][..], &[3usize][..]));
    assert_eq!(mvn.sample(&[2]).unwrap().shape(), &[2, 4, 3]);
    let dir = Dirichlet::new(&Tensor::ones(&[2, 5]).unwrap()).unwrap();
    assert_eq!(dir.sample(&[]).unwrap().shape(), &[2, 5]);
    let c = Categorical::from_logits(&Tensor::zeros(&[3, 4]).unwrap()).unwrap();
    assert_eq!(c.sample(&[6]).unwrap().shape(), &[6, 3]);
    let ind = Independent::new(Box::new(d.clone()), 1).unwrap();
    assert_eq!((ind.batch_shape(), ind.event_shape()), (&[2usize][..], &[3usize][..]));
    assert_eq!(ind.log_prob(&Tensor::zeros(&[2, 3]).unwrap()).unwrap().shape(), &[2]);
}

#[test]
fn expand_keeps_values() {
    let d = Gamma::new(&t(&[1.0, 2.0]), &s(3.0)).unwrap();
    let e = d.expand(&[4, 2]).unwrap();
    assert_eq!(e.batch_shape(), &[4, 2]);
    let x = Tensor::from_vec(vec![0.5, 1.5], &[2]).unwrap();
    let a = d.log_prob(&x).unwrap().to_f64_vec().unwrap();
    let b = e.log_prob(&x).unwrap().to_f64_vec().unwrap();
    assert_eq!(b.len(), 8);
    assert_eq!(&b[6..], &a[..]);
    assert!(d.expand(&[3]).is_err());
    let ind = Independent::new(Box::new(Normal::new(&Tensor::zeros(&[2, 3]).unwrap(), &s(1.0)).unwrap()), 1).unwrap();
    let e = ind.expand(&[5, 2]).unwrap();
    assert_eq!((e.batch_shape(), e.event_shape()), (&[5usize, 2][..], &[3usize][..]));
    let ln = LogNormal::new(&s(0.0), &s(1.0)).unwrap().expand(&[3]).unwrap();
    assert_eq!(ln.sample(&[2]).unwrap().shape(), &[2, 3]);
}

#[test]
fn validation_messages_and_switch() {
    let e = msg(Normal::new(&t(&[0.0, 1.0]), &t(&[1.0, -1.0])).err().unwrap());
    assert!(e.starts_with("Expected parameter scale (Tensor of shape (2,)) of distribution Normal(loc: torch.Size([2]), scale: torch.Size([2])) to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values:\n"), "{e}");
    let e = msg(Bernoulli::new(None, None).err().unwrap());
    assert_eq!(e, "Either `probs` or `logits` must be specified, but not both.");
    let e = msg(Bernoulli::new(Some(&s(0.5)), Some(&s(0.0))).err().unwrap());
    assert_eq!(e, "Either `probs` or `logits` must be specified, but not both.");
    let e = msg(MultivariateNormal::new(&t(&[0.0]), None, None, None).err().unwrap());
    assert_eq!(e, "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.");
    let e = msg(Uniform::new(&s(1.0), &s(0.0)).err().unwrap());
    assert_eq!(e, "Uniform is not defined when low>= high");
    let e = msg(Dirichlet::new(&s(1.0)).err().unwrap());
    assert_eq!(e, "`concentration` parameter must be at least one-dimensional.");
    let not_pd = Tensor::from_vec(vec![1.0, 2.0, 2.0, 1.0], &[2, 2]).unwrap();
    let e = msg(MultivariateNormal::from_covariance(&t(&[0.0, 0.0]), &not_pd).err().unwrap());
    assert!(e.contains("to satisfy the constraint PositiveDefinite()"), "{e}");
    let f32s = |v: f32| Tensor::from_vec(vec![v], &[1]).unwrap();
    let e = msg(Exponential::new(&f32s(1.0)).unwrap().log_prob(&f32s(-1.0)).err().unwrap());
    assert_eq!(e, "Expected value argument (Tensor of shape (1,)) to be within the support (GreaterThanEq(lower_bound=0.0)) of the distribution Exponential(rate: tensor([1.])), but found invalid values:\ntensor([-1.])");
    let e = msg(Categorical::from_probs(&t(&[0.5, 0.5])).unwrap().log_prob(&s(2.0)).err().unwrap());
    assert!(e.contains("IntegerInterval(lower_bound=0, upper_bound=1)"), "{e}");
    let e = msg(Binomial::from_probs(&s(5.0), &s(0.3)).unwrap().log_prob(&s(6.0)).err().unwrap());
    assert!(e.contains("IntegerInterval(lower_bound=0, upper_bound=5.0)"), "{e}");

}

#[test]
fn repr_as_pytorch() {
    assert_eq!(Normal::new(&s(0.0), &s(1.0)).unwrap().repr(), "Normal(loc: 0.0, scale: 1.0)");
    assert_eq!(Normal::new(&Tensor::zeros(&[2, 3]).unwrap(), &s(1.0)).unwrap().repr(), "Normal(loc: torch.Size([2, 3]), scale: torch.Size([2, 3]))");
    assert_eq!(Bernoulli::from_logits(&t(&[0.0, 1.0])).unwrap().repr(), "Bernoulli(logits: torch.Size([2]))");
    assert_eq!(format!("{}", Uniform::new(&s(0.0), &s(1.0)).unwrap().support().unwrap()), "Interval(lower_bound=0.0, upper_bound=1.0)");
}

#[test]
fn kl_registry() {
    let n = Normal::new(&s(0.0), &s(1.0)).unwrap();
    let st = StudentT::new(&s(3.0), &s(0.0), &s(1.0)).unwrap();
    let e = msg(kl_divergence(&n, &st).err().unwrap());
    assert_eq!(e, "No KL(p || q) is implemented for p type Normal and q type StudentT");
    // a user formula for a new pair, then used by kl_divergence
    register_kl(|p: &StudentT, q: &StudentT| p.df.sub(&q.df)?.abs());
    let st2 = StudentT::new(&s(5.0), &s(0.0), &s(1.0)).unwrap();
    assert_eq!(kl_divergence(&st, &st2).unwrap().to_f64_vec().unwrap(), vec![2.0]);
    // KL(p || p) = 0 for the same-family formulas
    let g = Gamma::new(&t(&[0.5, 3.0]), &t(&[2.0, 1.0])).unwrap();
    assert!(kl_divergence(&g, &g).unwrap().to_f64_vec().unwrap().iter().all(|v| v.abs() < 1e-12));
    // Binomial with q.total_count > p.total_count is PyTorch's NotImplementedError
    let b1 = Binomial::from_probs(&s(5.0), &s(0.5)).unwrap();
    let b2 = Binomial::from_probs(&s(6.0), &s(0.5)).unwrap();
    assert!(kl_divergence(&b1, &b2).err().unwrap().is_unsupported());
}

#[test]
fn transforms_invert_and_jacobians() {
    let x = t(&[-1.5, -0.2, 0.0, 0.7, 2.0]);
    let ts: Vec<Arc<dyn Transform>> = vec![
        Arc::new(ExpTransform),
        Arc::new(SigmoidTransform),
        Arc::new(TanhTransform),
        Arc::new(AffineTransform::new(&s(1.0), &s(-2.5), 0)),
        Arc::new(ComposeTransform::new(vec![Arc::new(AffineTransform::new(&s(0.5), &s(2.0), 0)), Arc::new(ExpTransform)])),
    ];
    for tr in &ts {
        let xr = x.detach().with_requires_grad().unwrap();
        let y = tr.forward(&xr).unwrap();
        let back = tr.inverse(&y.detach()).unwrap().to_f64_vec().unwrap();
        for (a, b) in back.iter().zip(x.to_f64_vec().unwrap()) {
            assert!((a - b).abs() < 1e-9, "{}: inverse {a} vs {b}", tr.name());
        }
        // log |dy/dx| from autograd
        y.sum().unwrap().backward().unwrap();
        let dy = xr.grad().unwrap().to_f64_vec().unwrap();
        let ladj = tr.log_abs_det_jacobian(&x, &y.detach()).unwrap().to_f64_vec().unwrap();
        for (l, d) in ladj.iter().zip(dy) {
            assert!((l - d.abs().ln()).abs() < 1e-9, "{}: log|J| {l} vs {}", tr.name(), d.abs().ln());
        }
    }
    let p = PowerTransform { exponent: s(3.0) };
    let y = p.forward(&t(&[0.5, 2.0])).unwrap();
    assert_eq!(p.inverse(&y).unwrap().to_f64_vec().unwrap().iter().map(|v| (v * 1e9).round() / 1e9).collect::<Vec<_>>(), vec![0.5, 2.0]);
    assert_eq!(AbsTransform.forward(&t(&[-2.0])).unwrap().to_f64_vec().unwrap(), vec![2.0]);
}

#[test]
fn modes_and_misc() {
    let b = Bernoulli::from_probs(&t(&[0.2, 0.5, 0.9])).unwrap();
    let m = b.mode().unwrap().to_f64_vec().unwrap();
    assert_eq!(m[0], 0.0);
    assert!(m[1].is_nan());
    assert_eq!(m[2], 1.0);
    let g = Gamma::new(&t(&[0.5, 3.0]), &s(2.0)).unwrap();
    assert_eq!(g.mode().unwrap().to_f64_vec().unwrap(), vec![0.0, 1.0]);
    let p = Poisson::new(&t(&[2.7])).unwrap();
    assert_eq!(p.mode().unwrap().to_f64_vec().unwrap(), vec![2.0]);
    let bi = Binomial::from_probs(&s(10.0), &s(0.35)).unwrap();
    assert_eq!(bi.mode().unwrap().to_f64_vec().unwrap(), vec![3.0]);
    let st = StudentT::new(&t(&[1.0, 2.0, 3.0]), &s(0.0), &s(1.0)).unwrap();
    let v = st.variance().unwrap().to_f64_vec().unwrap();
    assert!(v[0].is_nan() && v[1].is_infinite() && (v[2] - 3.0).abs() < 1e-12);
    let n = Normal::new(&s(1.0), &s(2.0)).unwrap();
    assert_eq!(n.stddev().unwrap().to_f64_vec().unwrap(), vec![2.0]);
}

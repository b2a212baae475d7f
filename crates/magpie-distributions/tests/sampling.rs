//! Samplers by their statistics: sample mean and variance within 5 standard errors of the
//! distribution's, cdf values of samples uniform, every sample in the support; and rsample
//! gradients: per-sample derivatives whose average matches the derivative of the mean.

use magpie_core::ops::random::manual_seed;
use magpie_core::{DType, Tensor};
use magpie_distributions::*;

const N: usize = 20000;

fn t(v: &[f64]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

fn s(v: f64) -> Tensor {
    Tensor::scalar(v)
}

// per column (last dims flattened), the samples of x [N, ...]
fn columns(x: &Tensor) -> Vec<Vec<f64>> {
    let v = x.to_dtype(DType::F64).unwrap().to_f64_vec().unwrap();
    let k = v.len() / x.shape()[0];
    (0..k).map(|j| v.iter().skip(j).step_by(k).cloned().collect()).collect()
}

fn moments(c: &[f64]) -> (f64, f64, f64) {
    let n = c.len() as f64;
    let m = c.iter().sum::<f64>() / n;
    let v = c.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    let m4 = c.iter().map(|x| (x - m).powi(4)).sum::<f64>() / n;
    (m, v, m4)
}

/// Sample mean and variance against the distribution's, within 5 standard errors.
fn check_moments(name: &str, d: &dyn Distribution) {
    let x = d.sample(&[N]).unwrap();
    assert_eq!(x.shape(), &d.extended_shape(&[N])[..], "{name}: sample shape");
    let ok = d.support().unwrap().check(&x).unwrap().to_f64_vec().unwrap();
    assert!(ok.iter().all(|&b| b != 0.0), "{name}: a sample outside the support {}", d.support().unwrap());
    let mean = d.mean().unwrap().to_dtype(DType::F64).unwrap().to_f64_vec().unwrap();
    let var = d.variance().unwrap().to_dtype(DType::F64).unwrap().to_f64_vec().unwrap();
    for (j, c) in columns(&x).iter().enumerate() {
        let (m, v, m4) = moments(c);
        let se_m = (var[j] / N as f64).sqrt();
        assert!((m - mean[j]).abs() <= 5.0 * se_m + 1e-12, "{name}[{j}]: sample mean {m}, mean {} (se {se_m})", mean[j]);
        // plus var * 2/N: the order of the estimator's bias, and the floor for two-point
        // distributions whose m4 - var^2 is 0 (Bernoulli(1/2))
        let se_v = ((m4 - v * v).max(0.0) / N as f64).sqrt();
        assert!((v - var[j]).abs() <= 5.0 * se_v + 2.0 * var[j] / N as f64 + 1e-12, "{name}[{j}]: sample variance {v}, variance {} (se {se_v})", var[j]);
    }
}

/// cdf(X) of samples is uniform: its mean within 5 standard errors of 1/2 and the fraction
/// below 0.1 within 5 standard errors of 0.1 (catches wrong shapes with right moments).
fn check_cdf_uniform(name: &str, d: &dyn Distribution) {
    let x = d.sample(&[N]).unwrap();
    let u = d.cdf(&x).unwrap();
    for (j, c) in columns(&u).iter().enumerate() {
        let (m, _, _) = moments(c);
        assert!((m - 0.5).abs() <= 5.0 * (1.0 / 12.0 / N as f64).sqrt(), "{name}[{j}]: mean cdf(X) {m}");
        let low = c.iter().filter(|&&p| p < 0.1).count() as f64 / N as f64;
        assert!((low - 0.1).abs() <= 5.0 * (0.09 / N as f64).sqrt(), "{name}[{j}]: P(cdf(X) < 0.1) = {low}");
    }
}

#[test]
fn continuous_samplers() {
    manual_seed(7);
    check_moments("Normal", &Normal::new(&t(&[0.0, -2.0]), &t(&[1.0, 3.0])).unwrap());
    check_moments("Laplace", &Laplace::new(&t(&[1.0, -1.0]), &t(&[0.5, 2.0])).unwrap());
    check_moments("Uniform", &Uniform::new(&t(&[0.0, -3.0]), &t(&[1.0, 5.0])).unwrap());
    check_moments("Exponential", &Exponential::new(&t(&[0.5, 4.0])).unwrap());
    check_moments("Gamma", &Gamma::new(&t(&[0.3, 1.0, 2.5, 30.0]), &t(&[1.0, 2.0, 0.5, 3.0])).unwrap());
    check_moments("Beta", &Beta::new(&t(&[0.5, 2.0, 8.0]), &t(&[0.5, 5.0, 1.5])).unwrap());
    check_moments("Dirichlet", &Dirichlet::new(&Tensor::from_vec(vec![0.4, 1.0, 3.0, 5.0, 5.0, 0.2], &[2, 3]).unwrap()).unwrap());
    check_moments("StudentT", &StudentT::new(&t(&[5.0, 12.0]), &t(&[1.0, -1.0]), &t(&[2.0, 0.5])).unwrap());
    check_moments("LogNormal", &LogNormal::new(&t(&[0.0, 1.0]), &t(&[0.5, 0.25])).unwrap());
    let cov = Tensor::from_vec(vec![2.0, 0.6, 0.6, 1.0], &[2, 2]).unwrap();
    check_moments("MultivariateNormal", &MultivariateNormal::from_covariance(&t(&[1.0, -1.0]), &cov).unwrap());
    let base = Normal::new(&Tensor::from_vec(vec![0.0, 1.0, 2.0, 3.0], &[2, 2]).unwrap(), &s(1.0)).unwrap();
    check_moments("Independent", &Independent::new(Box::new(base), 1).unwrap());
    let mix = Categorical::from_probs(&t(&[0.3, 0.7])).unwrap();
    let comp = Normal::new(&t(&[-2.0, 3.0]), &t(&[0.5, 1.0])).unwrap();
    check_moments("MixtureSameFamily", &MixtureSameFamily::new(mix, Box::new(comp)).unwrap());
}

#[test]
fn discrete_samplers() {
    manual_seed(11);
    check_moments("Bernoulli", &Bernoulli::from_probs(&t(&[0.1, 0.5, 0.95])).unwrap());
    check_moments("Binomial", &Binomial::from_probs(&t(&[1.0, 10.0, 100.0, 1000.0]), &t(&[0.5, 0.3, 0.9, 0.02])).unwrap());
    check_moments("Poisson", &Poisson::new(&t(&[0.2, 3.0, 9.5, 10.0, 50.0, 700.0])).unwrap());
    let probs = t(&[0.1, 0.2, 0.3, 0.4]);
    let c = Categorical::from_probs(&probs).unwrap();
    let x = c.sample(&[N]).unwrap();
    assert_eq!(x.dtype(), DType::I64);
    let v = x.to_f64_vec().unwrap();
    for (k, p) in [0.1, 0.2, 0.3, 0.4].iter().enumerate() {
        let f = v.iter().filter(|&&y| y == k as f64).count() as f64 / N as f64;
        assert!((f - p).abs() <= 5.0 * (p * (1.0 - p) / N as f64).sqrt(), "Categorical: frequency of {k} is {f}, p = {p}");
    }
    check_moments("OneHotCategorical", &OneHotCategorical::from_probs(&probs).unwrap());
}

/// The empirical pmf of a scalar discrete distribution against exp(log_prob), cell by cell,
/// within 5 standard errors.
fn check_pmf(name: &str, d: &dyn Distribution, n: usize, kmax: usize) {
    let x = d.sample(&[n]).unwrap().to_f64_vec().unwrap();
    for k in 0..=kmax {
        let p = d.log_prob(&s(k as f64)).unwrap().exp().unwrap().to_f64_vec().unwrap()[0];
        let f = x.iter().filter(|&&v| v == k as f64).count() as f64 / n as f64;
        assert!((f - p).abs() <= 5.0 * (p * (1.0 - p) / n as f64).sqrt() + 1e-9, "{name}: P({k}) sampled {f}, pmf {p}");
    }
}

#[test]
fn discrete_pmfs() {
    manual_seed(13);
    check_pmf("Poisson(4)", &Poisson::new(&s(4.0)).unwrap(), 100_000, 15);
    check_pmf("Poisson(10)", &Poisson::new(&s(10.0)).unwrap(), 100_000, 30);
    check_pmf("Poisson(25)", &Poisson::new(&s(25.0)).unwrap(), 100_000, 50);
    check_pmf("Binomial(20, 0.3)", &Binomial::from_probs(&s(20.0), &s(0.3)).unwrap(), 100_000, 20);
    check_pmf("Binomial(30, 0.8)", &Binomial::from_probs(&s(30.0), &s(0.8)).unwrap(), 100_000, 30);
}

#[test]
fn sample_distributions_by_cdf() {
    manual_seed(3);
    check_cdf_uniform("Normal", &Normal::new(&t(&[0.5]), &t(&[2.0])).unwrap());
    check_cdf_uniform("Laplace", &Laplace::new(&t(&[0.5]), &t(&[2.0])).unwrap());
    check_cdf_uniform("Exponential", &Exponential::new(&t(&[1.5])).unwrap());
    check_cdf_uniform("Gamma", &Gamma::new(&t(&[0.2, 1.5, 40.0]), &t(&[1.0, 2.0, 0.5])).unwrap());
    check_cdf_uniform("LogNormal", &LogNormal::new(&t(&[0.0]), &t(&[1.0])).unwrap());
    check_cdf_uniform("Uniform", &Uniform::new(&t(&[-1.0]), &t(&[1.0])).unwrap());
    // a decreasing transform: cdf is 1 - base cdf at the inverse
    let base = Normal::new(&t(&[0.3, -0.5]), &t(&[1.0, 0.5])).unwrap();
    let ts: Vec<std::sync::Arc<dyn Transform>> = vec![std::sync::Arc::new(AffineTransform::new(&s(1.0), &t(&[-2.0, 0.5]), 0)), std::sync::Arc::new(ExpTransform)];
    let td = TransformedDistribution::new(Box::new(base), ts).unwrap();
    check_cdf_uniform("TransformedDistribution", &td);
    let x = td.sample(&[1000]).unwrap();
    assert!(x.to_f64_vec().unwrap().iter().all(|&v| v > 0.0));
    let mix = Categorical::from_probs(&t(&[0.6, 0.4])).unwrap();
    let comp = Laplace::new(&t(&[-1.0, 2.0]), &t(&[0.5, 1.0])).unwrap();
    check_cdf_uniform("MixtureSameFamily", &MixtureSameFamily::new(mix, Box::new(comp)).unwrap());
}

#[test]
fn float32_samplers() {
    manual_seed(17);
    let t32 = |v: &[f32]| Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap();
    let g = Gamma::new(&t32(&[0.5, 4.0]), &t32(&[1.0, 2.0])).unwrap();
    assert_eq!(g.sample(&[2]).unwrap().dtype(), DType::F32);
    check_moments("Gamma f32", &g);
    check_moments("Normal f32", &Normal::new(&t32(&[1.0]), &t32(&[0.5])).unwrap());
    check_moments("Dirichlet f32", &Dirichlet::new(&t32(&[1.0, 2.0, 0.5])).unwrap());
    check_moments("Poisson f32", &Poisson::new(&t32(&[3.0, 30.0])).unwrap());
}

/// Per-sample derivatives of a reparameterized sample: a batch of `N` copies of the parameter,
/// one draw each; the average derivative of f(x) must match d E[f(x)] / d theta.
fn check_grad(name: &str, per_sample: &Tensor, expected: f64) {
    let g = per_sample.to_f64_vec().unwrap();
    let (m, v, _) = moments(&g);
    let se = (v / g.len() as f64).sqrt();
    assert!((m - expected).abs() <= 5.0 * se + 1e-9, "{name}: mean derivative {m}, expected {expected} (se {se})");
}

fn rep(v: f64) -> Tensor {
    Tensor::full_on(&[N], v, DType::F64, magpie_core::Device::Cpu).unwrap().with_requires_grad().unwrap()
}

#[test]
fn rsample_gradients() {
    manual_seed(5);
    // Normal: d x / d loc = 1 exactly; d (x - loc)^2 / d scale averages 2 scale
    let (loc, scale) = (rep(1.0), rep(2.0));
    let x = Normal::new(&loc, &scale).unwrap().rsample(&[]).unwrap();
    x.sub(&loc.detach()).unwrap().square().unwrap().sum().unwrap().backward().unwrap();
    check_grad("Normal d(x-loc)^2/dscale", &scale.grad().unwrap(), 4.0);
    let loc2 = rep(1.0);
    Normal::new(&loc2, &s(2.0)).unwrap().rsample(&[]).unwrap().sum().unwrap().backward().unwrap();
    assert!(loc2.grad().unwrap().to_f64_vec().unwrap().iter().all(|&g| g == 1.0));

    // Gamma(a, b): E x = a / b, d/da = 1 / b, d/db = -a / b^2 (implicit reparameterization)
    for a0 in [0.4, 1.0, 3.0, 12.0] {
        let (a, b) = (rep(a0), rep(2.0));
        Gamma::new(&a, &b).unwrap().rsample(&[]).unwrap().sum().unwrap().backward().unwrap();
        check_grad(&format!("Gamma({a0}) dx/dconcentration"), &a.grad().unwrap(), 0.5);
        check_grad(&format!("Gamma({a0}) dx/drate"), &b.grad().unwrap(), -a0 / 4.0);
    }
    // Beta(a, b): E x = a / (a + b)
    let (a, b) = (rep(2.0), rep(3.0));
    Beta::new(&a, &b).unwrap().rsample(&[]).unwrap().sum().unwrap().backward().unwrap();
    check_grad("Beta dx/dconcentration1", &a.grad().unwrap(), 3.0 / 25.0);
    check_grad("Beta dx/dconcentration0", &b.grad().unwrap(), -2.0 / 25.0);
    // Dirichlet: E x_0 = a_0 / sum a
    let conc = Tensor::from_vec([0.7, 1.5, 2.0].repeat(N), &[N, 3]).unwrap().with_requires_grad().unwrap();
    Dirichlet::new(&conc).unwrap().rsample(&[]).unwrap().select(-1, 0).unwrap().sum().unwrap().backward().unwrap();
    let g = conc.grad().unwrap();
    check_grad("Dirichlet dx0/da0", &g.select(-1, 0).unwrap(), 3.5 / (4.2 * 4.2));
    check_grad("Dirichlet dx0/da1", &g.select(-1, 1).unwrap(), -0.7 / (4.2 * 4.2));
    // StudentT: E (x - loc)^2 = scale^2 df / (df - 2)
    let (df, sc) = (rep(10.0), rep(1.5));
    let x = StudentT::new(&df, &s(0.0), &sc).unwrap().rsample(&[]).unwrap();
    x.square().unwrap().sum().unwrap().backward().unwrap();
    check_grad("StudentT d x^2/d scale", &sc.grad().unwrap(), 2.0 * 1.5 * 10.0 / 8.0);
    check_grad("StudentT d x^2/d df", &df.grad().unwrap(), -2.0 * 2.25 / 64.0);
    // Exponential: E x = 1 / rate
    let r = rep(2.0);
    Exponential::new(&r).unwrap().rsample(&[]).unwrap().sum().unwrap().backward().unwrap();
    check_grad("Exponential dx/drate", &r.grad().unwrap(), -0.25);
    // Uniform: E x = (low + high) / 2
    let (lo, hi) = (rep(-1.0), rep(3.0));
    Uniform::new(&lo, &hi).unwrap().rsample(&[]).unwrap().sum().unwrap().backward().unwrap();
    check_grad("Uniform dx/dlow", &lo.grad().unwrap(), 0.5);
    check_grad("Uniform dx/dhigh", &hi.grad().unwrap(), 0.5);
    // Laplace: E |x - loc| = scale
    let (l, sc) = (rep(0.5), rep(2.0));
    let x = Laplace::new(&l, &sc).unwrap().rsample(&[]).unwrap();
    x.sub(&l.detach()).unwrap().abs().unwrap().sum().unwrap().backward().unwrap();
    check_grad("Laplace d|x-loc|/dscale", &sc.grad().unwrap(), 1.0);
    // LogNormal: E x = exp(loc + scale^2 / 2)
    let (l, sc) = (rep(0.2), rep(0.5));
    LogNormal::new(&l, &sc).unwrap().rsample(&[]).unwrap().sum().unwrap().backward().unwrap();
    let m = (0.2f64 + 0.125).exp();
    check_grad("LogNormal dx/dloc", &l.grad().unwrap(), m);
    check_grad("LogNormal dx/dscale", &sc.grad().unwrap(), m * 0.5);
    // MultivariateNormal: E (x_0 - loc_0)^2 = L_00^2
    let tril = Tensor::from_vec([1.5, 0.0, 0.5, 1.0].repeat(N), &[N, 2, 2]).unwrap().with_requires_grad().unwrap();
    let x = MultivariateNormal::from_scale_tril(&t(&[0.0, 0.0]), &tril).unwrap().rsample(&[]).unwrap();
    x.select(-1, 0).unwrap().square().unwrap().sum().unwrap().backward().unwrap();
    let g = tril.grad().unwrap().reshape(&[N as i64, 4]).unwrap();
    check_grad("MultivariateNormal d x0^2 / d L00", &g.select(-1, 0).unwrap(), 3.0);
}

#[test]
fn has_rsample_as_pytorch() {
    let one = s(1.0);
    assert!(Normal::new(&one, &one).unwrap().has_rsample());
    assert!(Gamma::new(&one, &one).unwrap().has_rsample());
    assert!(!Poisson::new(&one).unwrap().has_rsample());
    assert!(!Bernoulli::from_probs(&s(0.5)).unwrap().has_rsample());
    assert!(Poisson::new(&one).unwrap().rsample(&[2]).is_err());
    let x = Gamma::new(&one.clone().with_requires_grad().unwrap(), &one).unwrap().sample(&[3]).unwrap();
    assert!(!x.requires_grad());
}

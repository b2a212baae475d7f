//! Implicit reparameterization of Gamma and Dirichlet samples: PyTorch's
//! `_standard_gamma_grad` (d x / d alpha = -(d cdf/d alpha) / pdf) and `_dirichlet_grad`, with
//! the same series, saddle-point and rational approximations, and the custom autograd
//! functions `_standard_gamma` and `_Dirichlet` whose backward uses them.

use magpie_core::autograd::{Function, FunctionCtx};
use magpie_core::ops::special::gamma::digamma;
use magpie_core::{Error, Result, Tensor};

use crate::samplers::{standard_gamma_one, to_tensor, HostRng};
use crate::util::tiny;

/// d x / d alpha for `x ~ Gamma(alpha, 1)` at one point.
pub fn standard_gamma_grad_one(alpha: f64, x: f64) -> f64 {
    if x < 0.8 {
        // Taylor series of the regularized lower incomplete gamma in x
        let mut numer = 1.0;
        let mut denom = alpha;
        let mut s1 = numer / denom;
        let mut s2 = numer / (denom * denom);
        for i in 1..=5 {
            numer *= -x / i as f64;
            denom += 1.0;
            s1 += numer / denom;
            s2 += numer / (denom * denom);
        }
        let pow_xa = x.powf(alpha);
        let pdf = x.powf(alpha - 1.0) * (-x).exp();
        let cdf = pow_xa * s1;
        let cdf_alpha = (x.ln() - digamma(alpha)) * cdf - pow_xa * s2;
        let r = -cdf_alpha / pdf;
        return if r.is_nan() { 0.0 } else { r };
    }
    if alpha > 8.0 {
        // Rice saddle-point expansion for large alpha
        if 0.9 * alpha <= x && x <= 1.1 * alpha {
            let n1 = 1.0 + 24.0 * alpha * (1.0 + 12.0 * alpha);
            let n2 = 1440.0 * alpha * alpha + 6.0 * x * (53.0 - 120.0 * x) - 65.0 * x * x / alpha + alpha * (107.0 + 3600.0 * x);
            let den = 1244160.0 * (alpha * alpha) * (alpha * alpha);
            return n1 * n2 / den;
        }
        let den = (8.0 * alpha).sqrt();
        let t2 = den / (alpha - x);
        let t3 = (x - alpha - alpha * (x / alpha).ln()).powf(-1.5);
        let t23 = if x < alpha { t2 - t3 } else { t2 + t3 };
        let t1 = (x / alpha).ln() * t23 - (2.0 / alpha).sqrt() * (alpha + x) / ((alpha - x) * (alpha - x));
        let stirling = 1.0 + 1.0 / (12.0 * alpha) * (1.0 + 1.0 / (24.0 * alpha));
        return -stirling * (x * t1) / den;
    }
    // bivariate rational approximation in (log(x / alpha), log(alpha))
    const C: [[f64; 8]; 3] = [
        [0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1.0, 0.32668115, 0.10406089, 0.0014179084],
        [0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
        [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07],
    ];
    let u = (x / alpha).ln();
    let v = alpha.ln();
    let cv: Vec<f64> = (0..8).map(|i| C[0][i] + u * (C[1][i] + u * C[2][i])).collect();
    let p = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]));
    let q = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]));
    (p / q).exp()
}

// Beta(alpha, beta) reparameterized gradient w.r.t. alpha near x = 0 (Taylor series).
fn beta_grad_alpha_small(x: f64, alpha: f64, beta: f64) -> f64 {
    let factor = digamma(alpha) - digamma(alpha + beta) - x.ln();
    let mut numer = 1.0;
    let mut series = numer / alpha * (factor + 1.0 / alpha);
    for i in 1..=10 {
        let fi = i as f64;
        numer *= (fi - beta) * x / fi;
        let den = alpha + fi;
        series += numer / den * (factor + 1.0 / den);
    }
    let r = x * (1.0 - x).powf(-beta) * series;
    if r.is_nan() {
        0.0
    } else {
        r
    }
}

// Beta(alpha, beta) reparameterized gradient w.r.t. beta near x = 0 (Taylor series).
fn beta_grad_beta_small(x: f64, alpha: f64, beta: f64) -> f64 {
    let factor = digamma(alpha + beta) - digamma(beta);
    let (mut numer, mut betas, mut dbetas, mut series) = (1.0, 1.0, 0.0, factor / alpha);
    for i in 1..=8 {
        let fi = i as f64;
        numer *= -x / fi;
        dbetas = dbetas * (beta - fi) + betas;
        betas *= beta - fi;
        series += numer / (alpha + fi) * (dbetas + factor * betas);
    }
    let r = -(1.0 - x).powf(1.0 - beta) * series;
    if r.is_nan() {
        0.0
    } else {
        r
    }
}

// Beta gradient w.r.t. alpha when alpha and beta are both large (Rice saddle point).
fn beta_grad_alpha_mid(x: f64, alpha: f64, beta: f64) -> f64 {
    let total = alpha + beta;
    let mean = alpha / total;
    let std = (alpha * beta / (total + 1.0)).sqrt() / total;
    if mean - 0.1 * std <= x && x <= mean + 0.1 * std {
        let b2 = beta * beta;
        let poly = 47.0 * x * b2 * b2
            + alpha
                * ((43.0 + 20.0 * (16.0 + 27.0 * beta) * x) * b2 * beta
                    + alpha
                        * (3.0 * (59.0 + 180.0 * beta - 90.0 * x) * b2
                            + alpha * ((453.0 + 1620.0 * beta * (1.0 - x) - 455.0 * x) * beta + alpha * (8.0 * (1.0 - x) * (135.0 * beta - 11.0)))));
        let pre_num = (1.0 + 12.0 * alpha) * (1.0 + 12.0 * beta) / (total * total);
        let pre_den = 12960.0 * alpha * alpha * alpha * beta * beta * (1.0 + 12.0 * total);
        return pre_num / (1.0 - x) * poly / pre_den;
    }
    let prefactor = -x / (2.0 * alpha * beta / total).sqrt();
    let st = |a: f64| 1.0 + 1.0 / (12.0 * a) + 1.0 / (288.0 * a * a);
    let stirling = st(alpha) * st(beta) / st(total);
    let t1_num = 2.0 * alpha * alpha * (x - 1.0) + alpha * beta * (x - 1.0) - x * beta * beta;
    let axbx = alpha * (x - 1.0) + beta * x;
    let t1_den = (2.0 * alpha / beta).sqrt() * total.powf(1.5) * axbx * axbx;
    let t1 = t1_num / t1_den;
    let t2 = 0.5 * (alpha / (total * x)).ln();
    let t3 = (8.0 * alpha * beta / total).sqrt() / (beta * x + alpha * (x - 1.0));
    let t4 = (beta * (beta / (total * (1.0 - x))).ln() + alpha * (alpha / (total * x)).ln()).powf(-1.5);
    let t1234 = t1 + t2 * (t3 + if x < mean { t4 } else { -t4 });
    stirling * prefactor * t1234
}

/// PyTorch's `dirichlet_grad_one`: `-(d cdf/d alpha) / pdf / (1 - x)` for `x ~ Beta(alpha, total - alpha)`.
pub fn dirichlet_grad_one(x: f64, alpha: f64, total: f64) -> f64 {
    let beta = total - alpha;
    let boundary = total * x * (1.0 - x);
    if x <= 0.5 && boundary < 2.5 {
        return beta_grad_alpha_small(x, alpha, beta);
    }
    if x >= 0.5 && boundary < 0.75 {
        return -beta_grad_beta_small(1.0 - x, beta, alpha);
    }
    if alpha > 6.0 && beta > 6.0 {
        return beta_grad_alpha_mid(x, alpha, beta);
    }
    // rational correction to an analytic approximation, in (log x, log(alpha / x), log(total) - ...)
    const C: [[[[f64; 4]; 3]; 3]; 2] = [
        [
            [
                [1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
                [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
                [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013],
            ],
            [
                [0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
                [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
                [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05],
            ],
            [
                [-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
                [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
                [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05],
            ],
        ],
        [
            [
                [1.0, -0.02924021934, -0.04438342661, 0.007285809825],
                [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
                [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149],
            ],
            [
                [0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
                [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
                [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05],
            ],
            [
                [0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
                [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
                [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06],
            ],
        ],
    ];
    let u = x.ln();
    let a = alpha.ln() - u;
    let b = total.ln() - a;
    let pu = [1.0, u, u * u];
    let pa = [1.0, a, a * a];
    let (mut p, mut q) = (0.0, 0.0);
    for i in 0..3 {
        for j in 0..3 {
            let ua = pu[i] * pa[j];
            let c0 = &C[0][i][j];
            let c1 = &C[1][i][j];
            p += ua * (c0[0] + b * (c0[1] + b * (c0[2] + b * c0[3])));
            q += ua * (c1[0] + b * (c1[1] + b * (c1[2] + b * c1[3])));
        }
    }
    let approx = x * (digamma(total) - digamma(alpha)) / beta;
    p / q * approx
}

fn same_shape(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(Error::shape(op, format!("{op}: expected tensors of the same shape, got {:?} and {:?}", a.shape(), b.shape())));
    }
    Ok(())
}

/// `torch._standard_gamma_grad(alpha, x)`: elementwise d x / d alpha (no history).
pub fn standard_gamma_grad(alpha: &Tensor, x: &Tensor) -> Result<Tensor> {
    same_shape("_standard_gamma_grad", alpha, x)?;
    let (a, v) = (alpha.to_f64_vec()?, x.to_f64_vec()?);
    let g = a.iter().zip(&v).map(|(&a, &x)| standard_gamma_grad_one(a, x)).collect();
    to_tensor(g, x.shape(), x.dtype(), x.device())
}

/// `torch._dirichlet_grad(x, alpha, total)`: elementwise, no history.
pub fn dirichlet_grad(x: &Tensor, alpha: &Tensor, total: &Tensor) -> Result<Tensor> {
    same_shape("_dirichlet_grad", x, alpha)?;
    same_shape("_dirichlet_grad", x, total)?;
    let (xv, av, tv) = (x.to_f64_vec()?, alpha.to_f64_vec()?, total.to_f64_vec()?);
    let g = (0..xv.len()).map(|i| dirichlet_grad_one(xv[i], av[i], tv[i])).collect();
    to_tensor(g, x.shape(), x.dtype(), x.device())
}

/// `torch._standard_gamma(alpha)` as an autograd function: a Gamma(alpha, 1) sample per
/// element; backward multiplies by [`standard_gamma_grad`].
pub struct StandardGamma;

impl Function for StandardGamma {
    fn name(&self) -> String {
        "StandardGamma".into()
    }
    fn once_differentiable(&self) -> bool {
        true
    }
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let alpha = &inputs[0];
        let a = alpha.to_f64_vec()?;
        let lo = tiny(alpha.dtype());
        let mut rng = HostRng::new();
        let v = a.iter().map(|&a| standard_gamma_one(&mut rng, a).max(lo)).collect();
        let x = to_tensor(v, alpha.shape(), alpha.dtype(), alpha.device())?;
        ctx.save_for_backward(&[alpha.clone(), x.clone()]);
        Ok(vec![x])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let s = ctx.saved_tensors();
        Ok(vec![Some(g[0].mul(&standard_gamma_grad(&s[0], &s[1])?)?)])
    }
}

/// `torch._sample_dirichlet` with PyTorch's `_Dirichlet` backward (`_dirichlet_grad`).
pub struct DirichletSample;

impl Function for DirichletSample {
    fn name(&self) -> String {
        "_Dirichlet".into()
    }
    fn once_differentiable(&self) -> bool {
        true
    }
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let alpha = &inputs[0];
        let k = *alpha.shape().last().ok_or_else(|| Error::shape("_sample_dirichlet", "concentration must be at least one-dimensional"))?;
        let a = alpha.to_f64_vec()?;
        let lo = tiny(alpha.dtype());
        let mut rng = HostRng::new();
        let mut v = Vec::with_capacity(a.len());
        for row in a.chunks(k.max(1)) {
            let g: Vec<f64> = row.iter().map(|&a| standard_gamma_one(&mut rng, a).max(lo)).collect();
            let s: f64 = g.iter().sum();
            v.extend(g.iter().map(|x| (x / s).max(lo)));
        }
        let x = to_tensor(v, alpha.shape(), alpha.dtype(), alpha.device())?;
        ctx.save_for_backward(&[alpha.clone(), x.clone()]);
        Ok(vec![x])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let s = ctx.saved_tensors();
        let (alpha, x) = (&s[0], &s[1]);
        let total = alpha.sum_dims(Some(&[-1]), true, None)?.expand_as(alpha)?.contiguous()?;
        let d = dirichlet_grad(x, alpha, &total)?;
        let inner = g[0].sub(&x.mul(&g[0])?.sum_dims(Some(&[-1]), true, None)?)?;
        Ok(vec![Some(d.mul(&inner)?)])
    }
}

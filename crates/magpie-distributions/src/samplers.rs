//! Host samplers for the distributions without a direct tensor sampler: standard gamma
//! (Marsaglia-Tsang), Poisson (products of uniforms, or Hörmann's PTRS for large rates) and
//! binomial (geometric waiting times). They draw from the default generator, so
//! `manual_seed` makes them reproducible.

use magpie_core::ops::random::with_default_generator;
use magpie_core::ops::special::gamma::lgamma;
use magpie_core::{Device, DType, Result, Tensor};

/// Uniform and normal draws from the default generator, fetched in blocks.
pub struct HostRng {
    u: Vec<f64>,
    n: Vec<f64>,
}

const BLOCK: usize = 512;

impl HostRng {
    /// An empty buffer.
    pub fn new() -> Self {
        HostRng { u: Vec::new(), n: Vec::new() }
    }
    /// A uniform draw in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        loop {
            if self.u.is_empty() {
                self.u = with_default_generator(|g| g.uniform(BLOCK));
            }
            if let Some(x) = self.u.pop() {
                if x > 0.0 {
                    return x;
                }
            }
        }
    }
    /// A standard normal draw.
    pub fn normal(&mut self) -> f64 {
        if self.n.is_empty() {
            self.n = with_default_generator(|g| g.normal(BLOCK));
        }
        self.n.pop().unwrap_or(0.0)
    }
}

impl Default for HostRng {
    fn default() -> Self {
        Self::new()
    }
}

/// One draw of Gamma(alpha, 1) (Marsaglia and Tsang; alpha < 1 through alpha + 1 and a power).
pub fn standard_gamma_one(rng: &mut HostRng, alpha: f64) -> f64 {
    if alpha.is_nan() || alpha <= 0.0 {
        return f64::NAN;
    }
    if alpha < 1.0 {
        let g = standard_gamma_one(rng, alpha + 1.0);
        return g * rng.uniform().powf(1.0 / alpha);
    }
    let d = alpha - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = rng.uniform();
        let x2 = x * x;
        if u < 1.0 - 0.0331 * x2 * x2 || u.ln() < 0.5 * x2 + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

/// One draw of Poisson(lam).
pub fn poisson_one(rng: &mut HostRng, lam: f64) -> f64 {
    if lam <= 0.0 {
        return 0.0;
    }
    if lam < 10.0 {
        // count uniforms until their product falls below exp(-lam)
        let limit = (-lam).exp();
        let mut k = 0.0;
        let mut prod = rng.uniform();
        while prod > limit {
            k += 1.0;
            prod *= rng.uniform();
        }
        return k;
    }
    // Hörmann (1993), transformed rejection with squeeze
    let slam = lam.sqrt();
    let loglam = lam.ln();
    let b = 0.931 + 2.53 * slam;
    let a = -0.059 + 0.02483 * b;
    let inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    let vr = 0.9277 - 3.6224 / (b - 2.0);
    loop {
        let u = rng.uniform() - 0.5;
        let v = rng.uniform();
        let us = 0.5 - u.abs();
        let k = ((2.0 * a / us + b) * u + lam + 0.43).floor();
        if us >= 0.07 && v <= vr {
            return k;
        }
        if k < 0.0 || (us < 0.013 && v > us) {
            continue;
        }
        if v.ln() + inv_alpha.ln() - (a / (us * us) + b).ln() <= -lam + k * loglam - lgamma(k + 1.0) {
            return k;
        }
    }
}

/// One draw of Binomial(n, p): counts successes through geometric gaps between them, on the
/// rarer outcome, so the work is about `n min(p, 1-p)` and nothing underflows.
pub fn binomial_one(rng: &mut HostRng, n: f64, p: f64) -> f64 {
    if n <= 0.0 || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return n;
    }
    let (q, flip) = if p > 0.5 { (1.0 - p, true) } else { (p, false) };
    let log1mq = (-q).ln_1p();
    let mut pos = 0.0;
    let mut k = 0.0;
    loop {
        // trials up to and including the next success
        pos += (rng.uniform().ln() / log1mq).floor() + 1.0;
        if pos > n {
            break;
        }
        k += 1.0;
    }
    if flip {
        n - k
    } else {
        k
    }
}

/// A tensor from host values in `dtype` on `device`.
pub fn to_tensor(v: Vec<f64>, shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
    Tensor::from_vec(v, shape)?.to_dtype(dtype)?.to_device(device)
}

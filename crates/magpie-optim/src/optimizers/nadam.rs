//! `torch.optim.NAdam`: Adam with Nesterov momentum and momentum decay.

use super::{adam_hyper, adam_moments, b, check, optimizer, put_moments, take_moments, weight_decay};
use crate::core::{Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// NAdam's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct NAdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum_decay: f64,
    pub decoupled_weight_decay: bool,
    pub maximize: bool,
}

impl Default for NAdamConfig {
    fn default() -> Self {
        NAdamConfig { lr: 2e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, momentum_decay: 4e-3, decoupled_weight_decay: false, maximize: false }
    }
}

impl NAdamConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "NAdam", format!("Invalid learning rate: {}", self.lr))?;
        check(self.momentum_decay >= 0.0, "NAdam", format!("Invalid momentum_decay value: {}", self.momentum_decay))
    }
    fn hyper(&self) -> Hyper {
        let extra = [("momentum_decay", self.momentum_decay), ("decoupled_weight_decay", b(self.decoupled_weight_decay))];
        adam_hyper(self.lr, self.betas, self.eps, self.weight_decay, &extra, self.maximize)
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, b1, b2, eps, wd, md) = (g.get("lr"), g.get("beta1"), g.get("beta2"), c(g.get("eps")), g.get("weight_decay"), g.get("momentum_decay"));
    let n = p.len();
    let (mut m, mut v) = take_moments::<T>(ps, n)?;
    let step = ps.step;
    let mu_product_prev = ps.scalars.get("mu_product").copied().unwrap_or(1.0);
    let bc2 = 1.0 - b2.powf(step);
    let mu = b1 * (1.0 - 0.5 * 0.96f64.powf(step * md));
    let mu_next = b1 * (1.0 - 0.5 * 0.96f64.powf((step + 1.0) * md));
    let mu_product = mu_product_prev * mu;
    ps.scalars.insert("mu_product".into(), mu_product);
    let (w1, tb2, w2) = (c(1.0 - b1), c(b2), c(1.0 - b2));
    let a = c(lr * (1.0 - mu) / (1.0 - mu_product));
    let bb = c(lr * mu_next / (1.0 - mu_product * mu_next));
    let bc2t = c(bc2);
    for i in 0..n {
        let d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        let d = weight_decay(&mut p[i], d, lr, wd, g.flag("decoupled_weight_decay"));
        adam_moments(&mut m[i], &mut v[i], d, w1, tb2, w2);
        let denom = (v[i] / bc2t).sqrt() + eps;
        p[i] = p[i] - a * (d / denom);
        p[i] = p[i] - bb * (m[i] / denom);
    }
    put_moments(ps, m, v);
    Ok(())
}

optimizer!(
    /// NAdam (`torch.optim.NAdam`).
    NAdam, NAdamConfig, "NAdam", update
);

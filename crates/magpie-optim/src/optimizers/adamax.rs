//! `torch.optim.Adamax`: Adam with the infinity norm.

use super::{adam_hyper, check, optimizer};
use crate::core::{put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// Adamax's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct AdamaxConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl Default for AdamaxConfig {
    fn default() -> Self {
        AdamaxConfig { lr: 2e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, maximize: false }
    }
}

impl AdamaxConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "Adamax", format!("Invalid learning rate: {}", self.lr))?;
        check((0.0..1.0).contains(&self.betas.0) && (0.0..1.0).contains(&self.betas.1), "Adamax", format!("Invalid beta parameters: {:?}", self.betas))
    }
    fn hyper(&self) -> Hyper {
        adam_hyper(self.lr, self.betas, self.eps, self.weight_decay, &[], self.maximize)
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, b1, b2, eps, wd) = (g.get("lr"), g.get("beta1"), c(g.get("beta2")), c(g.get("eps")), c(g.get("weight_decay")));
    let n = p.len();
    let mut m = take(ps, "exp_avg", n, T::zero())?;
    let mut u = take(ps, "exp_inf", n, T::zero())?;
    ps.step += 1.0;
    let clr = c(lr / (1.0 - b1.powf(ps.step)));
    let w1 = c(1.0 - b1);
    for i in 0..n {
        let mut d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        if wd != T::zero() {
            d = d + wd * p[i];
        }
        m[i] = m[i] + w1 * (d - m[i]);
        u[i] = (u[i] * b2).max(d.abs() + eps);
        p[i] = p[i] - clr * (m[i] / u[i]);
    }
    put(ps, "exp_avg", m);
    put(ps, "exp_inf", u);
    Ok(())
}

optimizer!(
    /// Adamax (`torch.optim.Adamax`).
    Adamax, AdamaxConfig, "Adamax", update
);

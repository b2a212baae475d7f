//! `torch.optim.Adadelta`.

use super::{b, check, hyper, optimizer};
use crate::core::{put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// Adadelta's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct AdadeltaConfig {
    pub lr: f64,
    pub rho: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl Default for AdadeltaConfig {
    fn default() -> Self {
        AdadeltaConfig { lr: 1.0, rho: 0.9, eps: 1e-6, weight_decay: 0.0, maximize: false }
    }
}

impl AdadeltaConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "Adadelta", format!("Invalid learning rate: {}", self.lr))?;
        check((0.0..=1.0).contains(&self.rho), "Adadelta", format!("Invalid rho value: {}", self.rho))
    }
    fn hyper(&self) -> Hyper {
        hyper(&[("lr", self.lr), ("rho", self.rho), ("eps", self.eps), ("weight_decay", self.weight_decay), ("maximize", b(self.maximize))])
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, rho, w, eps, wd) = (c(g.get("lr")), c(g.get("rho")), c(1.0 - g.get("rho")), c(g.get("eps")), c(g.get("weight_decay")));
    let n = p.len();
    let mut sq = take(ps, "square_avg", n, T::zero())?;
    let mut acc = take(ps, "acc_delta", n, T::zero())?;
    ps.step += 1.0;
    for i in 0..n {
        let mut d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        if wd != T::zero() {
            d = d + wd * p[i];
        }
        sq[i] = sq[i] * rho + w * d * d;
        let std = (sq[i] + eps).sqrt();
        let delta = (acc[i] + eps).sqrt() / std * d;
        acc[i] = acc[i] * rho + w * delta * delta;
        p[i] = p[i] - lr * delta;
    }
    put(ps, "square_avg", sq);
    put(ps, "acc_delta", acc);
    Ok(())
}

optimizer!(
    /// Adadelta (`torch.optim.Adadelta`).
    Adadelta, AdadeltaConfig, "Adadelta", update
);

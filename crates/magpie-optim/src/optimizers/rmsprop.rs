//! `torch.optim.RMSprop`: plain, centered, with momentum.

use super::{b, check, hyper, optimizer};
use crate::core::{put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// RMSprop's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct RmsPropConfig {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub centered: bool,
    pub maximize: bool,
}

impl Default for RmsPropConfig {
    fn default() -> Self {
        RmsPropConfig { lr: 1e-2, alpha: 0.99, eps: 1e-8, weight_decay: 0.0, momentum: 0.0, centered: false, maximize: false }
    }
}

impl RmsPropConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "RMSprop", format!("Invalid learning rate: {}", self.lr))?;
        check(self.alpha >= 0.0, "RMSprop", format!("Invalid alpha value: {}", self.alpha))?;
        check(self.momentum >= 0.0, "RMSprop", format!("Invalid momentum value: {}", self.momentum))
    }
    fn hyper(&self) -> Hyper {
        hyper(&[
            ("lr", self.lr),
            ("alpha", self.alpha),
            ("eps", self.eps),
            ("weight_decay", self.weight_decay),
            ("momentum", self.momentum),
            ("centered", b(self.centered)),
            ("maximize", b(self.maximize)),
        ])
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, alpha, w, eps, wd, mom) =
        (c(g.get("lr")), c(g.get("alpha")), c(1.0 - g.get("alpha")), c(g.get("eps")), c(g.get("weight_decay")), c(g.get("momentum")));
    let centered = g.flag("centered");
    let n = p.len();
    let mut sq = take(ps, "square_avg", n, T::zero())?;
    let mut ga = if centered { take(ps, "grad_avg", n, T::zero())? } else { Vec::new() };
    let mut buf = if mom > T::zero() { take(ps, "momentum_buffer", n, T::zero())? } else { Vec::new() };
    ps.step += 1.0;
    for i in 0..n {
        let mut d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        if wd != T::zero() {
            d = d + wd * p[i];
        }
        sq[i] = sq[i] * alpha + w * d * d;
        let avg = if centered {
            ga[i] = ga[i] + w * (d - ga[i]);
            (sq[i] - ga[i] * ga[i]).sqrt() + eps
        } else {
            sq[i].sqrt() + eps
        };
        if mom > T::zero() {
            buf[i] = buf[i] * mom + d / avg;
            p[i] = p[i] - lr * buf[i];
        } else {
            p[i] = p[i] - lr * (d / avg);
        }
    }
    put(ps, "square_avg", sq);
    if centered {
        put(ps, "grad_avg", ga);
    }
    if mom > T::zero() {
        put(ps, "momentum_buffer", buf);
    }
    Ok(())
}

optimizer!(
    /// RMSprop (`torch.optim.RMSprop`).
    RmsProp, RmsPropConfig, "RMSprop", update
);

//! `torch.optim.ASGD`: averaged SGD.

use super::{b, check, hyper, optimizer};
use crate::core::{put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// ASGD's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct AsgdConfig {
    pub lr: f64,
    pub lambd: f64,
    pub alpha: f64,
    pub t0: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl Default for AsgdConfig {
    fn default() -> Self {
        AsgdConfig { lr: 1e-2, lambd: 1e-4, alpha: 0.75, t0: 1e6, weight_decay: 0.0, maximize: false }
    }
}

impl AsgdConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "ASGD", format!("Invalid learning rate: {}", self.lr))
    }
    fn hyper(&self) -> Hyper {
        hyper(&[
            ("lr", self.lr),
            ("lambd", self.lambd),
            ("alpha", self.alpha),
            ("t0", self.t0),
            ("weight_decay", self.weight_decay),
            ("maximize", b(self.maximize)),
        ])
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, lambd, alpha, t0, wd) = (g.get("lr"), g.get("lambd"), g.get("alpha"), g.get("t0"), c(g.get("weight_decay")));
    let n = p.len();
    let mut ax = take(ps, "ax", n, T::zero())?;
    let eta = ps.scalars.get("eta").copied().unwrap_or(lr);
    let mu = ps.scalars.get("mu").copied().unwrap_or(1.0);
    ps.step += 1.0;
    let step = ps.step;
    // PyTorch keeps eta and mu as tensors of the parameter's dtype
    let (eta_t, mu_t) = (c(eta), c(mu));
    let decay = T::one() - c(lambd) * eta_t;
    for i in 0..n {
        let mut d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        if wd != T::zero() {
            d = d + wd * p[i];
        }
        p[i] = p[i] * decay;
        p[i] = p[i] - eta_t * d;
        ax[i] = if mu != 1.0 { ax[i] + (p[i] - ax[i]) * mu_t } else { p[i] };
    }
    ps.scalars.insert("eta".into(), lr / (1.0 + lambd * lr * step).powf(alpha));
    ps.scalars.insert("mu".into(), 1.0 / (step - t0).max(1.0));
    put(ps, "ax", ax);
    Ok(())
}

optimizer!(
    /// Averaged SGD (`torch.optim.ASGD`).
    Asgd, AsgdConfig, "ASGD", update
);

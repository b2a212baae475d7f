//! `torch.optim.Rprop`: resilient backpropagation (sign-based steps).

use super::{b, check, hyper, optimizer};
use crate::core::{put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// Rprop's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct RpropConfig {
    pub lr: f64,
    pub etas: (f64, f64),
    pub step_sizes: (f64, f64),
    pub maximize: bool,
}

impl Default for RpropConfig {
    fn default() -> Self {
        RpropConfig { lr: 1e-2, etas: (0.5, 1.2), step_sizes: (1e-6, 50.0), maximize: false }
    }
}

impl RpropConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "Rprop", format!("Invalid learning rate: {}", self.lr))?;
        check(0.0 < self.etas.0 && self.etas.0 < 1.0 && 1.0 < self.etas.1, "Rprop", format!("Invalid eta values: {:?}", self.etas))
    }
    fn hyper(&self) -> Hyper {
        hyper(&[
            ("lr", self.lr),
            ("etaminus", self.etas.0),
            ("etaplus", self.etas.1),
            ("step_size_min", self.step_sizes.0),
            ("step_size_max", self.step_sizes.1),
            ("maximize", b(self.maximize)),
        ])
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (em, ep, smin, smax) = (c(g.get("etaminus")), c(g.get("etaplus")), c(g.get("step_size_min")), c(g.get("step_size_max")));
    let n = p.len();
    let mut prev = take(ps, "prev", n, T::zero())?;
    let mut steps = take(ps, "step_size", n, c(g.get("lr")))?;
    ps.step += 1.0;
    for i in 0..n {
        let mut d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        let s = d * prev[i];
        let factor = if s > T::zero() { ep } else if s < T::zero() { em } else { T::one() };
        steps[i] = (steps[i] * factor).max(smin).min(smax);
        if factor == em {
            d = T::zero();
        }
        let sign = if d > T::zero() { T::one() } else if d < T::zero() { -T::one() } else { T::zero() };
        p[i] = p[i] - sign * steps[i];
        prev[i] = d;
    }
    put(ps, "prev", prev);
    put(ps, "step_size", steps);
    Ok(())
}

optimizer!(
    /// Rprop (`torch.optim.Rprop`).
    Rprop, RpropConfig, "Rprop", update
);

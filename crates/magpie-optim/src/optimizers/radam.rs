//! `torch.optim.RAdam`: Adam with a rectified adaptive learning rate.

use super::{adam_hyper, adam_moments, b, check, optimizer, put_moments, take_moments, weight_decay};
use crate::core::{Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// RAdam's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct RAdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub decoupled_weight_decay: bool,
    pub maximize: bool,
}

impl Default for RAdamConfig {
    fn default() -> Self {
        RAdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, decoupled_weight_decay: false, maximize: false }
    }
}

impl RAdamConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "RAdam", format!("Invalid learning rate: {}", self.lr))
    }
    fn hyper(&self) -> Hyper {
        adam_hyper(self.lr, self.betas, self.eps, self.weight_decay, &[("decoupled_weight_decay", b(self.decoupled_weight_decay))], self.maximize)
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, b1, b2, eps, wd) = (g.get("lr"), g.get("beta1"), g.get("beta2"), c(g.get("eps")), g.get("weight_decay"));
    let n = p.len();
    let (mut m, mut v) = take_moments::<T>(ps, n)?;
    let step = ps.step;
    let bc1 = 1.0 - b1.powf(step);
    let bc2 = 1.0 - b2.powf(step);
    let rho_inf = 2.0 / (1.0 - b2) - 1.0;
    let rho_t = rho_inf - 2.0 * step * b2.powf(step) / bc2;
    let rect = if rho_t > 5.0 {
        Some(((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)).sqrt())
    } else {
        None
    };
    let (w1, tb2, w2) = (c(1.0 - b1), c(b2), c(1.0 - b2));
    let (bc1t, bc2s, lrt) = (c(bc1), c(bc2.sqrt()), c(lr));
    for i in 0..n {
        let d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        let d = weight_decay(&mut p[i], d, lr, wd, g.flag("decoupled_weight_decay"));
        adam_moments(&mut m[i], &mut v[i], d, w1, tb2, w2);
        let corrected = m[i] / bc1t;
        match rect {
            Some(r) => {
                let adaptive = bc2s / (v[i].sqrt() + eps);
                p[i] = p[i] + corrected * lrt * adaptive * c(r) * -T::one();
            }
            None => p[i] = p[i] + corrected * lrt * -T::one(),
        }
    }
    put_moments(ps, m, v);
    Ok(())
}

optimizer!(
    /// RAdam (`torch.optim.RAdam`).
    RAdam, RAdamConfig, "RAdam", update
);

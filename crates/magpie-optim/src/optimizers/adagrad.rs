//! `torch.optim.Adagrad`.

use super::{b, check, hyper, optimizer};
use crate::core::{put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

/// Adagrad's keyword arguments and defaults.
#[derive(Clone, Debug)]
pub struct AdagradConfig {
    pub lr: f64,
    pub lr_decay: f64,
    pub weight_decay: f64,
    pub initial_accumulator_value: f64,
    pub eps: f64,
    pub maximize: bool,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig { lr: 1e-2, lr_decay: 0.0, weight_decay: 0.0, initial_accumulator_value: 0.0, eps: 1e-10, maximize: false }
    }
}

impl AdagradConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "Adagrad", format!("Invalid learning rate: {}", self.lr))?;
        check(self.lr_decay >= 0.0, "Adagrad", format!("Invalid lr_decay value: {}", self.lr_decay))?;
        check(self.initial_accumulator_value >= 0.0, "Adagrad", format!("Invalid initial_accumulator_value value: {}", self.initial_accumulator_value))
    }
    fn hyper(&self) -> Hyper {
        hyper(&[
            ("lr", self.lr),
            ("lr_decay", self.lr_decay),
            ("weight_decay", self.weight_decay),
            ("initial_accumulator_value", self.initial_accumulator_value),
            ("eps", self.eps),
            ("maximize", b(self.maximize)),
        ])
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, decay, wd, eps) = (g.get("lr"), g.get("lr_decay"), c(g.get("weight_decay")), c(g.get("eps")));
    let n = p.len();
    let mut sum = take(ps, "sum", n, c(g.get("initial_accumulator_value")))?;
    ps.step += 1.0;
    let clr = c(lr / (1.0 + (ps.step - 1.0) * decay));
    for i in 0..n {
        let mut d = if g.flag("maximize") { -grad[i] } else { grad[i] };
        if wd != T::zero() {
            d = d + wd * p[i];
        }
        sum[i] = sum[i] + d * d;
        let std = sum[i].sqrt() + eps;
        p[i] = p[i] - clr * (d / std);
    }
    put(ps, "sum", sum);
    Ok(())
}

optimizer!(
    /// Adagrad (`torch.optim.Adagrad`).
    Adagrad, AdagradConfig, "Adagrad", update
);

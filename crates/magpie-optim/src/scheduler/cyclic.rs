//! Cyclical schedules that also cycle momentum: CyclicLR and OneCycleLR.

use super::{base_access, Base, LrScheduler};
use crate::Optimizer;
use magpie_core::{Error, Result};
use std::f64::consts::PI;

/// The momentum a group cycles: SGD-style `momentum` or Adam-style `beta1`.
fn momentum_key(opt: &dyn Optimizer, name: &str) -> Result<&'static str> {
    if opt.hyper(0, "beta1").is_some() {
        Ok("beta1")
    } else if opt.hyper(0, "momentum").is_some() {
        Ok("momentum")
    } else {
        Err(Error::value(name, "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"))
    }
}

/// CyclicLR's policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CyclicMode {
    Triangular,
    Triangular2,
    ExpRange,
}

/// `CyclicLR(base_lr, max_lr, step_size_up, step_size_down, mode, gamma, cycle_momentum, base_momentum, max_momentum)`.
pub struct CyclicLr {
    base: Base,
    max_lrs: Vec<f64>,
    total: f64,
    step_ratio: f64,
    mode: CyclicMode,
    gamma: f64,
    momentum: Option<(&'static str, f64, f64)>,
}

impl CyclicLr {
    /// A new CyclicLR; sets each group's lr to `base_lr` (and momentum to `max_momentum`), then steps.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        opt: &mut dyn Optimizer,
        base_lr: f64,
        max_lr: f64,
        step_size_up: i64,
        step_size_down: Option<i64>,
        mode: CyclicMode,
        gamma: f64,
        cycle_momentum: bool,
        base_momentum: f64,
        max_momentum: f64,
    ) -> Result<Self> {
        for i in 0..opt.num_groups() {
            opt.set_lr(i, base_lr);
        }
        let up = step_size_up as f64;
        let down = step_size_down.map_or(up, |d| d as f64);
        let momentum = if cycle_momentum {
            let k = momentum_key(opt, "CyclicLR")?;
            for i in 0..opt.num_groups() {
                opt.set_hyper(i, k, max_momentum);
            }
            Some((k, base_momentum, max_momentum))
        } else {
            None
        };
        let n = opt.num_groups();
        let mut s = CyclicLr {
            base: Base::new(opt),
            max_lrs: vec![max_lr; n],
            total: up + down,
            step_ratio: up / (up + down),
            mode,
            gamma,
            momentum,
        };
        s.base.base_lrs = vec![base_lr; n];
        s.step(opt)?;
        Ok(s)
    }

    fn scale(&self, cycle: f64) -> f64 {
        match self.mode {
            CyclicMode::Triangular => 1.0,
            CyclicMode::Triangular2 => 1.0 / 2f64.powf(cycle - 1.0),
            CyclicMode::ExpRange => self.gamma.powf(self.base.last_epoch as f64),
        }
    }
}

impl LrScheduler for CyclicLr {
    base_access!();
    fn get_lr(&mut self, _opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch as f64;
        let cycle = (1.0 + e / self.total).floor();
        let x = 1.0 + e / self.total - cycle;
        let sf = if x <= self.step_ratio { x / self.step_ratio } else { (x - 1.0) / (self.step_ratio - 1.0) };
        let scale = self.scale(cycle);
        Ok(self.base.base_lrs.iter().zip(&self.max_lrs).map(|(b, m)| b + (m - b) * sf * scale).collect())
    }
    fn apply(&mut self, opt: &mut dyn Optimizer, lrs: &[f64]) -> Result<()> {
        for (i, &lr) in lrs.iter().enumerate() {
            opt.set_lr(i, lr);
        }
        if let Some((k, bm, mm)) = self.momentum {
            let e = self.base.last_epoch as f64;
            let cycle = (1.0 + e / self.total).floor();
            let x = 1.0 + e / self.total - cycle;
            let sf = if x <= self.step_ratio { x / self.step_ratio } else { (x - 1.0) / (self.step_ratio - 1.0) };
            let m = mm - (mm - bm) * sf * self.scale(cycle);
            for i in 0..opt.num_groups() {
                opt.set_hyper(i, k, m);
            }
        }
        Ok(())
    }
}

/// OneCycleLR's annealing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnealStrategy {
    Cos,
    Linear,
}

struct Phase {
    end_step: f64,
    start_lr: &'static str,
    end_lr: &'static str,
    start_m: &'static str,
    end_m: &'static str,
}

/// `OneCycleLR(max_lr, total_steps, pct_start, anneal_strategy, cycle_momentum, base_momentum,
/// max_momentum, div_factor, final_div_factor, three_phase)`.
pub struct OneCycleLr {
    base: Base,
    total_steps: i64,
    phases: Vec<Phase>,
    anneal: AnnealStrategy,
    /// per group: initial_lr, max_lr, min_lr
    lrs: Vec<[f64; 3]>,
    momentum: Option<(&'static str, f64, f64)>,
}

impl OneCycleLr {
    /// A new OneCycleLR; performs the initial step.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        opt: &mut dyn Optimizer,
        max_lr: f64,
        total_steps: i64,
        pct_start: f64,
        anneal: AnnealStrategy,
        cycle_momentum: bool,
        base_momentum: f64,
        max_momentum: f64,
        div_factor: f64,
        final_div_factor: f64,
        three_phase: bool,
    ) -> Result<Self> {
        if total_steps <= 0 {
            return Err(Error::value("OneCycleLR", format!("Expected positive integer total_steps, but got {total_steps}")));
        }
        if !(0.0..=1.0).contains(&pct_start) {
            return Err(Error::value("OneCycleLR", format!("Expected float between 0 and 1 pct_start, but got {pct_start}")));
        }
        let t = total_steps as f64;
        let phases = if three_phase {
            vec![
                Phase { end_step: pct_start * t - 1.0, start_lr: "initial_lr", end_lr: "max_lr", start_m: "max_momentum", end_m: "base_momentum" },
                Phase { end_step: 2.0 * pct_start * t - 2.0, start_lr: "max_lr", end_lr: "initial_lr", start_m: "base_momentum", end_m: "max_momentum" },
                Phase { end_step: t - 1.0, start_lr: "initial_lr", end_lr: "min_lr", start_m: "max_momentum", end_m: "max_momentum" },
            ]
        } else {
            vec![
                Phase { end_step: pct_start * t - 1.0, start_lr: "initial_lr", end_lr: "max_lr", start_m: "max_momentum", end_m: "base_momentum" },
                Phase { end_step: t - 1.0, start_lr: "max_lr", end_lr: "min_lr", start_m: "base_momentum", end_m: "max_momentum" },
            ]
        };
        let n = opt.num_groups();
        let initial = max_lr / div_factor;
        let lrs = vec![[initial, max_lr, initial / final_div_factor]; n];
        for i in 0..n {
            opt.set_hyper(i, "initial_lr", initial);
            opt.set_lr(i, initial);
        }
        let momentum = if cycle_momentum {
            let k = momentum_key(opt, "OneCycleLR")?;
            for i in 0..n {
                opt.set_hyper(i, k, max_momentum);
            }
            Some((k, base_momentum, max_momentum))
        } else {
            None
        };
        let mut s = OneCycleLr { base: Base::new(opt), total_steps, phases, anneal, lrs, momentum };
        s.step(opt)?;
        Ok(s)
    }

    fn anneal(&self, start: f64, end: f64, pct: f64) -> f64 {
        match self.anneal {
            AnnealStrategy::Cos => end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0),
            AnnealStrategy::Linear => (end - start) * pct + start,
        }
    }

    /// (lr per group, momentum) at the current step.
    fn values(&self) -> Result<(Vec<f64>, Option<f64>)> {
        let step = self.base.last_epoch as f64;
        if self.base.last_epoch > self.total_steps {
            return Err(Error::value(
                "OneCycleLR",
                format!("Tried to step {} times. The specified number of total steps is {}", self.base.last_epoch, self.total_steps),
            ));
        }
        let mut lrs = Vec::new();
        let mut mom = None;
        for g in &self.lrs {
            let pick = |k: &str| match k {
                "initial_lr" => g[0],
                "max_lr" => g[1],
                _ => g[2],
            };
            let mut start = 0.0;
            for (i, ph) in self.phases.iter().enumerate() {
                if step <= ph.end_step || i == self.phases.len() - 1 {
                    let pct = (step - start) / (ph.end_step - start);
                    lrs.push(self.anneal(pick(ph.start_lr), pick(ph.end_lr), pct));
                    if let Some((_, bm, mm)) = self.momentum {
                        let m = |k: &str| if k == "base_momentum" { bm } else { mm };
                        mom = Some(self.anneal(m(ph.start_m), m(ph.end_m), pct));
                    }
                    break;
                }
                start = ph.end_step;
            }
        }
        Ok((lrs, mom))
    }
}

impl LrScheduler for OneCycleLr {
    base_access!();
    fn get_lr(&mut self, _opt: &dyn Optimizer) -> Result<Vec<f64>> {
        Ok(self.values()?.0)
    }
    fn apply(&mut self, opt: &mut dyn Optimizer, lrs: &[f64]) -> Result<()> {
        for (i, &lr) in lrs.iter().enumerate() {
            opt.set_lr(i, lr);
        }
        if let (Some((k, _, _)), (_, Some(m))) = (self.momentum, self.values()?) {
            for i in 0..opt.num_groups() {
                opt.set_hyper(i, k, m);
            }
        }
        Ok(())
    }
}

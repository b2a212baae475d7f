//! `ReduceLROnPlateau`: lower the learning rate when a metric stops improving.

use crate::Optimizer;
use magpie_core::{Error, Result};

/// Whether lower or higher metric values are better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlateauMode {
    Min,
    Max,
}

/// How `threshold` is measured against the best value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdMode {
    Rel,
    Abs,
}

/// `ReduceLROnPlateau(mode, factor, patience, threshold, threshold_mode, cooldown, min_lr, eps)`.
pub struct ReduceLrOnPlateau {
    pub mode: PlateauMode,
    pub factor: f64,
    pub patience: i64,
    pub threshold: f64,
    pub threshold_mode: ThresholdMode,
    pub cooldown: i64,
    pub min_lrs: Vec<f64>,
    pub eps: f64,
    best: f64,
    num_bad: i64,
    cooldown_counter: i64,
    last_epoch: i64,
    last_lr: Vec<f64>,
}

impl ReduceLrOnPlateau {
    /// A new scheduler with PyTorch's defaults (min, 0.1, 10, 1e-4, rel, 0, 0, 1e-8).
    pub fn new(opt: &dyn Optimizer) -> Self {
        Self::with(opt, PlateauMode::Min, 0.1, 10, 1e-4, ThresholdMode::Rel, 0, 0.0, 1e-8)
    }
    /// A new scheduler with every option.
    #[allow(clippy::too_many_arguments)]
    pub fn with(
        opt: &dyn Optimizer,
        mode: PlateauMode,
        factor: f64,
        patience: i64,
        threshold: f64,
        threshold_mode: ThresholdMode,
        cooldown: i64,
        min_lr: f64,
        eps: f64,
    ) -> Self {
        ReduceLrOnPlateau {
            mode,
            factor,
            patience,
            threshold,
            threshold_mode,
            cooldown,
            min_lrs: vec![min_lr; opt.num_groups()],
            eps,
            best: if mode == PlateauMode::Min { f64::INFINITY } else { f64::NEG_INFINITY },
            num_bad: 0,
            cooldown_counter: 0,
            last_epoch: 0,
            last_lr: super::group_lrs(opt),
        }
    }

    fn is_better(&self, a: f64) -> bool {
        match (self.mode, self.threshold_mode) {
            (PlateauMode::Min, ThresholdMode::Rel) => a < self.best * (1.0 - self.threshold),
            (PlateauMode::Min, ThresholdMode::Abs) => a < self.best - self.threshold,
            (PlateauMode::Max, ThresholdMode::Rel) => a > self.best * (self.threshold + 1.0),
            (PlateauMode::Max, ThresholdMode::Abs) => a > self.best + self.threshold,
        }
    }

    /// `scheduler.step(metric)`.
    pub fn step(&mut self, opt: &mut dyn Optimizer, metric: f64) -> Result<()> {
        if self.factor >= 1.0 {
            return Err(Error::value("ReduceLROnPlateau", "Factor should be < 1.0."));
        }
        self.last_epoch += 1;
        if self.is_better(metric) {
            self.best = metric;
            self.num_bad = 0;
        } else {
            self.num_bad += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad = 0;
        }
        if self.num_bad > self.patience {
            for i in 0..opt.num_groups() {
                let old = opt.lr(i);
                let new = (old * self.factor).max(self.min_lrs.get(i).copied().unwrap_or(0.0));
                if old - new > self.eps {
                    opt.set_lr(i, new);
                }
            }
            self.cooldown_counter = self.cooldown;
            self.num_bad = 0;
        }
        self.last_lr = super::group_lrs(opt);
        Ok(())
    }

    /// `scheduler.get_last_lr()`.
    pub fn get_last_lr(&self) -> Vec<f64> {
        self.last_lr.clone()
    }
}

//! Cosine schedules: CosineAnnealingLR (PyTorch's recursive form) and CosineAnnealingWarmRestarts.

use super::{base_access, group_lrs, Base, LrScheduler};
use crate::Optimizer;
use magpie_core::{Error, Result};
use std::f64::consts::PI;

/// `CosineAnnealingLR(T_max, eta_min)`.
pub struct CosineAnnealingLr {
    base: Base,
    t_max: i64,
    eta_min: f64,
}

impl CosineAnnealingLr {
    /// A new CosineAnnealingLR; performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, t_max: i64, eta_min: f64) -> Result<Self> {
        if t_max <= 0 {
            return Err(Error::value("CosineAnnealingLR", format!("T_max must be positive, got {t_max}")));
        }
        let mut s = CosineAnnealingLr { base: Base::new(opt), t_max, eta_min };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for CosineAnnealingLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        let t = self.t_max as f64;
        let lrs = group_lrs(opt);
        let em = self.eta_min;
        Ok(if e == 0 {
            lrs
        } else if self.base.step_count == 1 && e > 0 {
            self.base.base_lrs.iter().map(|b| em + (b - em) * (1.0 + (e as f64 * PI / t).cos()) / 2.0).collect()
        } else if (e - 1 - self.t_max).rem_euclid(2 * self.t_max) == 0 {
            lrs.iter().zip(&self.base.base_lrs).map(|(l, b)| l + (b - em) * (1.0 - (PI / t).cos()) / 2.0).collect()
        } else {
            lrs.iter()
                .map(|l| (1.0 + (PI * e as f64 / t).cos()) / (1.0 + (PI * (e - 1) as f64 / t).cos()) * (l - em) + em)
                .collect()
        })
    }
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        let e = self.base.last_epoch as f64;
        let em = self.eta_min;
        Some(self.base.base_lrs.iter().map(|b| em + (b - em) * (1.0 + (PI * e / self.t_max as f64).cos()) / 2.0).collect())
    }
}

/// `CosineAnnealingWarmRestarts(T_0, T_mult, eta_min)`.
pub struct CosineAnnealingWarmRestarts {
    base: Base,
    t_0: i64,
    t_i: i64,
    t_mult: i64,
    t_cur: f64,
    eta_min: f64,
}

impl CosineAnnealingWarmRestarts {
    /// A new scheduler; performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, t_0: i64, t_mult: i64, eta_min: f64) -> Result<Self> {
        if t_0 <= 0 {
            return Err(Error::value("CosineAnnealingWarmRestarts", format!("Expected positive integer T_0, but got {t_0}")));
        }
        if t_mult < 1 {
            return Err(Error::value("CosineAnnealingWarmRestarts", format!("Expected integer T_mult >= 1, but got {t_mult}")));
        }
        let mut s = CosineAnnealingWarmRestarts { base: Base::new(opt), t_0, t_i: t_0, t_mult, t_cur: -1.0, eta_min };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for CosineAnnealingWarmRestarts {
    base_access!();
    fn get_lr(&mut self, _opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let em = self.eta_min;
        let (tc, ti) = (self.t_cur, self.t_i as f64);
        Ok(self.base.base_lrs.iter().map(|b| em + (b - em) * (1.0 + (PI * tc / ti).cos()) / 2.0).collect())
    }
    /// Advances `T_cur` (restarting when it reaches `T_i`) before computing the rates.
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        if self.base.last_epoch < 0 {
            self.t_i = self.t_0;
            self.t_cur = 0.0;
        } else {
            self.t_cur += 1.0;
            if self.t_cur >= self.t_i as f64 {
                self.t_cur -= self.t_i as f64;
                self.t_i *= self.t_mult;
            }
        }
        self.base.step_count += 1;
        self.base.last_epoch += 1;
        let lrs = self.get_lr(opt)?;
        self.apply(opt, &lrs)?;
        self.base.last_lr = group_lrs(opt);
        Ok(())
    }
}

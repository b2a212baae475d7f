//! The closed-form-able schedulers: StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR.

use super::{base_access, group_lrs, Base, LrScheduler};
use crate::Optimizer;
use magpie_core::{Error, Result};

/// `StepLR(step_size, gamma)`: multiply by `gamma` every `step_size` epochs.
pub struct StepLr {
    base: Base,
    step_size: i64,
    gamma: f64,
}

impl StepLr {
    /// A new StepLR; performs PyTorch's initial step.
    pub fn new(opt: &mut dyn Optimizer, step_size: i64, gamma: f64) -> Result<Self> {
        if step_size <= 0 {
            return Err(Error::value("StepLR", format!("step_size must be positive, got {step_size}")));
        }
        let mut s = StepLr { base: Base::new(opt), step_size, gamma };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for StepLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        let lrs = group_lrs(opt);
        Ok(if e == 0 || e % self.step_size != 0 { lrs } else { lrs.iter().map(|l| l * self.gamma).collect() })
    }
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        let k = self.base.last_epoch.div_euclid(self.step_size) as i32;
        Some(self.base.base_lrs.iter().map(|b| b * self.gamma.powi(k)).collect())
    }
}

/// `MultiStepLR(milestones, gamma)`: multiply by `gamma` at each milestone (repeats count twice).
pub struct MultiStepLr {
    base: Base,
    milestones: Vec<i64>,
    gamma: f64,
}

impl MultiStepLr {
    /// A new MultiStepLR; performs PyTorch's initial step.
    pub fn new(opt: &mut dyn Optimizer, milestones: &[i64], gamma: f64) -> Result<Self> {
        let mut m = milestones.to_vec();
        m.sort();
        let mut s = MultiStepLr { base: Base::new(opt), milestones: m, gamma };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for MultiStepLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        let hits = self.milestones.iter().filter(|&&m| m == e).count() as i32;
        Ok(group_lrs(opt).iter().map(|l| if hits == 0 { *l } else { l * self.gamma.powi(hits) }).collect())
    }
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        let k = self.milestones.iter().filter(|&&m| m <= self.base.last_epoch).count() as i32;
        Some(self.base.base_lrs.iter().map(|b| b * self.gamma.powi(k)).collect())
    }
}

/// `ConstantLR(factor, total_iters)`: scale by `factor` until `total_iters`.
pub struct ConstantLr {
    base: Base,
    factor: f64,
    total_iters: i64,
}

impl ConstantLr {
    /// A new ConstantLR (PyTorch's defaults: factor 1/3, total_iters 5); performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, factor: f64, total_iters: i64) -> Result<Self> {
        if !(0.0..=1.0).contains(&factor) {
            return Err(Error::value("ConstantLR", "Constant multiplicative factor expected to be between 0 and 1."));
        }
        let mut s = ConstantLr { base: Base::new(opt), factor, total_iters };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for ConstantLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        let lrs = group_lrs(opt);
        Ok(if e == 0 {
            lrs.iter().map(|l| l * self.factor).collect()
        } else if e != self.total_iters {
            lrs
        } else {
            lrs.iter().map(|l| l * (1.0 / self.factor)).collect()
        })
    }
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        let k = if self.base.last_epoch >= self.total_iters { 1.0 - self.factor } else { 0.0 };
        Some(self.base.base_lrs.iter().map(|b| b * (self.factor + k)).collect())
    }
}

/// `LinearLR(start_factor, end_factor, total_iters)`: linear warm-up (or decay) of the factor.
pub struct LinearLr {
    base: Base,
    start: f64,
    end: f64,
    total_iters: i64,
}

impl LinearLr {
    /// A new LinearLR (PyTorch's defaults: 1/3, 1.0, 5); performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, start_factor: f64, end_factor: f64, total_iters: i64) -> Result<Self> {
        if !(start_factor > 0.0 && start_factor <= 1.0) {
            return Err(Error::value("LinearLR", "Starting multiplicative factor expected to be greater than 0 and less or equal to 1."));
        }
        if !(0.0..=1.0).contains(&end_factor) {
            return Err(Error::value("LinearLR", "Ending multiplicative factor expected to be between 0 and 1."));
        }
        let mut s = LinearLr { base: Base::new(opt), start: start_factor, end: end_factor, total_iters };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for LinearLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        let lrs = group_lrs(opt);
        Ok(if e == 0 {
            lrs.iter().map(|l| l * self.start).collect()
        } else if e > self.total_iters {
            lrs
        } else {
            let f = 1.0 + (self.end - self.start) / (self.total_iters as f64 * self.start + (e - 1) as f64 * (self.end - self.start));
            lrs.iter().map(|l| l * f).collect()
        })
    }
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        let e = self.base.last_epoch.min(self.total_iters) as f64;
        let f = self.start + (self.end - self.start) * e / self.total_iters as f64;
        Some(self.base.base_lrs.iter().map(|b| b * f).collect())
    }
}

/// `ExponentialLR(gamma)`: multiply by `gamma` every epoch.
pub struct ExponentialLr {
    base: Base,
    gamma: f64,
}

impl ExponentialLr {
    /// A new ExponentialLR; performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, gamma: f64) -> Result<Self> {
        let mut s = ExponentialLr { base: Base::new(opt), gamma };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for ExponentialLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let lrs = group_lrs(opt);
        Ok(if self.base.last_epoch == 0 { lrs } else { lrs.iter().map(|l| l * self.gamma).collect() })
    }
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        Some(self.base.base_lrs.iter().map(|b| b * self.gamma.powi(self.base.last_epoch as i32)).collect())
    }
}

/// `PolynomialLR(total_iters, power)`: polynomial decay to zero over `total_iters`.
pub struct PolynomialLr {
    base: Base,
    total_iters: i64,
    power: f64,
}

impl PolynomialLr {
    /// A new PolynomialLR (PyTorch's defaults: 5, 1.0); performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, total_iters: i64, power: f64) -> Result<Self> {
        let mut s = PolynomialLr { base: Base::new(opt), total_iters, power };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for PolynomialLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        let lrs = group_lrs(opt);
        if e == 0 || e > self.total_iters {
            return Ok(lrs);
        }
        let t = self.total_iters as f64;
        let f = ((1.0 - e as f64 / t) / (1.0 - (e - 1) as f64 / t)).powf(self.power);
        Ok(lrs.iter().map(|l| l * f).collect())
    }
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        let e = self.base.last_epoch.min(self.total_iters) as f64;
        let f = (1.0 - e / self.total_iters as f64).powf(self.power);
        Some(self.base.base_lrs.iter().map(|b| b * f).collect())
    }
}

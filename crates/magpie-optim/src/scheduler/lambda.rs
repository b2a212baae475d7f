//! Schedulers driven by a user function: LambdaLR and MultiplicativeLR.

use super::{base_access, group_lrs, Base, LrScheduler};
use crate::Optimizer;
use magpie_core::Result;

/// A learning-rate factor as a function of the epoch, one per group (or one for all).
pub type LrLambda = Box<dyn Fn(i64) -> f64 + Send>;

fn pick(fs: &[LrLambda], i: usize) -> &LrLambda {
    if fs.len() == 1 {
        &fs[0]
    } else {
        &fs[i]
    }
}

fn check_len(name: &str, fs: &[LrLambda], groups: usize) -> Result<()> {
    if fs.len() != 1 && fs.len() != groups {
        return Err(magpie_core::Error::value(name, format!("Expected {groups} lr_lambdas, but got {}", fs.len())));
    }
    Ok(())
}

/// `LambdaLR(lr_lambda)`: `lr = base_lr * lambda(epoch)`.
pub struct LambdaLr {
    base: Base,
    fs: Vec<LrLambda>,
}

impl LambdaLr {
    /// A new LambdaLR with one function for all groups or one per group; performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, fs: Vec<LrLambda>) -> Result<Self> {
        check_len("LambdaLR", &fs, opt.num_groups())?;
        let mut s = LambdaLr { base: Base::new(opt), fs };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for LambdaLr {
    base_access!();
    fn get_lr(&mut self, _opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        Ok(self.base.base_lrs.iter().enumerate().map(|(i, b)| b * pick(&self.fs, i)(e)).collect())
    }
}

/// `MultiplicativeLR(lr_lambda)`: `lr *= lambda(epoch)` from the first step on.
pub struct MultiplicativeLr {
    base: Base,
    fs: Vec<LrLambda>,
}

impl MultiplicativeLr {
    /// A new MultiplicativeLR; performs the initial step.
    pub fn new(opt: &mut dyn Optimizer, fs: Vec<LrLambda>) -> Result<Self> {
        check_len("MultiplicativeLR", &fs, opt.num_groups())?;
        let mut s = MultiplicativeLr { base: Base::new(opt), fs };
        s.step(opt)?;
        Ok(s)
    }
}

impl LrScheduler for MultiplicativeLr {
    base_access!();
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        let e = self.base.last_epoch;
        let lrs = group_lrs(opt);
        Ok(if e > 0 { lrs.iter().enumerate().map(|(i, l)| l * pick(&self.fs, i)(e)).collect() } else { lrs })
    }
}

//! Schedulers of schedulers: SequentialLR (switch at milestones) and ChainedScheduler (all at once).

use super::{group_lrs, Base, LrScheduler};
use crate::Optimizer;
use magpie_core::{Error, Result};

/// `SequentialLR(schedulers, milestones)`: runs `schedulers[i]` between `milestones[i-1]` and `milestones[i]`.
pub struct SequentialLr {
    base: Base,
    schedulers: Vec<Box<dyn LrScheduler>>,
    milestones: Vec<i64>,
}

impl SequentialLr {
    /// Builds from schedulers already constructed on `opt` (as in PyTorch), undoing their initial
    /// steps and redoing the first one's, as PyTorch does.
    pub fn new(opt: &mut dyn Optimizer, mut schedulers: Vec<Box<dyn LrScheduler>>, milestones: &[i64]) -> Result<Self> {
        if schedulers.is_empty() {
            return Err(Error::value("SequentialLR", "expects at least one scheduler"));
        }
        if milestones.len() != schedulers.len() - 1 {
            return Err(Error::value(
                "SequentialLR",
                format!("Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points, but got number of schedulers {} and the number of milestones to be equal to {}", schedulers.len(), milestones.len()),
            ));
        }
        let base = Base::new(opt);
        // reset learning rates back to their initial values
        for i in 0..opt.num_groups() {
            let init = opt.hyper(i, "initial_lr").unwrap_or(opt.lr(i));
            opt.set_lr(i, init);
        }
        for s in schedulers.iter_mut() {
            s.base_mut().last_epoch -= 1;
        }
        // the first scheduler's initial step (PyTorch's `_initial_step` restarts its step count)
        schedulers[0].base_mut().step_count = 0;
        schedulers[0].step(opt)?;
        let mut s = SequentialLr { base, schedulers, milestones: milestones.to_vec() };
        s.base.last_epoch = 0;
        s.base.last_lr = s.schedulers[0].get_last_lr();
        Ok(s)
    }
}

impl LrScheduler for SequentialLr {
    fn base(&self) -> &Base {
        &self.base
    }
    fn base_mut(&mut self) -> &mut Base {
        &mut self.base
    }
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        Ok(group_lrs(opt))
    }
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.base.last_epoch += 1;
        let e = self.base.last_epoch;
        let idx = self.milestones.iter().filter(|&&m| m <= e).count();
        if idx > 0 && self.milestones[idx - 1] == e {
            self.schedulers[idx].step_to(opt, 0)?;
        } else {
            self.schedulers[idx].step(opt)?;
        }
        self.base.last_lr = self.schedulers[idx].get_last_lr();
        Ok(())
    }
}

/// `ChainedScheduler(schedulers)`: steps every scheduler each epoch, their factors compounding.
pub struct ChainedScheduler {
    base: Base,
    schedulers: Vec<Box<dyn LrScheduler>>,
}

impl ChainedScheduler {
    /// Chains schedulers already constructed on `opt`.
    pub fn new(opt: &mut dyn Optimizer, schedulers: Vec<Box<dyn LrScheduler>>) -> Result<Self> {
        if schedulers.is_empty() {
            return Err(Error::value("ChainedScheduler", "expects at least one scheduler"));
        }
        let mut base = Base::new(opt);
        base.last_lr = schedulers[schedulers.len() - 1].get_last_lr();
        Ok(ChainedScheduler { base, schedulers })
    }
}

impl LrScheduler for ChainedScheduler {
    fn base(&self) -> &Base {
        &self.base
    }
    fn base_mut(&mut self) -> &mut Base {
        &mut self.base
    }
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>> {
        Ok(group_lrs(opt))
    }
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        for s in self.schedulers.iter_mut() {
            s.step(opt)?;
        }
        self.base.last_lr = group_lrs(opt);
        Ok(())
    }
}

//! Learning-rate schedulers (`torch.optim.lr_scheduler`), with PyTorch's recursive ("chainable")
//! formulas so that values match PyTorch's step by step, including when schedulers are chained.
//!
//! A scheduler does not hold the optimizer (Rust's borrows make that awkward); pass it to
//! `new` and to each `step`:
//!
//! ```
//! use magpie_core::Tensor;
//! use magpie_optim::{Optimizer, Sgd, SgdConfig};
//! use magpie_optim::scheduler::{LrScheduler, StepLr};
//! let w = Tensor::zeros(&[2])?.with_requires_grad()?;
//! let mut opt = Sgd::new(vec![w], SgdConfig { lr: 1.0, ..Default::default() })?;
//! let mut sched = StepLr::new(&mut opt, 2, 0.5)?;
//! for _ in 0..4 { sched.step(&mut opt)?; }
//! assert_eq!(opt.lr(0), 0.25);
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod compose;
mod cosine;
mod cyclic;
mod lambda;
mod plateau;
mod simple;

pub use compose::{ChainedScheduler, SequentialLr};
pub use cosine::{CosineAnnealingLr, CosineAnnealingWarmRestarts};
pub use cyclic::{AnnealStrategy, CyclicLr, CyclicMode, OneCycleLr};
pub use lambda::{LambdaLr, MultiplicativeLr};
pub use plateau::{PlateauMode, ReduceLrOnPlateau, ThresholdMode};
pub use simple::{ConstantLr, ExponentialLr, LinearLr, MultiStepLr, PolynomialLr, StepLr};

use crate::Optimizer;
use magpie_core::Result;

/// What every epoch-driven scheduler keeps (PyTorch's `LRScheduler` attributes).
#[derive(Clone, Debug)]
pub struct Base {
    pub base_lrs: Vec<f64>,
    pub last_epoch: i64,
    pub step_count: u64,
    pub last_lr: Vec<f64>,
}

impl Base {
    /// Sets each group's `initial_lr` if absent and reads the base learning rates.
    pub fn new(opt: &mut dyn Optimizer) -> Base {
        let mut base_lrs = Vec::new();
        for i in 0..opt.num_groups() {
            let init = match opt.hyper(i, "initial_lr") {
                Some(v) => v,
                None => {
                    let lr = opt.lr(i);
                    opt.set_hyper(i, "initial_lr", lr);
                    lr
                }
            };
            base_lrs.push(init);
        }
        Base { base_lrs, last_epoch: -1, step_count: 0, last_lr: Vec::new() }
    }
}

/// A learning-rate scheduler.
pub trait LrScheduler {
    /// The shared state.
    fn base(&self) -> &Base;
    /// Mutable shared state.
    fn base_mut(&mut self) -> &mut Base;
    /// PyTorch's `get_lr()`: the new learning rates, computed after `last_epoch` was advanced.
    fn get_lr(&mut self, opt: &dyn Optimizer) -> Result<Vec<f64>>;
    /// PyTorch's `_get_closed_form_lr()`, for schedulers that have one (used by `step_to`).
    fn closed_form_lr(&self, _opt: &dyn Optimizer) -> Option<Vec<f64>> {
        None
    }
    /// Hook for schedulers that also set other hyperparameters (momentum) with the learning rate.
    fn apply(&mut self, opt: &mut dyn Optimizer, lrs: &[f64]) -> Result<()> {
        for (i, &lr) in lrs.iter().enumerate() {
            opt.set_lr(i, lr);
        }
        Ok(())
    }

    /// `scheduler.step()`: advances one epoch and sets the optimizer's learning rates.
    fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        self.base_mut().step_count += 1;
        self.base_mut().last_epoch += 1;
        let lrs = self.get_lr(opt)?;
        self.apply(opt, &lrs)?;
        self.base_mut().last_lr = (0..opt.num_groups()).map(|i| opt.lr(i)).collect();
        Ok(())
    }
    /// `scheduler.step(epoch)` (deprecated in PyTorch, used by `SequentialLR`): jumps to `epoch`,
    /// with the closed form where the scheduler has one.
    fn step_to(&mut self, opt: &mut dyn Optimizer, epoch: i64) -> Result<()> {
        self.base_mut().step_count += 1;
        self.base_mut().last_epoch = epoch;
        let lrs = match self.closed_form_lr(opt) {
            Some(l) => l,
            None => self.get_lr(opt)?,
        };
        self.apply(opt, &lrs)?;
        self.base_mut().last_lr = (0..opt.num_groups()).map(|i| opt.lr(i)).collect();
        Ok(())
    }
    /// `scheduler.get_last_lr()`.
    fn get_last_lr(&self) -> Vec<f64> {
        self.base().last_lr.clone()
    }
    /// `scheduler.last_epoch`.
    fn last_epoch(&self) -> i64 {
        self.base().last_epoch
    }
}

/// The current learning rates of every group.
pub(crate) fn group_lrs(opt: &dyn Optimizer) -> Vec<f64> {
    (0..opt.num_groups()).map(|i| opt.lr(i)).collect()
}

/// Implements the `base`/`base_mut` accessors for a scheduler with a `base: Base` field.
macro_rules! base_access {
    () => {
        fn base(&self) -> &$crate::scheduler::Base {
            &self.base
        }
        fn base_mut(&mut self) -> &mut $crate::scheduler::Base {
            &mut self.base
        }
    };
}
pub(crate) use base_access;

//! The optimizers, one file each. Each is a config struct (PyTorch's keyword arguments and
//! defaults) and an update rule over one parameter's elements, in the parameter's precision,
//! following PyTorch's single-tensor implementation step by step.

mod adadelta;
mod adagrad;
pub(crate) mod adam;
mod adamax;
mod asgd;
mod lbfgs;
mod nadam;
mod radam;
mod rmsprop;
mod rprop;
mod sgd;
mod sparse_adam;

pub use adadelta::{Adadelta, AdadeltaConfig};
pub use adagrad::{Adagrad, AdagradConfig};
pub use adam::{Adam, AdamConfig, AdamW};
pub use adamax::{Adamax, AdamaxConfig};
pub use asgd::{Asgd, AsgdConfig};
pub use lbfgs::{Lbfgs, LbfgsConfig};
pub use nadam::{NAdam, NAdamConfig};
pub use radam::{RAdam, RAdamConfig};
pub use rmsprop::{RmsProp, RmsPropConfig};
pub use rprop::{Rprop, RpropConfig};
pub use sgd::{Sgd, SgdConfig};
pub use sparse_adam::{SparseAdam, SparseAdamConfig};

/// Defines an optimizer type over a config: constructor, `add_param_group`, and the
/// `Optimizer` impl whose `step` runs `$update::<T>` on every parameter with a gradient.
macro_rules! optimizer {
    ($(#[$m:meta])* $name:ident, $cfg:ty, $pyname:expr, $update:ident) => {
        $crate::optimizers::optimizer!($(#[$m])* $name, $cfg, $pyname, $update, None);
    };
    ($(#[$m:meta])* $name:ident, $cfg:ty, $pyname:expr, $update:ident, $dev:expr) => {
        $crate::optimizers::optimizer!($(#[$m])* $name, $cfg, $pyname, $update, $dev, None);
    };
    ($(#[$m:meta])* $name:ident, $cfg:ty, $pyname:expr, $update:ident, $dev:expr, $dev_group:expr) => {
        $(#[$m])*
        pub struct $name {
            st: $crate::core::OptimizerState,
        }
        impl $name {
            #[doc = concat!("A new `", $pyname, "` over `params` with `config`.")]
            pub fn new(params: Vec<magpie_core::Tensor>, config: $cfg) -> magpie_core::Result<Self> {
                config.validate()?;
                Ok($name { st: $crate::core::OptimizerState::new($pyname, params, config.hyper())? })
            }
            /// `optimizer.add_param_group`: a group with its own config.
            pub fn add_param_group(&mut self, params: Vec<magpie_core::Tensor>, config: $cfg) -> magpie_core::Result<()> {
                config.validate()?;
                self.st.add_group($pyname, params, config.hyper())
            }
        }
        impl $crate::core::Optimizer for $name {
            fn state(&self) -> &$crate::core::OptimizerState {
                &self.st
            }
            fn state_mut(&mut self) -> &mut $crate::core::OptimizerState {
                &mut self.st
            }
            fn step(&mut self) -> magpie_core::Result<()> {
                $crate::core::for_each_param($pyname, &mut self.st, $dev, $dev_group, |g, ps, e| match e {
                    $crate::core::Elem::F32(p, gr) => $update::<f32>(g, ps, p, gr),
                    $crate::core::Elem::F64(p, gr) => $update::<f64>(g, ps, p, gr),
                })
            }
        }
    };
}
pub(crate) use optimizer;

/// Turns a list of `(name, value)` into the hyperparameter map.
pub(crate) fn hyper(items: &[(&str, f64)]) -> crate::core::Hyper {
    items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Fails with PyTorch's message unless `cond`.
pub(crate) fn check(cond: bool, op: &str, msg: String) -> magpie_core::Result<()> {
    if cond {
        Ok(())
    } else {
        Err(magpie_core::Error::value(op, msg))
    }
}

fn b(x: bool) -> f64 {
    x as u8 as f64
}

/// The hyperparameters of the Adam family in PyTorch's order: `lr`, `betas`, `eps`,
/// `weight_decay`, the variant's own (`extra`), then `maximize`.
pub(crate) fn adam_hyper(lr: f64, betas: (f64, f64), eps: f64, weight_decay: f64, extra: &[(&str, f64)], maximize: bool) -> crate::core::Hyper {
    let head = [("lr", lr), ("beta1", betas.0), ("beta2", betas.1), ("eps", eps), ("weight_decay", weight_decay)];
    let items: Vec<(&str, f64)> = head.iter().chain(extra).chain(&[("maximize", b(maximize))]).copied().collect();
    hyper(&items)
}

/// Takes a parameter's `exp_avg` and `exp_avg_sq` (zeros at first) and counts the step: the
/// start of an Adam-family update (give them back with [`put_moments`]).
pub(crate) fn take_moments<T: crate::core::OptFloat>(ps: &mut crate::core::ParamState, n: usize) -> magpie_core::Result<(Vec<T>, Vec<T>)> {
    let m = crate::core::take(ps, "exp_avg", n, T::zero())?;
    let v = crate::core::take(ps, "exp_avg_sq", n, T::zero())?;
    ps.step += 1.0;
    Ok((m, v))
}

/// Stores the moments taken by [`take_moments`] back.
pub(crate) fn put_moments<T: crate::core::OptFloat>(ps: &mut crate::core::ParamState, m: Vec<T>, v: Vec<T>) {
    crate::core::put(ps, "exp_avg", m);
    crate::core::put(ps, "exp_avg_sq", v);
}

/// The Adam family's moment update: `m.lerp_(d, 1 - beta1)`, `v = beta2 v + (1 - beta2) d²`.
#[inline(always)]
pub(crate) fn adam_moments<T: crate::core::OptFloat>(m: &mut T, v: &mut T, d: T, w1: T, b2: T, w2: T) {
    *m = *m + w1 * (d - *m);
    *v = *v * b2 + w2 * d * d;
}

/// Weight decay as NAdam/RAdam do it: decoupled (`p *= 1 - lr wd`) or added to the gradient.
#[inline(always)]
pub(crate) fn weight_decay<T: crate::core::OptFloat>(p: &mut T, d: T, lr: f64, wd: f64, decoupled: bool) -> T {
    if wd == 0.0 {
        d
    } else if decoupled {
        *p = *p * T::c(1.0 - lr * wd);
        d
    } else {
        d + T::c(wd) * *p
    }
}

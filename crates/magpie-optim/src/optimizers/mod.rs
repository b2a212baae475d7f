//! The optimizers, one file each. Each is a config struct (PyTorch's keyword arguments and
//! defaults) and an update rule over one parameter's elements, in the parameter's precision,
//! following PyTorch's single-tensor implementation step by step.

mod adadelta;
mod adagrad;
mod adam;
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
                $crate::core::for_each_param($pyname, &mut self.st, |g, ps, e| match e {
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

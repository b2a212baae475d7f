//! `torch.distributions` for torch-magpie: probability distributions with PyTorch's
//! parameterizations, argument validation, reparameterized sampling, transforms and the
//! `kl_divergence` registry. See `docs/distributions.md`.
//!
//! ```
//! use magpie_core::Tensor;
//! use magpie_distributions::{kl_divergence, Distribution, Normal};
//! let loc = Tensor::from_vec(vec![0f64, 1.], &[2])?.with_requires_grad()?;
//! let p = Normal::new(&loc, &Tensor::scalar(1f64))?;
//! let q = Normal::new(&Tensor::scalar(0f64), &Tensor::scalar(2f64))?;
//! let kl = kl_divergence(&p, &q)?;                 // [2]
//! kl.sum()?.backward()?;
//! assert!(loc.grad().is_some());
//! # Ok::<(), magpie_core::Error>(())
//! ```

/// Implements the bookkeeping methods of [`Distribution`] for a struct with `batch` and
/// `validate` fields.
macro_rules! dist_common {
    ($name:literal) => {
        fn name(&self) -> String {
            $name.into()
        }
        fn batch_shape(&self) -> &[usize] {
            &self.batch
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn validates(&self) -> bool {
            self.validate
        }
        fn clone_box(&self) -> Box<dyn $crate::Distribution> {
            Box::new(self.clone())
        }
    };
}

pub mod constraints;
pub mod distribution;
pub mod dists;
pub mod gamma_grad;
pub mod kl;
pub mod samplers;
pub mod transforms;
pub mod util;

pub use constraints::Constraint;
pub use distribution::{default_validate_args, set_default_validate_args, validate_args, Distribution};
pub use dists::*;
pub use gamma_grad::{dirichlet_grad, standard_gamma_grad};
pub use kl::{kl_divergence, register_kl};
pub use transforms::{AbsTransform, AffineTransform, ComposeTransform, ExpTransform, PowerTransform, SigmoidTransform, TanhTransform, Transform};

/// The examples of `docs/distributions.md` run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/distributions.md")]
pub struct DistributionsDocs;

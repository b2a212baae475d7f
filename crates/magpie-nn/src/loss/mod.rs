//! Losses as modules (`nn.CrossEntropyLoss`, `nn.MSELoss`, ...). Each holds its options as
//! public fields (with PyTorch's defaults in `Default`), computes with the functional form in
//! `magpie_core::ops::nn::loss`, and is called with a typed `forward2(input, target)` (or
//! `forward3` / `forward_ctc` for losses with more inputs) or generically with `forward_many`.
//! Per-class `weight` / `pos_weight` tensors are buffers, so they appear in the state dict
//! under PyTorch's names.
//!
//! ```
//! use magpie_nn::loss::CrossEntropyLoss;
//! use magpie_core::Tensor;
//! let ce = CrossEntropyLoss { label_smoothing: 0.1, ..Default::default() };
//! let logits = Tensor::zeros(&[2, 3])?;
//! let target = Tensor::from_vec(vec![0i64, 2], &[2])?;
//! let l = ce.forward2(&logits, &target)?;
//! assert!((l.item()?.to_f64() - 3f64.ln()).abs() < 1e-6);
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod classification;
mod ctc;
mod embedding;
mod regression;

pub use classification::{BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss};
pub use ctc::CTCLoss;
pub use embedding::{CosineEmbeddingLoss, HingeEmbeddingLoss, MarginRankingLoss, SoftMarginLoss, TripletMarginLoss};
pub use magpie_core::ops::nn::Reduction;
pub use regression::{GaussianNLLLoss, HuberLoss, L1Loss, MSELoss, PoissonNLLLoss, SmoothL1Loss};

/// Implements `Module` for a loss with a typed `$fwd(inputs...)`: `forward_many` takes exactly
/// those inputs (`$what` names them for the error); the listed optional fields are the module's
/// buffers.
macro_rules! loss_module {
    ($name:ident, $fwd:ident($($x:ident),+), $what:literal $(, $buf:ident)*) => {
        impl crate::module::Module for $name {
            fn type_name(&self) -> &'static str {
                stringify!($name)
            }
            fn forward_many(&self, xs: &[&magpie_core::Tensor]) -> magpie_core::Result<Vec<magpie_core::Tensor>> {
                match xs {
                    [$($x),+] => Ok(vec![self.$fwd($($x),+)?]),
                    _ => Err(magpie_core::Error::value(stringify!($name), format!(concat!("forward takes ", $what, " but {} were given"), xs.len()))),
                }
            }
            $crate::loss::loss_buffers!($($buf),*);
        }
    };
}

/// [`loss_module!`] for a loss with a typed `forward2(input, target)`.
macro_rules! loss_module2 {
    ($name:ident $(, $buf:ident)*) => {
        $crate::loss::loss_module!($name, forward2(x, y), "2 inputs (input, target)" $(, $buf)*);
    };
}

/// [`loss_module!`] for a loss with a typed `forward3(a, b, c)`.
macro_rules! loss_module3 {
    ($name:ident $(, $buf:ident)*) => {
        $crate::loss::loss_module!($name, forward3(a, b, c), "3 inputs" $(, $buf)*);
    };
}

/// The `local_buffers(_mut)` of a loss: its `Option<Tensor>` fields that are set.
macro_rules! loss_buffers {
    () => {};
    ($($buf:ident),+) => {
        fn local_buffers(&self) -> Vec<(&'static str, &magpie_core::Tensor)> {
            let mut v = Vec::new();
            $(v.extend(self.$buf.iter().map(|t| (stringify!($buf), t)));)+
            v
        }
        fn local_buffers_mut(&mut self) -> Vec<(&'static str, &mut magpie_core::Tensor)> {
            let mut v = Vec::new();
            $(v.extend(self.$buf.iter_mut().map(|t| (stringify!($buf), t)));)+
            v
        }
    };
}

pub(crate) use {loss_buffers, loss_module, loss_module2, loss_module3};

//! `Dropout`: zeroes elements with probability `p` in training, identity in eval.

use crate::module::Module;
use magpie_core::ops::nn::dropout;
use magpie_core::{Error, Result, Tensor};

/// `nn.Dropout(p)`; draws from the default generator (`magpie_core::ops::random::manual_seed`).
pub struct Dropout {
    pub p: f64,
    pub training: bool,
}

impl Dropout {
    /// `p` must lie in [0, 1].
    pub fn new(p: f64) -> Result<Dropout> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::value("Dropout", format!("dropout probability has to be between 0 and 1, but got {p}")));
        }
        Ok(Dropout { p, training: true })
    }
}

impl Module for Dropout {
    fn type_name(&self) -> &'static str {
        "Dropout"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        dropout(x, self.p, self.training, false)
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}

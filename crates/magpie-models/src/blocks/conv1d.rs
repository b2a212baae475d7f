//! GPT-2's `Conv1D`: a linear layer whose weight is stored `[in, out]` (`y = x W + b`), kept in
//! that layout so checkpoints load and save unchanged.

use magpie_core::{Error, Result, Tensor};
use magpie_nn::Module;

/// `transformers.pytorch_utils.Conv1D`: weight `[in, out]`, bias `[out]`.
pub struct Conv1D {
    pub weight: Tensor,
    pub bias: Tensor,
}

impl Conv1D {
    /// A layer from its tensors.
    pub fn from_weights(weight: Tensor, bias: Tensor) -> Result<Conv1D> {
        match (weight.shape(), bias.shape()) {
            (&[_, o], &[ob]) if o == ob => Ok(Conv1D { weight, bias }),
            _ => Err(Error::shape("Conv1D", format!("weight must be [in, out] and bias [out], got {:?} and {:?}", weight.shape(), bias.shape()))),
        }
    }
}

impl Module for Conv1D {
    fn type_name(&self) -> &'static str {
        "Conv1D"
    }
    /// `x [.., in]` to `[.., out]`: `linear` with the transposed (view of the) weight.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        magpie_core::ops::nn::linear(x, &self.weight.t()?, Some(&self.bias))
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        vec![("weight", &self.weight), ("bias", &self.bias)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        vec![("weight", &mut self.weight), ("bias", &mut self.bias)]
    }
}

//! `CTCLoss`: Connectionist Temporal Classification over unsegmented sequences.

use super::{loss_buffers, Reduction};
use crate::module::Module;
use magpie_core::ops::nn::ctc_loss;
use magpie_core::{Error, Result, Tensor};

/// `nn.CTCLoss(blank=0, reduction='mean', zero_infinity=False)`. Call
/// `forward_ctc(log_probs [T, N, C], targets, input_lengths, target_lengths)`; targets are padded
/// `[N, S]` or concatenated 1-D. `mean` divides each loss by its target length, then averages.
#[derive(Debug, Clone)]
pub struct CTCLoss {
    pub blank: i64,
    pub reduction: Reduction,
    pub zero_infinity: bool,
}
impl Default for CTCLoss {
    fn default() -> Self {
        CTCLoss { blank: 0, reduction: Reduction::Mean, zero_infinity: false }
    }
}
impl CTCLoss {
    /// The loss with lengths given as slices.
    pub fn forward_ctc(&self, log_probs: &Tensor, targets: &Tensor, input_lengths: &[i64], target_lengths: &[i64]) -> Result<Tensor> {
        ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction, self.zero_infinity)
    }
}

fn ints(t: &Tensor) -> Result<Vec<i64>> {
    if t.dtype().is_float() || t.dtype().is_complex() {
        return Err(Error::dtype("CTCLoss", format!("lengths must be integer tensors, got {}", t.dtype())));
    }
    t.reshape(&[-1])?.to_vec()
}

impl Module for CTCLoss {
    fn type_name(&self) -> &'static str {
        "CTCLoss"
    }
    /// `[log_probs, targets, input_lengths, target_lengths]` with integer length tensors.
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        match xs {
            [lp, tg, il, tl] => Ok(vec![self.forward_ctc(lp, tg, &ints(il)?, &ints(tl)?)?]),
            _ => Err(Error::value("CTCLoss", format!("forward takes 4 inputs but {} were given", xs.len()))),
        }
    }
    loss_buffers!();
}

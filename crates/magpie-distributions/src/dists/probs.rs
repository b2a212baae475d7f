//! The `probs` / `logits` parameterization shared by Bernoulli, Binomial and Categorical.

use magpie_core::{Error, Result, Tensor};

use crate::util::{logits_to_probs, probs_to_logits};

/// Both forms of the parameter, and which one the user gave (what `repr` and validation name).
#[derive(Clone)]
pub struct ProbsLogits {
    /// Probabilities.
    pub probs: Tensor,
    /// Log-odds (binary) or normalized log-probabilities (categorical).
    pub logits: Tensor,
    /// True when `probs` was given.
    pub from_probs: bool,
}

impl ProbsLogits {
    /// From exactly one of `probs` and `logits`, with PyTorch's error otherwise.
    pub fn new(op: &str, probs: Option<&Tensor>, logits: Option<&Tensor>, binary: bool) -> Result<ProbsLogits> {
        let norm = |p: &Tensor| -> Result<Tensor> {
            if binary {
                Ok(p.clone())
            } else {
                p.div(&p.sum_dims(Some(&[-1]), true, None)?)
            }
        };
        match (probs, logits) {
            (Some(p), None) => {
                check_float(op, p)?;
                let p = norm(p)?;
                Ok(ProbsLogits { logits: probs_to_logits(&p, binary)?, probs: p, from_probs: true })
            }
            (None, Some(l)) => {
                check_float(op, l)?;
                let l = if binary { l.clone() } else { l.sub(&l.logsumexp(&[-1], true)?)? };
                Ok(ProbsLogits { probs: logits_to_probs(&l, binary)?, logits: l, from_probs: false })
            }
            _ => Err(Error::value(op, "Either `probs` or `logits` must be specified, but not both.")),
        }
    }

    /// The parameter the user gave, named.
    pub fn given(&self) -> (&'static str, Tensor) {
        if self.from_probs {
            ("probs", self.probs.clone())
        } else {
            ("logits", self.logits.clone())
        }
    }

    /// Both parameters expanded to `shape`.
    pub fn expand(&self, shape: &[usize]) -> Result<ProbsLogits> {
        Ok(ProbsLogits { probs: crate::util::expand_to(&self.probs, shape)?, logits: crate::util::expand_to(&self.logits, shape)?, from_probs: self.from_probs })
    }
}

fn check_float(op: &str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::dtype(op, format!("{op}: probs and logits must be floating-point tensors, got {}", t.dtype())));
    }
    Ok(())
}

/// `binary_cross_entropy_with_logits(logits, target, reduction='none')` as
/// `softplus(l) - l * target`: stable, and differentiable at `l = 0` (gradient `sigmoid(l) - target`).
pub fn bce_with_logits(logits: &Tensor, target: &Tensor) -> Result<Tensor> {
    logits.softplus(1.0, 20.0)?.sub(&logits.mul(target)?)
}

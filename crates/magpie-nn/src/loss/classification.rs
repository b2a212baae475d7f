//! Classification losses: `CrossEntropyLoss`, `NLLLoss`, `BCELoss`, `BCEWithLogitsLoss`,
//! `KLDivLoss`, `MultiMarginLoss`, `MultiLabelMarginLoss`, `MultiLabelSoftMarginLoss`.

use super::{loss_module2, Reduction};
use magpie_core::ops::nn::loss as f;
use magpie_core::{Result, Tensor};

/// `nn.CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0)`:
/// `log_softmax` over dim 1 (dim 0 for unbatched `[C]` input) then NLL; the target is class
/// indices (integer, `[N, d...]`) or class probabilities (float, same shape as the input).
#[derive(Debug, Clone)]
pub struct CrossEntropyLoss {
    /// Per-class weights `[C]` (a buffer).
    pub weight: Option<Tensor>,
    pub ignore_index: i64,
    pub reduction: Reduction,
    pub label_smoothing: f64,
}
impl Default for CrossEntropyLoss {
    fn default() -> Self {
        CrossEntropyLoss { weight: None, ignore_index: -100, reduction: Reduction::Mean, label_smoothing: 0.0 }
    }
}
impl CrossEntropyLoss {
    /// The loss of logits `input` against `target`.
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::cross_entropy(input, target, self.weight.as_ref(), self.ignore_index, self.reduction, self.label_smoothing)
    }
}
loss_module2!(CrossEntropyLoss, weight);

/// `nn.NLLLoss(weight=None, ignore_index=-100, reduction='mean')` on log-probabilities.
#[derive(Debug, Clone)]
pub struct NLLLoss {
    /// Per-class weights `[C]` (a buffer).
    pub weight: Option<Tensor>,
    pub ignore_index: i64,
    pub reduction: Reduction,
}
impl Default for NLLLoss {
    fn default() -> Self {
        NLLLoss { weight: None, ignore_index: -100, reduction: Reduction::Mean }
    }
}
impl NLLLoss {
    /// The loss of log-probabilities `input` against class indices `target`.
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::nll_loss(input, target, self.weight.as_ref(), self.ignore_index, self.reduction)
    }
}
loss_module2!(NLLLoss, weight);

/// `nn.BCELoss(weight=None, reduction='mean')` on probabilities in [0, 1] (logs clamped at -100).
#[derive(Debug, Clone)]
pub struct BCELoss {
    /// Rescaling weight, broadcast to the input (a buffer).
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
}
impl Default for BCELoss {
    fn default() -> Self {
        BCELoss { weight: None, reduction: Reduction::Mean }
    }
}
impl BCELoss {
    /// The loss of probabilities `input` against `target` (same shape).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::binary_cross_entropy(input, target, self.weight.as_ref(), self.reduction)
    }
}
loss_module2!(BCELoss, weight);

/// `nn.BCEWithLogitsLoss(weight=None, reduction='mean', pos_weight=None)`: sigmoid + BCE,
/// computed stably; `pos_weight` scales the positive term (broadcast along the last dim).
#[derive(Debug, Clone)]
pub struct BCEWithLogitsLoss {
    /// Rescaling weight (a buffer).
    pub weight: Option<Tensor>,
    /// Weight of positive examples per class (a buffer).
    pub pos_weight: Option<Tensor>,
    pub reduction: Reduction,
}
impl Default for BCEWithLogitsLoss {
    fn default() -> Self {
        BCEWithLogitsLoss { weight: None, pos_weight: None, reduction: Reduction::Mean }
    }
}
impl BCEWithLogitsLoss {
    /// The loss of logits `input` against `target` (same shape).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::binary_cross_entropy_with_logits(input, target, self.weight.as_ref(), self.pos_weight.as_ref(), self.reduction)
    }
}
loss_module2!(BCEWithLogitsLoss, weight, pos_weight);

/// `nn.KLDivLoss(reduction='mean', log_target=False)`: `target * (log target - input)` with
/// `input` in log space; `reduction` is `"none"`, `"mean"`, `"sum"` or `"batchmean"` (the
/// mathematically correct KL divergence).
#[derive(Debug, Clone)]
pub struct KLDivLoss {
    pub reduction: String,
    pub log_target: bool,
}
impl Default for KLDivLoss {
    fn default() -> Self {
        KLDivLoss { reduction: "mean".into(), log_target: false }
    }
}
impl KLDivLoss {
    /// The loss of log-probabilities `input` against `target` (log-probabilities with `log_target`).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::kl_div(input, target, &self.reduction, self.log_target)
    }
}
loss_module2!(KLDivLoss);

/// `nn.MultiMarginLoss(p=1, margin=1.0, weight=None, reduction='mean')`: multi-class hinge loss.
#[derive(Debug, Clone)]
pub struct MultiMarginLoss {
    pub p: i64,
    pub margin: f64,
    /// Per-class weights (a buffer).
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
}
impl Default for MultiMarginLoss {
    fn default() -> Self {
        MultiMarginLoss { p: 1, margin: 1.0, weight: None, reduction: Reduction::Mean }
    }
}
impl MultiMarginLoss {
    /// The loss of scores `input` `[N, C]` against class indices `target` `[N]`.
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::multi_margin_loss(input, target, self.p, self.margin, self.weight.as_ref(), self.reduction)
    }
}
loss_module2!(MultiMarginLoss, weight);

/// `nn.MultiLabelMarginLoss(reduction='mean')`: targets are class indices padded with -1.
#[derive(Debug, Clone)]
pub struct MultiLabelMarginLoss {
    pub reduction: Reduction,
}
impl Default for MultiLabelMarginLoss {
    fn default() -> Self {
        MultiLabelMarginLoss { reduction: Reduction::Mean }
    }
}
impl MultiLabelMarginLoss {
    /// The loss of scores `input` against label lists `target` (same shape).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::multilabel_margin_loss(input, target, self.reduction)
    }
}
loss_module2!(MultiLabelMarginLoss);

/// `nn.MultiLabelSoftMarginLoss(weight=None, reduction='mean')`: per-class logistic loss, averaged over classes.
#[derive(Debug, Clone)]
pub struct MultiLabelSoftMarginLoss {
    /// Per-class weights (a buffer).
    pub weight: Option<Tensor>,
    pub reduction: Reduction,
}
impl Default for MultiLabelSoftMarginLoss {
    fn default() -> Self {
        MultiLabelSoftMarginLoss { weight: None, reduction: Reduction::Mean }
    }
}
impl MultiLabelSoftMarginLoss {
    /// The loss of logits `input` `[N, C]` against 0/1 targets (same shape).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::multilabel_soft_margin_loss(input, target, self.weight.as_ref(), self.reduction)
    }
}
loss_module2!(MultiLabelSoftMarginLoss, weight);

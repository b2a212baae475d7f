//! Margin and embedding losses: `CosineEmbeddingLoss`, `MarginRankingLoss`,
//! `TripletMarginLoss`, `HingeEmbeddingLoss`, `SoftMarginLoss`.

use super::{loss_module2, loss_module3, Reduction};
use magpie_core::ops::nn::loss as f;
use magpie_core::{Result, Tensor};

/// `nn.CosineEmbeddingLoss(margin=0.0, reduction='mean')`: `1 - cos(x1, x2)` for target 1,
/// `max(0, cos(x1, x2) - margin)` for target -1. Call `forward3(x1, x2, target)`.
#[derive(Debug, Clone)]
pub struct CosineEmbeddingLoss {
    pub margin: f64,
    pub reduction: Reduction,
}
impl Default for CosineEmbeddingLoss {
    fn default() -> Self {
        CosineEmbeddingLoss { margin: 0.0, reduction: Reduction::Mean }
    }
}
impl CosineEmbeddingLoss {
    /// The loss of the pairs `(x1, x2)` `[N, D]` with labels `target` `[N]` of ±1.
    pub fn forward3(&self, x1: &Tensor, x2: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::cosine_embedding_loss(x1, x2, target, self.margin, self.reduction)
    }
}
loss_module3!(CosineEmbeddingLoss);

/// `nn.MarginRankingLoss(margin=0.0, reduction='mean')`: `max(0, -y (x1 - x2) + margin)`.
/// Call `forward3(x1, x2, target)`.
#[derive(Debug, Clone)]
pub struct MarginRankingLoss {
    pub margin: f64,
    pub reduction: Reduction,
}
impl Default for MarginRankingLoss {
    fn default() -> Self {
        MarginRankingLoss { margin: 0.0, reduction: Reduction::Mean }
    }
}
impl MarginRankingLoss {
    /// The loss of scores `x1`, `x2` with preferred order `target` (±1).
    pub fn forward3(&self, x1: &Tensor, x2: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::margin_ranking_loss(x1, x2, target, self.margin, self.reduction)
    }
}
loss_module3!(MarginRankingLoss);

/// `nn.TripletMarginLoss(margin=1.0, p=2.0, eps=1e-6, swap=False, reduction='mean')`:
/// `max(d(a, p) - d(a, n) + margin, 0)` with the pairwise p-norm distance. Call
/// `forward3(anchor, positive, negative)`.
#[derive(Debug, Clone)]
pub struct TripletMarginLoss {
    pub margin: f64,
    pub p: f64,
    pub eps: f64,
    pub swap: bool,
    pub reduction: Reduction,
}
impl Default for TripletMarginLoss {
    fn default() -> Self {
        TripletMarginLoss { margin: 1.0, p: 2.0, eps: 1e-6, swap: false, reduction: Reduction::Mean }
    }
}
impl TripletMarginLoss {
    /// The loss of the triplets.
    pub fn forward3(&self, anchor: &Tensor, positive: &Tensor, negative: &Tensor) -> Result<Tensor> {
        f::triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap, self.reduction)
    }
}
loss_module3!(TripletMarginLoss);

/// `nn.HingeEmbeddingLoss(margin=1.0, reduction='mean')`: `x` for target 1, `max(0, margin - x)` for -1.
#[derive(Debug, Clone)]
pub struct HingeEmbeddingLoss {
    pub margin: f64,
    pub reduction: Reduction,
}
impl Default for HingeEmbeddingLoss {
    fn default() -> Self {
        HingeEmbeddingLoss { margin: 1.0, reduction: Reduction::Mean }
    }
}
impl HingeEmbeddingLoss {
    /// The loss of distances `input` with labels `target` (±1).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::hinge_embedding_loss(input, target, self.margin, self.reduction)
    }
}
loss_module2!(HingeEmbeddingLoss);

/// `nn.SoftMarginLoss(reduction='mean')`: `log(1 + exp(-y x))`.
#[derive(Debug, Clone)]
pub struct SoftMarginLoss {
    pub reduction: Reduction,
}
impl Default for SoftMarginLoss {
    fn default() -> Self {
        SoftMarginLoss { reduction: Reduction::Mean }
    }
}
impl SoftMarginLoss {
    /// The loss of scores `input` with labels `target` (±1).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::soft_margin_loss(input, target, self.reduction)
    }
}
loss_module2!(SoftMarginLoss);

//! Regression losses: `MSELoss`, `L1Loss`, `SmoothL1Loss`, `HuberLoss`, `GaussianNLLLoss`,
//! `PoissonNLLLoss`.

use super::{loss_module2, loss_module3, Reduction};
use magpie_core::ops::nn::loss as f;
use magpie_core::{Result, Tensor};

/// `nn.MSELoss(reduction='mean')`: `(input - target)²`.
#[derive(Debug, Clone)]
pub struct MSELoss {
    pub reduction: Reduction,
}
impl Default for MSELoss {
    fn default() -> Self {
        MSELoss { reduction: Reduction::Mean }
    }
}
impl MSELoss {
    /// The loss of `input` against `target` (broadcastable).
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::mse_loss(input, target, self.reduction)
    }
}
loss_module2!(MSELoss);

/// `nn.L1Loss(reduction='mean')`: `|input - target|`.
#[derive(Debug, Clone)]
pub struct L1Loss {
    pub reduction: Reduction,
}
impl Default for L1Loss {
    fn default() -> Self {
        L1Loss { reduction: Reduction::Mean }
    }
}
impl L1Loss {
    /// The loss of `input` against `target`.
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::l1_loss(input, target, self.reduction)
    }
}
loss_module2!(L1Loss);

/// `nn.SmoothL1Loss(reduction='mean', beta=1.0)`: quadratic below `beta`, linear above.
#[derive(Debug, Clone)]
pub struct SmoothL1Loss {
    pub reduction: Reduction,
    pub beta: f64,
}
impl Default for SmoothL1Loss {
    fn default() -> Self {
        SmoothL1Loss { reduction: Reduction::Mean, beta: 1.0 }
    }
}
impl SmoothL1Loss {
    /// The loss of `input` against `target`.
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::smooth_l1_loss(input, target, self.reduction, self.beta)
    }
}
loss_module2!(SmoothL1Loss);

/// `nn.HuberLoss(reduction='mean', delta=1.0)`: `beta`-smooth L1 scaled by `delta`.
#[derive(Debug, Clone)]
pub struct HuberLoss {
    pub reduction: Reduction,
    pub delta: f64,
}
impl Default for HuberLoss {
    fn default() -> Self {
        HuberLoss { reduction: Reduction::Mean, delta: 1.0 }
    }
}
impl HuberLoss {
    /// The loss of `input` against `target`.
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::huber_loss(input, target, self.reduction, self.delta)
    }
}
loss_module2!(HuberLoss);

/// `nn.PoissonNLLLoss(log_input=True, full=False, eps=1e-8, reduction='mean')`.
#[derive(Debug, Clone)]
pub struct PoissonNLLLoss {
    pub log_input: bool,
    pub full: bool,
    pub eps: f64,
    pub reduction: Reduction,
}
impl Default for PoissonNLLLoss {
    fn default() -> Self {
        PoissonNLLLoss { log_input: true, full: false, eps: 1e-8, reduction: Reduction::Mean }
    }
}
impl PoissonNLLLoss {
    /// The loss of rate `input` (log-rate with `log_input`) against counts `target`.
    pub fn forward2(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::poisson_nll_loss(input, target, self.log_input, self.full, self.eps, self.reduction)
    }
}
loss_module2!(PoissonNLLLoss);

/// `nn.GaussianNLLLoss(full=False, eps=1e-6, reduction='mean')`, called with
/// `forward3(input, target, var)`.
#[derive(Debug, Clone)]
pub struct GaussianNLLLoss {
    pub full: bool,
    pub eps: f64,
    pub reduction: Reduction,
}
impl Default for GaussianNLLLoss {
    fn default() -> Self {
        GaussianNLLLoss { full: false, eps: 1e-6, reduction: Reduction::Mean }
    }
}
impl GaussianNLLLoss {
    /// The loss of mean `input` and variance `var` against `target`.
    pub fn forward3(&self, input: &Tensor, target: &Tensor, var: &Tensor) -> Result<Tensor> {
        f::gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)
    }
}
loss_module3!(GaussianNLLLoss);

//! Channel-wise dropout (`Dropout1d/2d/3d`: whole channels are zeroed) and the SELU-preserving
//! `AlphaDropout` / `FeatureAlphaDropout`.

use crate::module::Module;
use magpie_core::ops::nn::{alpha_dropout, dropout};
use magpie_core::{Error, Result, Tensor};

fn check_p(op: &str, p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::value(op, format!("dropout probability has to be between 0 and 1, but got {p}")));
    }
    Ok(())
}

/// `nn.Dropout1d/2d/3d(p=0.5)` for `N` = 1, 2, 3: zeroes entire channels with probability `p`
/// in training (scaling the rest by `1 / (1 - p)`), identity in eval. Unbatched input
/// (`[C, L]`, `[C, H, W]`, `[C, D, H, W]`) is accepted.
#[derive(Debug, Clone)]
pub struct DropoutNd<const N: usize> {
    pub p: f64,
    pub training: bool,
}

/// `nn.Dropout1d`.
pub type Dropout1d = DropoutNd<1>;
/// `nn.Dropout2d`.
pub type Dropout2d = DropoutNd<2>;
/// `nn.Dropout3d`.
pub type Dropout3d = DropoutNd<3>;

fn dn_name(n: usize) -> &'static str {
    ["Dropout1d", "Dropout2d", "Dropout3d"][n.clamp(1, 3) - 1]
}

impl<const N: usize> DropoutNd<N> {
    /// `p` must lie in [0, 1].
    pub fn new(p: f64) -> Result<Self> {
        check_p(dn_name(N), p)?;
        Ok(DropoutNd { p, training: true })
    }
}

impl<const N: usize> Module for DropoutNd<N> {
    fn type_name(&self) -> &'static str {
        dn_name(N)
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let op = dn_name(N);
        // Dropout2d also takes 3-D input as batched [N, C, L] (PyTorch's documented behaviour)
        let lo = if N == 2 { N } else { N + 1 };
        if x.ndim() < lo || x.ndim() > N + 2 {
            return Err(Error::shape(op, format!("{op}: Expected {}D or {}D input, but received a {}D input", N + 1, N + 2, x.ndim())));
        }
        if x.ndim() == N + 1 && N != 2 {
            return dropout(&x.unsqueeze(0)?, self.p, self.training, true)?.squeeze_dims(&[0]);
        }
        dropout(x, self.p, self.training, true)
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}

/// `nn.AlphaDropout(p=0.5)`: dropout for SELU networks that keeps zero mean and unit variance
/// (dropped values are set to SELU's negative saturation, then an affine fix-up).
#[derive(Debug, Clone)]
pub struct AlphaDropout {
    pub p: f64,
    pub training: bool,
}

impl AlphaDropout {
    /// `p` must lie in [0, 1].
    pub fn new(p: f64) -> Result<AlphaDropout> {
        check_p("AlphaDropout", p)?;
        Ok(AlphaDropout { p, training: true })
    }
}

impl Module for AlphaDropout {
    fn type_name(&self) -> &'static str {
        "AlphaDropout"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        alpha_dropout(x, self.p, self.training, false)
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}

/// `nn.FeatureAlphaDropout(p=0.5)`: alpha dropout of whole channels.
#[derive(Debug, Clone)]
pub struct FeatureAlphaDropout {
    pub p: f64,
    pub training: bool,
}

impl FeatureAlphaDropout {
    /// `p` must lie in [0, 1].
    pub fn new(p: f64) -> Result<FeatureAlphaDropout> {
        check_p("FeatureAlphaDropout", p)?;
        Ok(FeatureAlphaDropout { p, training: true })
    }
}

impl Module for FeatureAlphaDropout {
    fn type_name(&self) -> &'static str {
        "FeatureAlphaDropout"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        alpha_dropout(x, self.p, self.training, true)
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}

//! Shape and resampling layers: `Flatten`, `Unflatten`, `Upsample` (and PyTorch's
//! `UpsamplingNearest2d` / `UpsamplingBilinear2d` shorthands).

use crate::module::Module;
use magpie_core::ops::nn::interpolate;
use magpie_core::{Error, Result, Tensor};

/// `nn.Flatten(start_dim=1, end_dim=-1)`.
#[derive(Debug, Clone, Copy)]
pub struct Flatten {
    pub start_dim: i64,
    pub end_dim: i64,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start_dim: 1, end_dim: -1 }
    }
}

impl Flatten {
    /// Flattens dims `start_dim..=end_dim`.
    pub fn new(start_dim: i64, end_dim: i64) -> Flatten {
        Flatten { start_dim, end_dim }
    }
}

impl Module for Flatten {
    fn type_name(&self) -> &'static str {
        "Flatten"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten(self.start_dim, self.end_dim)
    }
}

/// `nn.Unflatten(dim, unflattened_size)`: splits `dim` into `sizes` (one entry may be -1).
#[derive(Debug, Clone)]
pub struct Unflatten {
    pub dim: i64,
    pub unflattened_size: Vec<i64>,
}

impl Unflatten {
    /// Splits `dim` into `sizes`.
    pub fn new(dim: i64, sizes: &[i64]) -> Unflatten {
        Unflatten { dim, unflattened_size: sizes.to_vec() }
    }
}

impl Module for Unflatten {
    fn type_name(&self) -> &'static str {
        "Unflatten"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.unflatten(self.dim, &self.unflattened_size)
    }
}

/// `nn.Upsample(size=None, scale_factor=None, mode='nearest', align_corners=None,
/// recompute_scale_factor=None)`: exactly one of `size` / `scale_factor` is given (one value
/// for every spatial dim or one per dim).
#[derive(Debug, Clone)]
pub struct Upsample {
    pub size: Option<Vec<i64>>,
    pub scale_factor: Option<Vec<f64>>,
    /// `"nearest"`, `"nearest-exact"`, `"linear"`, `"bilinear"`, `"bicubic"`, `"trilinear"`.
    pub mode: String,
    pub align_corners: Option<bool>,
    pub recompute_scale_factor: Option<bool>,
}

impl Upsample {
    /// Resizes to `size`.
    pub fn to_size(size: &[i64], mode: &str, align_corners: Option<bool>) -> Upsample {
        Upsample { size: Some(size.to_vec()), scale_factor: None, mode: mode.into(), align_corners, recompute_scale_factor: None }
    }
    /// Scales by `scale_factor`.
    pub fn by_scale(scale_factor: &[f64], mode: &str, align_corners: Option<bool>) -> Upsample {
        Upsample { size: None, scale_factor: Some(scale_factor.to_vec()), mode: mode.into(), align_corners, recompute_scale_factor: None }
    }
    /// `nn.UpsamplingNearest2d(scale_factor=...)`.
    pub fn nearest2d(scale_factor: f64) -> Upsample {
        Upsample::by_scale(&[scale_factor], "nearest", None)
    }
    /// `nn.UpsamplingBilinear2d(scale_factor=...)` (align_corners=True).
    pub fn bilinear2d(scale_factor: f64) -> Upsample {
        Upsample::by_scale(&[scale_factor], "bilinear", Some(true))
    }
}

/// Expands a one-value-for-all spatial argument to one per spatial dim of `x`.
fn spread<T: Copy>(v: &[T], x: &Tensor) -> Vec<T> {
    let nd = x.ndim().saturating_sub(2);
    if v.len() == 1 && nd > 1 {
        vec![v[0]; nd]
    } else {
        v.to_vec()
    }
}

impl Module for Upsample {
    fn type_name(&self) -> &'static str {
        "Upsample"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.size.is_some() == self.scale_factor.is_some() {
            return Err(Error::value("Upsample", "only one of size or scale_factor should be defined"));
        }
        let size = self.size.as_ref().map(|s| spread(s, x));
        let scale = self.scale_factor.as_ref().map(|s| spread(s, x));
        interpolate(x, size.as_deref(), scale.as_deref(), &self.mode, self.align_corners, self.recompute_scale_factor, false)
    }
}

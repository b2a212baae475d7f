//! Normalisation layers over the trailing dims: `LayerNorm` and `RMSNorm`.

use crate::module::{present, present_mut, Module};
use magpie_core::ops::nn::{native_layer_norm, rms_norm};
use magpie_core::{default_dtype, Device, Result, Tensor};

fn affine(shape: &[usize], on: bool, bias: bool) -> Result<(Option<Tensor>, Option<Tensor>)> {
    if !on {
        return Ok((None, None));
    }
    let w = Tensor::ones_on(shape, default_dtype(), Device::Cpu)?.with_requires_grad()?;
    let b = if bias { Some(Tensor::zeros_on(shape, default_dtype(), Device::Cpu)?.with_requires_grad()?) } else { None };
    Ok((Some(w), b))
}

fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// `nn.LayerNorm(normalized_shape, eps, elementwise_affine, bias)`.
pub struct LayerNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub normalized_shape: Vec<usize>,
    pub eps: f64,
}

impl LayerNorm {
    /// PyTorch's defaults are `eps = 1e-5`, affine with bias.
    pub fn new(normalized_shape: &[usize], eps: f64, elementwise_affine: bool, bias: bool) -> Result<LayerNorm> {
        let (weight, bias) = affine(normalized_shape, elementwise_affine, bias)?;
        Ok(LayerNorm { weight, bias, normalized_shape: normalized_shape.to_vec(), eps })
    }
}

impl Module for LayerNorm {
    fn type_name(&self) -> &'static str {
        "LayerNorm"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(native_layer_norm(x, &dims(&self.normalized_shape), self.weight.as_ref(), self.bias.as_ref(), self.eps)?.0)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        present([("weight", self.weight.as_ref()), ("bias", self.bias.as_ref())])
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        present_mut([("weight", self.weight.as_mut()), ("bias", self.bias.as_mut())])
    }
}

/// `nn.RMSNorm(normalized_shape, eps, elementwise_affine)`; `eps = None` uses the dtype's epsilon
/// as PyTorch does.
pub struct RMSNorm {
    pub weight: Option<Tensor>,
    pub normalized_shape: Vec<usize>,
    pub eps: Option<f64>,
}

impl RMSNorm {
    /// A new layer (weight of ones when affine).
    pub fn new(normalized_shape: &[usize], eps: Option<f64>, elementwise_affine: bool) -> Result<RMSNorm> {
        let (weight, _) = affine(normalized_shape, elementwise_affine, false)?;
        Ok(RMSNorm { weight, normalized_shape: normalized_shape.to_vec(), eps })
    }
}

impl Module for RMSNorm {
    fn type_name(&self) -> &'static str {
        "RMSNorm"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        rms_norm(x, &dims(&self.normalized_shape), self.weight.as_ref(), self.eps)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        self.weight.iter().map(|w| ("weight", w)).collect()
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        self.weight.iter_mut().map(|w| ("weight", w)).collect()
    }
}

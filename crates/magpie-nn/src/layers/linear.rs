//! `Linear` (y = x Wᵀ + b) and `Identity`.

use crate::init;
use crate::module::{present, present_mut, Module};
use magpie_core::ops::nn::linear;
use magpie_core::{default_dtype, Device, Error, Result, Tensor};

/// `nn.Linear(in_features, out_features, bias)`: weight `[out, in]`, bias `[out]`, initialised
/// as PyTorch does (kaiming-uniform with a = √5, i.e. U(±1/√in) for both).
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub in_features: usize,
    pub out_features: usize,
}

impl Linear {
    /// A new layer with PyTorch's default initialisation, in the default dtype.
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Result<Linear> {
        let weight = Tensor::zeros_on(&[out_features, in_features], default_dtype(), Device::Cpu)?;
        init::kaiming_uniform_(&weight, 5f64.sqrt(), init::FanMode::FanIn, init::Nonlinearity::LeakyRelu)?;
        let bias = if bias {
            let b = Tensor::zeros_on(&[out_features], default_dtype(), Device::Cpu)?;
            let bound = if in_features > 0 { 1.0 / (in_features as f64).sqrt() } else { 0.0 };
            init::uniform_(&b, -bound, bound)?;
            Some(b.with_requires_grad()?)
        } else {
            None
        };
        Ok(Linear { weight: weight.with_requires_grad()?, bias, in_features, out_features })
    }
    /// A layer from given tensors (`weight [out, in]`, `bias [out]`), used as they are.
    pub fn from_weights(weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        let [out_features, in_features] = *weight.shape() else {
            return Err(Error::shape("Linear", format!("weight must be 2-D [out, in], got {:?}", weight.shape())));
        };
        if let Some(b) = &bias {
            if b.shape() != [out_features] {
                return Err(Error::shape("Linear", format!("bias must have shape [{out_features}], got {:?}", b.shape())));
            }
        }
        Ok(Linear { weight, bias, in_features, out_features })
    }
}

impl Module for Linear {
    fn type_name(&self) -> &'static str {
        "Linear"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        linear(x, &self.weight, self.bias.as_ref())
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        present([("weight", Some(&self.weight)), ("bias", self.bias.as_ref())])
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        present_mut([("weight", Some(&mut self.weight)), ("bias", self.bias.as_mut())])
    }
}

/// `nn.Identity()`: returns its input.
#[derive(Default)]
pub struct Identity;

impl Module for Identity {
    fn type_name(&self) -> &'static str {
        "Identity"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
}

//! `Bilinear`: `y = x1ᵀ W x2 + b`, a layer with two inputs.

use crate::init;
use crate::module::{present, present_mut, Module};
use magpie_core::ops::nn::bilinear;
use magpie_core::{default_dtype, Device, Error, Result, Tensor};

/// `nn.Bilinear(in1_features, in2_features, out_features, bias=True)`: weight
/// `[out, in1, in2]`, bias `[out]`, both U(±1/√in1). Call [`Bilinear::forward2`] (or
/// `forward_many(&[x1, x2])`); `forward` with one input is an error.
pub struct Bilinear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub in1_features: usize,
    pub in2_features: usize,
    pub out_features: usize,
}

impl Bilinear {
    /// A new layer with PyTorch's initialisation.
    pub fn new(in1_features: usize, in2_features: usize, out_features: usize, bias: bool) -> Result<Bilinear> {
        let bound = if in1_features > 0 { 1.0 / (in1_features as f64).sqrt() } else { 0.0 };
        let w = Tensor::zeros_on(&[out_features, in1_features, in2_features], default_dtype(), Device::Cpu)?;
        init::uniform_(&w, -bound, bound)?;
        let b = if bias {
            let b = Tensor::zeros_on(&[out_features], default_dtype(), Device::Cpu)?;
            init::uniform_(&b, -bound, bound)?;
            Some(b.with_requires_grad()?)
        } else {
            None
        };
        Ok(Bilinear { weight: w.with_requires_grad()?, bias: b, in1_features, in2_features, out_features })
    }
    /// `forward(input1, input2)`: inputs `[*, in1]` and `[*, in2]`, output `[*, out]`.
    pub fn forward2(&self, x1: &Tensor, x2: &Tensor) -> Result<Tensor> {
        bilinear(x1, x2, &self.weight, self.bias.as_ref())
    }
}

impl Module for Bilinear {
    fn type_name(&self) -> &'static str {
        "Bilinear"
    }
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        match xs {
            [a, b] => Ok(vec![self.forward2(a, b)?]),
            _ => Err(Error::value("Bilinear", format!("forward takes 2 inputs but {} were given", xs.len()))),
        }
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        present([("weight", Some(&self.weight)), ("bias", self.bias.as_ref())])
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        present_mut([("weight", Some(&mut self.weight)), ("bias", self.bias.as_mut())])
    }
}

//! `QuantLinear`: y = x Wᵀ + b with W kept in a quantized block format (GGUF's Q8_0, Q4_0, Q4_K,
//! Q6_K), for inference; and `AnyLinear`, a projection that is either a dense [`Linear`] or a
//! `QuantLinear`, for models whose weights may come quantized.

use super::linear::Linear;
use crate::module::{present, present_mut, Module};
use magpie_core::quant::QuantMatrix;
use magpie_core::{Error, Result, Tensor};

/// A linear layer over a quantized `[out, in]` weight. The weight is inference only: it is not a
/// tensor parameter (no gradient, not in `state_dict`; the bias is), and asking for its gradient
/// ([`QuantLinear::weight_requires_grad_`]) is an error. Gradients still flow to the input (through
/// the dequantized weight), so layers before it can be trained.
pub struct QuantLinear {
    pub weight: QuantMatrix,
    pub bias: Option<Tensor>,
    pub in_features: usize,
    pub out_features: usize,
}

impl QuantLinear {
    /// A layer from a quantized weight and an optional bias `[out]`.
    pub fn new(weight: QuantMatrix, bias: Option<Tensor>) -> Result<QuantLinear> {
        let [out_features, in_features] = weight.shape();
        if let Some(b) = &bias {
            if b.shape() != [out_features] {
                return Err(Error::shape("QuantLinear", format!("bias must have shape [{out_features}], got {:?}", b.shape())));
            }
        }
        Ok(QuantLinear { weight, bias, in_features, out_features })
    }

    /// Gradients of a quantized weight do not exist: always an error saying so (the call a
    /// trainer would make to unfreeze the weight).
    pub fn weight_requires_grad_(&self, requires_grad: bool) -> Result<()> {
        if requires_grad {
            return Err(Error::unsupported("QuantLinear", format!("the {} weight is quantized and inference only; dequantize it (weight.dequantize()) to train", self.weight.ty())));
        }
        Ok(())
    }
}

impl Module for QuantLinear {
    fn type_name(&self) -> &'static str {
        "QuantLinear"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.weight.matmul_t(x)?;
        match &self.bias {
            Some(b) => y.add(&b.to_dtype(y.dtype())?),
            None => Ok(y),
        }
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        present([("bias", self.bias.as_ref())])
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        present_mut([("bias", self.bias.as_mut())])
    }
}

/// A projection whose weight is dense or quantized (a model loaded from GGUF keeps the block
/// types with kernels quantized and the others dense).
pub enum AnyLinear {
    Dense(Linear),
    Quant(QuantLinear),
}

impl AnyLinear {
    /// The dense layer; an error naming `op` for a quantized one (for code that needs the
    /// weight as a tensor parameter: training, weight fusion).
    pub fn dense(&self, op: &str) -> Result<&Linear> {
        match self {
            AnyLinear::Dense(l) => Ok(l),
            AnyLinear::Quant(q) => Err(Error::unsupported(op, format!("needs dense weights, but this layer's weight is {} (quantized)", q.weight.ty()))),
        }
    }

    /// The weight as a tensor: the parameter itself when dense, dequantized to f32 (a new CPU
    /// tensor, exact) when quantized.
    pub fn weight(&self) -> Result<Tensor> {
        match self {
            AnyLinear::Dense(l) => Ok(l.weight.clone()),
            AnyLinear::Quant(q) => q.weight.dequantize(),
        }
    }

    /// `[out_features, in_features]`.
    pub fn shape(&self) -> [usize; 2] {
        match self {
            AnyLinear::Dense(l) => [l.out_features, l.in_features],
            AnyLinear::Quant(q) => [q.out_features, q.in_features],
        }
    }

    /// The bias, if any.
    pub fn bias(&self) -> Option<&Tensor> {
        match self {
            AnyLinear::Dense(l) => l.bias.as_ref(),
            AnyLinear::Quant(q) => q.bias.as_ref(),
        }
    }

    /// Whether the weight is quantized.
    pub fn is_quantized(&self) -> bool {
        matches!(self, AnyLinear::Quant(_))
    }

    /// The bytes the weight takes in memory (block bytes when quantized).
    pub fn weight_nbytes(&self) -> usize {
        match self {
            AnyLinear::Dense(l) => l.weight.numel() * l.weight.dtype().size(),
            AnyLinear::Quant(q) => q.weight.bytes().len(),
        }
    }

    fn inner(&self) -> &dyn Module {
        match self {
            AnyLinear::Dense(l) => l,
            AnyLinear::Quant(q) => q,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Module {
        match self {
            AnyLinear::Dense(l) => l,
            AnyLinear::Quant(q) => q,
        }
    }
}

impl From<Linear> for AnyLinear {
    fn from(l: Linear) -> AnyLinear {
        AnyLinear::Dense(l)
    }
}

impl Module for AnyLinear {
    fn type_name(&self) -> &'static str {
        self.inner().type_name()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.inner().forward(x)
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        self.inner().local_parameters()
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        self.inner_mut().local_parameters_mut()
    }
}

//! The activation functions Hugging Face configs name (`hidden_act`, `activation_function`).

use magpie_core::{Error, Result, Tensor};

/// An activation by its transformers name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact (erf) GELU.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
    /// `silu` / `swish`.
    Silu,
}

impl Activation {
    /// Parses a transformers activation name; `key` names the config field in the error.
    pub fn parse(name: &str, key: &str) -> Result<Activation> {
        match name {
            "gelu" => Ok(Activation::Gelu),
            "gelu_new" | "gelu_pytorch_tanh" => Ok(Activation::GeluTanh),
            "relu" => Ok(Activation::Relu),
            "silu" | "swish" => Ok(Activation::Silu),
            other => Err(Error::unsupported("config", format!("config.json: {key} '{other}' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, silu)"))),
        }
    }

    /// Applies the activation.
    pub fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Activation::Gelu => x.gelu("none"),
            Activation::GeluTanh => x.gelu("tanh"),
            Activation::Relu => x.relu(),
            Activation::Silu => x.silu(),
        }
    }
}

//! The gated MLP of Llama and Qwen2: `down(act(gate(x)) * up(x))`.

use super::activation::Activation;
use magpie_core::{Result, Tensor};
use magpie_nn::{AnyLinear, Module};

/// `LlamaMLP` / `Qwen2MLP` (`gate_proj`, `up_proj`, `down_proj`).
pub struct GatedMlp {
    pub gate_proj: AnyLinear,
    pub up_proj: AnyLinear,
    pub down_proj: AnyLinear,
    pub act: Activation,
}

impl GatedMlp {
    /// `x [.., hidden]` to `[.., hidden]`.
    pub fn run(&self, x: &Tensor) -> Result<Tensor> {
        let g = self.act.apply(&self.gate_proj.forward(x)?)?;
        self.down_proj.forward(&g.mul(&self.up_proj.forward(x)?)?)
    }
}

super::module_children!(GatedMlp, "GatedMlp", [gate_proj => "gate_proj", up_proj => "up_proj", down_proj => "down_proj"], forward = GatedMlp::run);

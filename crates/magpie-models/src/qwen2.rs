//! Qwen2 (`Qwen2ForCausalLM`): the Llama architecture with biases on the q/k/v projections (none on
//! the output projection), read from a Qwen2 config.

use crate::config::LlamaConfig;
use crate::hub::WeightSource;
use crate::llama::LlamaForCausalLM;
use magpie_core::Result;
use serde_json::Value;

/// Qwen2 runs as a [`LlamaForCausalLM`] with `qkv_bias`.
pub type Qwen2ForCausalLM = LlamaForCausalLM;

/// Reads a Qwen2 `config.json`.
pub fn config(cfg: &Value) -> Result<LlamaConfig> {
    LlamaConfig::from_json(cfg, true)
}

/// Builds a Qwen2 model from `w`.
pub fn build(cfg: &LlamaConfig, w: &mut dyn WeightSource) -> Result<Qwen2ForCausalLM> {
    LlamaForCausalLM::build(cfg, w)
}

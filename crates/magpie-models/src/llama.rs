//! Llama (`LlamaForCausalLM`, Llama 2/3): RMSNorm, rotary embeddings (plain, linear or `llama3`
//! scaled), grouped-query attention, the SwiGLU MLP, tied or untied embeddings. Qwen2 is this model
//! with biases on the q/k/v projections (`qwen2.rs` wires it).

use crate::blocks::attention::{attend, AttnMask, Heads};
use crate::blocks::kv_cache::KvCache;
use crate::blocks::mlp::GatedMlp;
use crate::blocks::load;
use crate::blocks::module_children;
use crate::blocks::rope::Rope;
use crate::config::LlamaConfig;
use crate::hub::WeightSource;
use crate::output::ModelOutput;
use crate::positions::StepInputs;
use magpie_core::ops::nn::linear;
use magpie_core::Result;
use magpie_nn::{AnyLinear, Embedding, Module, ModuleList, RMSNorm};

/// `self_attn`: separate q/k/v/o projections.
pub struct LlamaAttention {
    pub q_proj: AnyLinear,
    pub k_proj: AnyLinear,
    pub v_proj: AnyLinear,
    pub o_proj: AnyLinear,
}
module_children!(LlamaAttention, "LlamaAttention", [q_proj => "q_proj", k_proj => "k_proj", v_proj => "v_proj", o_proj => "o_proj"]);

/// `layers.N`.
pub struct LlamaDecoderLayer {
    pub self_attn: LlamaAttention,
    pub mlp: GatedMlp,
    pub input_layernorm: RMSNorm,
    pub post_attention_layernorm: RMSNorm,
}
module_children!(LlamaDecoderLayer, "LlamaDecoderLayer", [self_attn => "self_attn", mlp => "mlp", input_layernorm => "input_layernorm", post_attention_layernorm => "post_attention_layernorm"]);

/// `model`.
pub struct LlamaModel {
    pub embed_tokens: Embedding,
    pub layers: ModuleList<LlamaDecoderLayer>,
    pub norm: RMSNorm,
}
module_children!(LlamaModel, "LlamaModel", [embed_tokens => "embed_tokens", layers => "layers", norm => "norm"]);

/// `LlamaForCausalLM` (and `Qwen2ForCausalLM`).
pub struct LlamaForCausalLM {
    pub model: LlamaModel,
    /// None when tied to `model.embed_tokens`.
    pub lm_head: Option<AnyLinear>,
    pub config: LlamaConfig,
    pub rope: Rope,
    /// Training mode (attention dropout on); models load in eval mode, as in transformers.
    pub training: bool,
}

module_children!(LlamaForCausalLM, "LlamaForCausalLM", [model => "model"], optional [lm_head => "lm_head"], training = training);

impl LlamaForCausalLM {
    /// Builds the model from `w` (names `model.*`, `lm_head.weight` when untied).
    pub fn build(cfg: &LlamaConfig, w: &mut dyn WeightSource) -> Result<LlamaForCausalLM> {
        let (h, eps) = (cfg.hidden_size, cfg.rms_norm_eps);
        let (q_out, kv_out) = (cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim);
        let mut layers = ModuleList::new();
        for i in 0..cfg.num_hidden_layers {
            let l = |s: &str| format!("model.layers.{i}.{s}");
            layers.push(Box::new(LlamaDecoderLayer {
                self_attn: LlamaAttention {
                    q_proj: load::any_linear(w, &l("self_attn.q_proj"), q_out, h, cfg.qkv_bias)?,
                    k_proj: load::any_linear(w, &l("self_attn.k_proj"), kv_out, h, cfg.qkv_bias)?,
                    v_proj: load::any_linear(w, &l("self_attn.v_proj"), kv_out, h, cfg.qkv_bias)?,
                    o_proj: load::any_linear(w, &l("self_attn.o_proj"), h, q_out, cfg.o_bias)?,
                },
                mlp: GatedMlp {
                    gate_proj: load::any_linear(w, &l("mlp.gate_proj"), cfg.intermediate_size, h, cfg.mlp_bias)?,
                    up_proj: load::any_linear(w, &l("mlp.up_proj"), cfg.intermediate_size, h, cfg.mlp_bias)?,
                    down_proj: load::any_linear(w, &l("mlp.down_proj"), h, cfg.intermediate_size, cfg.mlp_bias)?,
                    act: cfg.hidden_act,
                },
                input_layernorm: load::rms_norm(w, &l("input_layernorm"), h, eps)?,
                post_attention_layernorm: load::rms_norm(w, &l("post_attention_layernorm"), h, eps)?,
            }));
        }
        let model = LlamaModel {
            embed_tokens: load::embedding(w, "model.embed_tokens", cfg.vocab_size, h)?,
            layers,
            norm: load::rms_norm(w, "model.norm", h, eps)?,
        };
        let lm_head = if cfg.tie_word_embeddings { None } else { Some(load::any_linear(w, "lm_head", cfg.vocab_size, h, false)?) };
        let rope = Rope::new(cfg.head_dim, cfg.rope_theta, &cfg.rope_scaling);
        Ok(LlamaForCausalLM { model, lm_head, config: cfg.clone(), rope, training: false })
    }

    /// One forward over `step`, appending to `cache` when given.
    pub fn forward_step(&self, step: &StepInputs, mut cache: Option<&mut KvCache>, output_hidden_states: bool) -> Result<ModelOutput> {
        step.check_positions("LlamaForCausalLM", None)?;
        let c = &self.config;
        let mut x = self.model.embed_tokens.forward(&step.input_ids)?;
        let (cos, sin) = self.rope.tables(&step.positions, step.b, step.t, x.dtype(), step.device())?;
        let mask = AttnMask::causal(step.attention_mask.as_ref(), step.past, step.t, step.device())?;
        let attn_p = if self.training { c.attention_dropout } else { 0.0 };
        let heads = Heads { n_heads: c.num_attention_heads, n_kv_heads: c.num_key_value_heads, head_dim: c.head_dim };
        let (mut hidden, mut layer_outputs) = (Vec::new(), Vec::new());
        for (i, layer) in self.model.layers.iter().enumerate() {
            if output_hidden_states {
                hidden.push(x.clone());
            }
            let a = &layer.self_attn;
            let n = layer.input_layernorm.forward(&x)?;
            let y = attend(&a.q_proj.forward(&n)?, &a.k_proj.forward(&n)?, &a.v_proj.forward(&n)?, heads, Some((&cos, &sin)), &mask, cache.as_deref_mut().map(|c| (c, i)), None, attn_p)?;
            x = x.add(&a.o_proj.forward(&y)?)?;
            x = x.add(&layer.mlp.run(&layer.post_attention_layernorm.forward(&x)?)?)?;
            if output_hidden_states {
                layer_outputs.push(x.clone());
            }
        }
        if let Some(c) = cache {
            c.advance(step.t);
        }
        let x = self.model.norm.forward(&x)?;
        if output_hidden_states {
            hidden.push(x.clone());
        }
        let last = if step.last_only { x.narrow(1, step.t as i64 - 1, 1)? } else { x.clone() };
        let logits = match &self.lm_head {
            Some(head) => head.forward(&last)?,
            None => linear(&last, &self.model.embed_tokens.weight, None)?,
        };
        Ok(ModelOutput { logits: Some(logits), last_hidden_state: x, hidden_states: hidden, layer_outputs, pooler_output: None })
    }
}

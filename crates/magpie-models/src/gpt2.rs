//! GPT-2 (`GPT2LMHeadModel`): token and learned position embeddings, pre-LayerNorm blocks of
//! causal attention and an MLP in `Conv1D` layout (`[in, out]` weights), a final LayerNorm, and
//! the LM head tied to the token embedding (or its own `lm_head.weight`).

use crate::blocks::activation::Activation;
use crate::blocks::attention::{attend, AttnMask, Heads};
use crate::blocks::conv1d::Conv1D;
use crate::blocks::kv_cache::KvCache;
use crate::blocks::load;
use crate::blocks::module_children;
use crate::config::Gpt2Config;
use crate::hub::{Init, WeightSource};
use crate::output::ModelOutput;
use crate::positions::StepInputs;
use magpie_core::ops::nn::{dropout, linear};
use magpie_core::{Result, Tensor};
use magpie_nn::{Embedding, LayerNorm, Linear, Module, ModuleList};

fn conv1d(w: &mut dyn WeightSource, name: &str, in_f: usize, out_f: usize) -> Result<Conv1D> {
    Conv1D::from_weights(w.take(&format!("{name}.weight"), &[in_f, out_f], Init::Normal)?, w.take(&format!("{name}.bias"), &[out_f], Init::Zeros)?)
}

/// `attn`: the fused q/k/v projection and the output projection.
pub struct Gpt2Attention {
    pub c_attn: Conv1D,
    pub c_proj: Conv1D,
}
module_children!(Gpt2Attention, "GPT2Attention", [c_attn => "c_attn", c_proj => "c_proj"]);

/// `mlp`: `c_proj(act(c_fc(x)))`.
pub struct Gpt2Mlp {
    pub c_fc: Conv1D,
    pub c_proj: Conv1D,
    pub act: Activation,
}
module_children!(Gpt2Mlp, "GPT2MLP", [c_fc => "c_fc", c_proj => "c_proj"], forward = Gpt2Mlp::run);

impl Gpt2Mlp {
    fn run(&self, x: &Tensor) -> Result<Tensor> {
        self.c_proj.forward(&self.act.apply(&self.c_fc.forward(x)?)?)
    }
}

/// `h.N`.
pub struct Gpt2Block {
    pub ln_1: LayerNorm,
    pub attn: Gpt2Attention,
    pub ln_2: LayerNorm,
    pub mlp: Gpt2Mlp,
}
module_children!(Gpt2Block, "GPT2Block", [ln_1 => "ln_1", attn => "attn", ln_2 => "ln_2", mlp => "mlp"]);

/// `transformer`.
pub struct Gpt2Model {
    pub wte: Embedding,
    pub wpe: Embedding,
    pub h: ModuleList<Gpt2Block>,
    pub ln_f: LayerNorm,
}
module_children!(Gpt2Model, "GPT2Model", [wte => "wte", wpe => "wpe", h => "h", ln_f => "ln_f"]);

/// `GPT2LMHeadModel`.
pub struct Gpt2LMHeadModel {
    pub transformer: Gpt2Model,
    /// None when tied to `transformer.wte`.
    pub lm_head: Option<Linear>,
    pub config: Gpt2Config,
    /// Training mode (dropout on); models load in eval mode, as in transformers.
    pub training: bool,
}

module_children!(Gpt2LMHeadModel, "GPT2LMHeadModel", [transformer => "transformer"], optional [lm_head => "lm_head"], training = training);

fn drop(x: Tensor, p: f64) -> Result<Tensor> {
    if p > 0.0 {
        dropout(&x, p, true, false)
    } else {
        Ok(x)
    }
}

impl Gpt2LMHeadModel {
    /// Builds the model from `w` (names `transformer.*`, `lm_head.weight` when untied).
    pub fn build(cfg: &Gpt2Config, w: &mut dyn WeightSource) -> Result<Gpt2LMHeadModel> {
        let (d, eps) = (cfg.n_embd, cfg.layer_norm_epsilon);
        let mut h = ModuleList::new();
        for i in 0..cfg.n_layer {
            let l = |s: &str| format!("transformer.h.{i}.{s}");
            h.push(Box::new(Gpt2Block {
                ln_1: load::layer_norm(w, &l("ln_1"), d, eps)?,
                attn: Gpt2Attention { c_attn: conv1d(w, &l("attn.c_attn"), d, 3 * d)?, c_proj: conv1d(w, &l("attn.c_proj"), d, d)? },
                ln_2: load::layer_norm(w, &l("ln_2"), d, eps)?,
                mlp: Gpt2Mlp { c_fc: conv1d(w, &l("mlp.c_fc"), d, cfg.n_inner)?, c_proj: conv1d(w, &l("mlp.c_proj"), cfg.n_inner, d)?, act: cfg.activation_function },
            }));
        }
        let transformer = Gpt2Model {
            wte: load::embedding(w, "transformer.wte", cfg.vocab_size, d)?,
            wpe: load::embedding(w, "transformer.wpe", cfg.n_positions, d)?,
            h,
            ln_f: load::layer_norm(w, "transformer.ln_f", d, eps)?,
        };
        let lm_head = if cfg.tie_word_embeddings { None } else { Some(load::linear(w, "lm_head", cfg.vocab_size, d, false)?) };
        Ok(Gpt2LMHeadModel { transformer, lm_head, config: cfg.clone(), training: false })
    }

    /// One forward over `step` (ids, mask, positions), appending to `cache` when given.
    pub fn forward_step(&self, step: &StepInputs, mut cache: Option<&mut KvCache>, output_hidden_states: bool) -> Result<ModelOutput> {
        step.check_positions("GPT2LMHeadModel", Some(self.config.n_positions))?;
        let tr = &self.transformer;
        let pos = step.position_tensor()?;
        let c = &self.config;
        let (embd_p, attn_p, resid_p) = if self.training { (c.embd_pdrop, c.attn_pdrop, c.resid_pdrop) } else { (0.0, 0.0, 0.0) };
        let mut x = drop(tr.wte.forward(&step.input_ids)?.add(&tr.wpe.forward(&pos)?)?, embd_p)?;
        let mask = AttnMask::causal(step.attention_mask.as_ref(), step.past, step.t, step.device())?;
        let d = self.config.n_embd;
        let heads = Heads { n_heads: self.config.n_head, n_kv_heads: self.config.n_head, head_dim: d / self.config.n_head };
        let scale = if self.config.scale_attn_weights { None } else { Some(1.0) };
        let (mut hidden, mut layer_outputs) = (Vec::new(), Vec::new());
        for (i, blk) in tr.h.iter().enumerate() {
            if output_hidden_states {
                hidden.push(x.clone());
            }
            let qkv = blk.attn.c_attn.forward(&blk.ln_1.forward(&x)?)?;
            let p = qkv.split(d as i64, 2)?;
            let a = attend(&p[0], &p[1], &p[2], heads, None, &mask, cache.as_deref_mut().map(|c| (c, i)), scale, attn_p)?;
            x = x.add(&drop(blk.attn.c_proj.forward(&a)?, resid_p)?)?;
            x = x.add(&drop(blk.mlp.run(&blk.ln_2.forward(&x)?)?, resid_p)?)?;
            if output_hidden_states {
                layer_outputs.push(x.clone());
            }
        }
        if let Some(c) = cache {
            c.advance(step.t);
        }
        let x = tr.ln_f.forward(&x)?;
        if output_hidden_states {
            hidden.push(x.clone());
        }
        let head = self.lm_head.as_ref().map_or(&tr.wte.weight, |l| &l.weight);
        let last = if step.last_only { x.narrow(1, step.t as i64 - 1, 1)? } else { x.clone() };
        let logits = linear(&last, head, None)?;
        Ok(ModelOutput { logits: Some(logits), last_hidden_state: x, hidden_states: hidden, layer_outputs, pooler_output: None })
    }
}

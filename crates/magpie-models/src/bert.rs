//! BERT (`BertModel`, `BertForMaskedLM`): absolute positions, token types, post-LayerNorm encoder
//! layers over a padding mask, the pooler, and the masked-language-model head tied to the word
//! embeddings. Module names follow transformers', so `named_parameters()` are checkpoint names.

use crate::blocks::activation::Activation;
use crate::blocks::attention::{attend, AttnMask, Heads};
use crate::blocks::load;
use crate::blocks::module_children;
use crate::config::BertConfig;
use crate::hub::{Init, WeightSource};
use crate::output::ModelOutput;
use magpie_core::ops::nn::add_layer_norm::add_layer_norm;
use magpie_core::ops::nn::bias_gelu::bias_gelu;
use magpie_core::ops::nn::lm_head_loss::lm_head_cross_entropy_with_bias;
use magpie_core::ops::nn::{dropout, linear, Reduction};
use magpie_core::{DType, Error, Result, Tensor};
use magpie_nn::{Embedding, LayerNorm, Linear, Module, ModuleList};

/// Word, position and token-type embeddings, summed and normalized.
pub struct BertEmbeddings {
    pub word_embeddings: Embedding,
    pub position_embeddings: Embedding,
    pub token_type_embeddings: Embedding,
    pub layer_norm: LayerNorm,
}
module_children!(BertEmbeddings, "BertEmbeddings", [word_embeddings => "word_embeddings", position_embeddings => "position_embeddings", token_type_embeddings => "token_type_embeddings", layer_norm => "LayerNorm"]);

/// The q/k/v projections (`attention.self`).
pub struct BertSelfAttention {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
}
module_children!(BertSelfAttention, "BertSelfAttention", [query => "query", key => "key", value => "value"]);

/// A projection, dropout (off at inference), residual add and LayerNorm (`attention.output`, `output`).
pub struct BertResidualOutput {
    pub dense: Linear,
    pub layer_norm: LayerNorm,
}
module_children!(BertResidualOutput, "BertOutput", [dense => "dense", layer_norm => "LayerNorm"]);

impl BertResidualOutput {
    fn run(&self, x: &Tensor, residual: &Tensor, drop: Drop) -> Result<Tensor> {
        if drop.hidden > 0.0 {
            return self.layer_norm.forward(&drop.hidden(&self.dense.forward(x)?)?.add(residual)?);
        }
        // without dropout the projection's bias, the residual add and the LayerNorm are one op
        // (one kernel each way on CUDA)
        let ln = &self.layer_norm;
        let ns: Vec<i64> = ln.normalized_shape.iter().map(|&v| v as i64).collect();
        let y = linear(x, &self.dense.weight, None)?;
        add_layer_norm(&y, residual, self.dense.bias.as_ref(), &ns, ln.weight.as_ref(), ln.bias.as_ref(), ln.eps)
    }
}

/// Dropout probabilities of one forward call (zero in eval mode).
#[derive(Clone, Copy)]
struct Drop {
    hidden: f64,
    attention: f64,
}

impl Drop {
    fn hidden(self, x: &Tensor) -> Result<Tensor> {
        if self.hidden > 0.0 {
            dropout(x, self.hidden, true, false)
        } else {
            Ok(x.clone())
        }
    }
}

/// `attention.self` and `attention.output`.
pub struct BertAttention {
    pub self_attn: BertSelfAttention,
    pub output: BertResidualOutput,
}
module_children!(BertAttention, "BertAttention", [self_attn => "self", output => "output"]);

/// `intermediate.dense` (followed by the activation).
pub struct BertIntermediate {
    pub dense: Linear,
}
module_children!(BertIntermediate, "BertIntermediate", [dense => "dense"]);

/// One encoder layer.
pub struct BertLayer {
    pub attention: BertAttention,
    pub intermediate: BertIntermediate,
    pub output: BertResidualOutput,
}
module_children!(BertLayer, "BertLayer", [attention => "attention", intermediate => "intermediate", output => "output"]);

/// `encoder.layer.N`.
pub struct BertEncoder {
    pub layer: ModuleList<BertLayer>,
}
module_children!(BertEncoder, "BertEncoder", [layer => "layer"]);

/// `pooler.dense` (tanh of a projection of the first token).
pub struct BertPooler {
    pub dense: Linear,
}
module_children!(BertPooler, "BertPooler", [dense => "dense"]);

/// `BertModel`: embeddings, encoder and (when the checkpoint has one) the pooler.
pub struct BertModel {
    pub embeddings: BertEmbeddings,
    pub encoder: BertEncoder,
    pub pooler: Option<BertPooler>,
    pub config: BertConfig,
    /// Training mode (dropout on); models load in eval mode, as in transformers.
    pub training: bool,
    /// Position ids on the model's device (no upload per forward).
    position_ids: crate::positions::PositionIds,
}

module_children!(BertModel, "BertModel", [embeddings => "embeddings", encoder => "encoder"], optional [pooler => "pooler"], training = training);

impl BertModel {
    /// Builds the encoder from `w`, names under `prefix` (`""` or `"bert."`); the pooler is built
    /// when `pooler` is true and the source has it.
    pub fn build(cfg: &BertConfig, w: &mut dyn WeightSource, prefix: &str, pooler: bool) -> Result<BertModel> {
        let (h, eps) = (cfg.hidden_size, cfg.layer_norm_eps);
        let p = |s: &str| format!("{prefix}{s}");
        let embeddings = BertEmbeddings {
            word_embeddings: load::embedding(w, &p("embeddings.word_embeddings"), cfg.vocab_size, h)?,
            position_embeddings: load::embedding(w, &p("embeddings.position_embeddings"), cfg.max_position_embeddings, h)?,
            token_type_embeddings: load::embedding(w, &p("embeddings.token_type_embeddings"), cfg.type_vocab_size, h)?,
            layer_norm: load::layer_norm(w, &p("embeddings.LayerNorm"), h, eps)?,
        };
        let mut layers = ModuleList::new();
        for i in 0..cfg.num_hidden_layers {
            let l = |s: &str| p(&format!("encoder.layer.{i}.{s}"));
            layers.push(Box::new(BertLayer {
                attention: BertAttention {
                    self_attn: BertSelfAttention {
                        query: load::linear(w, &l("attention.self.query"), h, h, true)?,
                        key: load::linear(w, &l("attention.self.key"), h, h, true)?,
                        value: load::linear(w, &l("attention.self.value"), h, h, true)?,
                    },
                    output: BertResidualOutput { dense: load::linear(w, &l("attention.output.dense"), h, h, true)?, layer_norm: load::layer_norm(w, &l("attention.output.LayerNorm"), h, eps)? },
                },
                intermediate: BertIntermediate { dense: load::linear(w, &l("intermediate.dense"), cfg.intermediate_size, h, true)? },
                output: BertResidualOutput { dense: load::linear(w, &l("output.dense"), h, cfg.intermediate_size, true)?, layer_norm: load::layer_norm(w, &l("output.LayerNorm"), h, eps)? },
            }));
        }
        let pooler = if pooler && w.has(&p("pooler.dense.weight")) { Some(BertPooler { dense: load::linear(w, &p("pooler.dense"), h, h, true)? }) } else { None };
        Ok(BertModel { embeddings, encoder: BertEncoder { layer: layers }, pooler, config: cfg.clone(), training: false, position_ids: Default::default() })
    }

    /// `input_ids [B, T]` (int64), `attention_mask [B, T]` (1 = token, 0 = padding; None: all
    /// tokens), `token_type_ids [B, T]` (None: all 0).
    pub fn forward_with(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>, token_type_ids: Option<&Tensor>, output_hidden_states: bool) -> Result<ModelOutput> {
        let op = "BertModel";
        let &[b, t] = input_ids.shape() else {
            return Err(Error::shape(op, format!("input_ids must be [batch, seq], got {:?}", input_ids.shape())));
        };
        if t > self.config.max_position_embeddings {
            return Err(Error::value(op, format!("sequence length {t} is longer than the model's {} positions", self.config.max_position_embeddings)));
        }
        let dev = input_ids.device();
        let e = &self.embeddings;
        let pos = self.position_ids.get(t, dev)?.reshape(&[1, t as i64])?;
        let tt = match token_type_ids {
            Some(tt) => {
                if tt.shape() != [b, t] {
                    return Err(Error::shape(op, format!("token_type_ids must be [{b}, {t}] like input_ids, got {:?}", tt.shape())));
                }
                tt.clone()
            }
            None => Tensor::zeros_on(&[b, t], DType::I64, dev)?,
        };
        let x = e.word_embeddings.forward(input_ids)?.add(&e.token_type_embeddings.forward(&tt)?)?.add(&e.position_embeddings.forward(&pos)?)?;
        let drop = if self.training { Drop { hidden: self.config.hidden_dropout_prob, attention: self.config.attention_probs_dropout_prob } } else { Drop { hidden: 0.0, attention: 0.0 } };
        let mut x = drop.hidden(&e.layer_norm.forward(&x)?)?;
        let mask = AttnMask::bidirectional(attention_mask, t)?;
        let heads = Heads { n_heads: self.config.num_attention_heads, n_kv_heads: self.config.num_attention_heads, head_dim: self.config.head_dim() };
        let act = self.config.hidden_act;
        let mut hidden = Vec::new();
        for layer in self.encoder.layer.iter() {
            if output_hidden_states {
                hidden.push(x.clone());
            }
            x = layer.run(&x, &mask, heads, act, drop)?;
        }
        if output_hidden_states {
            hidden.push(x.clone());
        }
        let pooler_output = match &self.pooler {
            Some(p) => Some(p.dense.forward(&x.select(1, 0)?)?.tanh()?),
            None => None,
        };
        Ok(ModelOutput { logits: None, last_hidden_state: x, hidden_states: hidden, layer_outputs: Vec::new(), pooler_output })
    }
}

impl BertLayer {
    fn run(&self, x: &Tensor, mask: &AttnMask, heads: Heads, act: Activation, drop: Drop) -> Result<Tensor> {
        let s = &self.attention.self_attn;
        let a = attend(&s.query.forward(x)?, &s.key.forward(x)?, &s.value.forward(x)?, heads, None, mask, None, None, drop.attention)?;
        let a = self.attention.output.run(&a, x, drop)?;
        let i = dense_act(&self.intermediate.dense, act, &a)?;
        self.output.run(&i, &a, drop)
    }
}

/// `act(dense(x))`; for GELU the projection's bias and the activation are one op (`bias_gelu`:
/// one kernel each way on CUDA, the bias added in the activation's dtype as `linear` adds it).
fn dense_act(dense: &Linear, act: Activation, x: &Tensor) -> Result<Tensor> {
    let approximate = match act {
        Activation::Gelu => "none",
        Activation::GeluTanh => "tanh",
        _ => return act.apply(&dense.forward(x)?),
    };
    match &dense.bias {
        Some(b) => bias_gelu(&linear(x, &dense.weight, None)?, b, approximate),
        None => act.apply(&dense.forward(x)?),
    }
}

/// `cls.predictions.transform`: dense, activation, LayerNorm.
pub struct BertPredictionHeadTransform {
    pub dense: Linear,
    pub layer_norm: LayerNorm,
}
module_children!(BertPredictionHeadTransform, "BertPredictionHeadTransform", [dense => "dense", layer_norm => "LayerNorm"]);

/// `cls.predictions`: the transform, then the decoder tied to the word embeddings plus `bias`.
pub struct BertLMPredictionHead {
    pub transform: BertPredictionHeadTransform,
    pub bias: Tensor,
}

impl Module for BertLMPredictionHead {
    fn type_name(&self) -> &'static str {
        "BertLMPredictionHead"
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        vec![("bias", &self.bias)]
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        vec![("bias", &mut self.bias)]
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("transform".into(), &self.transform)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("transform".into(), &mut self.transform)]
    }
}

/// `cls` (`BertOnlyMLMHead`).
pub struct BertOnlyMLMHead {
    pub predictions: BertLMPredictionHead,
}
module_children!(BertOnlyMLMHead, "BertOnlyMLMHead", [predictions => "predictions"]);

/// `BertForMaskedLM`: `bert` (without pooler) and `cls`.
pub struct BertForMaskedLM {
    pub bert: BertModel,
    pub cls: BertOnlyMLMHead,
    /// Training mode (`train()` sets it here and on `bert`, which applies the dropout).
    pub training: bool,
}
module_children!(BertForMaskedLM, "BertForMaskedLM", [bert => "bert", cls => "cls"], training = training);

impl BertForMaskedLM {
    /// Builds the model from `w` (names `bert.*` and `cls.*`).
    pub fn build(cfg: &BertConfig, w: &mut dyn WeightSource) -> Result<BertForMaskedLM> {
        let bert = BertModel::build(cfg, w, "bert.", false)?;
        let h = cfg.hidden_size;
        let cls = BertOnlyMLMHead {
            predictions: BertLMPredictionHead {
                transform: BertPredictionHeadTransform {
                    dense: load::linear(w, "cls.predictions.transform.dense", h, h, true)?,
                    layer_norm: load::layer_norm(w, "cls.predictions.transform.LayerNorm", h, cfg.layer_norm_eps)?,
                },
                bias: w.take("cls.predictions.bias", &[cfg.vocab_size], Init::Zeros)?,
            },
        };
        Ok(BertForMaskedLM { bert, cls, training: false })
    }

    /// The encoder's outputs and the MLM logits `[B, T, vocab]`.
    pub fn forward_with(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>, token_type_ids: Option<&Tensor>, output_hidden_states: bool) -> Result<ModelOutput> {
        let mut out = self.bert.forward_with(input_ids, attention_mask, token_type_ids, output_hidden_states)?;
        let h = self.head_hidden(&out.last_hidden_state)?;
        out.logits = Some(linear(&h, &self.bert.embeddings.word_embeddings.weight, Some(&self.cls.predictions.bias))?);
        Ok(out)
    }

    /// The MLM head's transform (dense, activation, LayerNorm) before the decoder.
    fn head_hidden(&self, x: &Tensor) -> Result<Tensor> {
        let p = &self.cls.predictions;
        p.transform.layer_norm.forward(&dense_act(&p.transform.dense, self.bert.config.hidden_act, x)?)
    }

    /// The masked-LM loss: the mean cross-entropy of `labels [B, T]` (-100: ignored) over the
    /// MLM logits, as transformers' `BertForMaskedLM(labels=...)` computes it. The decoder and the
    /// loss run as one op (`lm_head_cross_entropy_with_bias`): on CUDA under autocast with an odd
    /// vocabulary (30522) the logits stay in an aligned padded product, without the padded copies
    /// of the logits and of their gradient. Same values as the loss over `forward_with`'s logits.
    pub fn mlm_loss(&self, input_ids: &Tensor, labels: &Tensor, attention_mask: Option<&Tensor>, token_type_ids: Option<&Tensor>) -> Result<Tensor> {
        let out = self.bert.forward_with(input_ids, attention_mask, token_type_ids, false)?;
        let h = self.head_hidden(&out.last_hidden_state)?;
        let c = self.bert.config.hidden_size as i64;
        lm_head_cross_entropy_with_bias(
            &h.reshape(&[-1, c])?,
            &self.bert.embeddings.word_embeddings.weight,
            Some(&self.cls.predictions.bias),
            &labels.reshape(&[-1])?,
            -100,
            Reduction::Mean,
        )
    }
}

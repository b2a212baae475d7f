//! `config.json` as Hugging Face writes it, read into one typed config per architecture. Every field
//! the models use is checked: a missing, mistyped or unsupported value is an error naming the key.

use crate::blocks::activation::Activation;
use crate::blocks::rope::RopeScaling;
use magpie_core::{Error, Result};
use serde_json::{Map, Value};

/// Which model `config.json` describes (from `architectures`, else `model_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// `BertModel`: the encoder (and its pooler, when the checkpoint has one).
    BertModel,
    /// `BertForMaskedLM`: the encoder and the masked-language-model head.
    BertForMaskedLM,
    /// `GPT2LMHeadModel`.
    Gpt2LMHeadModel,
    /// `LlamaForCausalLM`.
    LlamaForCausalLM,
    /// `Qwen2ForCausalLM`.
    Qwen2ForCausalLM,
}

impl Architecture {
    /// The class name transformers uses (`architectures[0]` in a saved config).
    pub fn class_name(self) -> &'static str {
        match self {
            Architecture::BertModel => "BertModel",
            Architecture::BertForMaskedLM => "BertForMaskedLM",
            Architecture::Gpt2LMHeadModel => "GPT2LMHeadModel",
            Architecture::LlamaForCausalLM => "LlamaForCausalLM",
            Architecture::Qwen2ForCausalLM => "Qwen2ForCausalLM",
        }
    }

    /// Reads `architectures[0]`, or falls back on `model_type` (the task model for decoders, the
    /// bare encoder for BERT).
    pub fn from_config(cfg: &Value) -> Result<Architecture> {
        let op = "config";
        if let Some(arch) = cfg.get("architectures").and_then(|a| a.as_array()).and_then(|a| a.first()) {
            let name = arch.as_str().ok_or_else(|| Error::value(op, "config.json: 'architectures' must be a list of class names"))?;
            return match name {
                "BertModel" => Ok(Architecture::BertModel),
                "BertForMaskedLM" | "BertForPreTraining" => Ok(Architecture::BertForMaskedLM),
                "GPT2LMHeadModel" | "GPT2Model" => Ok(Architecture::Gpt2LMHeadModel),
                "LlamaForCausalLM" | "LlamaModel" => Ok(Architecture::LlamaForCausalLM),
                "Qwen2ForCausalLM" | "Qwen2Model" => Ok(Architecture::Qwen2ForCausalLM),
                other => Err(Error::unsupported(
                    op,
                    format!("config.json: architecture '{other}' is not supported (supported: BertModel, BertForMaskedLM, GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM)"),
                )),
            };
        }
        match cfg.get("model_type").and_then(|m| m.as_str()) {
            Some("bert") => Ok(Architecture::BertModel),
            Some("gpt2") => Ok(Architecture::Gpt2LMHeadModel),
            Some("llama") => Ok(Architecture::LlamaForCausalLM),
            Some("qwen2") => Ok(Architecture::Qwen2ForCausalLM),
            Some(other) => Err(Error::unsupported(op, format!("config.json: model_type '{other}' is not supported (supported: bert, gpt2, llama, qwen2)"))),
            None => Err(Error::value(op, "config.json names neither 'architectures' nor 'model_type'")),
        }
    }
}

/// Typed reads of config.json's fields, with errors that name the key.
pub(crate) struct Fields<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(cfg: &'a Value) -> Result<Fields<'a>> {
        let map = cfg.as_object().ok_or_else(|| Error::value("config", "config.json is not a JSON object"))?;
        Ok(Fields { map })
    }

    fn present(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A positive integer field that must be present.
    pub(crate) fn usize(&self, key: &str) -> Result<usize> {
        self.usize_or(key, None)
    }

    /// A positive integer field, or `default` when absent or null.
    pub(crate) fn usize_or(&self, key: &str, default: Option<usize>) -> Result<usize> {
        match self.present(key) {
            None => default.ok_or_else(|| Error::value("config", format!("config.json: '{key}' is missing"))),
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 && n <= (1 << 31) => Ok(n as usize),
                _ => Err(Error::value("config", format!("config.json: '{key}' must be a positive integer, got {v}"))),
            },
        }
    }

    /// A positive float field, or `default` when absent.
    pub(crate) fn f64_or(&self, key: &str, default: Option<f64>) -> Result<f64> {
        match self.present(key) {
            None => default.ok_or_else(|| Error::value("config", format!("config.json: '{key}' is missing"))),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(Error::value("config", format!("config.json: '{key}' must be a positive number, got {v}"))),
            },
        }
    }

    /// A probability in [0, 1), or `default` when absent.
    pub(crate) fn prob_or(&self, key: &str, default: f64) -> Result<f64> {
        match self.present(key) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if (0.0..1.0).contains(&x) => Ok(x),
                _ => Err(Error::value("config", format!("config.json: '{key}' must be a probability in [0, 1), got {v}"))),
            },
        }
    }

    /// A boolean field, or `default` when absent.
    pub(crate) fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.present(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| Error::value("config", format!("config.json: '{key}' must be true or false, got {v}"))),
        }
    }

    /// A string field, or `default` when absent.
    pub(crate) fn str_or(&self, key: &str, default: &'a str) -> Result<&'a str> {
        match self.present(key) {
            None => Ok(default),
            Some(v) => v.as_str().ok_or_else(|| Error::value("config", format!("config.json: '{key}' must be a string, got {v}"))),
        }
    }

    /// The raw value, if present and not null.
    pub(crate) fn raw(&self, key: &str) -> Option<&'a Value> {
        self.present(key)
    }
}

/// Token ids of a config field that holds one id or a list (`eos_token_id`).
pub fn token_ids(v: Option<&Value>) -> Vec<u32> {
    match v {
        Some(Value::Number(n)) => n.as_u64().map(|x| vec![x as u32]).unwrap_or_default(),
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect(),
        _ => Vec::new(),
    }
}

/// `BertConfig`.
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    /// Dropout after the embeddings and each residual branch (training only).
    pub hidden_dropout_prob: f64,
    /// Dropout on the attention probabilities (training only).
    pub attention_probs_dropout_prob: f64,
}

impl BertConfig {
    /// Reads and checks the fields BERT uses.
    pub fn from_json(cfg: &Value) -> Result<BertConfig> {
        let f = Fields::new(cfg)?;
        let pet = f.str_or("position_embedding_type", "absolute")?;
        if pet != "absolute" {
            return Err(Error::unsupported("config", format!("config.json: position_embedding_type '{pet}' is not supported (only 'absolute')")));
        }
        if f.bool_or("is_decoder", false)? || f.bool_or("add_cross_attention", false)? {
            return Err(Error::unsupported("config", "config.json: BERT as a decoder (is_decoder / add_cross_attention) is not supported"));
        }
        let c = BertConfig {
            vocab_size: f.usize("vocab_size")?,
            hidden_size: f.usize("hidden_size")?,
            num_hidden_layers: f.usize("num_hidden_layers")?,
            num_attention_heads: f.usize("num_attention_heads")?,
            intermediate_size: f.usize("intermediate_size")?,
            hidden_act: Activation::parse(f.str_or("hidden_act", "gelu")?, "hidden_act")?,
            max_position_embeddings: f.usize_or("max_position_embeddings", Some(512))?,
            type_vocab_size: f.usize_or("type_vocab_size", Some(2))?,
            layer_norm_eps: f.f64_or("layer_norm_eps", Some(1e-12))?,
            hidden_dropout_prob: f.prob_or("hidden_dropout_prob", 0.1)?,
            attention_probs_dropout_prob: f.prob_or("attention_probs_dropout_prob", 0.1)?,
        };
        divisible(c.hidden_size, "hidden_size", c.num_attention_heads, "num_attention_heads")?;
        Ok(c)
    }

    /// Size of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// `GPT2Config`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpt2Config {
    pub vocab_size: usize,
    pub n_positions: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_inner: usize,
    pub activation_function: Activation,
    pub layer_norm_epsilon: f64,
    pub scale_attn_weights: bool,
    pub tie_word_embeddings: bool,
    /// Dropout after the embeddings, on the attention probabilities, after each residual branch.
    pub embd_pdrop: f64,
    pub attn_pdrop: f64,
    pub resid_pdrop: f64,
}

impl Gpt2Config {
    /// Reads and checks the fields GPT-2 uses.
    pub fn from_json(cfg: &Value) -> Result<Gpt2Config> {
        let f = Fields::new(cfg)?;
        if f.bool_or("scale_attn_by_inverse_layer_idx", false)? {
            return Err(Error::unsupported("config", "config.json: scale_attn_by_inverse_layer_idx = true is not supported"));
        }
        if f.bool_or("add_cross_attention", false)? {
            return Err(Error::unsupported("config", "config.json: add_cross_attention = true is not supported"));
        }
        let n_embd = f.usize("n_embd")?;
        let c = Gpt2Config {
            vocab_size: f.usize("vocab_size")?,
            n_positions: f.usize_or("n_positions", Some(1024))?,
            n_embd,
            n_layer: f.usize("n_layer")?,
            n_head: f.usize("n_head")?,
            n_inner: f.usize_or("n_inner", Some(4 * n_embd))?,
            activation_function: Activation::parse(f.str_or("activation_function", "gelu_new")?, "activation_function")?,
            layer_norm_epsilon: f.f64_or("layer_norm_epsilon", Some(1e-5))?,
            scale_attn_weights: f.bool_or("scale_attn_weights", true)?,
            tie_word_embeddings: f.bool_or("tie_word_embeddings", true)?,
            embd_pdrop: f.prob_or("embd_pdrop", 0.1)?,
            attn_pdrop: f.prob_or("attn_pdrop", 0.1)?,
            resid_pdrop: f.prob_or("resid_pdrop", 0.1)?,
        };
        divisible(c.n_embd, "n_embd", c.n_head, "n_head")?;
        Ok(c)
    }
}

/// `LlamaConfig` and `Qwen2Config` (Qwen2 is Llama with biases on the q/k/v projections).
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: RopeScaling,
    /// Biases on q, k and v (Qwen2; Llama's `attention_bias`, which also puts one on o).
    pub qkv_bias: bool,
    /// A bias on the output projection (Llama's `attention_bias`).
    pub o_bias: bool,
    pub mlp_bias: bool,
    pub tie_word_embeddings: bool,
    /// Dropout on the attention probabilities (training only).
    pub attention_dropout: f64,
}

impl LlamaConfig {
    /// Reads a Llama (`qwen2 == false`) or Qwen2 config.
    pub fn from_json(cfg: &Value, qwen2: bool) -> Result<LlamaConfig> {
        let f = Fields::new(cfg)?;
        let hidden_size = f.usize("hidden_size")?;
        let heads = f.usize("num_attention_heads")?;
        if qwen2 && f.bool_or("use_sliding_window", false)? {
            return Err(Error::unsupported("config", "config.json: use_sliding_window = true is not supported"));
        }
        let (rope_theta, rope_scaling) = RopeScaling::from_config(&f)?;
        let attention_bias = if qwen2 { false } else { f.bool_or("attention_bias", false)? };
        let pretraining_tp = f.usize_or("pretraining_tp", Some(1))?;
        let _ = pretraining_tp; // transformers ignores it at inference (it only splits the same matmuls)
        let c = LlamaConfig {
            vocab_size: f.usize("vocab_size")?,
            hidden_size,
            intermediate_size: f.usize("intermediate_size")?,
            num_hidden_layers: f.usize("num_hidden_layers")?,
            num_attention_heads: heads,
            num_key_value_heads: f.usize_or("num_key_value_heads", Some(heads))?,
            head_dim: f.usize_or("head_dim", Some(hidden_size / heads))?,
            hidden_act: Activation::parse(f.str_or("hidden_act", "silu")?, "hidden_act")?,
            max_position_embeddings: f.usize_or("max_position_embeddings", Some(2048))?,
            rms_norm_eps: f.f64_or("rms_norm_eps", Some(1e-6))?,
            rope_theta,
            rope_scaling,
            qkv_bias: qwen2 || attention_bias,
            o_bias: attention_bias,
            mlp_bias: if qwen2 { false } else { f.bool_or("mlp_bias", false)? },
            tie_word_embeddings: f.bool_or("tie_word_embeddings", false)?,
            attention_dropout: f.prob_or("attention_dropout", 0.0)?,
        };
        divisible(c.num_attention_heads, "num_attention_heads", c.num_key_value_heads, "num_key_value_heads")?;
        if c.head_dim % 2 != 0 {
            return Err(Error::value("config", format!("config.json: head_dim ({}) must be even for rotary embeddings", c.head_dim)));
        }
        Ok(c)
    }
}

fn divisible(a: usize, an: &str, b: usize, bn: &str) -> Result<()> {
    if a % b != 0 {
        return Err(Error::value("config", format!("config.json: {an} ({a}) must be divisible by {bn} ({b})")));
    }
    Ok(())
}

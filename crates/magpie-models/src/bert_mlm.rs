//! BERT masked-language-model pretraining: [`BertForMaskedLM`] as a [`TrainModel`] (config from
//! the command's flags, stored as a Hugging Face `config.json`), its MLM loss and masked-token
//! accuracy, and fill-mask predictions for showing what a trained model learned.

use crate::bert::BertForMaskedLM;
use crate::blocks::activation::Activation;
use crate::config::BertConfig;
use crate::data::{Dataset, Split};
use crate::hub::{LoadOptions, RandomWeights};
use crate::mlm::{mlm_batch, MaskConfig, MlmSpec, IGNORE_INDEX};
use crate::mlm_vocab::MlmTokenizer;
use crate::train_model::{batch_tensor, TrainModel, TrainTokenizer};
use magpie_core::autograd::no_grad;
use magpie_core::ops::nn::loss::{cross_entropy, Reduction};
use magpie_core::ops::random::Generator;
use magpie_core::{Device, Error, Result, Tensor};
use magpie_nn::ModuleExt;
use serde_json::{json, Value};

/// A small BERT for pretraining from scratch: `intermediate_size` 4 x hidden, GELU, absolute
/// positions up to `seq_len`, two token types, LayerNorm eps 1e-12 (BERT's), one dropout for the
/// hidden states and the attention probabilities.
pub fn bert_config(vocab_size: usize, seq_len: usize, n_layer: usize, n_head: usize, n_embd: usize, dropout: f64) -> Result<BertConfig> {
    let op = "BertConfig";
    if vocab_size == 0 || n_layer == 0 || n_head == 0 || n_embd == 0 {
        return Err(Error::value(op, "vocab size, layers, heads and width must each be at least 1"));
    }
    if seq_len < 3 {
        return Err(Error::value(op, format!("block size {seq_len} is too small for [CLS] token [SEP] (at least 3)")));
    }
    if !(0.0..1.0).contains(&dropout) {
        return Err(Error::value(op, format!("dropout must lie in [0, 1), got {dropout}")));
    }
    if n_embd > (1 << 16) || n_layer > 4096 || seq_len > (1 << 20) || vocab_size > (1 << 31) {
        return Err(Error::value(op, "model sizes are too large"));
    }
    BertConfig::from_json(&hf_config(&BertConfig {
        vocab_size,
        hidden_size: n_embd,
        num_hidden_layers: n_layer,
        num_attention_heads: n_head,
        intermediate_size: 4 * n_embd,
        hidden_act: Activation::Gelu,
        max_position_embeddings: seq_len,
        type_vocab_size: 2,
        layer_norm_eps: 1e-12,
        hidden_dropout_prob: dropout,
        attention_probs_dropout_prob: dropout,
    }))
}

/// `config.json` as transformers writes it for a `BertForMaskedLM`.
fn hf_config(c: &BertConfig) -> Value {
    let act = match c.hidden_act {
        Activation::Gelu => "gelu",
        Activation::GeluTanh => "gelu_new",
        Activation::Relu => "relu",
        Activation::Silu => "silu",
    };
    json!({
        "architectures": ["BertForMaskedLM"],
        "model_type": "bert",
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "hidden_act": act,
        "max_position_embeddings": c.max_position_embeddings,
        "type_vocab_size": c.type_vocab_size,
        "layer_norm_eps": c.layer_norm_eps,
        "hidden_dropout_prob": c.hidden_dropout_prob,
        "attention_probs_dropout_prob": c.attention_probs_dropout_prob,
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
        "torch_dtype": "float32",
    })
}

impl TrainTokenizer for MlmTokenizer {
    fn vocab_size(&self) -> usize {
        MlmTokenizer::vocab_size(self)
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        MlmTokenizer::encode(self, text)
    }
    fn to_json(&self) -> String {
        MlmTokenizer::to_json(self)
    }
    fn from_json(s: &str) -> Result<Self> {
        MlmTokenizer::from_json(s)
    }
}

impl BertForMaskedLM {
    /// The MLM logits `[B, T, vocab]` of `input_ids` (no padding, one segment).
    pub fn mlm_logits(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.forward_with(input_ids, None, None, false)?.logits.ok_or_else(|| Error::value("BertForMaskedLM", "the model gave no logits"))
    }
}

impl TrainModel for BertForMaskedLM {
    type Config = BertConfig;
    type Tokenizer = MlmTokenizer;
    const KIND: &'static str = "bert";

    fn build(cfg: &BertConfig, seed: u64) -> Result<BertForMaskedLM> {
        // transformers' init: normal(0, 0.02) matrices and embeddings, zero biases, unit norms
        let mut w = RandomWeights::new(LoadOptions { dtype: magpie_core::DType::F32, device: Device::Cpu }, seed)?;
        BertForMaskedLM::build(cfg, &mut w)
    }
    fn config(&self) -> &BertConfig {
        &self.bert.config
    }
    fn check(cfg: &BertConfig, tok: &MlmTokenizer) -> Result<()> {
        if cfg.vocab_size != tok.vocab_size() {
            return Err(Error::value("train", format!("vocab_size {} does not match the tokenizer's {}", cfg.vocab_size, tok.vocab_size())));
        }
        if cfg.max_position_embeddings < 3 {
            return Err(Error::value("train", "BERT needs at least 3 positions ([CLS] token [SEP])"));
        }
        Ok(())
    }
    fn config_to_json(cfg: &BertConfig) -> Result<Value> {
        Ok(hf_config(cfg))
    }
    fn config_from_json(v: &Value) -> Result<BertConfig> {
        BertConfig::from_json(v)
    }
    fn seq_len(cfg: &BertConfig) -> usize {
        cfg.max_position_embeddings
    }
    fn data_window(cfg: &BertConfig) -> usize {
        cfg.max_position_embeddings - 2
    }
    fn make_batch(cfg: &BertConfig, tok: &MlmTokenizer, data: &Dataset, gen: &mut Generator, split: Split, batch: usize) -> Result<Vec<Tensor>> {
        let b = mlm_batch(data, gen, split, batch, cfg.max_position_embeddings, MlmSpec { vocab_size: cfg.vocab_size, special: tok.special(), rates: MaskConfig::default() })?;
        Ok(vec![b.input_ids, b.labels])
    }
    fn loss(&self, batch: &[Tensor], metric: bool) -> Result<(Tensor, Option<f64>)> {
        let (ids, labels) = (batch_tensor(batch, 0, "BertForMaskedLM")?, batch_tensor(batch, 1, "BertForMaskedLM")?);
        if !metric {
            // the decoder and the loss as one op (no logits tensor needed)
            return Ok((self.mlm_loss(ids, labels, None, None)?, None));
        }
        let logits = self.mlm_logits(ids)?;
        let v = self.bert.config.vocab_size as i64;
        let loss = cross_entropy(&logits.reshape(&[-1, v])?, &labels.reshape(&[-1])?, None, IGNORE_INDEX, Reduction::Mean, 0.0)?;
        let acc = if metric { Some(masked_accuracy(&logits, labels)?) } else { None };
        Ok((loss, acc))
    }
    fn extra_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let s = serde_json::to_string_pretty(&hf_config(&self.bert.config)).map_err(|e| Error::value("checkpoint", e.to_string()))?;
        Ok(vec![("config.json".into(), s.into_bytes())])
    }
}

/// The share of the predicted positions (label not -100) whose arg-max logit is the label.
pub fn masked_accuracy(logits: &Tensor, labels: &Tensor) -> Result<f64> {
    let _g = no_grad();
    let pred = logits.argmax(Some(-1), false)?.to_device(Device::Cpu)?.to_vec::<i64>()?;
    let labels = labels.to_device(Device::Cpu)?.to_vec::<i64>()?;
    let (mut hit, mut n) = (0usize, 0usize);
    for (p, l) in pred.iter().zip(&labels) {
        if *l != IGNORE_INDEX {
            n += 1;
            hit += (p == l) as usize;
        }
    }
    Ok(if n == 0 { 0.0 } else { hit as f64 / n as f64 })
}

/// One fill-mask prediction: the position, the true token and the model's top token.
#[derive(Clone, Debug, PartialEq)]
pub struct FillMask {
    pub position: usize,
    pub truth: u32,
    pub predicted: u32,
}

/// Replaces the tokens at `positions` of `ids` (one sequence, `[CLS] ... [SEP]` included) by
/// `[MASK]` and returns the model's top prediction at each (eval mode, no gradients).
pub fn fill_mask(model: &mut BertForMaskedLM, tok: &MlmTokenizer, ids: &[u32], positions: &[usize]) -> Result<Vec<FillMask>> {
    let _g = no_grad();
    let mask = tok.special().mask;
    let mut masked: Vec<i64> = ids.iter().map(|&v| v as i64).collect();
    for &p in positions {
        let slot = masked.get_mut(p).ok_or_else(|| Error::value("fill_mask", format!("position {p} is outside the {} tokens", ids.len())))?;
        *slot = mask as i64;
    }
    let was_training = model.training;
    model.eval();
    let dev = model.bert.embeddings.word_embeddings.weight.device();
    let x = Tensor::from_vec(masked, &[1, ids.len()])?.to_device(dev)?;
    let logits = model.mlm_logits(&x);
    model.train(was_training);
    let pred = logits?.argmax(Some(-1), false)?.to_device(Device::Cpu)?.to_vec::<i64>()?;
    Ok(positions.iter().map(|&p| FillMask { position: p, truth: ids[p], predicted: pred[p] as u32 }).collect())
}

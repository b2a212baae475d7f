//! What the [`Trainer`](crate::trainer::Trainer) needs from a model: how to build it from its
//! config, its tokenizer, how to draw a batch and what the loss is. The GPT (next-token loss) and
//! BERT (masked-language-model loss, in [`crate::bert_mlm`]) share one training loop through it.

use crate::data::{Dataset, Split};
use crate::gpt::{Gpt, GptConfig};
use crate::tokenizer::CharTokenizer;
use magpie_core::ops::random::Generator;
use magpie_core::{DType, Error, Result, Tensor};
use magpie_nn::{Module, ModuleExt};
use serde_json::Value;

/// A tokenizer a trainer stores in its checkpoints (`tokenizer.json`).
pub trait TrainTokenizer: Clone + Send + 'static {
    /// The number of ids.
    fn vocab_size(&self) -> usize;
    /// The ids of `text` (no special tokens).
    fn encode(&self, text: &str) -> Result<Vec<u32>>;
    /// The stored form.
    fn to_json(&self) -> String;
    /// Reads the stored form.
    fn from_json(s: &str) -> Result<Self>;
}

impl TrainTokenizer for CharTokenizer {
    fn vocab_size(&self) -> usize {
        CharTokenizer::vocab_size(self)
    }
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        CharTokenizer::encode(self, text)
    }
    fn to_json(&self) -> String {
        CharTokenizer::to_json(self)
    }
    fn from_json(s: &str) -> Result<Self> {
        CharTokenizer::from_json(s)
    }
}

/// A model the trainer can train: a module with a config, a tokenizer, batches and a loss.
pub trait TrainModel: Module + Sized + 'static {
    /// The model's shape.
    type Config: Clone + std::fmt::Debug;
    type Tokenizer: TrainTokenizer;
    /// The name recorded in `trainer.json` ("gpt", "bert"), checked on resume.
    const KIND: &'static str;

    /// A freshly initialised model (float32, CPU), drawing from the default generator seeded with `seed`.
    fn build(cfg: &Self::Config, seed: u64) -> Result<Self>;
    /// The model's config.
    fn config(&self) -> &Self::Config;
    /// Checks the config (and that it fits the tokenizer).
    fn check(cfg: &Self::Config, tok: &Self::Tokenizer) -> Result<()>;
    /// The config as stored in `trainer.json`.
    fn config_to_json(cfg: &Self::Config) -> Result<Value>;
    /// Reads the stored config.
    fn config_from_json(v: &Value) -> Result<Self::Config>;
    /// Tokens per row of a batch.
    fn seq_len(cfg: &Self::Config) -> usize;
    /// The window of the token stream one row is made from (each data split needs one more token).
    fn data_window(cfg: &Self::Config) -> usize;
    /// A batch of `batch` rows of `split`, drawn with `gen`, as the tensors [`TrainModel::loss`] takes
    /// (on the CPU; each is `[batch, ...]`, so a data-parallel rank takes its rows of each).
    fn make_batch(cfg: &Self::Config, tok: &Self::Tokenizer, data: &Dataset, gen: &mut Generator, split: Split, batch: usize) -> Result<Vec<Tensor>>;
    /// The mean loss of a batch (and, for evaluation, a metric of the same forward pass when `metric`).
    fn loss(&self, batch: &[Tensor], metric: bool) -> Result<(Tensor, Option<f64>)>;
    /// Files written into checkpoints beside the trainer's own (e.g. a Hugging Face `config.json`).
    fn extra_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        Ok(Vec::new())
    }
    /// The parameters' dtype.
    fn param_dtype(&self) -> DType {
        self.parameters().first().map(|p| p.dtype()).unwrap_or(DType::F32)
    }
    /// AdamW's groups: matrices (decayed) and the rest (biases, norms: not decayed).
    fn decay_groups(&self) -> (Vec<Tensor>, Vec<Tensor>) {
        self.parameters().into_iter().partition(|p| p.ndim() >= 2)
    }
}

/// Tensor `i` of a batch, or an error naming `op`.
pub(crate) fn batch_tensor<'a>(batch: &'a [Tensor], i: usize, op: &str) -> Result<&'a Tensor> {
    batch.get(i).ok_or_else(|| Error::value(op, format!("the batch has {} tensors, expected more than {i}", batch.len())))
}

impl TrainModel for Gpt {
    type Config = GptConfig;
    type Tokenizer = CharTokenizer;
    const KIND: &'static str = "gpt";

    fn build(cfg: &GptConfig, seed: u64) -> Result<Gpt> {
        magpie_core::ops::random::manual_seed(seed);
        Gpt::new(cfg.clone())
    }
    fn config(&self) -> &GptConfig {
        &self.config
    }
    fn check(cfg: &GptConfig, tok: &CharTokenizer) -> Result<()> {
        cfg.validate()?;
        if cfg.vocab_size != tok.vocab_size() {
            return Err(Error::value("train", format!("vocab_size {} does not match the tokenizer's {}", cfg.vocab_size, tok.vocab_size())));
        }
        Ok(())
    }
    fn config_to_json(cfg: &GptConfig) -> Result<Value> {
        serde_json::to_value(cfg).map_err(|e| Error::value("checkpoint", e.to_string()))
    }
    fn config_from_json(v: &Value) -> Result<GptConfig> {
        serde_json::from_value(v.clone()).map_err(|e| Error::value("checkpoint", format!("trainer.json: the GPT config is not valid: {e}")))
    }
    fn seq_len(cfg: &GptConfig) -> usize {
        cfg.block_size
    }
    fn data_window(cfg: &GptConfig) -> usize {
        cfg.block_size
    }
    fn make_batch(cfg: &GptConfig, _tok: &CharTokenizer, data: &Dataset, gen: &mut Generator, split: Split, batch: usize) -> Result<Vec<Tensor>> {
        let (x, y) = data.batch(gen, split, batch, cfg.block_size)?;
        Ok(vec![x, y])
    }
    fn loss(&self, batch: &[Tensor], _metric: bool) -> Result<(Tensor, Option<f64>)> {
        Ok((Gpt::loss(self, batch_tensor(batch, 0, "GPT")?, batch_tensor(batch, 1, "GPT")?)?, None))
    }
    fn decay_groups(&self) -> (Vec<Tensor>, Vec<Tensor>) {
        Gpt::decay_groups(self)
    }
}


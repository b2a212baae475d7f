//! `AutoModel`: picks the architecture from `config.json`, loads the weights of a Hugging Face
//! folder (or draws random ones for a config), runs `forward`, hands decoders to generation, and
//! saves a folder transformers' `from_pretrained` loads back.

use crate::bert::{BertForMaskedLM, BertModel};
use crate::blocks::kv_cache::KvCache;
use crate::causal_lm::CausalLm;
use crate::config::{Architecture, BertConfig, Gpt2Config, LlamaConfig};
use crate::generate::GenerationConfig;
use crate::gpt2::Gpt2LMHeadModel;
use crate::hub::{self, FileWeights, LoadOptions, ModelFolder, RandomWeights, WeightSource};
use crate::llama::LlamaForCausalLM;
use crate::output::ModelOutput;
use crate::positions::StepInputs;
use crate::qwen2;
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_nn::{Module, ModuleExt};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The model of one architecture.
pub enum ModelKind {
    Bert(BertModel),
    BertForMaskedLM(BertForMaskedLM),
    Gpt2(Gpt2LMHeadModel),
    /// Llama and Qwen2.
    Llama(LlamaForCausalLM),
}

/// A model with the config it was built from.
pub struct AutoModel {
    pub kind: ModelKind,
    pub architecture: Architecture,
    /// `config.json` as read (saved back with the dtype updated).
    pub config: Value,
    /// `generation_config.json`, when the folder has one.
    pub generation_config: Option<Value>,
    /// The folder it was loaded from (for `tokenizer.json`).
    pub dir: Option<PathBuf>,
    pub options: LoadOptions,
}

/// Checkpoint tensors transformers ignores on load (buffers, heads the class does not have).
fn ignored(arch: Architecture, tied: bool) -> Vec<&'static str> {
    let mut v = match arch {
        Architecture::BertModel => vec!["embeddings.position_ids", "bert.embeddings.position_ids", "cls.*", "embeddings.token_type_ids", "bert.embeddings.token_type_ids"],
        Architecture::BertForMaskedLM => vec![
            "bert.embeddings.position_ids",
            "bert.embeddings.token_type_ids",
            "bert.pooler.*",
            "cls.seq_relationship.*",
            "cls.predictions.decoder.weight",
            "cls.predictions.decoder.bias",
        ],
        Architecture::Gpt2LMHeadModel => vec!["transformer.h.#.attn.bias", "transformer.h.#.attn.masked_bias", "h.#.attn.bias", "h.#.attn.masked_bias"],
        Architecture::LlamaForCausalLM | Architecture::Qwen2ForCausalLM => vec!["model.rotary_emb.inv_freq", "model.layers.#.self_attn.rotary_emb.inv_freq"],
    };
    if tied && !matches!(arch, Architecture::BertModel | Architecture::BertForMaskedLM) {
        v.push("lm_head.weight");
    }
    v
}

impl AutoModel {
    /// Loads a Hugging Face folder (`config.json` + `model.safetensors` or shards) in `opts`' dtype
    /// and device.
    pub fn from_pretrained(dir: impl AsRef<Path>, opts: &LoadOptions) -> Result<AutoModel> {
        let dir = dir.as_ref();
        let folder = ModelFolder::open(dir)?;
        let arch = Architecture::from_config(&folder.config)?;
        let base = match arch {
            Architecture::BertModel => ("bert", false),
            Architecture::BertForMaskedLM => ("bert", true),
            Architecture::Gpt2LMHeadModel => ("transformer", true),
            Architecture::LlamaForCausalLM | Architecture::Qwen2ForCausalLM => ("model", true),
        };
        let mut w = FileWeights::open(dir, *opts)?.with_base_prefix(base.0, base.1);
        let (kind, tied) = build(arch, &folder.config, &mut w)?;
        w.finish(&ignored(arch, tied))?;
        Ok(AutoModel { kind, architecture: arch, config: folder.config, generation_config: folder.generation_config, dir: Some(dir.to_path_buf()), options: *opts })
    }

    /// A model of the config in `dir/config.json` with random weights (seeded), for speed runs.
    pub fn from_config_random(dir: impl AsRef<Path>, opts: &LoadOptions, seed: u64) -> Result<AutoModel> {
        let dir = dir.as_ref();
        let folder = ModelFolder::open(dir)?;
        let arch = Architecture::from_config(&folder.config)?;
        let mut w = RandomWeights::new(*opts, seed)?;
        let (kind, _) = build(arch, &folder.config, &mut w)?;
        Ok(AutoModel { kind, architecture: arch, config: folder.config, generation_config: folder.generation_config, dir: Some(dir.to_path_buf()), options: *opts })
    }

    /// The model as a `Module` (parameters, state dict, train/eval, moves).
    pub fn module(&self) -> &(dyn Module + 'static) {
        match &self.kind {
            ModelKind::Bert(m) => m,
            ModelKind::BertForMaskedLM(m) => m,
            ModelKind::Gpt2(m) => m,
            ModelKind::Llama(m) => m,
        }
    }

    /// Mutable access to the same module.
    pub fn module_mut(&mut self) -> &mut (dyn Module + 'static) {
        match &mut self.kind {
            ModelKind::Bert(m) => m,
            ModelKind::BertForMaskedLM(m) => m,
            ModelKind::Gpt2(m) => m,
            ModelKind::Llama(m) => m,
        }
    }

    /// The decoder, for generation (None for BERT).
    pub fn as_causal_lm(&self) -> Option<&dyn CausalLm> {
        match &self.kind {
            ModelKind::Gpt2(m) => Some(m),
            ModelKind::Llama(m) => Some(m),
            _ => None,
        }
    }

    /// True for BERT.
    pub fn is_encoder(&self) -> bool {
        matches!(self.kind, ModelKind::Bert(_) | ModelKind::BertForMaskedLM(_))
    }

    /// Number of token ids.
    pub fn vocab_size(&self) -> usize {
        match &self.kind {
            ModelKind::Bert(m) => m.config.vocab_size,
            ModelKind::BertForMaskedLM(m) => m.bert.config.vocab_size,
            ModelKind::Gpt2(m) => m.config.vocab_size,
            ModelKind::Llama(m) => m.config.vocab_size,
        }
    }

    /// The generation settings of the folder (`generation_config.json`, `config.json`).
    pub fn generation_defaults(&self) -> GenerationConfig {
        GenerationConfig::from_model_files(self.generation_config.as_ref(), &self.config)
    }

    /// `tokenizer.json` beside the weights, when there is one.
    pub fn tokenizer_path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join("tokenizer.json")).filter(|p| p.is_file())
    }

    /// A forward pass as `model(input_ids, attention_mask, token_type_ids, output_hidden_states)`
    /// in transformers: `input_ids [B, T]` int64; `attention_mask [B, T]` (1 = token; None: all);
    /// `token_type_ids` (BERT only). Decoders use positions `0..T`, as transformers' forward does.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>, token_type_ids: Option<&Tensor>, output_hidden_states: bool) -> Result<ModelOutput> {
        let vocab = self.vocab_size();
        check_ids(input_ids, vocab)?;
        let dev = self.options.device;
        let ids = input_ids.to_device(dev)?;
        let mask = attention_mask.map(|m| m.to_device(dev)).transpose()?;
        let tt = token_type_ids.map(|m| m.to_device(dev)).transpose()?;
        if tt.is_some() && !self.is_encoder() {
            return Err(Error::value("forward", "token_type_ids are only used by BERT"));
        }
        match &self.kind {
            ModelKind::Bert(m) => m.forward_with(&ids, mask.as_ref(), tt.as_ref(), output_hidden_states),
            ModelKind::BertForMaskedLM(m) => m.forward_with(&ids, mask.as_ref(), tt.as_ref(), output_hidden_states),
            ModelKind::Gpt2(m) => m.forward_step(&StepInputs::new(&ids, mask.as_ref(), None, 0)?, None, output_hidden_states),
            ModelKind::Llama(m) => m.forward_step(&StepInputs::new(&ids, mask.as_ref(), None, 0)?, None, output_hidden_states),
        }
    }

    /// Writes `config.json`, `model.safetensors` (tied weights once, as transformers saves them),
    /// `generation_config.json` when the model has one, and copies the tokenizer files it was
    /// loaded with, into `dir` (created if needed).
    pub fn save_pretrained(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        let io = |e: std::io::Error, what: &str| Error::io("save_pretrained", format!("{what}: {e}"));
        std::fs::create_dir_all(dir).map_err(|e| io(e, &dir.display().to_string()))?;
        let params = self.module().named_parameters();
        let dtype = params.first().map(|(_, t)| t.dtype()).unwrap_or(DType::F32);
        hub::save_weights(dir, &params)?;
        let mut cfg = self.config.clone();
        if let Some(o) = cfg.as_object_mut() {
            o.insert("architectures".into(), Value::from(vec![self.architecture.class_name()]));
            o.insert("dtype".into(), Value::from(dtype_name(dtype)));
            if o.contains_key("torch_dtype") {
                o.insert("torch_dtype".into(), Value::from(dtype_name(dtype)));
            }
        }
        let write_json = |name: &str, v: &Value| -> Result<()> {
            let s = serde_json::to_string_pretty(v).map_err(|e| Error::io("save_pretrained", e.to_string()))?;
            std::fs::write(dir.join(name), s + "\n").map_err(|e| io(e, name))
        };
        write_json("config.json", &cfg)?;
        if let Some(g) = &self.generation_config {
            write_json("generation_config.json", g)?;
        }
        if let Some(src) = &self.dir {
            for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"] {
                let (from, to) = (src.join(f), dir.join(f));
                if from.is_file() && from != to {
                    std::fs::copy(&from, &to).map_err(|e| io(e, f))?;
                }
            }
        }
        Ok(())
    }

    /// Moves the weights to another dtype (float32, bfloat16, float16).
    pub fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        LoadOptions { dtype, device: self.options.device }.validate()?;
        self.module_mut().to_dtype(dtype)?;
        self.options.dtype = dtype;
        Ok(())
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::BF16 => "bfloat16",
        DType::F16 => "float16",
        _ => "float32",
    }
}

/// Errors on ids that are not int64 `[B, T]` or fall outside the vocabulary (read on the host).
fn check_ids(ids: &Tensor, vocab: usize) -> Result<()> {
    if ids.dtype() != DType::I64 || ids.ndim() != 2 {
        return Err(Error::value("forward", format!("input_ids must be an int64 [batch, seq] tensor, got {} {:?}", ids.dtype(), ids.shape())));
    }
    let v = ids.to_device(Device::Cpu)?.contiguous()?.to_vec::<i64>()?;
    if let Some(bad) = v.iter().find(|&&x| x < 0 || x as usize >= vocab) {
        return Err(Error::index("forward", format!("token id {bad} is outside the vocabulary (size {vocab})")));
    }
    Ok(())
}

/// Builds the model of `arch` from `w`; also says whether the LM head is tied.
fn build(arch: Architecture, cfg: &Value, w: &mut dyn WeightSource) -> Result<(ModelKind, bool)> {
    Ok(match arch {
        Architecture::BertModel => (ModelKind::Bert(BertModel::build(&BertConfig::from_json(cfg)?, w, "", true)?), true),
        Architecture::BertForMaskedLM => (ModelKind::BertForMaskedLM(BertForMaskedLM::build(&BertConfig::from_json(cfg)?, w)?), true),
        Architecture::Gpt2LMHeadModel => {
            let c = Gpt2Config::from_json(cfg)?;
            let tied = c.tie_word_embeddings;
            (ModelKind::Gpt2(Gpt2LMHeadModel::build(&c, w)?), tied)
        }
        Architecture::LlamaForCausalLM => {
            let c = LlamaConfig::from_json(cfg, false)?;
            let tied = c.tie_word_embeddings;
            (ModelKind::Llama(LlamaForCausalLM::build(&c, w)?), tied)
        }
        Architecture::Qwen2ForCausalLM => {
            let c = qwen2::config(cfg)?;
            let tied = c.tie_word_embeddings;
            (ModelKind::Llama(qwen2::build(&c, w)?), tied)
        }
    })
}

fn weight_place(t: &Tensor) -> (Device, DType) {
    (t.device(), t.dtype())
}

impl CausalLm for Gpt2LMHeadModel {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }
    fn max_positions(&self) -> Option<usize> {
        Some(self.config.n_positions)
    }
    fn device(&self) -> Device {
        weight_place(&self.transformer.wte.weight).0
    }
    fn dtype(&self) -> DType {
        weight_place(&self.transformer.wte.weight).1
    }
    fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        let c = &self.config;
        KvCache::new(c.n_layer, batch, c.n_head, c.n_embd / c.n_head, capacity, self.dtype(), self.device())
    }
    fn forward_cached(&self, step: &StepInputs, cache: &mut KvCache) -> Result<Tensor> {
        check_past(step, cache)?;
        self.forward_step(step, Some(cache), false)?.logits.ok_or_else(|| Error::value("forward", "no logits"))
    }
}

impl CausalLm for LlamaForCausalLM {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }
    fn max_positions(&self) -> Option<usize> {
        None
    }
    fn device(&self) -> Device {
        weight_place(&self.model.embed_tokens.weight).0
    }
    fn dtype(&self) -> DType {
        weight_place(&self.model.embed_tokens.weight).1
    }
    fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        let c = &self.config;
        KvCache::new(c.num_hidden_layers, batch, c.num_key_value_heads, c.head_dim, capacity, self.dtype(), self.device())
    }
    fn forward_cached(&self, step: &StepInputs, cache: &mut KvCache) -> Result<Tensor> {
        check_past(step, cache)?;
        self.forward_step(step, Some(cache), false)?.logits.ok_or_else(|| Error::value("forward", "no logits"))
    }
}

fn check_past(step: &StepInputs, cache: &KvCache) -> Result<()> {
    if step.past != cache.len() || step.b != cache.batch() {
        return Err(Error::value(
            "forward",
            format!("the step (batch {}, {} past positions) does not continue the cache (batch {}, {} positions)", step.b, step.past, cache.batch(), cache.len()),
        ));
    }
    Ok(())
}

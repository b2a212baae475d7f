//! Sentence embeddings as sentence-transformers computes them: tokenize (truncated to
//! `max_seq_length`), run the encoder over a padded batch, pool the last hidden states (mean over
//! the attention mask, or the `[CLS]` token), optionally L2-normalize. The folder's
//! sentence-transformers files (`modules.json`, `1_Pooling/config.json`,
//! `sentence_bert_config.json`) give the defaults.

use crate::auto::AutoModel;
use crate::hf_tokenizer::HfTokenizer;
use crate::hub::{read_json, LoadOptions};
use magpie_core::autograd::no_grad;
use magpie_core::{DType, Device, Error, Result, Tensor};
use std::path::Path;

/// How token states become one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over the tokens the attention mask keeps.
    Mean,
    /// The first (`[CLS]`) token's state.
    Cls,
}

impl Pooling {
    /// `mean` or `cls`.
    pub fn parse(s: &str) -> Result<Pooling> {
        match s {
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            other => Err(Error::value("embed", format!("pooling must be mean or cls, got '{other}'"))),
        }
    }
}

/// `[B, H]` pooled from `hidden [B, T, H]` under `mask [B, T]` (1 = token).
pub fn pool(hidden: &Tensor, mask: &Tensor, pooling: Pooling) -> Result<Tensor> {
    match pooling {
        Pooling::Cls => hidden.select(1, 0),
        Pooling::Mean => {
            let m = mask.to_dtype(hidden.dtype())?.unsqueeze(-1)?;
            let sum = hidden.mul(&m)?.sum_dims(Some(&[1]), false, None)?;
            let count = m.sum_dims(Some(&[1]), false, None)?.clamp_min(1e-9)?;
            sum.div(&count)
        }
    }
}

/// An encoder with its tokenizer and pooling settings.
pub struct SentenceEncoder {
    pub model: AutoModel,
    /// The folder's tokenizer, truncating to `max_seq_length`.
    pub tokenizer: HfTokenizer,
    pub pooling: Pooling,
    pub normalize: bool,
    /// The longest input in tokens, special tokens included (the tokenizer truncates to it).
    pub max_seq_length: usize,
}

impl SentenceEncoder {
    /// Loads a BERT folder with `tokenizer.json`; pooling, normalization and the length limit come
    /// from its sentence-transformers files when present (mean pooling, no normalization, the
    /// model's positions otherwise).
    pub fn load(dir: &Path, opts: &LoadOptions) -> Result<SentenceEncoder> {
        let model = AutoModel::from_pretrained(dir, opts)?;
        if !model.is_encoder() {
            return Err(Error::value("embed", format!("{} is a {} (a decoder); embeddings need an encoder (BERT)", dir.display(), model.architecture.class_name())));
        }
        let tok_path = model.tokenizer_path().ok_or_else(|| Error::io("embed", format!("{}: no tokenizer.json", dir.display())))?;
        let tokenizer = HfTokenizer::from_file(tok_path)?;
        let mut pooling = Pooling::Mean;
        let pool_cfg = dir.join("1_Pooling/config.json");
        if pool_cfg.is_file() {
            let v = read_json(&pool_cfg)?;
            if v.get("pooling_mode_cls_token").and_then(|x| x.as_bool()) == Some(true) {
                pooling = Pooling::Cls;
            } else if v.get("pooling_mode_mean_tokens").and_then(|x| x.as_bool()) != Some(true) {
                return Err(Error::unsupported("embed", format!("{}: only mean and cls pooling are supported", pool_cfg.display())));
            }
        }
        let modules = dir.join("modules.json");
        let normalize = modules.is_file() && read_json(&modules)?.as_array().is_some_and(|a| a.iter().any(|m| m.get("type").and_then(|t| t.as_str()).is_some_and(|t| t.ends_with("Normalize"))));
        let positions = match &model.kind {
            crate::auto::ModelKind::Bert(m) => m.config.max_position_embeddings,
            crate::auto::ModelKind::BertForMaskedLM(m) => m.bert.config.max_position_embeddings,
            _ => 512,
        };
        let st = dir.join("sentence_bert_config.json");
        let max_seq_length = if st.is_file() { read_json(&st)?.get("max_seq_length").and_then(|x| x.as_u64()).map_or(positions, |x| (x as usize).min(positions)) } else { positions };
        let tokenizer = tokenizer.truncating(max_seq_length)?;
        Ok(SentenceEncoder { model, tokenizer, pooling, normalize, max_seq_length })
    }

    /// Token ids of each text, truncated to `max_seq_length`.
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        texts.iter().map(|t| self.tokenizer.encode(t, true)).collect()
    }

    /// One embedding per text, computed in one right-padded batch.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let _g = no_grad();
        let ids = self.tokenize(texts)?;
        let (b, t) = (ids.len(), ids.iter().map(|v| v.len()).max().unwrap_or(1).max(1));
        let flat: Vec<i64> = ids.iter().flat_map(|r| r.iter().map(|&v| v as i64).chain(std::iter::repeat(0).take(t - r.len()))).collect();
        let mask: Vec<i64> = ids.iter().flat_map(|r| std::iter::repeat(1).take(r.len()).chain(std::iter::repeat(0).take(t - r.len()))).collect();
        let dev = self.model.options.device;
        let ids_t = Tensor::from_vec(flat, &[b, t])?;
        let mask_t = Tensor::from_vec(mask, &[b, t])?;
        let out = self.model.forward(&ids_t, Some(&mask_t), None, false)?;
        let mut e = pool(&out.last_hidden_state.to_dtype(DType::F32)?, &mask_t.to_device(dev)?, self.pooling)?;
        if self.normalize {
            let n = e.mul(&e)?.sum_dims(Some(&[1]), true, None)?.sqrt()?.clamp_min(1e-12)?;
            e = e.div(&n)?;
        }
        let h = e.shape()[1];
        let v = e.to_device(Device::Cpu)?.contiguous()?.to_vec::<f32>()?;
        Ok(v.chunks(h).map(|c| c.to_vec()).collect())
    }
}

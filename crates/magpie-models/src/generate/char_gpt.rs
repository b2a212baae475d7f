//! Autoregressive sampling from the character-level [`Gpt`]: temperature, top-k and nucleus (top-p) filtering,
//! drawn from a seedable generator, one token at a time through a callback (for streaming).

use crate::gpt::Gpt;
use magpie_core::autograd::no_grad;
use magpie_core::ops::random::Generator;
use magpie_core::{DType, Error, Result, Tensor};

/// Sampling settings. `temperature == 0` is greedy decoding.
#[derive(Clone, Debug)]
pub struct SampleConfig {
    pub max_new_tokens: usize,
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (None: all).
    pub top_k: Option<usize>,
    /// Keep the smallest set of tokens whose probability reaches `p` (None: all).
    pub top_p: Option<f64>,
    pub seed: u64,
}

impl SampleConfig {
    /// Checks the values.
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(Error::value("sample", format!("temperature must be >= 0, got {}", self.temperature)));
        }
        if self.top_k == Some(0) {
            return Err(Error::value("sample", "top_k must be at least 1"));
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(Error::value("sample", format!("top_p must lie in (0, 1], got {p}")));
            }
        }
        Ok(())
    }
}

/// Picks the next token from `logits` (one row) under `cfg`, drawing from `gen`.
pub fn pick(logits: &[f32], cfg: &SampleConfig, gen: &mut Generator) -> u32 {
    if cfg.temperature == 0.0 {
        return super::logits::argmax(logits);
    }
    super::logits::sample(logits, &super::logits::Warpers { temperature: cfg.temperature, top_k: cfg.top_k, top_p: cfg.top_p }, gen)
}

/// Extends `prompt` by up to `cfg.max_new_tokens` tokens, calling `on_token` with each new one
/// as soon as it is chosen. The context is cropped to the model's block size.
pub fn generate(model: &Gpt, prompt: &[u32], cfg: &SampleConfig, mut on_token: impl FnMut(u32) -> Result<()>) -> Result<Vec<u32>> {
    cfg.validate()?;
    if prompt.is_empty() {
        return Err(Error::value("sample", "the prompt must hold at least one token"));
    }
    let _g = no_grad();
    let mut gen = Generator::new(cfg.seed);
    let mut ids = prompt.to_vec();
    let bs = model.config.block_size;
    let device = model.wte.weight.device();
    for _ in 0..cfg.max_new_tokens {
        let ctx = &ids[ids.len().saturating_sub(bs)..];
        let x = Tensor::from_vec(ctx.iter().map(|&v| v as i64).collect::<Vec<_>>(), &[1, ctx.len()])?.to_device(device)?;
        let logits = model.logits(&x)?;
        let last = logits.select(1, ctx.len() as i64 - 1)?.to_dtype(DType::F32)?.to_vec::<f32>()?;
        let next = pick(&last, cfg, &mut gen);
        ids.push(next);
        on_token(next)?;
    }
    Ok(ids)
}

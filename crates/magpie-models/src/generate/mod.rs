//! Generation like transformers' `generate` on the module path: batched prompts (left-padded, with
//! attention masks and mask-derived positions), a KV cache, greedy or seeded sampling (temperature,
//! top-k, top-p), repetition penalty, stopping at end-of-sequence ids or `max_new_tokens`, and a
//! callback after every step for streaming. Also the character-level GPT's sampler ([`char_gpt`]).

pub mod char_gpt;
pub mod logits;

pub use char_gpt::{generate as generate_char, pick, SampleConfig};

use crate::causal_lm::CausalLm;
use crate::positions::StepInputs;
use magpie_core::autograd::no_grad;
use magpie_core::ops::random::Generator;
use magpie_core::{DType, Error, Result, Tensor};
use serde_json::Value;

/// Settings of one `generate` call (transformers' `GenerationConfig` names).
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationConfig {
    pub max_new_tokens: usize,
    /// Sample (true) or take the most likely token (false).
    pub do_sample: bool,
    pub temperature: f64,
    pub top_k: Option<usize>,
    pub top_p: Option<f64>,
    /// 1.0 is off.
    pub repetition_penalty: f64,
    /// Seed of the sampling generator.
    pub seed: u64,
    /// Generation stops for a row when it produces one of these.
    pub eos_token_ids: Vec<u32>,
    /// What finished rows and left padding are filled with (default: the first eos id, else 0).
    pub pad_token_id: Option<u32>,
}

impl Default for GenerationConfig {
    /// transformers' defaults: greedy, temperature 1, top-k 50 and top-p 1 when sampling, 20 new tokens.
    fn default() -> Self {
        GenerationConfig { max_new_tokens: 20, do_sample: false, temperature: 1.0, top_k: Some(50), top_p: None, repetition_penalty: 1.0, seed: 0, eos_token_ids: Vec::new(), pad_token_id: None }
    }
}

impl GenerationConfig {
    /// The defaults overridden by a folder's `generation_config.json` (`do_sample`, `temperature`,
    /// `top_k`, `top_p`, `repetition_penalty`, `max_new_tokens`, `eos_token_id`, `pad_token_id`),
    /// with `config.json`'s eos/pad ids when generation_config has none.
    pub fn from_model_files(generation_config: Option<&Value>, config: &Value) -> GenerationConfig {
        let mut g = GenerationConfig::default();
        let empty = Value::Null;
        let gc = generation_config.unwrap_or(&empty);
        if let Some(v) = gc.get("do_sample").and_then(|v| v.as_bool()) {
            g.do_sample = v;
        }
        if let Some(v) = gc.get("temperature").and_then(|v| v.as_f64()) {
            g.temperature = v;
        }
        if let Some(v) = gc.get("top_k").and_then(|v| v.as_u64()) {
            g.top_k = if v == 0 { None } else { Some(v as usize) };
        }
        if let Some(v) = gc.get("top_p").and_then(|v| v.as_f64()) {
            g.top_p = if v >= 1.0 { None } else { Some(v) };
        }
        if let Some(v) = gc.get("repetition_penalty").and_then(|v| v.as_f64()) {
            g.repetition_penalty = v;
        }
        if let Some(v) = gc.get("max_new_tokens").and_then(|v| v.as_u64()) {
            g.max_new_tokens = v as usize;
        }
        let eos = crate::config::token_ids(gc.get("eos_token_id"));
        g.eos_token_ids = if eos.is_empty() { crate::config::token_ids(config.get("eos_token_id")) } else { eos };
        let pad = crate::config::token_ids(gc.get("pad_token_id").or_else(|| config.get("pad_token_id")));
        g.pad_token_id = pad.first().copied();
        g
    }

    /// Checks the values (transformers' messages where it has them).
    pub fn validate(&self) -> Result<()> {
        let op = "generate";
        if self.do_sample && !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(Error::value(op, format!("`temperature` has to be a strictly positive float, but is {}", self.temperature)));
        }
        if self.top_k == Some(0) {
            return Err(Error::value(op, "`top_k` has to be a strictly positive integer, but is 0"));
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(Error::value(op, format!("`top_p` has to be a float > 0 and < 1, but is {p}")));
            }
        }
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return Err(Error::value(op, format!("`repetition_penalty` has to be a strictly positive float, but is {}", self.repetition_penalty)));
        }
        Ok(())
    }
}

/// Generates up to `cfg.max_new_tokens` tokens after each prompt (a batch; prompts of different
/// lengths are left-padded). `on_step` is called after every step with each row's new token (None
/// for rows that already stopped). Returns each row's new tokens, ending with the eos token that
/// stopped it, if any.
pub fn generate(lm: &dyn CausalLm, prompts: &[Vec<u32>], cfg: &GenerationConfig, mut on_step: impl FnMut(&[Option<u32>]) -> Result<()>) -> Result<Vec<Vec<u32>>> {
    let op = "generate";
    cfg.validate()?;
    if prompts.is_empty() || prompts.iter().any(|p| p.is_empty()) {
        return Err(Error::value(op, "every prompt must hold at least one token"));
    }
    let vocab = lm.vocab_size();
    for p in prompts {
        if let Some(&bad) = p.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::index(op, format!("token id {bad} is outside the vocabulary (size {vocab})")));
        }
    }
    let b = prompts.len();
    let len = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
    if let Some(maxp) = lm.max_positions() {
        if len > maxp {
            return Err(Error::value(op, format!("the prompt is {len} tokens long but the model has {maxp} positions")));
        }
        if len + cfg.max_new_tokens > maxp {
            return Err(Error::value(op, format!("{len} prompt tokens plus {} new tokens exceed the model's {maxp} positions; ask for at most {} new tokens", cfg.max_new_tokens, maxp - len)));
        }
    }
    let _g = no_grad();
    let dev = lm.device();
    let pad = cfg.pad_token_id.or(cfg.eos_token_ids.first().copied()).unwrap_or(0);
    let padded = prompts.iter().any(|p| p.len() != len);
    // left padding: ids, the mask over the sequence so far, positions from the mask
    let mut mask_host: Vec<Vec<i64>> = prompts.iter().map(|p| std::iter::repeat(0).take(len - p.len()).chain(std::iter::repeat(1).take(p.len())).collect()).collect();
    let ids: Vec<i64> = prompts.iter().flat_map(|p| std::iter::repeat(pad as i64).take(len - p.len()).chain(p.iter().map(|&v| v as i64))).collect();
    let mut positions: Vec<i64> = mask_host
        .iter()
        .flat_map(|m| {
            let mut c = -1i64;
            m.iter().map(move |&x| {
                c += x;
                if x == 0 {
                    1
                } else {
                    c
                }
            })
        })
        .collect();
    let mut cache = lm.new_cache(b, len + cfg.max_new_tokens)?;
    let mask_tensor = |m: &[Vec<i64>]| -> Result<Option<Tensor>> {
        if !padded {
            return Ok(None);
        }
        let w = m[0].len();
        Ok(Some(Tensor::from_vec(m.concat(), &[b, w])?.to_device(dev)?))
    };
    let mut input = Tensor::from_vec(ids, &[b, len])?.to_device(dev)?;
    let mut seen: Vec<Vec<u32>> = prompts.to_vec();
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); b];
    let mut done = vec![false; b];
    let mut gen = Generator::new(cfg.seed);
    let warpers = logits::Warpers { temperature: cfg.temperature, top_k: cfg.top_k, top_p: cfg.top_p };
    let mut past = 0;
    for _ in 0..cfg.max_new_tokens {
        let t = input.shape()[1];
        let mut step = StepInputs::new(&input, mask_tensor(&mask_host)?.as_ref(), Some(positions.clone()), past)?;
        step.last_only = true;
        let lg = lm.forward_cached(&step, &mut cache)?;
        past += t;
        let last = lg.select(1, -1)?.to_dtype(DType::F32)?.to_vec::<f32>()?;
        let mut picked = vec![None; b];
        for r in 0..b {
            if done[r] {
                continue;
            }
            let mut row = last[r * vocab..(r + 1) * vocab].to_vec();
            logits::repetition_penalty(&mut row, &seen[r], cfg.repetition_penalty);
            let tok = if cfg.do_sample { logits::sample(&row, &warpers, &mut gen) } else { logits::argmax(&row) };
            picked[r] = Some(tok);
            out[r].push(tok);
            seen[r].push(tok);
            if cfg.eos_token_ids.contains(&tok) {
                done[r] = true;
            }
        }
        on_step(&picked)?;
        if done.iter().all(|&d| d) {
            break;
        }
        let next: Vec<i64> = picked.iter().map(|t| t.unwrap_or(pad) as i64).collect();
        input = Tensor::from_vec(next, &[b, 1])?.to_device(dev)?;
        positions = (0..b).map(|r| positions[r * t + t - 1] + 1).collect();
        for m in mask_host.iter_mut() {
            m.push(1);
        }
    }
    Ok(out)
}

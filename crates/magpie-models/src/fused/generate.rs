//! `generate` on the fused engine, with the module path's semantics ([`crate::generate::generate`]):
//! the same [`GenerationConfig`], per-row stopping at end-of-sequence ids, a callback after every
//! step. Prompts of different lengths need no padding: each sequence has its own cache row and
//! position. Selection runs on the GPU; only each step's token ids come back.

use super::engine::FusedDecoder;
use super::kernels::SampleArgs;
use crate::generate::GenerationConfig;
use magpie_core::{Error, Result};

/// The selection rule of `cfg` for the engine's kernel.
pub fn sample_args(cfg: &GenerationConfig) -> SampleArgs {
    SampleArgs {
        temperature: if cfg.do_sample { cfg.temperature as f32 } else { 0.0 },
        top_k: if cfg.do_sample { cfg.top_k.map_or(0, |k| k.min(i32::MAX as usize) as i32) } else { 0 },
        top_p: if cfg.do_sample { cfg.top_p.map_or(1.0, |p| p as f32) } else { 1.0 },
        penalty: cfg.repetition_penalty as f32,
        seed: cfg.seed,
    }
}

impl FusedDecoder {
    /// Generates up to `cfg.max_new_tokens` tokens after each prompt (at most the engine's
    /// `max_batch` prompts; each prompt plus its new tokens within `max_len`). `on_step` is called
    /// after every step with each row's new token (None for rows that already stopped). Returns
    /// each row's new tokens, ending with the eos token that stopped it, if any.
    pub fn generate(&mut self, prompts: &[Vec<u32>], cfg: &GenerationConfig, mut on_step: impl FnMut(&[Option<u32>]) -> Result<()>) -> Result<Vec<Vec<u32>>> {
        let op = "generate";
        cfg.validate()?;
        let b = prompts.len();
        let ec = self.config();
        if b == 0 || prompts.iter().any(|p| p.is_empty()) {
            return Err(Error::value(op, "every prompt must hold at least one token"));
        }
        if b > ec.max_batch {
            return Err(Error::value(op, format!("{b} prompts but the fused engine was built for at most {} sequences", ec.max_batch)));
        }
        let len = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
        if let Some(maxp) = self.spec().max_positions {
            if len + cfg.max_new_tokens > maxp {
                return Err(Error::value(op, format!("{len} prompt tokens plus {} new tokens exceed the model's {maxp} positions; ask for at most {} new tokens", cfg.max_new_tokens, maxp.saturating_sub(len))));
            }
        }
        if len + cfg.max_new_tokens > ec.max_len {
            return Err(Error::value(op, format!("{len} prompt tokens plus {} new tokens exceed the fused engine's cache of {} tokens", cfg.max_new_tokens, ec.max_len)));
        }
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); b];
        if cfg.max_new_tokens == 0 {
            return Ok(out);
        }
        self.set_sampling(sample_args(cfg))?;
        if prompts.iter().all(|p| p.len() == prompts[0].len()) {
            let rows: Vec<&[u32]> = prompts.iter().map(|p| p.as_slice()).collect();
            self.prefill_rows(0, &rows)?;
        } else {
            for (r, p) in prompts.iter().enumerate() {
                self.prefill(r, p)?;
            }
        }
        let mut done = vec![false; b];
        let n = cfg.max_new_tokens;
        // Step i+1 is queued before step i's tokens are read, so the GPU never waits for the host.
        self.mark_step(0)?;
        if n > 1 {
            self.decode_step(b)?;
            self.mark_step(1)?;
        }
        for step in 0..n {
            let toks = self.wait_step(step, b)?;
            let mut picked = vec![None; b];
            for r in 0..b {
                if done[r] {
                    continue;
                }
                picked[r] = Some(toks[r]);
                out[r].push(toks[r]);
                if cfg.eos_token_ids.contains(&toks[r]) {
                    done[r] = true;
                }
            }
            on_step(&picked)?;
            if done.iter().all(|&d| d) {
                break;
            }
            if step + 2 < n {
                self.decode_step(b)?;
                self.mark_step(step + 2)?;
            }
        }
        Ok(out)
    }
}

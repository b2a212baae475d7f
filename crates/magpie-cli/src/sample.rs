//! `magpie sample`: generates text from a training checkpoint, streaming it as it goes.

use clap::Args;
use magpie_core::{Error, Result};
use magpie_models::generate::{generate_char as generate, SampleConfig};
use std::io::Write;
use std::path::PathBuf;

/// `magpie sample` flags.
#[derive(Args, Debug)]
pub struct SampleArgs {
    /// Checkpoint folder written by `magpie train`.
    #[arg(long, default_value = "checkpoints/gpt")]
    pub checkpoint: PathBuf,
    /// Text to continue.
    #[arg(long, default_value = "fn ")]
    pub prompt: String,
    /// Characters to generate.
    #[arg(long, default_value_t = 500)]
    pub max_new_tokens: usize,
    /// Softmax temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f64,
    /// Sample only from the k most likely characters.
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Sample only from the smallest set of characters whose probability reaches p.
    #[arg(long)]
    pub top_p: Option<f64>,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Runs `magpie sample`.
pub fn run(a: SampleArgs) -> Result<()> {
    let cfg = SampleConfig { max_new_tokens: a.max_new_tokens, temperature: a.temperature, top_k: a.top_k, top_p: a.top_p, seed: a.seed };
    cfg.validate()?;
    if a.prompt.is_empty() {
        return Err(Error::value("sample", "the prompt is empty; give at least one character with --prompt"));
    }
    let (model, tok) = magpie_models::trainer::load_for_inference(&a.checkpoint)?;
    let ids = tok.encode(&a.prompt)?;
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{}", a.prompt);
    let _ = out.flush();
    generate(&model, &ids, &cfg, |id| {
        let _ = write!(out, "{}", tok.decode(&[id]));
        let _ = out.flush();
        Ok(())
    })?;
    let _ = writeln!(out);
    Ok(())
}

//! Times the tiny-GPT training step (forward, backward, clip, AdamW) that `train_step.py` times in
//! PyTorch: same shapes, same optimizer settings, same fixed batch. Prints one JSON line with the
//! median step time, the median of each phase, and the peak RSS.
//!
//! Usage: `train-step [--warmup N] [--steps N] [--batch B] [--block T] [--n-layer L] [--n-head H] [--n-embd C] [--vocab V] [--profile]`

use magpie_core::Tensor;
use magpie_models::gpt::{Gpt, GptConfig};
use magpie_nn::ModuleExt;
use magpie_optim::{AdamConfig, AdamW, Optimizer};
use std::time::Instant;

mod profile;

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn peak_rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> magpie_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (warmup, steps) = (arg(&args, "--warmup", 3), arg(&args, "--steps", 10));
    let (b, t) = (arg(&args, "--batch", 16), arg(&args, "--block", 64));
    let cfg = GptConfig {
        vocab_size: arg(&args, "--vocab", 101),
        block_size: t,
        n_layer: arg(&args, "--n-layer", 2),
        n_head: arg(&args, "--n-head", 4),
        n_embd: arg(&args, "--n-embd", 128),
        dropout: 0.0,
    };
    magpie_core::ops::random::manual_seed(0);
    if args.iter().any(|a| a == "--profile") {
        return profile::run(b, t, cfg.n_embd, cfg.n_head, cfg.vocab_size, cfg.n_layer);
    }
    let model = Gpt::new(cfg.clone())?;
    let (decay, no_decay) = model.decay_groups();
    let ac = AdamConfig { lr: 1e-3, betas: (0.9, 0.95), weight_decay: 0.1, ..AdamConfig::adamw() };
    let mut opt = AdamW::new(decay, ac.clone())?;
    opt.add_param_group(no_decay, AdamConfig { weight_decay: 0.0, ..ac })?;
    // a fixed batch: token i of row r is (7r + 3i) mod vocab, targets shifted by one
    let v = cfg.vocab_size as i64;
    let x: Vec<i64> = (0..b * t).map(|k| ((7 * (k / t) + 3 * (k % t)) as i64) % v).collect();
    let y: Vec<i64> = (0..b * t).map(|k| ((7 * (k / t) + 3 * (k % t) + 3) as i64) % v).collect();
    let (x, y) = (Tensor::from_vec(x, &[b, t])?, Tensor::from_vec(y, &[b, t])?);
    let params = model.parameters();
    let (mut tot, mut fw, mut bw, mut op) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut loss_v = 0.0;
    for i in 0..warmup + steps {
        let t0 = Instant::now();
        let loss = model.loss(&x, &y)?;
        let t1 = Instant::now();
        opt.zero_grad();
        loss.backward()?;
        let t2 = Instant::now();
        magpie_nn::utils::clip_grad_norm_(&params, 1.0, 2.0, false)?;
        opt.step()?;
        let t3 = Instant::now();
        loss_v = loss.item()?.to_f64();
        if i >= warmup {
            tot.push((t3 - t0).as_secs_f64() * 1e3);
            fw.push((t1 - t0).as_secs_f64() * 1e3);
            bw.push((t2 - t1).as_secs_f64() * 1e3);
            op.push((t3 - t2).as_secs_f64() * 1e3);
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "impl": "torch-magpie",
            "step_ms": median(&mut tot),
            "forward_ms": median(&mut fw),
            "backward_ms": median(&mut bw),
            "optimizer_ms": median(&mut op),
            "peak_rss_mb": peak_rss_mb(),
            "params": model.num_parameters(),
            "final_loss": loss_v,
        })
    );
    Ok(())
}

//! Full training steps on one device, the cases of `benchmark/train/train_torch.py` (PyTorch's side):
//!
//! - `gpt`: the GPT of `magpie train` (crates/magpie-models/src/gpt.rs) with 6 layers, 6 heads,
//!   n_embd 384, context 256, batch 64, vocab 96; AdamW (betas 0.9/0.95, weight decay 0.1 on
//!   matrices, lr 1e-3), gradient clipping at 1.0: tokens/s.
//! - `bert`: BertForMaskedLM (6 layers, hidden 768, 12 heads, vocab 30522, dropout 0), batch 4 x 128,
//!   the masked-LM loss over every position, AdamW (lr 1e-4, weight decay 0.01): ms per step.
//!
//! - `gpt2-small`: the same GPT at 12 layers / 12 heads / 768 / context 1024 / batch 8 / vocab 50257
//!   (bfloat16 autocast only, as PyTorch's side).
//!
//! `--dtypes float32,bfloat16`: float32 runs everything in float32; bfloat16 keeps float32
//! parameters and runs the forward under `autocast(cuda, bfloat16)` (PyTorch's `torch.autocast`).
//! Both sides use the same fixed batch (token k of row r is (7r + 3k) mod vocab). Each case runs
//! `--warmup` steps, then `--steps` timed steps with a device synchronisation per step (the loss is
//! read back, as a training loop logging it does); the median step time, the peak device memory over
//! the timed steps and the last loss are printed as one JSON line per case.
//!
//!     train-bench [--device cuda] [--cases gpt,bert,gpt2-small] [--dtypes float32,bfloat16] [--warmup 5] [--steps 20]
//!                 [--graph both|on|off] [--gemm-pad-min-macs N]
//!
//! `--graph both|on|off` (default both): each case also (or only) as CUDA-graph replays of the whole
//! step (`magpie_core::cuda_graph`): the warm-up steps run eagerly, then one step is captured and
//! every timed step is AdamW's per-step scalars written to the device, one replay and the loss
//! read back. Those rows say `"graph": true`.
//!
//! `--gemm-pad-min-macs`: the product size from which misaligned f16/bf16 GEMMs run on padded
//! aligned copies (`cuda::blas::set_pad_min_macs`; a huge value turns the padding off), to compare.
//!
//! `--cache-casts on|off` (default on): under autocast, fill the weight-cast cache for all
//! parameters at the start of the forward (`amp::cache_casts`: one multi-tensor launch) or let
//! each op cast its weights at first use. `--bert-loss fused|logits` (default fused): BERT's
//! loss as `BertForMaskedLM::mlm_loss` (decoder and loss as one op, inside the autocast region,
//! as transformers computes it with `labels=`) or from the logits cast to float32.

use magpie_core::backend::cuda;
use magpie_core::cuda_graph::CUDAGraph;
use magpie_core::ops::nn::loss::cross_entropy;
use magpie_core::ops::nn::Reduction;
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_models::bert::BertForMaskedLM;
use magpie_models::config::BertConfig;
use magpie_models::gpt::{Gpt, GptConfig};
use magpie_models::hub::{LoadOptions, RandomWeights};
use magpie_nn::ModuleExt;
use magpie_optim::{AdamConfig, AdamW, Optimizer};
use serde_json::json;
use std::time::Instant;

struct Args {
    device: Device,
    cases: Vec<String>,
    dtypes: Vec<String>,
    warmup: usize,
    steps: usize,
    /// Which of eager (false) and graphed (true) runs to time.
    graph: Vec<bool>,
    /// Fill autocast's weight-cast cache in one launch per step.
    cache_casts: bool,
    /// BERT's loss through `mlm_loss` (else from the float32 logits).
    bert_fused_loss: bool,
}

fn parse() -> Result<Args> {
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args {
        device: Device::Cuda(0),
        cases: vec!["gpt".into(), "bert".into(), "gpt2-small".into()],
        dtypes: vec!["float32".into(), "bfloat16".into()],
        warmup: 5,
        steps: 20,
        graph: vec![false, true],
        cache_casts: true,
        bert_fused_loss: true,
    };
    let bad = |m: String| Error::value("train-bench", m);
    let mut i = 0;
    while i < v.len() {
        let val = v.get(i + 1).ok_or_else(|| bad(format!("{} needs a value", v[i])))?;
        let num = || val.parse::<usize>().map_err(|_| bad(format!("{} expects a number, got {val}", v[i])));
        match v[i].as_str() {
            "--device" => a.device = Device::parse(val)?,
            "--cases" => a.cases = val.split(',').map(str::to_string).collect(),
            "--dtypes" => a.dtypes = val.split(',').map(str::to_string).collect(),
            "--warmup" => a.warmup = num()?,
            "--steps" => a.steps = num()?.max(1),
            "--gemm-pad-min-macs" => cuda::blas::set_pad_min_macs(num()?),
            "--graph" => {
                a.graph = match val.as_str() {
                    "both" => vec![false, true],
                    "on" => vec![true],
                    "off" => vec![false],
                    v => return Err(bad(format!("--graph takes both, on or off, got {v}"))),
                }
            }
            "--cache-casts" => {
                a.cache_casts = match val.as_str() {
                    "on" => true,
                    "off" => false,
                    v => return Err(bad(format!("--cache-casts takes on or off, got {v}"))),
                }
            }
            "--bert-loss" => {
                a.bert_fused_loss = match val.as_str() {
                    "fused" => true,
                    "logits" => false,
                    v => return Err(bad(format!("--bert-loss takes fused or logits, got {v}"))),
                }
            }
            f => return Err(bad(format!("unknown flag {f}"))),
        }
        i += 2;
    }
    Ok(a)
}

fn sync(dev: Device) -> Result<()> {
    if let Device::Cuda(_) = dev {
        cuda::synchronize(Some(dev))?;
    }
    Ok(())
}

fn peak(dev: Device) -> usize {
    match dev {
        Device::Cuda(n) => cuda::max_memory_allocated(n),
        Device::Cpu => 0,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The fixed batch: token k of row r is (7r + 3k + shift) mod vocab.
fn batch(b: usize, t: usize, vocab: usize, shift: usize, dev: Device) -> Result<Tensor> {
    let x: Vec<i64> = (0..b * t).map(|k| ((7 * (k / t) + 3 * (k % t) + shift) % vocab) as i64).collect();
    Tensor::from_vec(x, &[b, t])?.to_device(dev)
}

/// Runs `step` warmup + steps times; returns (median ms, peak bytes over the timed steps, last loss).
fn time_steps(a: &Args, mut step: impl FnMut() -> Result<f64>) -> Result<(f64, usize, f64)> {
    let mut loss = 0.0;
    for _ in 0..a.warmup {
        loss = step()?;
    }
    sync(a.device)?;
    if let Device::Cuda(n) = a.device {
        cuda::reset_peak_memory_stats(n);
    }
    let mut ms = Vec::with_capacity(a.steps);
    for _ in 0..a.steps {
        let t0 = Instant::now();
        loss = step()?;
        sync(a.device)?;
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(&mut ms), peak(a.device), loss))
}

/// Times `body` (one full step returning its loss) eagerly, or (`graph`) as CUDA-graph replays:
/// the warm-up steps eager, one captured step, then each timed step writes AdamW's step scalars,
/// replays and reads the loss back. Returns (median ms, peak bytes, last loss).
fn time_body(a: &Args, graph: bool, opt: &mut AdamW, mut body: impl FnMut(&mut AdamW) -> Result<Tensor>) -> Result<(f64, usize, f64)> {
    if !graph {
        return time_steps(a, || Ok(body(opt)?.item()?.to_f64()));
    }
    for _ in 0..a.warmup.max(1) {
        body(opt)?;
    }
    sync(a.device)?;
    if let Device::Cuda(n) = a.device {
        cuda::reset_peak_memory_stats(n);
    }
    let mut g = CUDAGraph::new();
    let mut loss = None;
    g.capture(a.device, None, || {
        loss = Some(body(opt)?.detach());
        Ok(())
    })?;
    let loss = loss.ok_or_else(|| Error::value("train-bench", "the captured step gave no loss"))?;
    let mut ms = Vec::with_capacity(a.steps);
    let mut last = 0.0;
    for _ in 0..a.steps {
        let t0 = Instant::now();
        opt.prepare_graphed_step()?;
        g.replay()?;
        last = loss.item()?.to_f64();
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(&mut ms), peak(a.device), last))
}

/// The forward's autocast region for `dtype` ("float32": none), with the weight casts of
/// `params` made up front in one launch unless `--cache-casts off`.
fn autocast(a: &Args, dtype: &str, params: &[Tensor]) -> Result<Option<magpie_core::amp::AutocastGuard>> {
    match dtype {
        "float32" => Ok(None),
        "bfloat16" => {
            let g = magpie_core::amp::autocast(a.device, Some(DType::BF16), true)?;
            if a.cache_casts {
                magpie_core::amp::cache_casts(params)?;
            }
            Ok(Some(g))
        }
        other => Err(Error::value("train-bench", format!("unsupported dtype {other} (float32, bfloat16)"))),
    }
}

#[allow(clippy::too_many_arguments)]
fn gpt(a: &Args, graph: bool, case: &str, dtype: &str, layers: usize, heads: usize, embd: usize, t: usize, b: usize, vocab: usize) -> Result<serde_json::Value> {
    let cfg = GptConfig { vocab_size: vocab, block_size: t, n_layer: layers, n_head: heads, n_embd: embd, dropout: 0.0 };
    magpie_core::ops::random::manual_seed(0);
    let mut model = Gpt::new(cfg.clone())?;
    model.to_device(a.device)?;
    let (decay, no_decay) = model.decay_groups();
    let ac = AdamConfig { lr: 1e-3, betas: (0.9, 0.95), weight_decay: 0.1, ..AdamConfig::adamw() };
    let mut opt = AdamW::new(decay, ac.clone())?;
    opt.add_param_group(no_decay, AdamConfig { weight_decay: 0.0, ..ac })?;
    let (x, y) = (batch(b, t, cfg.vocab_size, 0, a.device)?, batch(b, t, cfg.vocab_size, 3, a.device)?);
    let params = model.parameters();
    let (ms, mem, loss) = time_body(a, graph, &mut opt, |opt| {
        let loss = {
            let _ac = autocast(a, dtype, &params)?;
            model.loss(&x, &y)?
        };
        opt.zero_grad();
        loss.backward()?;
        magpie_nn::utils::clip_grad_norm_(&params, 1.0, 2.0, false)?;
        opt.step()?;
        Ok(loss)
    })?;
    let n = model.num_parameters();
    let tok = b * t;
    Ok(json!({"case": case, "dtype": dtype, "graph": graph, "step_ms": ms, "tokens_per_s": tok as f64 / ms * 1e3,
              "peak_mem_bytes": mem, "params": n, "loss": loss,
              "train_flops": 6 * n * tok + 6 * layers * t * embd * tok}))
}

fn bert(a: &Args, graph: bool, dtype: &str) -> Result<serde_json::Value> {
    let (b, t, vocab) = (4, 128, 30522);
    let cfg = BertConfig::from_json(&json!({
        "vocab_size": vocab, "hidden_size": 768, "num_hidden_layers": 6, "num_attention_heads": 12,
        "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
        "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0
    }))?;
    let mut w = RandomWeights::new(LoadOptions { dtype: DType::F32, device: a.device }, 0)?;
    let mut model = BertForMaskedLM::build(&cfg, &mut w)?;
    model.train(true);
    let params = model.parameters();
    let mut opt = AdamW::new(params.clone(), AdamConfig { lr: 1e-4, weight_decay: 0.01, ..AdamConfig::adamw() })?;
    let (x, y) = (batch(b, t, vocab, 0, a.device)?, batch(b, t, vocab, 3, a.device)?);
    let (ms, mem, loss) = time_body(a, graph, &mut opt, |opt| {
        let loss = if a.bert_fused_loss {
            let _ac = autocast(a, dtype, &params)?;
            model.mlm_loss(&x, &y, None, None)?
        } else {
            let logits = {
                let _ac = autocast(a, dtype, &params)?;
                let out = model.forward_with(&x, None, None, false)?;
                out.logits.ok_or_else(|| Error::value("train-bench", "BertForMaskedLM gave no logits"))?
            };
            let logits = logits.to_dtype(DType::F32)?;
            cross_entropy(&logits.reshape(&[(b * t) as i64, vocab as i64])?, &y.reshape(&[-1])?, None, -100, Reduction::Mean, 0.0)?
        };
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        Ok(loss)
    })?;
    Ok(json!({"case": "bert", "dtype": dtype, "graph": graph, "step_ms": ms, "tokens_per_s": (b * t) as f64 / ms * 1e3,
              "peak_mem_bytes": mem, "params": model.num_parameters(), "loss": loss}))
}

fn main() {
    let run = || -> Result<()> {
        let a = parse()?;
        for c in &a.cases {
            for dt in &a.dtypes {
                for &g in &a.graph {
                    let mut r = match (c.as_str(), dt.as_str()) {
                        ("gpt", _) => gpt(&a, g, "gpt", dt, 6, 6, 384, 256, 64, 96)?,
                        ("gpt2-small", "bfloat16") => gpt(&a, g, "gpt2-small", dt, 12, 12, 768, 1024, 8, 50257)?,
                        ("gpt2-small", _) => continue,
                        ("bert", _) => bert(&a, g, dt)?,
                        (other, _) => return Err(Error::value("train-bench", format!("unknown case {other} (gpt, bert, gpt2-small)"))),
                    };
                    r["impl"] = json!("torch-magpie");
                    r["cache_casts"] = json!(a.cache_casts);
                    if c == "bert" {
                        r["bert_loss"] = json!(if a.bert_fused_loss { "fused" } else { "logits" });
                    }
                    println!("{r}");
                }
            }
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("train-bench: {e}");
        std::process::exit(1);
    }
}

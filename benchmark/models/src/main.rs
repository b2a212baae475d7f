//! Model benchmark, torch-magpie side (the fused CUDA engine, and the module path with `--path module`): the cases of `configs/<case>/` (the same
//! config.json and workload.json that `transformers_bench.py` uses), random weights, and the same
//! three metrics: `prefill` (ms: one forward of the prompt into a fresh KV cache, the last position's
//! logits read back), `decode` (tok/s: greedy generation end to end, prefill included, no early stop)
//! and `decode_steady` (tok/s: the same runs timed from the first new token to the last). Median of
//! `--reps` runs after `--warmup`; peak device memory over the timed runs (weights included). One JSON
//! line per (case, metric) on stdout, in `report.py`'s format.
//!
//!     bench-models [--configs benchmark/models/configs] [--cases gpt2,llama-3.2-1b]
//!                  [--metrics prefill,decode,decode_steady] [--warmup 2] [--reps 5] [--device cuda]
//!                  [--path fused,module]

use magpie_core::autograd::no_grad;
use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_models::auto::AutoModel;
use magpie_models::hub::LoadOptions;
use magpie_models::causal_lm::CausalLm;
use magpie_models::fused::{sample_args, EngineConfig, FusedDecoder, FusedEncoder};
use magpie_models::generate::{generate, GenerationConfig};
use magpie_models::positions::StepInputs;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

struct Args {
    configs: PathBuf,
    cases: Vec<String>,
    metrics: Vec<String>,
    warmup: usize,
    reps: usize,
    device: Device,
    /// Which implementations to time: "fused" (the inference engine) and/or "module".
    paths: Vec<String>,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        configs: PathBuf::from("benchmark/models/configs"),
        cases: vec!["gpt2".into(), "llama-3.2-1b".into()],
        metrics: vec!["prefill".into(), "decode".into(), "decode_steady".into(), "forward".into()],
        warmup: 2,
        reps: 5,
        device: Device::Cuda(0),
        paths: vec!["fused".into()],
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let bad = |m: String| Error::value("bench-models", m);
    while i < argv.len() {
        let flag = argv[i].as_str();
        let val = argv.get(i + 1).cloned().ok_or_else(|| bad(format!("{flag} needs a value")))?;
        let list = || val.split(',').map(str::to_string).collect::<Vec<_>>();
        let num = || val.parse::<usize>().map_err(|_| bad(format!("{flag}: not a count: {val}")));
        match flag {
            "--configs" => a.configs = PathBuf::from(&val),
            "--cases" => a.cases = list(),
            "--metrics" => a.metrics = list(),
            "--warmup" => a.warmup = num()?,
            "--reps" => a.reps = num()?.max(1),
            "--device" => a.device = Device::parse(&val)?,
            "--path" => a.paths = list(),
            _ => return Err(bad(format!("unknown flag {flag}"))),
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

fn peak_reset(dev: Device) {
    if let Device::Cuda(n) = dev {
        cuda::reset_peak_memory_stats(n);
    }
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

fn read_json(p: &Path) -> Result<Value> {
    let s = std::fs::read_to_string(p).map_err(|e| Error::io("bench-models", format!("cannot read {}: {e}", p.display())))?;
    serde_json::from_str(&s).map_err(|e| Error::io("bench-models", format!("{}: {e}", p.display())))
}

fn dtype_of(s: &str) -> Result<DType> {
    match s {
        "float32" => Ok(DType::F32),
        "bfloat16" => Ok(DType::BF16),
        "float16" => Ok(DType::F16),
        _ => Err(Error::value("bench-models", format!("unsupported dtype {s}"))),
    }
}

/// One forward of the prompt into a fresh cache; the last position's logits come back to the host.
fn prefill(lm: &dyn CausalLm, prompt: &[u32]) -> Result<()> {
    let t = prompt.len();
    let ids = Tensor::from_vec(prompt.iter().map(|&v| v as i64).collect::<Vec<_>>(), &[1, t])?.to_device(lm.device())?;
    let mut cache = lm.new_cache(1, t)?;
    let mut step = StepInputs::new(&ids, None, None, 0)?;
    step.last_only = true;
    let logits = lm.forward_cached(&step, &mut cache)?;
    let _ = logits.select(1, -1)?.to_dtype(DType::F32)?.to_vec::<f32>()?;
    Ok(())
}

type StepFn<'a> = &'a mut dyn FnMut(&[Option<u32>]) -> Result<()>;

/// Times `run`, a greedy generation of exactly `n` tokens per prompt that calls its callback after
/// every step; returns (total seconds, seconds from the first new token to the last).
fn timed_generation(n: usize, run: impl FnOnce(StepFn<'_>) -> Result<Vec<Vec<u32>>>) -> Result<(f64, f64)> {
    let t0 = Instant::now();
    let mut first: Option<Instant> = None;
    let mut last = t0;
    let out = run(&mut |_step: &[Option<u32>]| {
        let now = Instant::now();
        first.get_or_insert(now);
        last = now;
        Ok(())
    })?;
    let total = t0.elapsed().as_secs_f64();
    if let Some(bad) = out.iter().find(|r| r.len() != n) {
        return Err(Error::value("bench-models", format!("generated {} tokens, expected {n}", bad.len())));
    }
    Ok((total, first.map_or(0.0, |f| (last - f).as_secs_f64())))
}

/// Greedy generation on the module path (see [`timed_generation`]).
fn decode(lm: &dyn CausalLm, prompts: &[Vec<u32>], n: usize) -> Result<(f64, f64)> {
    timed_generation(n, |cb| generate(lm, prompts, &greedy(n), cb))
}

/// The prompts of a workload: `prompt_ids` as one list (batch 1) or a list per sequence, or
/// `prompt_len` tokens made by the formula both sides share (`(i * prompt_mul + prompt_add) %
/// prompt_mod`, the same for every sequence of the batch).
fn prompts_of(work: &Value, vocab: usize) -> Vec<Vec<u32>> {
    let ids = |v: &Value| -> Vec<u32> { v.as_array().map(|a| a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect()).unwrap_or_default() };
    let batch = work["batch"].as_u64().unwrap_or(1).max(1) as usize;
    match &work["prompt_ids"] {
        Value::Array(rows) if rows.first().is_some_and(|r| r.is_array()) => rows.iter().map(ids).collect(),
        v @ Value::Array(_) => vec![ids(v); batch],
        _ => {
            let n = work["prompt_len"].as_u64().unwrap_or(0) as usize;
            let k = |key: &str, d: u64| work[key].as_u64().unwrap_or(d) as usize;
            let (mul, add, modulo) = (k("prompt_mul", 7919), k("prompt_add", 13), k("prompt_mod", vocab as u64).max(1));
            let one: Vec<u32> = (0..n).map(|i| ((i * mul + add) % modulo) as u32).collect();
            vec![one; batch]
        }
    }
}

/// Times the metrics of one case on one path ("fused" or "module").
fn run_case(a: &Args, case: &str, path: &str) -> Result<Vec<Value>> {
    let dir = a.configs.join(case);
    let work = read_json(&dir.join("workload.json"))?;
    let dt_name = work["dtype"].as_str().unwrap_or("float32").to_string();
    let dtype = dtype_of(&dt_name)?;
    let new_tokens = work["new_tokens"].as_u64().unwrap_or(0) as usize;
    let metrics: Vec<String> = match work["metrics"].as_array() {
        Some(m) => m.iter().filter_map(|x| x.as_str()).filter(|x| a.metrics.iter().any(|y| y == x)).map(str::to_string).collect(),
        None => a.metrics.clone(),
    };
    let dev = a.device;
    peak_reset(dev);
    let t0 = Instant::now();
    let model = AutoModel::from_config_random(&dir, &LoadOptions { dtype, device: dev }, 0)?;
    let vocab = model.vocab_size();
    let prompts = prompts_of(&work, vocab);
    if prompts.is_empty() || prompts[0].is_empty() || (new_tokens == 0 && metrics.iter().any(|m| m.starts_with("decode"))) {
        return Err(Error::value("bench-models", format!("{}: workload.json needs prompt_ids (or prompt_len) and new_tokens", dir.display())));
    }
    let batch = prompts.len();
    let prompt_len = prompts[0].len();
    let encoder = work["model"].as_str() == Some("encoder");
    let mut fused_encoder = None;
    if encoder && path == "fused" {
        fused_encoder = Some(FusedEncoder::from_model(&model, batch, prompt_len)?);
    }
    let mut engine = None;
    if path == "fused" && !encoder {
        // MAGPIE_FUSED_GEMV=0: cuBLAS for every product (to compare with our GEMV)
        let gemv = std::env::var("MAGPIE_FUSED_GEMV").map_or(true, |v| v != "0");
        // MAGPIE_FUSED_PDL=0: plain launches
        let pdl = std::env::var("MAGPIE_FUSED_PDL").map_or(true, |v| v != "0");
        // MAGPIE_FUSED_FUSE=0: the decode step's norms, residual adds, activation and rotary
        // embedding as separate kernels (not folded into the GEMVs)
        let fuse = std::env::var("MAGPIE_FUSED_FUSE").map_or(true, |v| v != "0");
        // MAGPIE_FUSED_SPLIT=1|2|4: warps per output of the fused GEMV (default: chosen per shape)
        let gemv_split = std::env::var("MAGPIE_FUSED_SPLIT").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        // MAGPIE_FUSED_SPLIT_GAIN=N: split K only where it divides the estimated round trips by N
        // (default 2; 1: any gain; 0: the rule before 2026-11-27)
        let gemv_split_min_gain = std::env::var("MAGPIE_FUSED_SPLIT_GAIN").ok().and_then(|v| v.parse().ok()).unwrap_or(EngineConfig::default().gemv_split_min_gain);
        // MAGPIE_FUSED_ATTN=0: the core's split-KV decode attention and its combine kernel instead
        // of the one-kernel attention of the folded step
        let attention_kernel = std::env::var("MAGPIE_FUSED_ATTN").map_or(true, |v| v != "0");
        // MAGPIE_FUSED_PF_MB=N: the decode step's L2 prefetch window in MiB (0: no prefetch)
        let l2_prefetch = std::env::var("MAGPIE_FUSED_PF_MB").ok().and_then(|v| v.parse::<usize>().ok()).map_or(EngineConfig::default().l2_prefetch, |m| m << 20);
        // MAGPIE_FUSED_ARGMAX=0: greedy selection by a pass over the logits (not the LM head's argmax)
        let fused_argmax = std::env::var("MAGPIE_FUSED_ARGMAX").map_or(true, |v| v != "0");
        // MAGPIE_FUSED_CHAIN=1: a block's o, gate|up, down and the next q|k|v as one persistent
        // kernel with grid barriers (EngineConfig::decode_chain)
        let decode_chain = std::env::var("MAGPIE_FUSED_CHAIN").map_or(EngineConfig::default().decode_chain, |v| v != "0");
        // MAGPIE_FUSED_LT=1: prefill products through timed cuBLASLt algorithms with the MLP's
        // bias and activation in the epilogue (0: the legacy cuBLAS call, the default)
        let prefill_lt = std::env::var("MAGPIE_FUSED_LT").map_or(EngineConfig::default().prefill_lt, |v| v != "0");
        // MAGPIE_FUSED_SHORT_ATTN=1: short prefill passes in 16-query blocks (0: the core's flash
        // kernel, the default)
        let prefill_short_attn = std::env::var("MAGPIE_FUSED_SHORT_ATTN").map_or(EngineConfig::default().prefill_short_attn, |v| v != "0");
        let cfg = EngineConfig { max_batch: batch, max_len: prompt_len + new_tokens.max(1), gemv, pdl, fuse, gemv_split, gemv_split_min_gain, attention_kernel, l2_prefetch, fused_argmax, decode_chain, prefill_lt, prefill_short_attn, ..EngineConfig::default() };
        engine = Some(FusedDecoder::from_model(&model, cfg)?);
    }
    // the fused engines hold what they read: free the module tree (its unfused q/k/v, gate/up)
    let model = if engine.is_some() || fused_encoder.is_some() {
        drop(model);
        None
    } else {
        Some(model)
    };
    sync(dev)?;
    let build_s = t0.elapsed().as_secs_f64();
    let weights_bytes = peak(dev);
    let impl_name = if path == "fused" { "torch-magpie fused" } else { "torch-magpie module path" };
    let mut out = Vec::new();
    let base = |metric: &str, value: f64, unit: &str, times: &[f64], mem: usize| {
        json!({"case": case, "metric": metric, "value": value, "unit": unit, "peak_mem_bytes": mem,
               "weights_bytes": weights_bytes, "dtype": dt_name, "batch": batch, "prompt_tokens": prompt_len,
               "new_tokens": new_tokens, "times_ms": times, "path": path,
               "device": format!("{dev:?}"), "impl": impl_name, "build_s": build_s})
    };
    let _g = no_grad();
    // one prefill of every prompt (the fused engine: each sequence's cache row, first token selected)
    let do_prefill = |engine: &mut Option<FusedDecoder>| -> Result<()> {
        match (engine.as_mut(), model.as_ref()) {
            (Some(e), _) => {
                e.set_sampling(sample_args(&greedy(1)))?;
                if prompts.iter().all(|p| p.len() == prompt_len) {
                    let rows: Vec<&[u32]> = prompts.iter().map(|p| p.as_slice()).collect();
                    e.prefill_rows(0, &rows)?;
                } else {
                    for (r, p) in prompts.iter().enumerate() {
                        e.prefill(r, p)?;
                    }
                }
                e.tokens(batch).map(|_| ())
            }
            (None, Some(m)) => {
                let lm = m.as_causal_lm().ok_or_else(|| Error::value("bench-models", format!("{case} is not a decoder")))?;
                for p in &prompts {
                    prefill(lm, p)?;
                }
                Ok(())
            }
            _ => Err(Error::value("bench-models", "no model")),
        }
    };
    if metrics.iter().any(|m| m == "prefill") {
        for _ in 0..a.warmup {
            do_prefill(&mut engine)?;
        }
        peak_reset(dev);
        let mut ts = Vec::new();
        for _ in 0..a.reps {
            sync(dev)?;
            let t = Instant::now();
            do_prefill(&mut engine)?;
            sync(dev)?;
            ts.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mem = peak(dev);
        let m = median(&mut ts.clone());
        out.push(base("prefill", m, "ms", &ts, mem));
        if prompt_len * batch >= 4096 {
            out.push(base("prefill_throughput", (prompt_len * batch) as f64 / (m / 1e3), "tok/s", &ts, mem));
        }
    }
    if metrics.iter().any(|m| m == "forward") {
        let ids: Vec<i64> = prompts.iter().flatten().map(|&t| t as i64).collect();
        let ids = Tensor::from_vec(ids, &[batch, prompt_len])?.to_device(dev)?;
        let mut fwd = || -> Result<()> {
            match (fused_encoder.as_mut(), model.as_ref()) {
                (Some(e), _) => drop(e.forward(&ids, None, None)?),
                (None, Some(m)) => drop(m.forward(&ids, None, None, false)?),
                _ => return Err(Error::value("bench-models", "no model")),
            }
            sync(dev)
        };
        for _ in 0..a.warmup {
            fwd()?;
        }
        peak_reset(dev);
        let mut ts = Vec::new();
        for _ in 0..a.reps {
            sync(dev)?;
            let t = Instant::now();
            fwd()?;
            ts.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mem = peak(dev);
        let med = median(&mut ts.clone());
        out.push(base("forward", med, "ms", &ts, mem));
    }
    let want_decode = metrics.iter().any(|m| m == "decode");
    let want_steady = metrics.iter().any(|m| m == "decode_steady");
    if want_decode || want_steady {
        let run = |engine: &mut Option<FusedDecoder>| -> Result<(f64, f64)> {
            match (engine.as_mut(), model.as_ref()) {
                (Some(e), _) => decode_fused(e, &prompts, new_tokens),
                (None, Some(m)) => decode(m.as_causal_lm().ok_or_else(|| Error::value("bench-models", format!("{case} is not a decoder")))?, &prompts, new_tokens),
                _ => Err(Error::value("bench-models", "no model")),
            }
        };
        for _ in 0..a.warmup {
            run(&mut engine)?;
        }
        peak_reset(dev);
        let (mut total, mut steady) = (Vec::new(), Vec::new());
        for _ in 0..a.reps {
            sync(dev)?;
            let (t, s) = run(&mut engine)?;
            total.push(t * 1e3);
            steady.push(s * 1e3);
        }
        let mem = peak(dev);
        if want_decode {
            let m = median(&mut total.clone());
            out.push(base("decode", (batch * new_tokens) as f64 / (m / 1e3), "tok/s", &total, mem));
        }
        if want_steady && new_tokens > 1 {
            let m = median(&mut steady.clone());
            out.push(base("decode_steady", (batch * (new_tokens - 1)) as f64 / (m / 1e3), "tok/s", &steady, mem));
        }
    }
    Ok(out)
}

fn greedy(n: usize) -> GenerationConfig {
    GenerationConfig { max_new_tokens: n, do_sample: false, eos_token_ids: Vec::new(), ..GenerationConfig::default() }
}

/// Greedy generation on the fused engine (see [`timed_generation`]).
fn decode_fused(e: &mut FusedDecoder, prompts: &[Vec<u32>], n: usize) -> Result<(f64, f64)> {
    timed_generation(n, |cb| e.generate(prompts, &greedy(n), cb))
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench-models: {e}");
            std::process::exit(2);
        }
    };
    let mut failed = false;
    for case in &args.cases {
        for path in &args.paths {
            match run_case(&args, case, path) {
                Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
                Err(e) => {
                    failed = true;
                    println!("{}", json!({"case": case, "metric": "all", "path": path, "error": e.to_string()}));
                }
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}

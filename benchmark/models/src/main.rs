//! Model benchmark, torch-magpie side (the module path): the cases of `configs/<case>/` (the same
//! config.json and workload.json that `transformers_bench.py` uses), random weights, and the same
//! three metrics: `prefill` (ms: one forward of the prompt into a fresh KV cache, the last position's
//! logits read back), `decode` (tok/s: greedy generation end to end, prefill included, no early stop)
//! and `decode_steady` (tok/s: the same runs timed from the first new token to the last). Median of
//! `--reps` runs after `--warmup`; peak device memory over the timed runs (weights included). One JSON
//! line per (case, metric) on stdout, in `report.py`'s format.
//!
//!     bench-models [--configs benchmark/models/configs] [--cases gpt2,llama-3.2-1b]
//!                  [--metrics prefill,decode,decode_steady] [--warmup 2] [--reps 5] [--device cuda]

use magpie_core::autograd::no_grad;
use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_models::auto::AutoModel;
use magpie_models::hub::LoadOptions;
use magpie_models::causal_lm::CausalLm;
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
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        configs: PathBuf::from("benchmark/models/configs"),
        cases: vec!["gpt2".into(), "llama-3.2-1b".into()],
        metrics: vec!["prefill".into(), "decode".into(), "decode_steady".into()],
        warmup: 2,
        reps: 5,
        device: Device::Cuda(0),
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

/// Greedy generation of exactly `n` tokens; returns (total seconds, seconds from the first new token to the last).
fn decode(lm: &dyn CausalLm, prompt: &[u32], n: usize) -> Result<(f64, f64)> {
    let cfg = GenerationConfig { max_new_tokens: n, do_sample: false, eos_token_ids: Vec::new(), ..GenerationConfig::default() };
    let t0 = Instant::now();
    let mut first: Option<Instant> = None;
    let mut last = t0;
    let out = generate(lm, &[prompt.to_vec()], &cfg, |_step| {
        let now = Instant::now();
        first.get_or_insert(now);
        last = now;
        Ok(())
    })?;
    let total = t0.elapsed().as_secs_f64();
    let got = out.first().map_or(0, |r| r.len());
    if got != n {
        return Err(Error::value("bench-models", format!("generated {got} tokens, expected {n}")));
    }
    Ok((total, first.map_or(0.0, |f| (last - f).as_secs_f64())))
}

fn run_case(a: &Args, case: &str) -> Result<Vec<Value>> {
    let dir = a.configs.join(case);
    let work = read_json(&dir.join("workload.json"))?;
    let dt_name = work["dtype"].as_str().unwrap_or("float32").to_string();
    let dtype = dtype_of(&dt_name)?;
    let prompt: Vec<u32> = work["prompt_ids"].as_array().map(|v| v.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect()).unwrap_or_default();
    let new_tokens = work["new_tokens"].as_u64().unwrap_or(0) as usize;
    if prompt.is_empty() || new_tokens == 0 {
        return Err(Error::value("bench-models", format!("{}: workload.json needs prompt_ids and new_tokens", dir.display())));
    }
    let dev = a.device;
    peak_reset(dev);
    let t0 = Instant::now();
    let model = AutoModel::from_config_random(&dir, &LoadOptions { dtype, device: dev }, 0)?;
    sync(dev)?;
    let build_s = t0.elapsed().as_secs_f64();
    let weights_bytes = peak(dev);
    let lm = model.as_causal_lm().ok_or_else(|| Error::value("bench-models", format!("{case} is not a decoder")))?;
    let mut out = Vec::new();
    let base = |metric: &str, value: f64, unit: &str, times: &[f64], mem: usize| {
        json!({"case": case, "metric": metric, "value": value, "unit": unit, "peak_mem_bytes": mem,
               "weights_bytes": weights_bytes, "dtype": dt_name, "batch": 1, "prompt_tokens": prompt.len(),
               "new_tokens": new_tokens, "times_ms": times,
               "device": format!("{dev:?}"), "impl": "torch-magpie module path", "build_s": build_s})
    };
    let _g = no_grad();
    if a.metrics.iter().any(|m| m == "prefill") {
        for _ in 0..a.warmup {
            prefill(lm, &prompt)?;
        }
        peak_reset(dev);
        let mut ts = Vec::new();
        for _ in 0..a.reps {
            sync(dev)?;
            let t = Instant::now();
            prefill(lm, &prompt)?;
            sync(dev)?;
            ts.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mem = peak(dev);
        let m = median(&mut ts.clone());
        out.push(base("prefill", m, "ms", &ts, mem));
    }
    let want_decode = a.metrics.iter().any(|m| m == "decode");
    let want_steady = a.metrics.iter().any(|m| m == "decode_steady");
    if want_decode || want_steady {
        for _ in 0..a.warmup {
            decode(lm, &prompt, new_tokens)?;
        }
        peak_reset(dev);
        let (mut total, mut steady) = (Vec::new(), Vec::new());
        for _ in 0..a.reps {
            sync(dev)?;
            let (t, s) = decode(lm, &prompt, new_tokens)?;
            total.push(t * 1e3);
            steady.push(s * 1e3);
        }
        let mem = peak(dev);
        if want_decode {
            let m = median(&mut total.clone());
            out.push(base("decode", new_tokens as f64 / (m / 1e3), "tok/s", &total, mem));
        }
        if want_steady && new_tokens > 1 {
            let m = median(&mut steady.clone());
            out.push(base("decode_steady", (new_tokens - 1) as f64 / (m / 1e3), "tok/s", &steady, mem));
        }
    }
    Ok(out)
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
        match run_case(&args, case) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                failed = true;
                println!("{}", json!({"case": case, "metric": "all", "error": e.to_string()}));
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}

//! Open-to-first-forward benchmark, torch-magpie side, and the GGUF decode speed on CUDA.
//!
//!     load-bench make DIR [--config benchmark/models/configs/llama-3.2-1b/config.json] [--only gguf]
//!         random weights of the config's shape: DIR/hf/ (config.json + model.safetensors, bf16)
//!         and DIR/model-Q4_K.gguf (llama metadata, 2-D weights quantized by magpie-io's Q4_K
//!         quantizer, norms f32)
//!     load-bench time st|gguf|st-tensors|pt PATH
//!         one JSON line: open_ms (file to model / tensors), forward_ms (the first forward of one
//!         token on the CPU, float32; st and gguf only), total_ms, peak RSS
//!     load-bench decode FILE.gguf [--new 64] [--dtype bfloat16] [--dense] [--path module|fused] [--unfolded] [--lane-coding]
//!         greedy decoding on cuda:0 (quantized layers on the quantized GEMV; with --dense every
//!         weight dequantized to --dtype on load) on the module path (the default) or the fused
//!         engine (one CUDA graph per step; --unfolded: its decode step without the small kernels
//!         folded into the GEMVs, `EngineConfig::fuse` off; --lane-coding: one-row folded Q4_K
//!         GEMVs of K <= 2048 code x per lane, `EngineConfig::quant_warp_coding` on):
//!         tok/s from the first new token to the last, and the weight bytes each step must read
//!         (the bandwidth floor)
//!
//! `benchmark/load/run.sh` runs it next to the Python loaders and writes results.md.

use magpie_core::autograd::no_grad;
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_io::gguf::{quantize_q4_k, GgmlType, GgufWriter, Value};
use magpie_models::auto::AutoModel;
use magpie_models::fused::{EngineConfig, FusedDecoder};
use magpie_models::generate::{generate, GenerationConfig};
use magpie_models::hub::LoadOptions;
use rayon::prelude::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn err(msg: impl Into<String>) -> Error {
    Error::value("load-bench", msg)
}

/// The model shape read from a Hugging Face config.json.
struct Shape {
    vocab: usize,
    hidden: usize,
    inter: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f64,
    theta: f64,
}

fn shape_of(cfg: &serde_json::Value) -> Result<Shape> {
    let u = |k: &str| cfg[k].as_u64().map(|v| v as usize).ok_or_else(|| err(format!("config.json has no '{k}'")));
    let (hidden, heads) = (u("hidden_size")?, u("num_attention_heads")?);
    Ok(Shape {
        vocab: u("vocab_size")?,
        hidden,
        inter: u("intermediate_size")?,
        layers: u("num_hidden_layers")?,
        heads,
        kv_heads: u("num_key_value_heads").unwrap_or(heads),
        head_dim: u("head_dim").unwrap_or(hidden / heads),
        eps: cfg["rms_norm_eps"].as_f64().unwrap_or(1e-5),
        theta: cfg["rope_parameters"]["rope_theta"].as_f64().or(cfg["rope_theta"].as_f64()).unwrap_or(10000.0),
    })
}

/// `n` values uniform in ±0.0346 (standard deviation 0.02, the configs' initializer range),
/// generated in parallel chunks from `seed`.
fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut v = vec![0f32; n];
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(c, chunk)| {
        let mut s = seed ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for x in chunk.iter_mut() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *x = ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.0693;
        }
    });
    v
}

/// Every tensor of the model: (Hugging Face name, GGUF name, shape); norms are the 1-D ones.
fn tensors(s: &Shape) -> Vec<(String, String, Vec<usize>)> {
    let (h, q, kv) = (s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let mut t = vec![("model.embed_tokens.weight".to_string(), "token_embd.weight".to_string(), vec![s.vocab, h])];
    for l in 0..s.layers {
        for (hf, g, shape) in [
            ("input_layernorm.weight", "attn_norm.weight", vec![h]),
            ("self_attn.q_proj.weight", "attn_q.weight", vec![q, h]),
            ("self_attn.k_proj.weight", "attn_k.weight", vec![kv, h]),
            ("self_attn.v_proj.weight", "attn_v.weight", vec![kv, h]),
            ("self_attn.o_proj.weight", "attn_output.weight", vec![h, q]),
            ("post_attention_layernorm.weight", "ffn_norm.weight", vec![h]),
            ("mlp.gate_proj.weight", "ffn_gate.weight", vec![s.inter, h]),
            ("mlp.up_proj.weight", "ffn_up.weight", vec![s.inter, h]),
            ("mlp.down_proj.weight", "ffn_down.weight", vec![h, s.inter]),
        ] {
            t.push((format!("model.layers.{l}.{hf}"), format!("blk.{l}.{g}"), shape));
        }
    }
    t.push(("model.norm.weight".to_string(), "output_norm.weight".to_string(), vec![h]));
    t
}

fn values(shape: &[usize], seed: u64) -> Vec<f32> {
    let n: usize = shape.iter().product();
    if shape.len() == 1 {
        vec![1.0; n]
    } else {
        random(n, seed)
    }
}

fn make(dir: &Path, config: &Path, only_gguf: bool) -> Result<()> {
    let io = |e: std::io::Error| Error::io("load-bench", e.to_string());
    let text = std::fs::read_to_string(config).map_err(io)?;
    let cfg: serde_json::Value = serde_json::from_str(&text).map_err(|e| err(format!("{}: {e}", config.display())))?;
    let s = shape_of(&cfg)?;
    let list = tensors(&s);
    if !only_gguf {
        let t = Instant::now();
        let hf = dir.join("hf");
        std::fs::create_dir_all(&hf).map_err(io)?;
        std::fs::write(hf.join("config.json"), &text).map_err(io)?;
        let mut st = Vec::with_capacity(list.len());
        for (i, (name, _, shape)) in list.iter().enumerate() {
            st.push((name.clone(), Tensor::from_vec(values(shape, i as u64), shape)?.to_dtype(DType::BF16)?));
        }
        magpie_io::safetensors::save(&st, None, hf.join("model.safetensors"))?;
        eprintln!("wrote {} ({} tensors, bf16) in {:.1} s", hf.display(), st.len(), t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let mut w = GgufWriter::new();
    w.add("general.architecture", Value::String("llama".into()))?;
    for (k, v) in [("embedding_length", s.hidden), ("feed_forward_length", s.inter), ("block_count", s.layers), ("attention.head_count", s.heads), ("attention.head_count_kv", s.kv_heads), ("attention.key_length", s.head_dim), ("vocab_size", s.vocab), ("context_length", 8192)] {
        w.add(format!("llama.{k}"), Value::U32(v as u32))?;
    }
    w.add("llama.attention.layer_norm_rms_epsilon", Value::F32(s.eps as f32))?;
    w.add("llama.rope.freq_base", Value::F32(s.theta as f32))?;
    for (i, (_, gname, shape)) in list.iter().enumerate() {
        let x = values(shape, 1000 + i as u64);
        let ne: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
        if shape.len() == 1 {
            w.add_tensor(gname.clone(), &Tensor::from_vec(x, shape)?, GgmlType::F32)?;
        } else {
            // rows quantized in parallel (each row is whole super-blocks)
            let row = shape[1];
            let blocks: Vec<Vec<u8>> = x.par_chunks(row * 64).map(quantize_q4_k).collect();
            w.add_raw(gname.clone(), GgmlType::Q4_K, &ne, blocks.concat())?;
        }
    }
    let path = dir.join("model-Q4_K.gguf");
    w.write(&path)?;
    eprintln!("wrote {} in {:.1} s", path.display(), t.elapsed().as_secs_f64());
    Ok(())
}

/// Peak resident set size of this process in MB (Linux; 0 elsewhere).
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

fn time(kind: &str, path: &Path) -> Result<()> {
    let _g = no_grad();
    let t0 = Instant::now();
    // what was loaded is dropped after the clock stops, as the Python side's `del` is
    let (open, forward, _loaded): (f64, Option<f64>, Box<dyn std::any::Any>) = match kind {
        "st" | "gguf" => {
            let m = AutoModel::load(path, &LoadOptions { dtype: DType::F32, device: Device::Cpu })?;
            let open = t0.elapsed().as_secs_f64();
            let ids = Tensor::from_vec(vec![1i64], &[1, 1])?;
            let logits = m.forward(&ids, None, None, false)?.logits.ok_or_else(|| err("the model gave no logits"))?;
            if logits.to_dtype(DType::F32)?.to_vec::<f32>()?.iter().any(|v| !v.is_finite()) {
                return Err(err("non-finite logits"));
            }
            (open, Some(t0.elapsed().as_secs_f64() - open), Box::new(m))
        }
        "st-tensors" => {
            let l = magpie_io::safetensors::load(path)?;
            std::hint::black_box(&l);
            (t0.elapsed().as_secs_f64(), None, Box::new(l))
        }
        "pt" => {
            let t = magpie_io::pt::load_tensors(path)?;
            std::hint::black_box(&t);
            (t0.elapsed().as_secs_f64(), None, Box::new(t))
        }
        _ => return Err(err(format!("unknown kind '{kind}' (st, gguf, st-tensors, pt)"))),
    };
    let total = t0.elapsed().as_secs_f64();
    println!("{}", json!({"loader": format!("torch-magpie {kind}"), "open_ms": open * 1e3, "forward_ms": forward.map(|f| f * 1e3), "total_ms": total * 1e3, "peak_rss_mb": peak_rss_mb()}));
    Ok(())
}

fn decode(path: &Path, new: usize, dtype: DType, dense: bool, fused: bool, fold: bool, warp_coding: bool) -> Result<()> {
    let _g = no_grad();
    let gpu = Device::Cuda(0);
    let t = Instant::now();
    let m = AutoModel::from_gguf_with(path, &LoadOptions { dtype, device: gpu }, !dense)?;
    let load_s = t.elapsed().as_secs_f64();
    let lm = m.as_causal_lm().ok_or_else(|| err("not a decoder"))?;
    // bytes one decode step reads: every quantized layer's blocks and every dense parameter
    // (the tied embedding is also the LM head, read once per step as the head, not as a lookup)
    let magpie_models::auto::ModelKind::Llama(l) = &m.kind else { return Err(err("not a llama")) };
    let step_bytes = magpie_models::gguf::resident_weight_bytes(l);
    let prompt = vec![vec![1u32, 20, 30, 400]];
    let cfg = GenerationConfig { max_new_tokens: new, eos_token_ids: Vec::new(), ..GenerationConfig::default() };
    let warm = GenerationConfig { max_new_tokens: 4, ..cfg.clone() };
    let mut engine = if fused { Some(FusedDecoder::from_model(&m, EngineConfig { max_len: prompt[0].len() + new.max(4), fuse: fold, quant_warp_coding: warp_coding, ..EngineConfig::default() })?) } else { None };
    let mut run = |c: &GenerationConfig, on_step: &mut dyn FnMut(&[Option<u32>]) -> Result<()>| match engine.as_mut() {
        Some(e) => e.generate(&prompt, c, on_step),
        None => generate(lm, &prompt, c, on_step),
    };
    // warm-up: kernels compiled, the allocator's blocks made (the fused engine: its decode graph captured)
    run(&warm, &mut |_| Ok(()))?;
    magpie_core::backend::cuda::synchronize(None)?;
    let (mut first, mut last) = (None, Instant::now());
    let out = run(&cfg, &mut |_| {
        let now = Instant::now();
        first.get_or_insert(now);
        last = now;
        Ok(())
    })?;
    let steady = first.map_or(0.0, |f| (last - f).as_secs_f64());
    let tok_s = (out[0].len().saturating_sub(1)) as f64 / steady;
    println!("{}", json!({"file": path.display().to_string(), "dtype": dtype.name(), "weights": if dense { "dequantized" } else { "quantized" }, "path": if fused { "fused" } else { "module" }, "folded": fused && fold, "warp_coding": fused && fold && warp_coding, "load_s": load_s, "new_tokens": out[0].len(), "decode_tok_s": tok_s, "ms_per_token": 1e3 / tok_s, "weight_bytes_per_step": step_bytes}));
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("load-bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let pos = |i: usize| args.get(i).cloned().ok_or_else(|| err("usage: load-bench make DIR | time KIND PATH | decode FILE.gguf (see the source's header)"));
    match pos(0)?.as_str() {
        "make" => {
            let config = PathBuf::from(opt("--config").unwrap_or_else(|| "benchmark/models/configs/llama-3.2-1b/config.json".into()));
            make(Path::new(&pos(1)?), &config, opt("--only").as_deref() == Some("gguf"))
        }
        "time" => time(&pos(1)?, Path::new(&pos(2)?)),
        "decode" => {
            let new = opt("--new").map_or(Ok(64), |v| v.parse::<usize>().map_err(|_| err(format!("--new {v} is not a count"))))?;
            let dtype = match opt("--dtype").as_deref().unwrap_or("bfloat16") {
                "float32" => DType::F32,
                "bfloat16" => DType::BF16,
                "float16" => DType::F16,
                d => return Err(err(format!("--dtype {d} is not float32, bfloat16 or float16"))),
            };
            let fused = match opt("--path").as_deref().unwrap_or("module") {
                "module" => false,
                "fused" => true,
                p => return Err(err(format!("--path {p} is not module or fused"))),
            };
            decode(Path::new(&pos(1)?), new, dtype, args.iter().any(|a| a == "--dense"), fused, !args.iter().any(|a| a == "--unfolded"), args.iter().any(|a| a == "--lane-coding"))
        }
        c => Err(err(format!("unknown command '{c}' (make, time, decode)"))),
    }
}

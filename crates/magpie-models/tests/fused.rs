//! The fused CUDA engine against the module path (its reference) and transformers' fixtures:
//! greedy tokens equal in float32 (and equal to transformers' greedy generations), prefill and
//! decode logits within float32 / bfloat16 tolerances of the module path, CUDA-graph replay equal
//! to eager launches, chunked prefill equal to one chunk, batches of different prompt lengths equal
//! to single rows, sampling seeded and inside top-k, and bad inputs as errors. Model shapes: the tiny
//! fixtures (head dim 16) and random models with head dim 64 (the tensor-core attention path).
//! Skips without CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

use magpie_core::autograd::no_grad;
use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Tensor};
use magpie_io::safetensors;
use magpie_models::auto::AutoModel;
use magpie_models::fused::{EngineConfig, FusedDecoder};
use magpie_models::generate::{generate, GenerationConfig};
use magpie_models::hub::LoadOptions;
use magpie_models::positions::StepInputs;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf").join(name)
}

/// The tests share the device's one stream; a test capturing a CUDA graph must not see another
/// test's work queued on it, so they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn gpu() -> Option<std::sync::MutexGuard<'static, ()>> {
    if cuda::is_available() {
        return Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()));
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available: {}", cuda::unavailable("test"));
    }
    eprintln!("skipped: no CUDA");
    None
}

const DEV: Device = Device::Cuda(0);

fn load(dir: &Path, dtype: DType) -> AutoModel {
    AutoModel::from_pretrained(dir, &LoadOptions { dtype, device: DEV }).unwrap()
}

fn greedy(n: usize) -> GenerationConfig {
    GenerationConfig { max_new_tokens: n, eos_token_ids: Vec::new(), ..GenerationConfig::default() }
}

fn engine(m: &AutoModel, max_batch: usize, max_len: usize) -> FusedDecoder {
    FusedDecoder::from_model(m, EngineConfig { max_batch, max_len, ..EngineConfig::default() }).unwrap()
}

/// The module path's last-position logits after `prompt` (f32 on the host).
fn module_last_logits(m: &AutoModel, prompt: &[u32]) -> Vec<f32> {
    let _g = no_grad();
    let lm = m.as_causal_lm().unwrap();
    let ids = Tensor::from_vec(prompt.iter().map(|&v| v as i64).collect::<Vec<_>>(), &[1, prompt.len()]).unwrap().to_device(DEV).unwrap();
    let mut cache = lm.new_cache(1, prompt.len()).unwrap();
    let step = StepInputs::new(&ids, None, None, 0).unwrap();
    let lg = lm.forward_cached(&step, &mut cache).unwrap();
    lg.select(1, -1).unwrap().to_dtype(DType::F32).unwrap().to_device(Device::Cpu).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap()
}

/// max |a - b| / max(1, max |b|).
fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1f32, |m, v| m.max(v.abs()));
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max) / scale
}

fn reference_greedy(name: &str) -> (Vec<u32>, Vec<u32>) {
    let r = safetensors::load(fixture(name).join("reference.safetensors")).unwrap();
    let ids: Vec<u32> = r.get("input_ids").unwrap().to_vec::<i64>().unwrap().into_iter().map(|x| x as u32).collect();
    let all: Vec<u32> = r.get("greedy").unwrap().to_vec::<i64>().unwrap().into_iter().map(|x| x as u32).collect();
    (ids.clone(), all[ids.len()..].to_vec())
}

/// A random-weight model folder with head dim 64 (the shapes of the real models' attention).
fn random_model(dir: &Path, arch: &str) -> PathBuf {
    let cfg = match arch {
        "llama" => serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
            "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "vocab_size": 1000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
            "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
            "tie_word_embeddings": true, "hidden_act": "silu"}),
        _ => serde_json::json!({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 256, "n_layer": 2, "n_head": 4,
            "vocab_size": 1000, "n_positions": 1024, "activation_function": "gelu_new"}),
    };
    let d = dir.join(arch);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.json"), cfg.to_string()).unwrap();
    d
}

fn random(dir: &Path, arch: &str, dtype: DType) -> AutoModel {
    AutoModel::from_config_random(random_model(dir, arch), &LoadOptions { dtype, device: DEV }, 7).unwrap()
}

#[test]
fn float32_greedy_equals_module_path_and_transformers() {
    let Some(_serial) = gpu() else { return };
    for name in ["tiny-gpt2", "tiny-llama", "tiny-qwen2"] {
        let m = load(&fixture(name), DType::F32);
        let (ids, want) = reference_greedy(name);
        let mut e = engine(&m, 1, ids.len() + want.len());
        let mut streamed = Vec::new();
        let got = e.generate(&[ids.clone()], &greedy(want.len()), |s| {
            streamed.push(s[0].unwrap());
            Ok(())
        });
        let got = got.unwrap();
        assert_eq!(got[0], want, "{name}: fused greedy tokens differ from transformers'");
        assert_eq!(streamed, want, "{name}: the callback sees every token");
        let module = generate(m.as_causal_lm().unwrap(), &[ids.clone()], &greedy(want.len()), |_| Ok(())).unwrap();
        assert_eq!(got, module, "{name}: fused and module path differ");
    }
}

#[test]
fn prefill_and_decode_logits_match_module_path() {
    let Some(_serial) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let prompt: Vec<u32> = (0..37).map(|i| (i * 37 + 11) % 500).collect();
    let mut cases: Vec<(String, AutoModel, f32)> = Vec::new();
    for name in ["tiny-gpt2", "tiny-llama", "tiny-qwen2"] {
        cases.push((format!("{name} f32"), load(&fixture(name), DType::F32), 1e-4));
        cases.push((format!("{name} bf16"), load(&fixture(name), DType::BF16), 3e-2));
    }
    for arch in ["llama", "gpt2"] {
        cases.push((format!("random {arch} f32"), random(tmp.path(), arch, DType::F32), 1e-4));
        cases.push((format!("random {arch} bf16"), random(tmp.path(), arch, DType::BF16), 3e-2));
        cases.push((format!("random {arch} f16"), random(tmp.path(), arch, DType::F16), 1e-2));
    }
    for (label, m, tol) in &cases {
        let mut e = engine(m, 1, 64);
        e.set_sampling(magpie_models::fused::sample_args(&greedy(1))).unwrap();
        e.prefill(0, &prompt).unwrap();
        let d = rel_diff(&e.logits(1).unwrap(), &module_last_logits(m, &prompt));
        assert!(d <= *tol, "{label}: prefill logits differ from the module path by {d} (tolerance {tol})");
        // three decode steps: the module path fed the fused path's tokens
        let mut seq = prompt.clone();
        for step in 0..3 {
            seq.push(e.tokens(1).unwrap()[0]);
            e.decode_step(1).unwrap();
            let d = rel_diff(&e.logits(1).unwrap(), &module_last_logits(m, &seq));
            assert!(d <= *tol, "{label}: decode step {step} logits differ from the module path by {d} (tolerance {tol})");
        }
    }
}

#[test]
fn graph_replay_equals_eager_launches_and_gemv_equals_cublas() {
    let Some(_serial) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for dtype in [DType::F32, DType::BF16] {
        let m = random(tmp.path(), "llama", dtype);
        let prompts = vec![vec![3u32, 14, 15, 92, 65], vec![35u32, 89, 79]];
        let run = |graphs: bool, gemv: bool| {
            // the reference: plain launches, one by one
            let pdl = graphs;
            let mut e = FusedDecoder::from_model(&m, EngineConfig { max_batch: 2, max_len: 64, cuda_graphs: graphs, gemv, pdl, ..EngineConfig::default() }).unwrap();
            let toks = e.generate(&prompts, &greedy(20), |_| Ok(())).unwrap();
            (toks, e.logits(2).unwrap())
        };
        let (eager, eager_logits) = run(false, true);
        let (graph, graph_logits) = run(true, true);
        assert_eq!(eager, graph, "{dtype}: graph replay (with programmatic dependent launch) and plain launches choose different tokens");
        assert_eq!(eager_logits, graph_logits, "{dtype}: graph replay and eager launches give different logits");
        let (_, cublas_logits) = run(true, false);
        let d = rel_diff(&graph_logits, &cublas_logits);
        assert!(d < if dtype == DType::F32 { 1e-4 } else { 3e-2 }, "{dtype}: GEMV and cuBLAS logits differ by {d}");
    }
}

/// A random model folder of odd widths: hidden 264, 6 heads of dim 44 (GQA 3:1 for Llama), MLP
/// 712 (Llama) / 1056 (GPT-2), vocab 997.
fn odd_model(dir: &Path, arch: &str) -> PathBuf {
    let cfg = match arch {
        "llama" => serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 264,
            "intermediate_size": 712, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 44,
            "vocab_size": 997, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": false, "hidden_act": "silu"}),
        _ => serde_json::json!({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 264, "n_layer": 2, "n_head": 6,
            "vocab_size": 997, "n_positions": 256, "activation_function": "gelu_new"}),
    };
    let d = dir.join(format!("odd-{arch}"));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.json"), cfg.to_string()).unwrap();
    d
}

/// f32 logits after prefilling `prompts` (one row each, different lengths) and `steps` decode steps.
fn decode_logits(m: &AutoModel, prompts: &[Vec<u32>], steps: usize, cfg: EngineConfig) -> (Vec<f32>, Vec<u32>, bool) {
    let mut e = FusedDecoder::from_model(m, cfg).unwrap();
    e.set_sampling(magpie_models::fused::sample_args(&greedy(1))).unwrap();
    for (r, p) in prompts.iter().enumerate() {
        e.prefill(r, p).unwrap();
    }
    let n = prompts.len();
    for _ in 0..steps {
        e.decode_step(n).unwrap();
    }
    (e.logits(n).unwrap(), e.tokens(n).unwrap(), e.decode_fused(n))
}

/// The decode step with the norms, residual adds, activation, bias, rotary embedding and KV-cache
/// write folded into the GEMVs against the separate kernels: GPT-2 (LayerNorm, biases, GELU),
/// Llama (RMSNorm, SwiGLU, rope), Qwen2 (q/k/v bias), odd widths and head dims (rows of 33, 66, 89
/// and 178 chunks: full batches of loads and every size of the halving rest), batches 1-4 with
/// rows at different positions, every split of K over warps and the rules that choose it,
/// float32 and bfloat16.
#[test]
fn fused_decode_step_equals_the_separate_kernels() {
    let Some(_serial) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let prompts: Vec<Vec<u32>> = vec![(0..11).map(|i| (i * 29 + 3) % 500).collect(), vec![5, 9], (0..17).map(|i| (i * 13 + 7) % 500).collect(), vec![3]];
    for dtype in [DType::F32, DType::BF16] {
        let opts = LoadOptions { dtype, device: DEV };
        let models = [
            ("random llama", random(tmp.path(), "llama", dtype)),
            ("random gpt2", random(tmp.path(), "gpt2", dtype)),
            ("tiny-qwen2", load(&fixture("tiny-qwen2"), dtype)),
            ("odd llama", AutoModel::from_config_random(odd_model(tmp.path(), "llama"), &opts, 5).unwrap()),
            ("odd gpt2", AutoModel::from_config_random(odd_model(tmp.path(), "gpt2"), &opts, 6).unwrap()),
        ];
        // float32: three steps (the steps read the cache the fused steps wrote), tokens equal;
        // bfloat16: one step (a rounding flip may pick another token later)
        let (steps, tol) = if dtype == DType::F32 { (3, 1e-4) } else { (1, 3e-2) };
        for (label, m) in &models {
            for batch in 1..=4 {
                let cfg = EngineConfig { max_batch: 4, max_len: 64, ..EngineConfig::default() };
                let (want, want_tok, fused) = decode_logits(m, &prompts[..batch], steps, EngineConfig { fuse: false, ..cfg });
                assert!(!fused, "{label} {dtype}: fuse = false still fuses");
                // every split of K with the one-kernel attention (the default), the split chosen
                // by the older rule, then the core's split-KV attention
                let variants = [(0, true, 2), (1, true, 2), (2, true, 2), (4, true, 2), (0, true, 1), (0, true, 0), (0, false, 2)];
                for (split, attention_kernel, gain) in variants {
                    let c = EngineConfig { gemv_split: split, attention_kernel, gemv_split_min_gain: gain, ..cfg };
                    let (got, got_tok, fused) = decode_logits(m, &prompts[..batch], steps, c);
                    assert!(fused, "{label} {dtype} batch {batch}: the decode step is not fused");
                    let d = rel_diff(&got, &want);
                    let what = format!("{label} {dtype} batch {batch} split {split} (least gain {gain}) attention kernel {attention_kernel}");
                    assert!(d <= tol, "{what}: fused logits differ from the separate kernels' by {d} (tolerance {tol})");
                    if dtype == DType::F32 {
                        assert_eq!(got_tok, want_tok, "{what}: fused decoding picks other tokens");
                    }
                }
            }
        }
    }
}

/// The one-kernel decode attention over long caches (each of its four key splits walks several
/// rounds of keys; rows of the batch at different lengths; head dim 64 in f32 and bf16, 16 in the
/// tiny fixture) against the core's split-KV kernels in the same folded step, and the step against
/// the separate kernels.
#[test]
fn one_kernel_decode_attention_equals_split_kv_on_long_caches() {
    let Some(_serial) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let prompts: Vec<Vec<u32>> = vec![(0..700).map(|i| (i * 29 + 3) % 1000).collect(), (0..333).map(|i| (i * 13 + 7) % 1000).collect(), vec![4, 8, 15]];
    for dtype in [DType::F32, DType::BF16] {
        let models = [("random llama", random(tmp.path(), "llama", dtype)), ("random gpt2", random(tmp.path(), "gpt2", dtype)), ("tiny-llama", load(&fixture("tiny-llama"), dtype))];
        let tol = if dtype == DType::F32 { 1e-4 } else { 3e-2 };
        for (label, m) in &models {
            let max_pos = if *label == "tiny-llama" { 512 } else { 1024 };
            for batch in [1, 3] {
                let rows: Vec<Vec<u32>> = prompts[..batch].iter().map(|p| p.iter().take(max_pos - 8).map(|&t| t % 90).collect()).collect();
                let cfg = EngineConfig { max_batch: 3, max_len: max_pos, ..EngineConfig::default() };
                let (one, one_tok, fused) = decode_logits(m, &rows, 2, cfg);
                assert!(fused, "{label} {dtype}: the decode step is not fused");
                let (split, split_tok, _) = decode_logits(m, &rows, 2, EngineConfig { attention_kernel: false, ..cfg });
                let (sep, _, _) = decode_logits(m, &rows, 2, EngineConfig { fuse: false, ..cfg });
                let d = rel_diff(&one, &split);
                let what = format!("{label} {dtype} batch {batch}");
                assert!(d <= if dtype == DType::F32 { 1e-5 } else { tol }, "{what}: one-kernel attention differs from split-KV by {d}");
                assert!(rel_diff(&one, &sep) <= tol, "{what}: the folded step differs from the separate kernels");
                if dtype == DType::F32 {
                    assert_eq!(one_tok, split_tok, "{what}: one-kernel attention picks other tokens");
                }
            }
        }
    }
}

/// The fused GEMV's split of K (warps per unit) by rounds of batched loads: the shapes of
/// Llama-3.2-1B bf16 and GPT-2 f32 on 132 SMs, short rows, tiny shapes, the least gain that
/// makes a split worth it. No GPU needed.
#[test]
fn gemv_split_by_rounds_picks_the_fewest_round_trips() {
    use magpie_models::fused::split_by_rounds;
    // Llama-3.2-1B bf16 (2048-wide rows: 256 chunks of 16 bytes; down 8192-wide: 1024)
    assert_eq!(split_by_rounds(1536, 256, 2, 132, 2), 2, "q|k|v: 2 rounds of 4 row pairs a lane become 1");
    assert_eq!(split_by_rounds(2048, 256, 1, 132, 2), 1, "o: one round of 8 a lane, one wave");
    assert_eq!(split_by_rounds(8192, 256, 2, 132, 2), 1, "gate|up: no split (two waves either way)");
    assert_eq!(split_by_rounds(2048, 1024, 1, 132, 2), 4, "down: 4 rounds become 1 in 1.94 waves");
    assert_eq!(split_by_rounds(128256, 256, 1, 132, 2), 1, "LM head");
    // GPT-2 f32 (768-wide rows: 192 chunks; down 3072-wide: 768)
    assert_eq!(split_by_rounds(1152, 192, 2, 132, 2), 1, "q|k|v: 2 rounds against 1.09");
    assert_eq!(split_by_rounds(1152, 192, 2, 132, 1), 4, "q|k|v, any gain: 2 chunks a lane in one round");
    assert_eq!(split_by_rounds(768, 192, 1, 132, 2), 4, "o: 2 rounds become 1");
    assert_eq!(split_by_rounds(768, 192, 1, 132, 3), 1, "o, a gain of 3 asked");
    assert_eq!(split_by_rounds(3072, 192, 1, 132, 1), 1, "up: more warps would need a second wave");
    assert_eq!(split_by_rounds(768, 768, 1, 132, 2), 1, "down: 3 rounds against 2");
    assert_eq!(split_by_rounds(768, 768, 1, 132, 1), 2, "down, any gain: rounds of 8 + 4, fewer warps than 4");
    // rows too short to split (a lane needs a chunk), one-chunk rows, gains 0 and 1 alike
    assert_eq!(split_by_rounds(4, 33, 1, 132, 1), 1);
    assert_eq!(split_by_rounds(1, 1, 2, 1, 0), 1);
    assert_eq!(split_by_rounds(10, 100, 1, 132, 1), 1, "4 chunks a lane are one round already");
    assert_eq!(split_by_rounds(10, 1000, 1, 132, 2), 4, "32 chunks a lane: 4 rounds become 1");
    assert_eq!(split_by_rounds(10, 1000, 1, 132, 0), 4);
}

/// Index of the largest value (the first on ties; NaN never wins), as the selection kernel.
fn argmax(v: &[f32]) -> u32 {
    let mut best: Option<(usize, f32)> = None;
    for (i, &x) in v.iter().enumerate() {
        if !x.is_nan() && best.is_none_or(|(_, b)| x > b) {
            best = Some((i, x));
        }
    }
    best.map_or(0, |(i, _)| i as u32)
}

/// The L2 prefetch plan (a tiny window cut into many ranges, the default one, none) and the LM
/// head's fused argmax change no value: every decode step's logits are bit-equal with and without
/// them, and each greedy token is the argmax of its row's logits (so the argmax slots are cleared
/// between steps, also by sampled steps). Odd widths (K of 33 and 89 chunks: the GEMV's batched
/// loads and its remainder), odd vocab, batches 1-4, float32 and bfloat16.
#[test]
fn l2_prefetch_and_fused_argmax_change_no_value() {
    let Some(_serial) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let prompts: Vec<Vec<u32>> = vec![(0..11).map(|i| (i * 29 + 3) % 900).collect(), vec![5, 9], (0..17).map(|i| (i * 13 + 7) % 900).collect(), vec![3]];
    for dtype in [DType::F32, DType::BF16] {
        let opts = LoadOptions { dtype, device: DEV };
        let models = [
            ("random llama", random(tmp.path(), "llama", dtype)),
            ("odd llama", AutoModel::from_config_random(odd_model(tmp.path(), "llama"), &opts, 5).unwrap()),
            ("odd gpt2", AutoModel::from_config_random(odd_model(tmp.path(), "gpt2"), &opts, 6).unwrap()),
        ];
        for (label, m) in &models {
            for batch in 1..=4 {
                let base = EngineConfig { max_batch: 4, max_len: 64, ..EngineConfig::default() };
                // per step: every row's logits and tokens
                let steps = |cfg: EngineConfig| {
                    let mut e = FusedDecoder::from_model(m, cfg).unwrap();
                    e.set_sampling(magpie_models::fused::sample_args(&greedy(1))).unwrap();
                    for (r, p) in prompts[..batch].iter().enumerate() {
                        e.prefill(r, p).unwrap();
                    }
                    let mut out = Vec::new();
                    for _ in 0..3 {
                        e.decode_step(batch).unwrap();
                        out.push((e.logits(batch).unwrap(), e.tokens(batch).unwrap()));
                    }
                    // sampled steps fill the argmax slots too; the selection must clear them
                    let hot = GenerationConfig { do_sample: true, temperature: 1.0, top_k: Some(5), seed: 3, ..greedy(1) };
                    e.set_sampling(magpie_models::fused::sample_args(&hot)).unwrap();
                    e.decode_step(batch).unwrap();
                    e.decode_step(batch).unwrap();
                    e.set_sampling(magpie_models::fused::sample_args(&greedy(1))).unwrap();
                    e.decode_step(batch).unwrap();
                    out.push((e.logits(batch).unwrap(), e.tokens(batch).unwrap()));
                    assert!(e.decode_fused(batch), "{label} {dtype} batch {batch}: the decode step is not fused");
                    out
                };
                let plain = steps(EngineConfig { l2_prefetch: 0, fused_argmax: false, ..base });
                for (what, cfg) in [("default", base), ("4 KiB window", EngineConfig { l2_prefetch: 4096, ..base }), ("24 MiB window", EngineConfig { l2_prefetch: 24 << 20, ..base })] {
                    let got = steps(cfg);
                    for (i, ((gl, gt), (pl, pt))) in got.iter().zip(&plain).enumerate() {
                        let at = format!("{label} {dtype} batch {batch} {what} step {i}");
                        assert!(gl.iter().zip(pl).all(|(a, b)| a.to_bits() == b.to_bits()), "{at}: logits differ from the plain step's");
                        assert_eq!(gt, pt, "{at}: tokens differ from the plain step's");
                        let vocab = gl.len() / batch;
                        let want: Vec<u32> = gl.chunks(vocab).map(argmax).collect();
                        assert_eq!(*gt, want, "{at}: the greedy tokens are not the logits' argmax");
                    }
                }
            }
        }
    }
}

/// The persistent chain (a block's o, gate|up, down and the next block's q|k|v in one kernel with
/// grid barriers between them) against one kernel per product: every step's logits bit-equal and
/// the same tokens, for GPT-2 (LayerNorm, GELU, biases), Llama (RMSNorm, SwiGLU, rope), Qwen2 (q/k/v
/// bias), odd widths, batches 1-4 at different positions, f32 and bf16, with the grid the device
/// keeps resident and with grids of 1 and 3 blocks (every block loops over many unit groups and
/// meets the others at each barrier; a barrier that let a block through early would read stale rows).
#[test]
fn persistent_chain_equals_one_kernel_per_product() {
    let Some(_serial) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let prompts: Vec<Vec<u32>> = vec![(0..11).map(|i| (i * 29 + 3) % 500).collect(), vec![5, 9], (0..17).map(|i| (i * 13 + 7) % 500).collect(), vec![3]];
    for dtype in [DType::F32, DType::BF16] {
        let opts = LoadOptions { dtype, device: DEV };
        let models = [
            ("random llama", random(tmp.path(), "llama", dtype)),
            ("random gpt2", random(tmp.path(), "gpt2", dtype)),
            ("tiny-qwen2", load(&fixture("tiny-qwen2"), dtype)),
            ("odd llama", AutoModel::from_config_random(odd_model(tmp.path(), "llama"), &opts, 5).unwrap()),
            ("odd gpt2", AutoModel::from_config_random(odd_model(tmp.path(), "gpt2"), &opts, 6).unwrap()),
        ];
        for (label, m) in &models {
            for batch in 1..=4 {
                let base = EngineConfig { max_batch: 4, max_len: 64, ..EngineConfig::default() };
                let steps = |cfg: EngineConfig| {
                    let mut e = FusedDecoder::from_model(m, cfg).unwrap();
                    e.set_sampling(magpie_models::fused::sample_args(&greedy(1))).unwrap();
                    for (r, p) in prompts[..batch].iter().enumerate() {
                        e.prefill(r, p).unwrap();
                    }
                    let mut out = Vec::new();
                    for _ in 0..3 {
                        e.decode_step(batch).unwrap();
                        out.push((e.logits(batch).unwrap(), e.tokens(batch).unwrap()));
                    }
                    assert!(e.decode_fused(batch), "{label} {dtype} batch {batch}: the decode step is not fused");
                    out
                };
                let want = steps(base);
                for grid in [0, 1, 3] {
                    let got = steps(EngineConfig { decode_chain: true, chain_grid: grid, ..base });
                    for (i, ((gl, gt), (wl, wt))) in got.iter().zip(&want).enumerate() {
                        let at = format!("{label} {dtype} batch {batch} chain grid {grid} step {i}");
                        let diff = gl.iter().zip(wl).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
                        assert_eq!(diff, 0, "{at}: {diff} logits differ from one kernel per product (max rel diff {})", rel_diff(gl, wl));
                        assert_eq!(gt, wt, "{at}: tokens differ from one kernel per product");
                    }
                }
            }
        }
    }
}

#[test]
fn batches_of_different_lengths_and_chunked_prefill_equal_single_rows() {
    let Some(_serial) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for (label, m) in [("tiny-llama", load(&fixture("tiny-llama"), DType::F32)), ("random gpt2", random(tmp.path(), "gpt2", DType::F32)), ("random llama", random(tmp.path(), "llama", DType::F32))] {
        let prompts: Vec<Vec<u32>> = vec![(0..23).map(|i| (i * 7 + 1) % 400).collect(), vec![11, 4], (0..9).map(|i| i * 3 + 2).collect(), vec![250]];
        let mut e = engine(&m, 5, 64);
        let batched = e.generate(&prompts, &greedy(12), |_| Ok(())).unwrap();
        for (p, got) in prompts.iter().zip(&batched) {
            let alone = e.generate(&[p.clone()], &greedy(12), |_| Ok(())).unwrap();
            assert_eq!(got, &alone[0], "{label}: prompt {p:?} generates differently inside a batch");
            let module = generate(m.as_causal_lm().unwrap(), &[p.clone()], &greedy(12), |_| Ok(())).unwrap();
            assert_eq!(got, &module[0], "{label}: prompt {p:?}: fused and module path differ");
        }
        // prompts of one length prefill together (in one pass, and in passes of one token each)
        let same: Vec<Vec<u32>> = (0..3u32).map(|r| (0..9u32).map(|i| (i * 13 + r * 101 + 5) % 400).collect()).collect();
        let together = e.generate(&same, &greedy(10), |_| Ok(())).unwrap();
        let mut tiny_chunks = FusedDecoder::from_model(&m, EngineConfig { max_batch: 3, max_len: 64, prefill_chunk: 4, ..EngineConfig::default() }).unwrap();
        let passes = tiny_chunks.generate(&same, &greedy(10), |_| Ok(())).unwrap();
        for (r, p) in same.iter().enumerate() {
            let alone = e.generate(&[p.clone()], &greedy(10), |_| Ok(())).unwrap();
            assert_eq!(together[r], alone[0], "{label}: row {r} of a batched prefill differs from the row alone");
            assert_eq!(passes[r], alone[0], "{label}: row {r} of a batched prefill in one-token passes differs");
        }
        // prefill in chunks of 5 tokens = one chunk
        let mut c = FusedDecoder::from_model(&m, EngineConfig { max_batch: 1, max_len: 64, prefill_chunk: 5, ..EngineConfig::default() }).unwrap();
        let chunked = c.generate(&prompts[..1], &greedy(12), |_| Ok(())).unwrap();
        assert_eq!(chunked[0], batched[0], "{label}: chunked prefill changes the generation");
        let mut one = engine(&m, 1, 64);
        one.set_sampling(magpie_models::fused::sample_args(&greedy(1))).unwrap();
        one.prefill(0, &prompts[0]).unwrap();
        c.prefill(0, &prompts[0]).unwrap();
        let d = rel_diff(&c.logits(1).unwrap(), &one.logits(1).unwrap());
        assert!(d < 1e-5, "{label}: chunked prefill logits differ by {d}");
    }
}

#[test]
fn sampling_on_the_gpu_is_seeded_inside_top_k_and_stops_at_eos() {
    let Some(_serial) = gpu() else { return };
    let m = load(&fixture("tiny-llama"), DType::F32);
    let p = vec![vec![1u32, 20, 30, 40]];
    let mut e = engine(&m, 2, 64);
    let cfg = |seed| GenerationConfig { max_new_tokens: 16, do_sample: true, temperature: 1.5, top_k: Some(50), top_p: Some(0.95), seed, eos_token_ids: Vec::new(), ..GenerationConfig::default() };
    let a = e.generate(&p, &cfg(1), |_| Ok(())).unwrap();
    let b = e.generate(&p, &cfg(1), |_| Ok(())).unwrap();
    let c = e.generate(&p, &cfg(2), |_| Ok(())).unwrap();
    assert_eq!(a, b, "same seed, same tokens");
    assert_ne!(a, c, "different seeds, different tokens");
    let g = e.generate(&p, &greedy(16), |_| Ok(())).unwrap();
    let k1 = e.generate(&p, &GenerationConfig { top_k: Some(1), ..cfg(5) }, |_| Ok(())).unwrap();
    assert_eq!(g, k1, "top_k = 1 is greedy");
    let p1 = e.generate(&p, &GenerationConfig { top_k: None, top_p: Some(1e-6), ..cfg(6) }, |_| Ok(())).unwrap();
    assert_eq!(g, p1, "a tiny top_p keeps only the most likely token");
    // every first token drawn with top_k = 3 is among the 3 largest logits; over many seeds more than one shows up
    let logits = module_last_logits(&m, &p[0]);
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&x, &y| logits[y].total_cmp(&logits[x]));
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..40 {
        let t = e.generate(&p, &GenerationConfig { max_new_tokens: 1, top_k: Some(3), top_p: None, temperature: 50.0, ..cfg(seed) }, |_| Ok(())).unwrap()[0][0] as usize;
        assert!(order[..3].contains(&t), "seed {seed}: token {t} is not in the top 3 {:?}", &order[..3]);
        seen.insert(t);
    }
    assert!(seen.len() > 1, "a hot top-3 draw always gave {seen:?}");
    // eos stops a row; the other row goes on
    let eos = g[0][2];
    let first = g[0].iter().position(|&t| t == eos).unwrap();
    let stopped = e.generate(&[p[0].clone(), vec![7, 7, 7]], &GenerationConfig { eos_token_ids: vec![eos], ..greedy(16) }, |_| Ok(())).unwrap();
    assert_eq!(stopped[0], g[0][..=first]);
    // repetition penalty: as the module path
    let pen = GenerationConfig { repetition_penalty: 1.7, ..greedy(16) };
    let fused = e.generate(&p, &pen, |_| Ok(())).unwrap();
    let module = generate(m.as_causal_lm().unwrap(), &p, &pen, |_| Ok(())).unwrap();
    assert_eq!(fused, module, "repetition penalty: fused and module path differ");
}

#[test]
fn bad_inputs_are_errors() {
    let Some(_serial) = gpu() else { return };
    let m = load(&fixture("tiny-llama"), DType::F32);
    let mut e = engine(&m, 2, 16);
    let msg = |r: magpie_core::Result<Vec<Vec<u32>>>| r.err().map(|e| e.to_string()).unwrap_or_default();
    let long: Vec<u32> = (0..20).collect();
    assert!(msg(e.generate(&[long], &greedy(2), |_| Ok(()))).contains("cache"), "prompt longer than the cache");
    assert!(msg(e.generate(&[vec![1; 10]], &greedy(10), |_| Ok(()))).contains("cache"), "prompt + new tokens past the cache");
    assert!(msg(e.generate(&[vec![1], vec![2], vec![3]], &greedy(2), |_| Ok(()))).contains("at most 2"), "batch larger than allocated");
    assert!(msg(e.generate(&[vec![100_000]], &greedy(2), |_| Ok(()))).contains("vocabulary"), "token outside the vocabulary");
    assert!(msg(e.generate(&[vec![]], &greedy(2), |_| Ok(()))).contains("at least one token"));
    assert!(e.decode_step(3).is_err());
    // the engine still works after the errors
    let (ids, want) = reference_greedy("tiny-llama");
    let mut ok = engine(&m, 1, ids.len() + want.len());
    assert_eq!(ok.generate(&[ids], &greedy(want.len()), |_| Ok(())).unwrap()[0], want);
    // what the fused path does not cover
    let bert = load(&fixture("tiny-bert"), DType::F32);
    assert!(magpie_models::fused::unsupported_reason(&bert).is_some());
    assert!(FusedDecoder::from_model(&bert, EngineConfig::default()).is_err());
    let cpu = AutoModel::from_pretrained(fixture("tiny-llama"), &LoadOptions { dtype: DType::F32, device: Device::Cpu }).unwrap();
    assert!(magpie_models::fused::unsupported_reason(&cpu).is_some());
    assert!(FusedDecoder::from_model(&cpu, EngineConfig::default()).is_err());
    // GPT-2 learned positions bound the cache
    let g = load(&fixture("tiny-gpt2"), DType::F32);
    assert!(FusedDecoder::from_model(&g, EngineConfig { max_len: 1_000_000, ..EngineConfig::default() }).is_err());
}

fn bert_model(dir: &Path, dtype: DType) -> AutoModel {
    let cfg = serde_json::json!({"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 128, "type_vocab_size": 2,
        "hidden_act": "gelu", "layer_norm_eps": 1e-12});
    let d = dir.join("bert");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.json"), cfg.to_string()).unwrap();
    AutoModel::from_config_random(d, &LoadOptions { dtype, device: DEV }, 3).unwrap()
}

fn host(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).unwrap().to_device(Device::Cpu).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap()
}

/// The fused BERT encoder against the module path: last hidden state and pooler, with and without
/// a right-padded mask and token types, float32 and bfloat16, graph replay equal to eager launches.
#[test]
fn fused_bert_matches_module_path() {
    let Some(_serial) = gpu() else { return };
    use magpie_models::fused::FusedEncoder;
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = vec![("tiny-bert f32", load(&fixture("tiny-bert"), DType::F32), 1e-4f32)];
    cases.push(("random bert f32", bert_model(tmp.path(), DType::F32), 1e-4));
    cases.push(("random bert bf16", bert_model(tmp.path(), DType::BF16), 4e-2));
    for (label, m, tol) in &cases {
        let (b, t) = (3usize, 37usize);
        let ids = Tensor::from_vec((0..b * t).map(|i| ((i * 31 + 7) % 90) as i64).collect::<Vec<_>>(), &[b, t]).unwrap().to_device(DEV).unwrap();
        let lens = [37usize, 20, 1];
        let mask: Vec<i64> = (0..b * t).map(|i| ((i % t) < lens[i / t]) as i64).collect();
        let mask = Tensor::from_vec(mask.clone(), &[b, t]).unwrap().to_device(DEV).unwrap();
        let types = Tensor::from_vec((0..b * t).map(|i| ((i % t) >= 10) as i64).collect::<Vec<_>>(), &[b, t]).unwrap().to_device(DEV).unwrap();
        let mut e = FusedEncoder::from_model(m, 4, 64).unwrap();
        for (with_mask, with_types) in [(false, false), (true, true)] {
            let (mk, tt) = (with_mask.then_some(&mask), with_types.then_some(&types));
            let want = {
                let _g = no_grad();
                m.forward(&ids, mk, tt, false).unwrap()
            };
            let got = e.forward(&ids, mk, tt).unwrap();
            let (g, w) = (host(&got.last_hidden_state), host(&want.last_hidden_state));
            // compare the valid positions only (padded queries differ by design when masked)
            let h = g.len() / (b * t);
            let keep = |i: &usize| !with_mask || (i / h) % t < lens[i / h / t];
            let gv: Vec<f32> = (0..g.len()).filter(keep).map(|i| g[i]).collect();
            let wv: Vec<f32> = (0..w.len()).filter(keep).map(|i| w[i]).collect();
            let d = rel_diff(&gv, &wv);
            assert!(d <= *tol, "{label} (mask {with_mask}): last_hidden_state differs from the module path by {d}");
            if let (Some(gp), Some(wp)) = (&got.pooler_output, &want.pooler_output) {
                let d = rel_diff(&host(gp), &host(wp));
                assert!(d <= *tol, "{label}: pooler_output differs by {d}");
            }
        }
        e.cuda_graphs = false;
        let eager = host(&e.forward(&ids, Some(&mask), None).unwrap().last_hidden_state);
        e.cuda_graphs = true;
        let graphed = host(&e.forward(&ids, Some(&mask), None).unwrap().last_hidden_state);
        assert_eq!(eager, graphed, "{label}: graph replay differs from eager launches");
        // bad inputs
        let left = Tensor::from_vec((0..b * t).map(|i| ((i % t) > 3) as i64).collect::<Vec<_>>(), &[b, t]).unwrap();
        assert!(e.forward(&ids, Some(&left), None).is_err(), "a left-padded mask is refused");
        let big = Tensor::zeros(&[5, 8]).unwrap().to_dtype(DType::I64).unwrap();
        assert!(e.forward(&big, None, None).is_err(), "a batch larger than allocated is refused");
    }
}

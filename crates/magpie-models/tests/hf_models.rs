//! The tiny Hugging Face models of `tests/fixtures/hf/` (copied from the shared `models/` fixtures,
//! made by transformers 5.24; see their README) against transformers' own outputs: every layer's
//! hidden states and the logits within 1e-4 in float32, greedy generations token for token,
//! bfloat16/float16 within those dtypes' tolerances of float32, and a load/save/load round trip.
//! Every test body runs on the CPU and, where CUDA is available, on the GPU (MAGPIE_REQUIRE_CUDA=1
//! makes a missing GPU a failure).

use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Tensor};
use magpie_io::safetensors;
use magpie_models::auto::AutoModel;
use magpie_models::generate::{generate, GenerationConfig};
use magpie_models::hub::LoadOptions;
use magpie_nn::ModuleExt;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf").join(name)
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    if cuda::is_available() {
        d.push(Device::Cuda(0));
    } else if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available: {}", cuda::unavailable("test"));
    }
    d
}

struct Reference {
    map: safetensors::Loaded,
}

impl Reference {
    fn load(name: &str) -> Reference {
        Reference { map: safetensors::load(fixture(name).join("reference.safetensors")).unwrap() }
    }
    fn get(&self, k: &str) -> Tensor {
        self.map.get(k).unwrap_or_else(|| panic!("reference has no {k}")).clone()
    }
    fn has(&self, k: &str) -> bool {
        self.map.get(k).is_some()
    }
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_device(Device::Cpu).unwrap().to_dtype(DType::F32).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap()
}

/// Max |a - b| over positions where `mask` ([B, T], per row of `inner` values) is 1.
fn max_diff(a: &Tensor, b: &Tensor, mask: Option<&[i64]>) -> f32 {
    assert_eq!(a.shape(), b.shape());
    let inner = a.shape().last().copied().unwrap();
    let (x, y) = (f32s(a), f32s(b));
    x.iter()
        .zip(&y)
        .enumerate()
        .filter(|(i, _)| mask.map_or(true, |m| m[i / inner] == 1))
        .map(|(_, (p, q))| (p - q).abs())
        .fold(0.0, f32::max)
}

/// Logits and every layer's hidden state against transformers', naming the first layer that drifts.
fn check_forward(name: &str, dev: Device) {
    let r = Reference::load(name);
    let m = AutoModel::from_pretrained(fixture(name), &LoadOptions { dtype: DType::F32, device: dev }).unwrap();
    let ids = r.get("input_ids");
    let mask = r.get("attention_mask");
    let tt = r.has("token_type_ids").then(|| r.get("token_type_ids"));
    let out = m.forward(&ids, Some(&mask), tt.as_ref(), true).unwrap();
    let mvals = mask.to_vec::<i64>().unwrap();
    let tol = 1e-4;
    let n_hidden = out.hidden_states.len();
    assert!(n_hidden >= 2, "{name}: no hidden states");
    for (i, h) in out.hidden_states.iter().enumerate() {
        let d = max_diff(h, &r.get(&format!("hidden_states.{i}")), Some(&mvals));
        assert!(d < tol, "{name} on {dev:?}: hidden_states.{i} (of {n_hidden}) differs from transformers' by {d}");
    }
    for (i, h) in out.layer_outputs.iter().enumerate() {
        let d = max_diff(h, &r.get(&format!("layer_output.{i}")), Some(&mvals));
        assert!(d < tol, "{name} on {dev:?}: layer {i}'s output differs from transformers' by {d}");
    }
    let d = max_diff(&out.last_hidden_state, &r.get("last_hidden_state"), Some(&mvals));
    assert!(d < tol, "{name} on {dev:?}: last_hidden_state differs by {d}");
    let d = max_diff(out.logits.as_ref().unwrap(), &r.get("logits"), Some(&mvals));
    assert!(d < tol, "{name} on {dev:?}: logits differ from transformers' by {d}");
}

/// transformers' 24 greedy tokens, through the KV cache.
fn check_greedy(name: &str, dev: Device) {
    let r = Reference::load(name);
    let m = AutoModel::from_pretrained(fixture(name), &LoadOptions { dtype: DType::F32, device: dev }).unwrap();
    let ids: Vec<u32> = r.get("input_ids").to_vec::<i64>().unwrap().into_iter().map(|x| x as u32).collect();
    let want: Vec<u32> = r.get("greedy").to_vec::<i64>().unwrap().into_iter().map(|x| x as u32).collect();
    let cfg = GenerationConfig { max_new_tokens: want.len() - ids.len(), eos_token_ids: Vec::new(), ..GenerationConfig::default() };
    let mut streamed = Vec::new();
    let got = generate(m.as_causal_lm().unwrap(), &[ids.clone()], &cfg, |s| {
        streamed.push(s[0].unwrap());
        Ok(())
    })
    .unwrap();
    assert_eq!(got[0], want[ids.len()..], "{name} on {dev:?}: greedy tokens differ from transformers'");
    assert_eq!(streamed, got[0], "the callback sees every token as it is made");
}

#[test]
fn bert_matches_transformers() {
    for dev in devices() {
        check_forward("tiny-bert", dev);
    }
}

#[test]
fn gpt2_matches_transformers() {
    for dev in devices() {
        check_forward("tiny-gpt2", dev);
        check_greedy("tiny-gpt2", dev);
    }
}

#[test]
fn llama_matches_transformers() {
    for dev in devices() {
        check_forward("tiny-llama", dev);
        check_greedy("tiny-llama", dev);
    }
}

#[test]
fn qwen2_matches_transformers() {
    for dev in devices() {
        check_forward("tiny-qwen2", dev);
        check_greedy("tiny-qwen2", dev);
    }
}

/// bfloat16 and float16 logits against the float32 model's, relative to the logits' scale.
#[test]
fn half_precision_within_tolerance_of_float32() {
    for dev in devices() {
        for name in ["tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-qwen2"] {
            let r = Reference::load(name);
            let ids = r.get("input_ids");
            let mask = r.get("attention_mask");
            let tt = r.has("token_type_ids").then(|| r.get("token_type_ids"));
            let mvals = mask.to_vec::<i64>().unwrap();
            let run = |dtype| {
                let m = AutoModel::from_pretrained(fixture(name), &LoadOptions { dtype, device: dev }).unwrap();
                m.forward(&ids, Some(&mask), tt.as_ref(), false).unwrap().logits.unwrap()
            };
            let full = run(DType::F32);
            let scale = f32s(&full).iter().fold(0f32, |a, v| a.max(v.abs()));
            // a few roundings of 2^-8 (bf16) / 2^-11 (f16) relative error through 2-3 layers
            for (dtype, rel) in [(DType::BF16, 0.06f32), (DType::F16, 0.01)] {
                let low = run(dtype);
                assert_eq!(low.dtype(), dtype);
                let d = max_diff(&low, &full, Some(&mvals));
                assert!(d < rel * scale, "{name} {dtype} on {dev:?}: logits differ from float32 by {d} (scale {scale})");
                assert!(d > 0.0, "{name} {dtype}: identical to float32, so the dtype was not used");
            }
        }
    }
}

/// Load, save, load: identical weights and config; the saved folder holds transformers' names.
#[test]
fn save_pretrained_round_trip() {
    for name in ["tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-qwen2"] {
        let a = AutoModel::from_pretrained(fixture(name), &LoadOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        a.save_pretrained(dir.path()).unwrap();
        let b = AutoModel::from_pretrained(dir.path(), &LoadOptions::default()).unwrap();
        let (pa, pb) = (a.module().named_parameters(), b.module().named_parameters());
        assert_eq!(pa.len(), pb.len());
        for ((na, ta), (nb, tb)) in pa.iter().zip(&pb) {
            assert_eq!(na, nb);
            assert_eq!(f32s(ta), f32s(tb), "{name}: {na} changed in the round trip");
        }
        // the same tensor names as the checkpoint transformers wrote
        let orig = safetensors::load(fixture(name).join("model.safetensors")).unwrap();
        let saved = safetensors::load(dir.path().join("model.safetensors")).unwrap();
        let mut n1: Vec<&String> = orig.tensors.iter().map(|(n, _)| n).collect();
        let mut n2: Vec<&String> = saved.tensors.iter().map(|(n, _)| n).collect();
        n1.sort();
        n2.sort();
        assert_eq!(n1, n2, "{name}: saved names differ from transformers'");
        assert_eq!(saved.metadata.get("format").map(String::as_str), Some("pt"));
    }
}

/// Rows of different lengths, left-padded in one batch, give each row's greedy tokens alone.
#[test]
fn batched_left_padded_generation_equals_single_rows() {
    for dev in devices() {
        for name in ["tiny-gpt2", "tiny-llama", "tiny-qwen2"] {
            let m = AutoModel::from_pretrained(fixture(name), &LoadOptions { dtype: DType::F32, device: dev }).unwrap();
            let lm = m.as_causal_lm().unwrap();
            let prompts = vec![vec![5u32, 17, 3, 99, 42, 7, 8], vec![11u32, 4], vec![9u32, 1, 2, 3]];
            let cfg = GenerationConfig { max_new_tokens: 10, eos_token_ids: Vec::new(), ..GenerationConfig::default() };
            let batched = generate(lm, &prompts, &cfg, |_| Ok(())).unwrap();
            for (p, got) in prompts.iter().zip(&batched) {
                let alone = generate(lm, &[p.clone()], &cfg, |_| Ok(())).unwrap();
                assert_eq!(got, &alone[0], "{name} on {dev:?}: prompt {p:?} generates differently when left-padded in a batch");
            }
        }
    }
}

/// Seeded sampling repeats for a seed, differs across seeds, stays inside top-k, and stops at eos.
#[test]
fn sampling_is_seeded_and_stops_at_eos() {
    let m = AutoModel::from_pretrained(fixture("tiny-llama"), &LoadOptions::default()).unwrap();
    let lm = m.as_causal_lm().unwrap();
    let p = vec![vec![1u32, 20, 30, 40]];
    let cfg = |seed| GenerationConfig { max_new_tokens: 16, do_sample: true, temperature: 1.5, top_k: Some(50), top_p: Some(0.95), seed, eos_token_ids: Vec::new(), ..GenerationConfig::default() };
    let a = generate(lm, &p, &cfg(1), |_| Ok(())).unwrap();
    let b = generate(lm, &p, &cfg(1), |_| Ok(())).unwrap();
    let c = generate(lm, &p, &cfg(2), |_| Ok(())).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    // top_k = 1 is greedy whatever the temperature
    let greedy = generate(lm, &p, &GenerationConfig { max_new_tokens: 16, eos_token_ids: Vec::new(), ..GenerationConfig::default() }, |_| Ok(())).unwrap();
    let k1 = generate(lm, &p, &GenerationConfig { top_k: Some(1), ..cfg(5) }, |_| Ok(())).unwrap();
    assert_eq!(greedy, k1);
    // stopping: make the 3rd greedy token the eos id
    let eos = greedy[0][2];
    let first = greedy[0].iter().position(|&t| t == eos).unwrap();
    let stopped = generate(lm, &p, &GenerationConfig { max_new_tokens: 16, eos_token_ids: vec![eos], ..GenerationConfig::default() }, |_| Ok(())).unwrap();
    assert_eq!(stopped[0], greedy[0][..=first]);
    // repetition penalty changes greedy output of a model that repeats itself
    let pen = generate(lm, &p, &GenerationConfig { max_new_tokens: 16, repetition_penalty: 5.0, eos_token_ids: Vec::new(), ..GenerationConfig::default() }, |_| Ok(())).unwrap();
    let distinct = |v: &[u32]| v.iter().collect::<std::collections::BTreeSet<_>>().len();
    assert!(distinct(&pen[0]) >= distinct(&greedy[0]), "penalty {:?} vs greedy {:?}", pen[0], greedy[0]);
}

/// Bad checkpoints and inputs are errors that name the problem.
#[test]
fn bad_checkpoints_and_inputs_are_named_errors() {
    let err = |r: Result<AutoModel, magpie_core::Error>| r.err().map(|e| e.to_string()).unwrap_or_default();
    let tmp = tempfile::tempdir().unwrap();
    let copy = |name: &str| {
        let d = tmp.path().join(format!("{name}-{}", rand_suffix()));
        std::fs::create_dir_all(&d).unwrap();
        for f in std::fs::read_dir(fixture(name)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
        }
        d
    };
    let opts = LoadOptions::default();
    // no config.json
    let d = copy("tiny-gpt2");
    std::fs::remove_file(d.join("config.json")).unwrap();
    assert!(err(AutoModel::from_pretrained(&d, &opts)).contains("no config.json"));
    // unknown architecture
    let d = copy("tiny-gpt2");
    let cfg = std::fs::read_to_string(d.join("config.json")).unwrap().replace("GPT2LMHeadModel", "MambaForCausalLM");
    std::fs::write(d.join("config.json"), cfg).unwrap();
    assert!(err(AutoModel::from_pretrained(&d, &opts)).contains("MambaForCausalLM"));
    // unsupported config value
    let d = copy("tiny-llama");
    let cfg = std::fs::read_to_string(d.join("config.json")).unwrap().replace("\"llama3\"", "\"yarn\"");
    std::fs::write(d.join("config.json"), cfg).unwrap();
    assert!(err(AutoModel::from_pretrained(&d, &opts)).contains("yarn"));
    // truncated weights
    let d = copy("tiny-llama");
    let bytes = std::fs::read(d.join("model.safetensors")).unwrap();
    std::fs::write(d.join("model.safetensors"), &bytes[..bytes.len() - 100]).unwrap();
    assert!(err(AutoModel::from_pretrained(&d, &opts)).contains("truncated"));
    // a config that does not fit the weights: the shape error names the weight
    let d = copy("tiny-qwen2");
    let cfg = std::fs::read_to_string(d.join("config.json")).unwrap().replace("\"intermediate_size\": 192", "\"intermediate_size\": 200");
    std::fs::write(d.join("config.json"), cfg).unwrap();
    let e = err(AutoModel::from_pretrained(&d, &opts));
    assert!(e.contains("model.layers.0.mlp.down_proj.weight") || e.contains("mlp.gate_proj.weight"), "{e}");
    // a missing weight, an unexpected one
    let d = copy("tiny-gpt2");
    let mut t = safetensors::load(d.join("model.safetensors")).unwrap().tensors;
    t.retain(|(n, _)| n != "transformer.ln_f.bias");
    t.push(("transformer.extra.weight".into(), Tensor::zeros(&[2]).unwrap()));
    safetensors::save(&t, None, d.join("model.safetensors")).unwrap();
    assert!(err(AutoModel::from_pretrained(&d, &opts)).contains("transformer.ln_f.bias"));
    t.push(("transformer.ln_f.bias".into(), Tensor::zeros(&[96]).unwrap()));
    safetensors::save(&t, None, d.join("model.safetensors")).unwrap();
    assert!(err(AutoModel::from_pretrained(&d, &opts)).contains("transformer.extra.weight"));
    // unsupported dtype
    assert!(err(AutoModel::from_pretrained(fixture("tiny-gpt2"), &LoadOptions { dtype: DType::F64, device: Device::Cpu })).contains("float32, bfloat16 or float16"));
    // a token outside the vocabulary, a sequence longer than the positions
    let m = AutoModel::from_pretrained(fixture("tiny-gpt2"), &opts).unwrap();
    let ids = Tensor::from_vec(vec![1i64, 5000], &[1, 2]).unwrap();
    assert!(m.forward(&ids, None, None, false).unwrap_err().to_string().contains("outside the vocabulary"));
    let long = Tensor::from_vec(vec![1i64; 200], &[1, 200]).unwrap();
    assert!(m.forward(&long, None, None, false).unwrap_err().to_string().contains("positions"));
    let g = generate(m.as_causal_lm().unwrap(), &[vec![1; 120]], &GenerationConfig { max_new_tokens: 20, ..GenerationConfig::default() }, |_| Ok(()));
    assert!(g.unwrap_err().to_string().contains("positions"));
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A sharded checkpoint (index + two shards) loads the same weights.
#[test]
fn sharded_checkpoint_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("tiny-llama");
    std::fs::copy(src.join("config.json"), tmp.path().join("config.json")).unwrap();
    let t = safetensors::load(src.join("model.safetensors")).unwrap().tensors;
    let (a, b) = t.split_at(t.len() / 2);
    safetensors::save(a, None, tmp.path().join("model-00001-of-00002.safetensors")).unwrap();
    safetensors::save(b, None, tmp.path().join("model-00002-of-00002.safetensors")).unwrap();
    let mut map = serde_json::Map::new();
    for (n, _) in a {
        map.insert(n.clone(), "model-00001-of-00002.safetensors".into());
    }
    for (n, _) in b {
        map.insert(n.clone(), "model-00002-of-00002.safetensors".into());
    }
    let idx = serde_json::json!({"metadata": {}, "weight_map": map});
    std::fs::write(tmp.path().join("model.safetensors.index.json"), idx.to_string()).unwrap();
    let m = AutoModel::from_pretrained(tmp.path(), &LoadOptions::default()).unwrap();
    let r = Reference::load("tiny-llama");
    let out = m.forward(&r.get("input_ids"), None, None, false).unwrap();
    assert!(max_diff(out.logits.as_ref().unwrap(), &r.get("logits"), None) < 1e-4);
    // a shard outside the folder is refused
    let bad = serde_json::json!({"weight_map": {"model.norm.weight": "../x.safetensors"}});
    std::fs::write(tmp.path().join("model.safetensors.index.json"), bad.to_string()).unwrap();
    assert!(AutoModel::from_pretrained(tmp.path(), &LoadOptions::default()).err().unwrap().to_string().contains("plain file name"));
}

fn is_mapped(t: &Tensor) -> bool {
    matches!(&*t.storage().read(), magpie_core::storage::Storage::Cpu(c) if c.is_mapped())
}

#[test]
fn weights_in_the_checkpoint_dtype_borrow_the_file() {
    // the fixtures are float32: loaded in float32 on the CPU, every parameter views the mapped file
    let dir = fixture("tiny-llama");
    let file = std::fs::read(dir.join("model.safetensors")).unwrap();
    let m = AutoModel::from_pretrained(&dir, &LoadOptions::default()).unwrap();
    let params = m.module().named_parameters();
    assert!(params.len() > 5);
    for (n, p) in &params {
        assert!(is_mapped(p), "{n} borrows the file");
        assert!(p.requires_grad(), "{n} is a trainable leaf");
    }
    // in bfloat16 they are converted copies of the same values
    let h = AutoModel::from_pretrained(&dir, &LoadOptions { dtype: DType::BF16, device: Device::Cpu }).unwrap();
    for ((n, p), (_, q)) in params.iter().zip(h.module().named_parameters()) {
        assert!(!is_mapped(&q), "{n} converted");
        assert_eq!(q.to_vec::<magpie_core::half::bf16>().unwrap(), p.to_dtype(DType::BF16).unwrap().to_vec::<magpie_core::half::bf16>().unwrap(), "{n}");
    }
    // an in-place update (as an optimizer step makes) copies the storage; the file stays as it was
    let (name, w) = &params[0];
    let before = w.to_vec::<f32>().unwrap();
    {
        let _g = magpie_core::autograd::no_grad();
        w.add_scalar_(1.0).unwrap();
    }
    assert!(!is_mapped(w));
    assert_eq!(w.to_vec::<f32>().unwrap(), before.iter().map(|x| x + 1.0).collect::<Vec<_>>(), "{name}");
    assert_eq!(std::fs::read(dir.join("model.safetensors")).unwrap(), file);
    let again = AutoModel::from_pretrained(&dir, &LoadOptions::default()).unwrap();
    assert_eq!(again.module().named_parameters()[0].1.to_vec::<f32>().unwrap(), before);
}

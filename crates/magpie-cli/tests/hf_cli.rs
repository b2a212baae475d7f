//! `magpie generate`, `magpie forward` and `magpie embed` on the tiny Hugging Face fixtures
//! (`crates/magpie-models/tests/fixtures/hf/`) and the real all-MiniLM-L6-v2 (fetched by
//! `scripts/fetch_minilm.sh`), against transformers' and sentence-transformers' outputs; and bad
//! input ending in one clear line on stderr with a non-zero exit.

mod common;
use common::{fails_with, magpie, text};
use magpie_core::{DType, Tensor};
use magpie_io::safetensors;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-models/tests/fixtures/hf").join(name).display().to_string()
}

fn reference(name: &str) -> safetensors::Loaded {
    safetensors::load(PathBuf::from(fixture(name)).join("reference.safetensors")).unwrap()
}

fn ids_of(t: &Tensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

#[test]
fn generate_print_ids_equals_transformers_greedy() {
    for name in ["tiny-gpt2", "tiny-llama", "tiny-qwen2"] {
        let r = reference(name);
        let ids = ids_of(r.get("input_ids").unwrap());
        let greedy = ids_of(r.get("greedy").unwrap());
        let arg: Vec<String> = ids.iter().map(|v| v.to_string()).collect();
        let joined = arg.join(",");
        let m = fixture(name);
        let o = magpie(&["generate", "--model", &m, "--input-ids", &joined, "--max-new-tokens", "24", "--print-ids"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let want: Vec<String> = greedy[ids.len()..].iter().map(|v| v.to_string()).collect();
        assert_eq!(text(&o.stdout), format!("{}\n", want.join(" ")), "{name}");
    }
}

/// `--model FILE.gguf`: llama.cpp's format, Q4_K weights, the greedy tokens transformers gives for
/// the dequantized weights.
#[test]
fn generate_from_a_gguf_file() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-io/tests/fixtures/gguf");
    let r = safetensors::load(dir.join("tiny-llama-Q4_K.reference.safetensors")).unwrap();
    let ids = ids_of(r.get("input_ids").unwrap());
    let greedy = ids_of(r.get("greedy").unwrap());
    let joined = ids.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(",");
    let file = dir.join("tiny-llama-Q4_K.gguf").display().to_string();
    let o = magpie(&["generate", "--model", &file, "--input-ids", &joined, "--max-new-tokens", "24", "--print-ids"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want: Vec<String> = greedy[ids.len()..].iter().map(|v| v.to_string()).collect();
    assert_eq!(text(&o.stdout), format!("{}\n", want.join(" ")));
    // a text prompt goes through the tokenizer of the file's metadata: the same tokens as the ids
    // transformers' GGUF tokenizer gives "hello world" (tests/fixtures/gguf-tokenizer/expected.json
    // of magpie-models)
    let by_text = magpie(&["generate", "--model", &file, "--prompt", "hello world", "--max-new-tokens", "6", "--print-ids"]);
    assert!(by_text.status.success(), "{}", text(&by_text.stderr));
    let by_ids = magpie(&["generate", "--model", &file, "--input-ids", "1,264,107,104,111,111,114,264,122,114,117,111,103", "--max-new-tokens", "6", "--print-ids"]);
    assert_eq!(text(&by_text.stdout), text(&by_ids.stdout));
    let o = magpie(&["generate", "--model", &file, "--prompt", "hello world", "--max-new-tokens", "4"]);
    assert!(o.status.success() && text(&o.stdout).starts_with("hello world"), "{}{}", text(&o.stdout), text(&o.stderr));
    fails_with(&["generate", "--model", &dir.join("README.md").display().to_string(), "--input-ids", "1"], "not a GGUF file");
}

#[test]
fn generate_streams_text_from_a_prompt() {
    let m = fixture("tiny-gpt2");
    let o = magpie(&["generate", "--model", &m, "--prompt", "Hello, tensors café", "--max-new-tokens", "8"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("Hello, tensors café") && out.len() > "Hello, tensors café".len() + 1, "{out:?}");
    // sampling is seeded: same seed, same text; the flags are accepted together
    let s = |seed: &str| text(&magpie(&["generate", "--model", &m, "--prompt", "Once upon", "--max-new-tokens", "12", "--temperature", "1.3", "--top-k", "40", "--top-p", "0.9", "--seed", seed]).stdout);
    assert_eq!(s("3"), s("3"));
}

#[test]
fn forward_writes_transformers_logits_and_hidden_states() {
    let d = tempfile::tempdir().unwrap();
    for name in ["tiny-bert", "tiny-llama"] {
        let out = d.path().join(format!("{name}.safetensors")).display().to_string();
        let inputs = PathBuf::from(fixture(name)).join("reference.safetensors").display().to_string();
        let o = magpie(&["forward", "--model", &fixture(name), "--inputs", &inputs, "--out", &out, "--hidden-states"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let got = safetensors::load(&out).unwrap();
        let r = reference(name);
        let mask = ids_of(r.get("attention_mask").unwrap());
        let mut keys = vec!["logits".to_string(), "hidden_states.0".to_string(), "hidden_states.2".to_string()];
        if name == "tiny-bert" {
            keys.push("last_hidden_state".into());
        }
        for k in keys {
            let (a, b) = (got.get(&k).unwrap_or_else(|| panic!("{name}: no {k}")), r.get(&k).unwrap());
            assert_eq!(a.dtype(), DType::F32);
            assert_eq!(a.shape(), b.shape());
            let inner = a.shape()[2];
            let (x, y) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            let d = x.iter().zip(&y).enumerate().filter(|(i, _)| mask[i / inner] == 1).map(|(_, (p, q))| (p - q).abs()).fold(0f32, f32::max);
            assert!(d < 1e-4, "{name} {k}: {d}");
        }
    }
}

fn minilm() -> String {
    if let Ok(d) = std::env::var("MAGPIE_MINILM_DIR") {
        return d;
    }
    let cache = std::env::var("MAGPIE_MODEL_CACHE").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/torch-magpie"));
    let d = cache.join("all-MiniLM-L6-v2");
    assert!(d.join("model.safetensors").is_file(), "all-MiniLM-L6-v2 is not at {}: run `bash scripts/fetch_minilm.sh`", d.display());
    d.display().to_string()
}

#[test]
fn embed_matches_sentence_transformers() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-models/tests/fixtures/minilm/reference.json");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let sentences: Vec<&str> = r["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let m = minilm();
    let mut args = vec!["embed", "--model", m.as_str(), "--json"];
    args.extend(&sentences);
    let o = magpie(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines: Vec<String> = text(&o.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), sentences.len());
    for (i, line) in lines.iter().enumerate() {
        let got: Vec<f64> = serde_json::from_str(line).unwrap();
        let want: Vec<f64> = r["embeddings"][i].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let dot: f64 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
        let n = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let cos = dot / (n(&got) * n(&want));
        assert!(cos >= 0.9999, "sentence {i}: cosine {cos}");
    }
    // cls pooling without normalization gives a different, unnormalized vector
    let o = magpie(&["embed", "--model", &m, "--pooling", "cls", "--no-normalize", "Hi"]);
    let v: Vec<f64> = text(&o.stdout).split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(v.len(), 384);
    assert!((v.iter().map(|x| x * x).sum::<f64>().sqrt() - 1.0).abs() > 1e-3);
}

#[test]
fn bad_input_is_one_clear_line() {
    let d = tempfile::tempdir().unwrap();
    let empty = d.path().display().to_string();
    fails_with(&["generate", "--model", &empty, "--input-ids", "1,2"], "no config.json");
    // unknown architecture
    let unk = d.path().join("unk");
    std::fs::create_dir(&unk).unwrap();
    std::fs::write(unk.join("config.json"), r#"{"architectures": ["MambaForCausalLM"], "model_type": "mamba"}"#).unwrap();
    fails_with(&["generate", "--model", unk.to_str().unwrap(), "--input-ids", "1"], "MambaForCausalLM");
    // truncated safetensors
    let tr = d.path().join("tr");
    std::fs::create_dir(&tr).unwrap();
    let src = PathBuf::from(fixture("tiny-llama"));
    std::fs::copy(src.join("config.json"), tr.join("config.json")).unwrap();
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    std::fs::write(tr.join("model.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    fails_with(&["generate", "--model", tr.to_str().unwrap(), "--input-ids", "1"], "truncated");
    let g = fixture("tiny-gpt2");
    // prompt longer than the positions (128)
    let long = vec!["1"; 130].join(",");
    fails_with(&["generate", "--model", &g, "--input-ids", &long], "positions");
    // token outside the vocabulary
    fails_with(&["generate", "--model", &g, "--input-ids", "1,99999"], "outside the vocabulary");
    fails_with(&["generate", "--model", &g, "--input-ids", "1,x"], "not a token id");
    // unsupported dtype
    fails_with(&["generate", "--model", &g, "--input-ids", "1", "--dtype", "float64"], "float64");
    // no tokenizer for a text prompt
    fails_with(&["generate", "--model", &fixture("tiny-llama"), "--prompt", "hi"], "tokenizer.json");
    // an encoder is not a generator; a decoder has no embeddings
    fails_with(&["generate", "--model", &fixture("tiny-bert"), "--input-ids", "1"], "not a decoder");
    fails_with(&["embed", "--model", &g, "hello"], "encoder");
    // forward: inputs without input_ids
    let bad_in = d.path().join("in.safetensors");
    safetensors::save(&[("x".to_string(), Tensor::zeros(&[1]).unwrap())], None, &bad_in).unwrap();
    let out = d.path().join("o.safetensors").display().to_string();
    fails_with(&["forward", "--model", &g, "--inputs", bad_in.to_str().unwrap(), "--out", &out], "input_ids");
    // the fused path needs CUDA; --path takes three values
    fails_with(&["generate", "--model", &g, "--input-ids", "1", "--path", "fused"], "runs on CUDA");
    fails_with(&["generate", "--model", &g, "--input-ids", "1", "--path", "fast"], "fast");
    // --device cuda without a GPU
    if !magpie_core::backend::cuda::is_available() {
        fails_with(&["generate", "--model", &g, "--input-ids", "1", "--device", "cuda"], "CUDA");
    }
}

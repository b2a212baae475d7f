//! Llama from GGUF files (`magpie-io/tests/fixtures/gguf/`, made by llama.cpp's gguf package from
//! the tiny Llama): each file's dequantized weights give the logits transformers computes with
//! them (within 1e-4) and its greedy tokens exactly; the F32 file gives the original model's
//! outputs. On the CPU and, where present, CUDA.

use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Tensor};
use magpie_io::safetensors;
use magpie_models::auto::AutoModel;
use magpie_models::generate::{generate, GenerationConfig};
use magpie_models::hub::LoadOptions;
use std::path::PathBuf;

fn gguf_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-io/tests/fixtures/gguf")
}

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    if cuda::is_available() {
        d.push(Device::Cuda(0));
    }
    d
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    let x = a.to_device(Device::Cpu).unwrap().to_dtype(DType::F32).unwrap().contiguous().unwrap().to_vec::<f32>().unwrap();
    let y = b.to_vec::<f32>().unwrap();
    assert_eq!(x.len(), y.len());
    x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max)
}

#[test]
fn gguf_llama_matches_transformers_on_its_weights() {
    for dev in devices() {
        for ty in ["F32", "Q8_0", "Q4_K"] {
            let r = safetensors::load(gguf_dir().join(format!("tiny-llama-{ty}.reference.safetensors"))).unwrap();
            let m = AutoModel::load(gguf_dir().join(format!("tiny-llama-{ty}.gguf")), &LoadOptions { dtype: DType::F32, device: dev }).unwrap();
            let ids = r.get("input_ids").unwrap();
            let logits = m.forward(ids, None, None, false).unwrap().logits.unwrap();
            let d = max_diff(&logits, r.get("logits").unwrap());
            assert!(d < 1e-4, "{ty} on {dev:?}: logits differ from transformers' by {d}");
            let prompt: Vec<u32> = ids.to_vec::<i64>().unwrap().iter().map(|&v| v as u32).collect();
            let want: Vec<u32> = r.get("greedy").unwrap().to_vec::<i64>().unwrap().iter().map(|&v| v as u32).collect();
            let cfg = GenerationConfig { max_new_tokens: want.len() - prompt.len(), eos_token_ids: Vec::new(), ..GenerationConfig::default() };
            let got = generate(m.as_causal_lm().unwrap(), &[prompt.clone()], &cfg, |_| Ok(())).unwrap();
            assert_eq!(got[0], want[prompt.len()..], "{ty} on {dev:?}: greedy tokens differ");
        }
    }
}

#[test]
fn f32_gguf_is_the_original_model_and_every_type_loads() {
    let hf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf/tiny-llama");
    let r = safetensors::load(hf.join("reference.safetensors")).unwrap();
    let ids = r.get("input_ids").unwrap();
    let m = AutoModel::load(gguf_dir().join("tiny-llama-F32.gguf"), &LoadOptions::default()).unwrap();
    let d = max_diff(&m.forward(ids, None, None, false).unwrap().logits.unwrap(), r.get("logits").unwrap());
    assert!(d < 1e-4, "F32 GGUF vs the Hugging Face model: {d}");
    for ty in ["F16", "Q4_0", "Q2_K", "Q3_K", "Q5_K", "Q6_K"] {
        let m = AutoModel::load(gguf_dir().join(format!("tiny-llama-{ty}.gguf")), &LoadOptions::default()).unwrap();
        let l = m.forward(ids, None, None, false).unwrap().logits.unwrap().to_vec::<f32>().unwrap();
        assert!(l.iter().all(|v| v.is_finite()), "{ty}: non-finite logits");
    }
    // a GGUF without a model's metadata, a file that is not GGUF
    let e = AutoModel::load(gguf_dir().join("kv-types.gguf"), &LoadOptions::default()).err().unwrap().to_string();
    assert!(e.contains("architecture") || e.contains("is missing"), "{e}");
    let e = AutoModel::load(gguf_dir().join("README.md"), &LoadOptions::default()).err().unwrap().to_string();
    assert!(e.contains("not a GGUF file"), "{e}");
}

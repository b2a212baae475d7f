//! Sentence embeddings from C: the real all-MiniLM-L6-v2 (`scripts/fetch_minilm.sh`) against
//! sentence-transformers' embeddings (`magpie-models/tests/fixtures/minilm/reference.json`).

mod common;
use common::ok;
use magpie_ffi::model::{magpie_embed, magpie_embedder_load};
use magpie_ffi::tensor::{magpie_release, magpie_tensor_nbytes, magpie_tensor_shape, magpie_tensor_to_host};
use magpie_ffi::*;
use std::ffi::CString;
use std::path::PathBuf;

#[test]
fn embeddings_match_sentence_transformers() {
    let dir = std::env::var("MAGPIE_MINILM_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        let cache = std::env::var("MAGPIE_MODEL_CACHE").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/torch-magpie"));
        cache.join("all-MiniLM-L6-v2")
    });
    assert!(dir.join("model.safetensors").is_file(), "all-MiniLM-L6-v2 is not at {}: run `bash scripts/fetch_minilm.sh`", dir.display());
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-models/tests/fixtures/minilm/reference.json");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let sentences: Vec<CString> = r["sentences"].as_array().unwrap().iter().map(|s| CString::new(s.as_str().unwrap()).unwrap()).collect();
    let ptrs: Vec<*const std::ffi::c_char> = sentences.iter().map(|s| s.as_ptr()).collect();
    let (mut e, mut t) = (0i64, 0i64);
    let d = CString::new(dir.to_str().unwrap()).unwrap();
    ok(unsafe { magpie_embedder_load(d.as_ptr(), -1, 8, &mut e) });
    ok(unsafe { magpie_embed(e, ptrs.as_ptr(), ptrs.len(), -1, -1, &mut t) });
    let mut shape = [0i64; 2];
    ok(unsafe { magpie_tensor_shape(t, shape.as_mut_ptr(), 2) });
    assert_eq!(shape, [sentences.len() as i64, 384]);
    let mut n = 0;
    ok(unsafe { magpie_tensor_nbytes(t, &mut n) });
    let mut v = vec![0f32; n / 4];
    ok(unsafe { magpie_tensor_to_host(t, v.as_mut_ptr().cast(), n) });
    for (i, want) in r["embeddings"].as_array().unwrap().iter().enumerate() {
        let want: Vec<f64> = want.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let got = &v[i * 384..(i + 1) * 384];
        let dot: f64 = got.iter().zip(&want).map(|(a, b)| *a as f64 * b).sum();
        let na: f64 = got.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
        let nb: f64 = want.iter().map(|b| b * b).sum::<f64>().sqrt();
        assert!(dot / (na * nb) >= 0.9999, "sentence {i}: cosine {}", dot / (na * nb));
    }
    assert_eq!(unsafe { magpie_embed(e, ptrs.as_ptr(), ptrs.len(), 7, -1, &mut t) }, MAGPIE_ERR_ARG);
    ok(magpie_release(t));
    ok(magpie_release(e));
}

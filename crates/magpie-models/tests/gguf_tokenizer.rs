//! Tokenizers built from GGUF metadata against transformers' GGUF tokenizer conversion
//! (`tests/fixtures/gguf-tokenizer/make.py` wrote the files and `expected.json`: ids of
//! `AutoTokenizer.from_pretrained(dir, gguf_file=...)(text)` and their decoding): a SentencePiece
//! ("llama") vocabulary whose merges come from the scores, a byte-level ("gpt2") one with merges,
//! and the tiny Llama fixture's own vocabulary; strings with leading and double spaces, tabs and
//! newlines, non-ASCII text and characters outside the vocabulary (byte fallback), special tokens
//! written in the text, and the empty string.

use magpie_io::gguf::GgufFile;
use magpie_models::hf_tokenizer::HfTokenizer;
use serde_json::Value;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf-tokenizer")
}

#[test]
fn gguf_tokenizers_match_transformers() {
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(dir().join("expected.json")).unwrap()).unwrap();
    for (file, path) in [
        ("tok-llama.gguf", dir().join("tok-llama.gguf")),
        ("tok-gpt2.gguf", dir().join("tok-gpt2.gguf")),
        ("tiny-llama-Q8_0.gguf", dir().join("../../../../magpie-io/tests/fixtures/gguf/tiny-llama-Q8_0.gguf")),
    ] {
        let tok = HfTokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
        let cases = expected[file].as_array().unwrap();
        assert!(cases.len() >= 8, "{file}");
        for c in cases {
            let text = c["text"].as_str().unwrap();
            let want: Vec<u32> = c["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            let got = tok.encode(text, true).unwrap();
            assert_eq!(got, want, "{file}: ids of {text:?}");
            assert_eq!(tok.decode(&got, true).unwrap(), c["decoded"].as_str().unwrap(), "{file}: decoding {text:?}");
        }
    }
}

#[test]
fn gguf_tokenizer_errors_name_the_key() {
    use magpie_io::gguf::{array_of, GgufWriter, ValueType};
    let mut w = GgufWriter::new();
    w.add("general.architecture", "llama").unwrap();
    let e = HfTokenizer::from_gguf(&GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap()).err().unwrap().to_string();
    assert!(e.contains("tokenizer.ggml.model"), "{e}");
    w.add("tokenizer.ggml.model", "llama").unwrap();
    w.add("tokenizer.ggml.tokens", array_of(ValueType::String, ["<unk>", "a"])).unwrap();
    let e = HfTokenizer::from_gguf(&GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap()).err().unwrap().to_string();
    assert!(e.contains("tokenizer.ggml.scores"), "{e}");
    w.add("tokenizer.ggml.bos_token_id", 7u32).unwrap();
    w.add("tokenizer.ggml.scores", array_of(ValueType::F32, [0f32, -1.0])).unwrap();
    let e = HfTokenizer::from_gguf(&GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap()).err().unwrap().to_string();
    assert!(e.contains("bos_token_id"), "{e}");
    let mut w = GgufWriter::new();
    w.add("tokenizer.ggml.model", "bert").unwrap();
    w.add("tokenizer.ggml.tokens", array_of(ValueType::String, ["a"])).unwrap();
    let e = HfTokenizer::from_gguf(&GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap()).err().unwrap().to_string();
    assert!(e.contains("'bert' is not supported"), "{e}");
}

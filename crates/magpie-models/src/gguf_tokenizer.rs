//! Tokenizers from GGUF metadata (`tokenizer.ggml.*`), built as the `tokenizer.json` that
//! transformers' GGUF conversion makes (`integrations/gguf/gguf_tokenizer_mapping.py` with
//! `LlamaTokenizer` / `GPT2Tokenizer`), then loaded by the `tokenizers` crate:
//!
//! - `"llama"` (SentencePiece BPE): BPE over the tokens with byte fallback (`<0xNN>`), merges from
//!   `tokenizer.ggml.merges` or, when absent, derived from the scores as transformers'
//!   `generate_merges` does; Metaspace (`▁`, prepended to the first word) and the matching
//!   decoder; BOS/EOS added by a template from `add_bos_token` (default true) / `add_eos_token`.
//! - `"gpt2"` (byte-level BPE): tokens respelled in the byte alphabet where they are not already,
//!   the file's merges, GPT-2's byte-level split or, for the pre-tokenizer names transformers
//!   knows (`llama-bpe`, `qwen2`, ...), that regex then byte-level.
//!
//! Control tokens (type 3) become special added tokens, user-defined ones (type 4) plain added
//! tokens, as in transformers.

use crate::hf_tokenizer::HfTokenizer;
use magpie_core::{Error, Result};
use magpie_io::gguf::GgufFile;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

fn err(msg: impl Into<String>) -> Error {
    Error::value("gguf tokenizer", msg)
}

const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The split regex transformers uses for a `tokenizer.ggml.pre` name (the llama3 and qwen2
/// families; others keep GPT-2's byte-level split).
fn split_regex(pre: &str) -> Option<&'static str> {
    match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2" | "jina-v5-nano" | "dbrx" | "smaug-bpe" => Some(LLAMA3_SPLIT),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" => Some(QWEN2_SPLIT),
        _ => None,
    }
}

/// GPT-2's `bytes_to_unicode`: the printable character standing for each byte.
fn byte_alphabet() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        out[b as usize] = if printable {
            char::from_u32(b).unwrap_or('\0')
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or('\0')
        };
    }
    out
}

/// transformers' `generate_merges(vocab, vocab_scores)`: every split of a token into two vocabulary
/// tokens, ordered by the token's score (best first), then the lengths of the two parts (longer
/// first), keeping file order among equals.
fn merges_from_scores(tokens: &[&str], scores: &[f32]) -> Vec<(String, String)> {
    let mut vocab: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tokens.iter().enumerate() {
        vocab.insert(t, i);
    }
    // dict(zip(tokens, scores)): first position, last score
    let mut order: Vec<&str> = Vec::new();
    let mut score: HashMap<&str, f32> = HashMap::new();
    for (t, &s) in tokens.iter().zip(scores) {
        if score.insert(t, s).is_none() {
            order.push(t);
        }
    }
    let mut merges: Vec<(&str, &str, f32)> = Vec::new();
    for t in order {
        let s = score[t];
        let mut local: Vec<(&str, &str, f32)> = t.char_indices().skip(1).map(|(i, _)| t.split_at(i)).filter(|(l, r)| vocab.contains_key(l) && vocab.contains_key(r)).map(|(l, r)| (l, r, s)).collect();
        local.sort_by_key(|&(l, r, _)| (vocab[l], vocab[r]));
        merges.extend(local);
    }
    let key = |m: &(&str, &str, f32)| (m.2, m.0.chars().count(), m.1.chars().count());
    merges.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        kb.0.partial_cmp(&ka.0).unwrap_or(std::cmp::Ordering::Equal).then(kb.1.cmp(&ka.1)).then(kb.2.cmp(&ka.2))
    });
    merges.into_iter().map(|(l, r, _)| (l.to_string(), r.to_string())).collect()
}

fn merges_from_file(list: &[&str]) -> Result<Vec<(String, String)>> {
    list.iter()
        .map(|m| {
            let mut parts = m.split(' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(l), Some(r), None) => Ok((l.to_string(), r.to_string())),
                _ => Err(err(format!("merge '{m}' is not two tokens separated by one space"))),
            }
        })
        .collect()
}

fn token_id(f: &GgufFile, key: &str, n: usize) -> Result<Option<usize>> {
    match f.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(i) if (i as usize) < n => Ok(Some(i as usize)),
            _ => Err(err(format!("'{key}' is not a token id below {n}"))),
        },
    }
}

fn added(id: usize, content: &str, special: bool) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": special})
}

/// The `TemplateProcessing` adding BOS / EOS around one sequence (and a pair).
fn template(bos: Option<&str>, eos: Option<&str>, tokens: &[&str], ids: (Option<usize>, Option<usize>)) -> Value {
    let special = |t: &str, ty: u32| json!({"SpecialToken": {"id": t, "type_id": ty}});
    let seq = |s: &str, ty: u32| json!({"Sequence": {"id": s, "type_id": ty}});
    let (mut single, mut pair) = (Vec::new(), Vec::new());
    let mut specials = Map::new();
    for (part, ty) in [("A", 0u32), ("B", 1)] {
        let out = if part == "A" { &mut single } else { &mut pair };
        if let (Some(b), Some(id)) = (bos, ids.0) {
            out.push(special(b, ty));
            specials.insert(b.to_string(), json!({"id": b, "ids": [id], "tokens": [tokens[id]]}));
        }
        out.push(seq(part, ty));
        if let (Some(e), Some(id)) = (eos, ids.1) {
            out.push(special(e, ty));
            specials.insert(e.to_string(), json!({"id": e, "ids": [id], "tokens": [tokens[id]]}));
        }
    }
    let pair: Vec<Value> = single.iter().cloned().chain(pair).collect();
    json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials})
}

/// The `tokenizer.json` (as a JSON value) for the tokenizer `f`'s metadata describes.
pub fn tokenizer_json(f: &GgufFile) -> Result<Value> {
    let model = f.get("tokenizer.ggml.model").and_then(|v| v.as_str()).ok_or_else(|| err("no 'tokenizer.ggml.model' string in the metadata"))?;
    let tokens = f.get("tokenizer.ggml.tokens").and_then(|v| v.as_str_array()).ok_or_else(|| err("no 'tokenizer.ggml.tokens' string array"))?;
    let n = tokens.len();
    let types: Vec<i64> = match f.get("tokenizer.ggml.token_type") {
        None => Vec::new(),
        Some(v) => v.as_i64_array().filter(|t| t.len() == n).ok_or_else(|| err(format!("'tokenizer.ggml.token_type' must be {n} integers")))?,
    };
    let merges_list = match f.get("tokenizer.ggml.merges") {
        None => None,
        Some(v) => Some(v.as_str_array().ok_or_else(|| err("'tokenizer.ggml.merges' must be an array of strings"))?),
    };
    let flag = |k: &str| f.get(k).and_then(|v| v.as_bool());
    let (bos, eos, unk) = (token_id(f, "tokenizer.ggml.bos_token_id", n)?, token_id(f, "tokenizer.ggml.eos_token_id", n)?, token_id(f, "tokenizer.ggml.unknown_token_id", n)?);
    let pre = f.get("tokenizer.ggml.pre").and_then(|v| v.as_str()).unwrap_or("default");
    let kind = |i: usize| types.get(i).copied().unwrap_or(1);

    let (vocab_tokens, merges, pre_tok, decoder, byte_level, add_bos) = match model {
        "llama" => {
            let merges = match &merges_list {
                Some(m) => merges_from_file(m)?,
                None => {
                    let scores = f.get("tokenizer.ggml.scores").and_then(|v| v.as_f32_array()).filter(|s| s.len() == n).ok_or_else(|| err(format!("a llama vocabulary without merges needs 'tokenizer.ggml.scores' ({n} floats)")))?;
                    merges_from_scores(&tokens, &scores)
                }
            };
            let pre_tok = json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false});
            let decoder = json!({"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]});
            // llama.cpp adds BOS to a SentencePiece vocabulary that does not say otherwise
            (tokens.iter().map(|t| t.to_string()).collect::<Vec<_>>(), merges, pre_tok, decoder, false, flag("tokenizer.ggml.add_bos_token").unwrap_or(true))
        }
        "gpt2" => {
            let alphabet = byte_alphabet();
            let in_alphabet = |t: &str| t.chars().all(|c| alphabet.contains(&c));
            let spelled: Vec<String> = tokens.iter().map(|t| if in_alphabet(t) { t.to_string() } else { t.bytes().map(|b| alphabet[b as usize]).collect() }).collect();
            let merges = merges_from_file(merges_list.as_deref().ok_or_else(|| err("a gpt2 vocabulary needs 'tokenizer.ggml.merges'"))?)?;
            let pre_tok = match split_regex(pre) {
                Some(re) => json!({"type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false},
                    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}),
                None => json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}),
            };
            let decoder = json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true});
            (spelled, merges, pre_tok, decoder, true, flag("tokenizer.ggml.add_bos_token").unwrap_or(false))
        }
        other => return Err(Error::unsupported("gguf tokenizer", format!("tokenizer.ggml.model '{other}' is not supported (llama and gpt2 are)"))),
    };

    let mut vocab = Map::new();
    for (i, t) in vocab_tokens.iter().enumerate() {
        vocab.insert(t.clone(), json!(i));
    }
    // added tokens: control (3) as special, user-defined (4) as plain; for SentencePiece also the
    // unknown / BOS / EOS tokens the tokenizer class declares special
    let alphabet = byte_alphabet();
    let mut added_tokens = Vec::new();
    for (i, t) in vocab_tokens.iter().enumerate() {
        let declared = !byte_level && [unk, bos, eos].contains(&Some(i));
        let control = kind(i) == 3 && (!byte_level || t.chars().all(|c| alphabet.contains(&c)));
        if control || declared {
            added_tokens.push(added(i, t, true));
        } else if kind(i) == 4 {
            added_tokens.push(added(i, t, false));
        }
    }
    let add_eos = flag("tokenizer.ggml.add_eos_token").unwrap_or(false);
    let name = |id: Option<usize>| id.map(|i| vocab_tokens[i].as_str());
    let refs: Vec<&str> = vocab_tokens.iter().map(String::as_str).collect();
    let post = template(if add_bos { name(bos) } else { None }, if add_eos { name(eos) } else { None }, &refs, (bos, eos));
    let model_json = if byte_level {
        json!({"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": merges})
    } else {
        json!({"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false, "vocab": vocab, "merges": merges})
    };
    Ok(json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": added_tokens, "normalizer": null,
              "pre_tokenizer": pre_tok, "post_processor": post, "decoder": decoder, "model": model_json}))
}

impl HfTokenizer {
    /// The tokenizer a GGUF file's metadata describes (see the module documentation).
    pub fn from_gguf(f: &GgufFile) -> Result<HfTokenizer> {
        let j = tokenizer_json(f)?;
        let inner: tokenizers::Tokenizer = j.to_string().parse().map_err(|e| err(format!("building the tokenizer: {e}")))?;
        Ok(HfTokenizer::from_tokenizer(inner))
    }
}

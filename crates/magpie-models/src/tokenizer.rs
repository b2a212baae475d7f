//! A character-level tokenizer: the vocabulary is the sorted set of characters of the training
//! corpus, so it is deterministic for a given corpus and small for source code (~100 symbols).

use magpie_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Maps characters to ids (their rank in the sorted vocabulary) and back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TokenizerFile", into = "TokenizerFile")]
pub struct CharTokenizer {
    chars: Vec<char>,
    index: HashMap<char, u32>,
}

/// The stored form (`tokenizer.json`): `{"kind": "char", "vocab": "<the characters in id order>"}`.
#[derive(Serialize, Deserialize)]
struct TokenizerFile {
    kind: String,
    vocab: String,
}

impl TryFrom<TokenizerFile> for CharTokenizer {
    type Error = String;
    fn try_from(f: TokenizerFile) -> std::result::Result<Self, String> {
        if f.kind != "char" {
            return Err(format!("unknown tokenizer kind {:?}", f.kind));
        }
        let chars: Vec<char> = f.vocab.chars().collect();
        let t = CharTokenizer::from_chars(chars);
        if t.chars.len() != f.vocab.chars().count() {
            return Err("tokenizer vocabulary has repeated characters".into());
        }
        Ok(t)
    }
}

impl From<CharTokenizer> for TokenizerFile {
    fn from(t: CharTokenizer) -> Self {
        TokenizerFile { kind: "char".into(), vocab: t.chars.iter().collect() }
    }
}

impl CharTokenizer {
    fn from_chars(mut chars: Vec<char>) -> CharTokenizer {
        chars.sort_unstable();
        chars.dedup();
        let index = chars.iter().enumerate().map(|(i, &c)| (c, i as u32)).collect();
        CharTokenizer { chars, index }
    }
    /// The vocabulary of `text`. Errors on an empty text.
    pub fn fit(text: &str) -> Result<CharTokenizer> {
        if text.is_empty() {
            return Err(Error::value("tokenizer", "the corpus is empty"));
        }
        Ok(CharTokenizer::from_chars(text.chars().collect()))
    }
    /// The number of ids.
    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }
    /// The ids of `text`; a character outside the vocabulary is an error naming it.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        text.chars()
            .map(|c| {
                self.index.get(&c).copied().ok_or_else(|| {
                    Error::value("tokenizer", format!("character {c:?} is not in the model's vocabulary ({} characters)", self.chars.len()))
                })
            })
            .collect()
    }
    /// The text of `ids`; ids outside the vocabulary become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        ids.iter().map(|&i| self.chars.get(i as usize).copied().unwrap_or('\u{FFFD}')).collect()
    }
    /// The JSON form stored in checkpoints.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    /// Reads the JSON form.
    pub fn from_json(s: &str) -> Result<CharTokenizer> {
        serde_json::from_str(s).map_err(|e| Error::value("tokenizer", format!("invalid tokenizer.json: {e}")))
    }
}

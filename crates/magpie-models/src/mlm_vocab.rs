//! The vocabulary of masked-language-model training: characters of the corpus after BERT's five
//! special tokens, or a WordPiece `tokenizer.json` (kept verbatim, so a checkpoint folder is also a
//! Hugging Face model folder).

use crate::hf_tokenizer::HfTokenizer;
use crate::tokenizer::CharTokenizer;
use magpie_core::{Error, Result};
use serde_json::Value;

/// BERT's special tokens, in the ids the character vocabulary gives them (0..5).
pub const SPECIAL_TOKENS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// The ids of the special tokens the masking and the windows use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialIds {
    pub pad: u32,
    pub cls: u32,
    pub sep: u32,
    pub mask: u32,
}

/// A tokenizer for BERT pretraining.
#[derive(Clone)]
pub enum MlmTokenizer {
    /// Characters of the corpus, ids shifted past [`SPECIAL_TOKENS`].
    Char(CharTokenizer),
    /// A WordPiece `tokenizer.json` and its text.
    WordPiece { tok: std::sync::Arc<HfTokenizer>, json: String, special: SpecialIds },
}

const CHAR_KIND: &str = "char-mlm";

impl MlmTokenizer {
    /// The character vocabulary of `text` plus the special tokens.
    pub fn fit_chars(text: &str) -> Result<MlmTokenizer> {
        Ok(MlmTokenizer::Char(CharTokenizer::fit(text)?))
    }

    /// A WordPiece tokenizer from the text of a `tokenizer.json`; `what` names it in errors. It
    /// must know [PAD], [CLS], [SEP] and [MASK].
    pub fn wordpiece(json: String, what: &str) -> Result<MlmTokenizer> {
        let mut inner: tokenizers::Tokenizer = json.parse().map_err(|e| Error::value("tokenizer", format!("{what}: not a valid tokenizer.json: {e}")))?;
        // the corpus is encoded as one text: a model's own truncation (all-MiniLM's 128) or
        // padding would cut or pad it
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| Error::value("tokenizer", format!("{what}: {e}")))?;
        let tok = HfTokenizer::from_tokenizer(inner);
        let id = |t: &str| tok.token_to_id(t).ok_or_else(|| Error::value("tokenizer", format!("{what}: the vocabulary has no {t} token (BERT pretraining needs [PAD], [CLS], [SEP] and [MASK])")));
        let special = SpecialIds { pad: id("[PAD]")?, cls: id("[CLS]")?, sep: id("[SEP]")?, mask: id("[MASK]")? };
        Ok(MlmTokenizer::WordPiece { tok: std::sync::Arc::new(tok), json, special })
    }

    /// Reads a `tokenizer.json` file for [`MlmTokenizer::wordpiece`].
    pub fn wordpiece_file(path: &std::path::Path) -> Result<MlmTokenizer> {
        let json = std::fs::read_to_string(path).map_err(|e| Error::io("tokenizer", format!("cannot read {}: {e}", path.display())))?;
        MlmTokenizer::wordpiece(json, &path.display().to_string())
    }

    /// The special tokens' ids.
    pub fn special(&self) -> SpecialIds {
        match self {
            MlmTokenizer::Char(_) => SpecialIds { pad: 0, cls: 2, sep: 3, mask: 4 },
            MlmTokenizer::WordPiece { special, .. } => *special,
        }
    }

    /// The number of ids (special tokens included).
    pub fn vocab_size(&self) -> usize {
        match self {
            MlmTokenizer::Char(c) => c.vocab_size() + SPECIAL_TOKENS.len(),
            MlmTokenizer::WordPiece { tok, .. } => tok.vocab_size(),
        }
    }

    /// The ids of `text`, without special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match self {
            MlmTokenizer::Char(c) => Ok(c.encode(text)?.into_iter().map(|i| i + SPECIAL_TOKENS.len() as u32).collect()),
            MlmTokenizer::WordPiece { tok, .. } => tok.encode(text, false),
        }
    }

    /// One token's text (special tokens by name).
    pub fn token(&self, id: u32) -> String {
        match self {
            MlmTokenizer::Char(c) => match SPECIAL_TOKENS.get(id as usize) {
                Some(s) => s.to_string(),
                None => c.decode(&[id - SPECIAL_TOKENS.len() as u32]),
            },
            MlmTokenizer::WordPiece { tok, .. } => tok.decode(&[id], false).unwrap_or_else(|_| "\u{FFFD}".into()),
        }
    }

    /// The text of `ids` (special tokens by name).
    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            MlmTokenizer::Char(_) => ids.iter().map(|&i| self.token(i)).collect(),
            MlmTokenizer::WordPiece { tok, .. } => tok.decode(ids, false).unwrap_or_default(),
        }
    }

    /// Words or characters: how the vocabulary is described in the command's output.
    pub fn describe(&self) -> &'static str {
        match self {
            MlmTokenizer::Char(_) => "characters + [PAD] [UNK] [CLS] [SEP] [MASK]",
            MlmTokenizer::WordPiece { .. } => "WordPiece",
        }
    }

    /// The stored form: the WordPiece `tokenizer.json` as read, or
    /// `{"kind": "char-mlm", "vocab": "<characters in id order after the specials>"}`.
    pub fn to_json(&self) -> String {
        match self {
            MlmTokenizer::Char(c) => {
                let v: Value = serde_json::from_str(&c.to_json()).unwrap_or(Value::Null);
                serde_json::json!({"kind": CHAR_KIND, "special_tokens": SPECIAL_TOKENS, "vocab": v.get("vocab").cloned().unwrap_or(Value::Null)}).to_string()
            }
            MlmTokenizer::WordPiece { json, .. } => json.clone(),
        }
    }

    /// Reads the stored form.
    pub fn from_json(s: &str) -> Result<MlmTokenizer> {
        let v: Value = serde_json::from_str(s).map_err(|e| Error::value("tokenizer", format!("invalid tokenizer.json: {e}")))?;
        if v.get("kind").and_then(Value::as_str) == Some(CHAR_KIND) {
            let vocab = v.get("vocab").and_then(Value::as_str).ok_or_else(|| Error::value("tokenizer", "tokenizer.json: no character vocabulary"))?;
            let c = CharTokenizer::from_json(&serde_json::json!({"kind": "char", "vocab": vocab}).to_string())?;
            return Ok(MlmTokenizer::Char(c));
        }
        MlmTokenizer::wordpiece(s.to_string(), "tokenizer.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_vocab_has_specials_first_and_round_trips() {
        let t = MlmTokenizer::fit_chars("abca").unwrap();
        assert_eq!(t.vocab_size(), 8);
        assert_eq!(t.encode("cab").unwrap(), vec![7, 5, 6]);
        assert_eq!(t.decode(&[2, 7, 4, 3]), "[CLS]c[MASK][SEP]");
        let back = MlmTokenizer::from_json(&t.to_json()).unwrap();
        assert_eq!(back.encode("abc").unwrap(), t.encode("abc").unwrap());
        assert!(MlmTokenizer::from_json("{\"kind\": 3}").is_err());
        assert!(MlmTokenizer::from_json("not json").is_err());
    }
}

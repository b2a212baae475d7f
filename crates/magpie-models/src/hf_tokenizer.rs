//! Hugging Face tokenizers (`tokenizer.json`: WordPiece for BERT, byte-level BPE for GPT-2, Llama 3
//! and Qwen2) through the `tokenizers` crate, and a streaming decoder that prints text as tokens
//! arrive without splitting a multi-byte character.

use magpie_core::{Error, Result};
use std::path::Path;

/// A `tokenizer.json` tokenizer.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
}

fn terr(e: impl std::fmt::Display) -> Error {
    Error::value("tokenizer", e.to_string())
}

impl HfTokenizer {
    /// Reads `tokenizer.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<HfTokenizer> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(Error::io("tokenizer", format!("{}: no such file", path.display())));
        }
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| Error::io("tokenizer", format!("{}: {e}", path.display())))?;
        Ok(HfTokenizer { inner })
    }

    /// Wraps a tokenizer built in memory (e.g. from GGUF metadata).
    pub fn from_tokenizer(inner: tokenizers::Tokenizer) -> HfTokenizer {
        HfTokenizer { inner }
    }

    /// Token ids of `text`, with the tokenizer's special tokens (`[CLS] ... [SEP]`, Llama 3's
    /// `<|begin_of_text|>`) when `add_special_tokens`, as `tokenizer(text)` in transformers.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        Ok(self.inner.encode(text, add_special_tokens).map_err(terr)?.get_ids().to_vec())
    }

    /// This tokenizer truncating every encoding to `max_len` tokens, special tokens included (the
    /// tokenizer's own truncation, so `[SEP]` stays last), and never padding.
    pub fn truncating(&self, max_len: usize) -> Result<HfTokenizer> {
        let mut inner = self.inner.clone();
        inner.with_padding(None);
        inner.with_truncation(Some(tokenizers::TruncationParams { max_length: max_len, ..Default::default() })).map_err(terr)?;
        Ok(HfTokenizer { inner })
    }

    /// Text of `ids`.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner.decode(ids, skip_special_tokens).map_err(terr)
    }

    /// The id of a token, if the vocabulary has it.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

/// Turns a growing list of generated ids into text pieces: each call returns the text the new ids
/// add, held back while it ends in an incomplete character (transformers' `TextStreamer` rule).
pub struct DecodeStream<'a> {
    tok: &'a HfTokenizer,
    ids: Vec<u32>,
    printed: usize,
}

impl<'a> DecodeStream<'a> {
    /// A stream over `tok`.
    pub fn new(tok: &'a HfTokenizer) -> Self {
        DecodeStream { tok, ids: Vec::new(), printed: 0 }
    }

    /// Adds `id`; returns the newly completed text (possibly empty).
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.ids.push(id);
        let text = self.tok.decode(&self.ids, true)?;
        if text.ends_with('\u{FFFD}') || text.len() < self.printed || !text.is_char_boundary(self.printed) {
            return Ok(String::new());
        }
        let new = text[self.printed..].to_string();
        self.printed = text.len();
        Ok(new)
    }

    /// Whatever is left (at the end of generation).
    pub fn finish(&mut self) -> Result<String> {
        let text = self.tok.decode(&self.ids, true)?;
        let rest = if text.len() > self.printed && text.is_char_boundary(self.printed) { text[self.printed..].to_string() } else { String::new() };
        self.printed = text.len();
        Ok(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_bpe() -> HfTokenizer {
        HfTokenizer::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hf/tiny-gpt2/tokenizer.json")).unwrap()
    }

    #[test]
    fn byte_level_bpe_round_trips_any_text() {
        let t = tiny_bpe();
        assert_eq!(t.vocab_size(), 1100);
        assert_eq!(t.token_to_id("<|endoftext|>"), Some(1099));
        for s in ["Hello, tensors!", "café naïve Straße", "東京 🙂 Москва", "  spaces\tand\nlines  ", ""] {
            let ids = t.encode(s, true).unwrap();
            assert_eq!(t.decode(&ids, false).unwrap(), s);
        }
    }

    #[test]
    fn stream_never_splits_a_character() {
        let t = tiny_bpe();
        let text = "a 🙂 東京 é";
        let ids = t.encode(text, false).unwrap();
        let mut s = DecodeStream::new(&t);
        let mut out = String::new();
        for &id in &ids {
            let piece = s.push(id).unwrap();
            assert!(!piece.contains('\u{FFFD}'), "partial character streamed: {piece:?}");
            out.push_str(&piece);
        }
        out.push_str(&s.finish().unwrap());
        assert_eq!(out, text);
    }

    #[test]
    fn missing_or_broken_files_are_errors() {
        assert!(HfTokenizer::from_file("/nonexistent/tokenizer.json").is_err());
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tokenizer.json");
        std::fs::write(&p, "{not json").unwrap();
        assert!(HfTokenizer::from_file(&p).err().map(|e| e.to_string()).unwrap_or_default().contains("tokenizer.json"));
    }
}

//! Models built from `magpie-nn` modules. Pretrained transformers loaded from Hugging Face folders
//! ([`auto::AutoModel`]: BERT, GPT-2, Llama 3, Qwen2) with generation ([`generate`]), tokenizers
//! ([`hf_tokenizer`]) and sentence embeddings ([`embed`]); and a character-level GPT ([`gpt`]) with
//! its tokenizer, batches, a [`trainer::Trainer`] with bit-identical checkpoint/resume, and sampling;
//! the same trainer pretrains BERT as a masked language model ([`bert_mlm`], [`mlm`]).
//!
//! ```
//! use magpie_models::gpt::{Gpt, GptConfig};
//! use magpie_nn::ModuleExt;
//! let cfg = GptConfig { vocab_size: 10, block_size: 8, n_layer: 1, n_head: 2, n_embd: 8, dropout: 0.0 };
//! let m = Gpt::new(cfg)?;
//! let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).take(3).collect();
//! assert_eq!(names, ["wte.weight", "wpe.weight", "h.0.ln_1.weight"]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

pub mod auto;
pub mod bert;
pub mod bert_mlm;
pub mod blocks;
pub mod causal_lm;
pub mod config;
pub mod data;
pub mod embed;
pub mod fused;
pub mod generate;
pub mod gpt;
pub mod gguf;
pub mod gguf_tokenizer;
pub mod gpt2;
pub mod hf_tokenizer;
pub mod hub;
pub mod llama;
pub mod mlm;
pub mod mlm_vocab;
pub mod output;
pub mod positions;
pub mod qwen2;
pub mod tokenizer;
pub mod train_model;
pub mod trainer;

//! Models built from `magpie-nn` modules, and what it takes to train and sample them: a GPT-2
//! style language model ([`gpt`]), a character tokenizer, batches, a [`trainer::Trainer`] with
//! bit-identical checkpoint/resume, and sampling.
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

pub mod blocks;
pub mod causal_lm;
pub mod data;
pub mod generate;
pub mod gpt;
pub mod tokenizer;
pub mod trainer;

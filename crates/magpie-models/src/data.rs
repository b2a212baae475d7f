//! The token stream split into train and validation parts, and random `[B, T]` batches of
//! (input, next-token target) windows drawn with a seedable generator.

use magpie_core::ops::random::Generator;
use magpie_core::{Error, Result, Tensor};

/// Which part of the corpus to draw from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Val,
}

/// A tokenized corpus: the first `1 - val_fraction` for training, the rest for validation.
pub struct Dataset {
    pub train: Vec<u32>,
    pub val: Vec<u32>,
}

impl Dataset {
    /// Splits `tokens`; both parts must hold at least one window of `block_size + 1` tokens.
    pub fn new(tokens: Vec<u32>, val_fraction: f64, block_size: usize) -> Result<Dataset> {
        let n = tokens.len();
        let n_val = ((n as f64) * val_fraction).round() as usize;
        let n_train = n - n_val.min(n);
        let need = block_size + 1;
        if n_train < need || n_val < need {
            return Err(Error::value(
                "dataset",
                format!(
                    "the corpus is too short: {n} tokens give {n_train} for training and {n_val} for validation, \
                     each part needs at least block_size + 1 = {need}"
                ),
            ));
        }
        let val = tokens[n_train..].to_vec();
        let mut train = tokens;
        train.truncate(n_train);
        Ok(Dataset { train, val })
    }

    /// The token counts of the training part per id (for the unigram baseline).
    pub fn unigram_entropy(&self, vocab_size: usize) -> f64 {
        let mut counts = vec![0u64; vocab_size];
        for &t in &self.train {
            if let Some(c) = counts.get_mut(t as usize) {
                *c += 1;
            }
        }
        let n = self.train.len() as f64;
        counts.iter().filter(|&&c| c > 0).map(|&c| {
            let p = c as f64 / n;
            -p * p.ln()
        }).sum()
    }

    /// `batch` random windows of `len` tokens of `split` (`len` at most the part's length).
    pub fn windows(&self, gen: &mut Generator, split: Split, batch: usize, len: usize) -> Result<Vec<&[u32]>> {
        let data = match split {
            Split::Train => &self.train,
            Split::Val => &self.val,
        };
        if len == 0 || len > data.len() {
            return Err(Error::value("dataset", format!("windows of {len} tokens do not fit a part of {} tokens", data.len())));
        }
        let starts = data.len() + 1 - len;
        let r = gen.next_u32(2 * batch);
        Ok(r.chunks_exact(2)
            .map(|p| {
                // 64 random bits make the modulo bias negligible
                let s = ((((p[0] as u64) << 32) | p[1] as u64) % starts as u64) as usize;
                &data[s..s + len]
            })
            .collect())
    }

    /// A batch of `batch` random windows: inputs and targets (shifted by one), both `[B, T]` int64.
    pub fn batch(&self, gen: &mut Generator, split: Split, batch: usize, block_size: usize) -> Result<(Tensor, Tensor)> {
        let mut x = Vec::with_capacity(batch * block_size);
        let mut y = Vec::with_capacity(batch * block_size);
        for w in self.windows(gen, split, batch, block_size + 1)? {
            x.extend(w[..block_size].iter().map(|&v| v as i64));
            y.extend(w[1..].iter().map(|&v| v as i64));
        }
        Ok((Tensor::from_vec(x, &[batch, block_size])?, Tensor::from_vec(y, &[batch, block_size])?))
    }
}

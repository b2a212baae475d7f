//! The token stream split into train and validation parts, and random `[B, T]` batches of
//! (input, next-token target) windows drawn with a seedable generator. Batches come through a
//! `magpie_data::DataLoader`: a [`Windows`] dataset (one item per window start), a sampler drawing
//! window starts with replacement from the caller's generator, and a collate function.

use magpie_core::ops::random::Generator;
use magpie_core::{Error, Result, Tensor};
use magpie_data::{DataLoader, RandomSampler, Sample, SharedGenerator};
use std::sync::Arc;

/// Which part of the corpus to draw from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Val,
}

/// A tokenized corpus: the first `1 - val_fraction` for training, the rest for validation.
pub struct Dataset {
    pub train: Arc<Vec<u32>>,
    pub val: Arc<Vec<u32>>,
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
        Ok(Dataset { train: Arc::new(train), val: Arc::new(val) })
    }

    /// The token counts of the training part per id (for the unigram baseline).
    pub fn unigram_entropy(&self, vocab_size: usize) -> f64 {
        let mut counts = vec![0u64; vocab_size];
        for &t in self.train.iter() {
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

    /// The tokens of `split`.
    pub fn part(&self, split: Split) -> &Arc<Vec<u32>> {
        match split {
            Split::Train => &self.train,
            Split::Val => &self.val,
        }
    }

    /// `batch` random windows of `len` tokens of `split` (`len` at most the part's length).
    pub fn windows(&self, gen: &mut Generator, split: Split, batch: usize, len: usize) -> Result<Vec<&[u32]>> {
        let data = self.part(split);
        let w = Windows::new(data.clone(), len, false)?;
        let starts = magpie_data::Dataset::len(&w);
        let shared = shared_from(gen);
        let mut s = RandomSampler::new(starts).replacement(true).num_samples(Some(batch))?.generator(shared.clone());
        let idx = magpie_data::Sampler::epoch_indices(&mut s);
        *gen = shared.snapshot();
        Ok(idx?.into_iter().map(|s| &data[s..s + len]).collect())
    }

    /// One batch of `batch` random windows of `windows`' part through a [`DataLoader`]: the
    /// sampler draws the window starts (with replacement, 64 random bits each) from `gen`, then
    /// `collate` makes the batch and may draw from `gen` too (BERT's masking). `gen` ends where a
    /// direct draw would leave it, so the stream of batches is the same as without a loader.
    pub fn load_batch(
        &self,
        gen: &mut Generator,
        windows: Windows,
        batch: usize,
        collate: impl Fn(Vec<Sample>, &SharedGenerator) -> Result<Sample> + Send + Sync + 'static,
    ) -> Result<Sample> {
        let shared = shared_from(gen);
        let out = (|| {
            let n = magpie_data::Dataset::len(&windows);
            let sampler = RandomSampler::new(n).replacement(true).num_samples(Some(batch))?.generator(shared.clone());
            let g = shared.clone();
            let mut dl = DataLoader::builder(Arc::new(windows)).sampler(sampler).batch_size(Some(batch)).collate_fn(move |s| collate(s, &g)).build()?;
            let b = dl.iter()?.next();
            b.ok_or_else(|| Error::value("dataset", "the loader yielded no batch"))?
        })();
        *gen = shared.snapshot();
        out
    }

    /// A batch of `batch` random windows: inputs and targets (shifted by one), both `[B, T]` int64.
    pub fn batch(&self, gen: &mut Generator, split: Split, batch: usize, block_size: usize) -> Result<(Tensor, Tensor)> {
        let w = Windows::new(self.part(split).clone(), block_size + 1, true)?;
        let b = self.load_batch(gen, w, batch, |s, _| magpie_data::default_collate(s))?;
        let mut parts = b.into_list().unwrap_or_default().into_iter().filter_map(Sample::into_tensor);
        match (parts.next(), parts.next()) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(Error::value("dataset", "a batch of windows should collate to inputs and targets")),
        }
    }
}

/// A generator shared with a sampler, starting from `gen`'s state.
fn shared_from(gen: &Generator) -> SharedGenerator {
    SharedGenerator::new(gen.clone())
}

/// The windows of `len` tokens of a token stream as a map-style dataset: item `s` is the window
/// starting at `s` (`len - 1` inputs and the next tokens as targets when `pairs`, else one int64
/// tensor of `len` tokens).
#[derive(Clone)]
pub struct Windows {
    tokens: Arc<Vec<u32>>,
    len: usize,
    pairs: bool,
}

impl Windows {
    /// Windows of `len` tokens of `tokens` (`len` between 1 and the stream's length).
    pub fn new(tokens: Arc<Vec<u32>>, len: usize, pairs: bool) -> Result<Windows> {
        if len == 0 || len > tokens.len() || (pairs && len < 2) {
            return Err(Error::value("dataset", format!("windows of {len} tokens do not fit a part of {} tokens", tokens.len())));
        }
        Ok(Windows { tokens, len, pairs })
    }
}

impl magpie_data::Dataset for Windows {
    fn len(&self) -> usize {
        self.tokens.len() + 1 - self.len
    }
    fn get(&self, s: usize) -> Result<Sample> {
        let w = self.tokens.get(s..s + self.len).ok_or_else(|| Error::index("dataset", format!("window {s} is out of range for {} windows", self.tokens.len() + 1 - self.len)))?;
        let ids = |v: &[u32]| Tensor::from_vec(v.iter().map(|&t| t as i64).collect::<Vec<_>>(), &[v.len()]);
        if self.pairs {
            let t = self.len - 1;
            Ok(Sample::Tuple(vec![Sample::Tensor(ids(&w[..t])?), Sample::Tensor(ids(&w[1..])?)]))
        } else {
            Ok(Sample::Tensor(ids(w)?))
        }
    }
}

//! Masked-language-model batches: windows of the token stream wrapped in `[CLS] ... [SEP]`, masked
//! as transformers' `DataCollatorForLanguageModeling` does (15% of the non-special positions
//! selected; of those 80% become `[MASK]`, 10% a random token, 10% stay), labels -100 elsewhere.

use crate::data::{Dataset, Split, Windows};
use crate::mlm_vocab::SpecialIds;
use magpie_core::ops::random::Generator;
use magpie_core::{Error, Result, Tensor};
use magpie_data::{Sample, SharedGenerator};

/// The label of a position that is not predicted (cross-entropy's `ignore_index`).
pub const IGNORE_INDEX: i64 = -100;

/// The masking rates (transformers' defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaskConfig {
    /// Share of the non-special positions that are predicted.
    pub mlm_probability: f64,
    /// Of those, the share replaced by `[MASK]`.
    pub mask_replace: f64,
    /// Of the rest, the share replaced by a random token (the others stay unchanged).
    pub random_replace: f64,
}

impl Default for MaskConfig {
    fn default() -> Self {
        MaskConfig { mlm_probability: 0.15, mask_replace: 0.8, random_replace: 0.5 }
    }
}

/// Masks `ids` in place and returns the labels (the original id where a position is predicted,
/// [`IGNORE_INDEX`] elsewhere). `special[i]` marks positions never selected. Draws the same amount
/// of randomness whatever the outcome (three uniforms and one random id per position, as the
/// collator's three Bernoulli draws over the whole batch and its `randint`), so batches that follow
/// do not depend on this one's contents. One departure from the collator: a batch where no
/// position was selected gets its first non-special one (as `[MASK]`), so the loss is never 0/0.
pub fn mask_tokens(ids: &mut [i64], special: &[bool], vocab_size: usize, mask_id: u32, cfg: MaskConfig, gen: &mut Generator) -> Result<Vec<i64>> {
    if ids.len() != special.len() {
        return Err(Error::shape("mask_tokens", format!("{} ids but {} special flags", ids.len(), special.len())));
    }
    if vocab_size == 0 {
        return Err(Error::value("mask_tokens", "vocab_size must be at least 1"));
    }
    let n = ids.len();
    let selected: Vec<bool> = gen.uniform(n).into_iter().zip(special).map(|(u, &s)| !s && u < cfg.mlm_probability).collect();
    let replaced: Vec<bool> = gen.uniform(n).into_iter().zip(&selected).map(|(u, &m)| m && u < cfg.mask_replace).collect();
    let random: Vec<bool> = gen.uniform(n).into_iter().zip(selected.iter().zip(&replaced)).map(|(u, (&m, &r))| m && !r && u < cfg.random_replace).collect();
    let words = gen.next_u32(n);
    let mut labels = vec![IGNORE_INDEX; n];
    for i in 0..n {
        if !selected[i] {
            continue;
        }
        labels[i] = ids[i];
        if replaced[i] {
            ids[i] = mask_id as i64;
        } else if random[i] {
            // an unbiased-enough draw in 0..vocab_size from 32 random bits (the collator's randint)
            ids[i] = ((words[i] as u64 * vocab_size as u64) >> 32) as i64;
        }
    }
    // A batch with nothing to predict would make the mean loss 0/0 (NaN, which the collator
    // leaves to the user); predict its first non-special position instead, as [MASK].
    if !selected.iter().any(|&m| m) {
        if let Some(i) = special.iter().position(|&s| !s) {
            labels[i] = ids[i];
            ids[i] = mask_id as i64;
        }
    }
    Ok(labels)
}

/// A masked batch: `input_ids` and `labels`, both `[B, T]` int64.
pub struct MlmBatch {
    pub input_ids: Tensor,
    pub labels: Tensor,
}

/// What masking a batch needs to know about the vocabulary, and the rates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MlmSpec {
    /// Random replacements are drawn from `0..vocab_size`.
    pub vocab_size: usize,
    pub special: SpecialIds,
    pub rates: MaskConfig,
}

/// `batch` random windows of `seq_len - 2` tokens of `split`, each as `[CLS] window [SEP]`, masked
/// with [`mask_tokens`]; windows and masks both come from `gen` (the windows through a
/// `DataLoader`'s sampler, the masks in its collate function).
pub fn mlm_batch(data: &Dataset, gen: &mut Generator, split: Split, batch: usize, seq_len: usize, spec: MlmSpec) -> Result<MlmBatch> {
    let (vocab_size, sp, cfg) = (spec.vocab_size, spec.special, spec.rates);
    if seq_len < 3 {
        return Err(Error::value("mlm_batch", format!("sequence length {seq_len} leaves no room for a token between [CLS] and [SEP]")));
    }
    let windows = Windows::new(data.part(split).clone(), seq_len - 2, false)?;
    let collate = move |rows: Vec<Sample>, g: &SharedGenerator| -> Result<Sample> {
        let b = rows.len();
        let mut ids = Vec::with_capacity(b * seq_len);
        let mut special = Vec::with_capacity(b * seq_len);
        for r in rows {
            let w = r.into_tensor().ok_or_else(|| Error::value("mlm_batch", "a window should be a tensor"))?.to_vec::<i64>()?;
            ids.push(sp.cls as i64);
            ids.extend_from_slice(&w);
            ids.push(sp.sep as i64);
            special.push(true);
            // a special token inside the text (a WordPiece [UNK] or [SEP] in the corpus) is not masked either
            let is_special = |v: i64| [sp.cls, sp.sep, sp.pad, sp.mask].iter().any(|&s| s as i64 == v);
            special.extend(w.iter().map(|&v| is_special(v)));
            special.push(true);
        }
        let labels = g.with(|g| mask_tokens(&mut ids, &special, vocab_size, sp.mask, cfg, g))?;
        Ok(Sample::List(vec![Tensor::from_vec(ids, &[b, seq_len])?.into(), Tensor::from_vec(labels, &[b, seq_len])?.into()]))
    };
    let out = data.load_batch(gen, windows, batch, collate)?;
    let mut parts = out.into_list().unwrap_or_default().into_iter().filter_map(Sample::into_tensor);
    match (parts.next(), parts.next()) {
        (Some(input_ids), Some(labels)) => Ok(MlmBatch { input_ids, labels }),
        _ => Err(Error::value("mlm_batch", "a masked batch should collate to input ids and labels")),
    }
}

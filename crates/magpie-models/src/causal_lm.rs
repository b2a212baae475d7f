//! What generation needs from a decoder-only language model (GPT-2, Llama, Qwen2 on the module path).

use crate::blocks::kv_cache::KvCache;
use crate::positions::StepInputs;
use magpie_core::{DType, Device, Result, Tensor};

/// A decoder that runs one step at a time over a [`KvCache`].
///
/// `forward_cached(step, cache)` returns logits `[B, T, vocab]` for the step's tokens (`[B, 1, vocab]`
/// with `step.last_only`) and appends
/// their keys and values to `cache` (the cache's length moves on by `T`). The step carries the
/// padding mask over the whole sequence so far and the position ids (transformers' `generate`
/// derives them from the mask, `cumsum(mask) - 1`), so a left-padded row gives the same logits as
/// the same row alone.
pub trait CausalLm: Send + Sync {
    /// Number of token ids (the logits' last dimension).
    fn vocab_size(&self) -> usize;
    /// The longest sequence the model can take (learned positions), if it has such a limit.
    fn max_positions(&self) -> Option<usize>;
    /// Where the weights live.
    fn device(&self) -> Device;
    /// The weights' dtype.
    fn dtype(&self) -> DType;
    /// An empty cache for `batch` sequences with room for `capacity` positions (it grows past that).
    fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache>;
    /// One step: logits of the step's tokens; their keys and values are appended to `cache`.
    fn forward_cached(&self, step: &StepInputs, cache: &mut KvCache) -> Result<Tensor>;
}

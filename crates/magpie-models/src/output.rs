//! What a forward pass returns, named as in transformers' model outputs.

use magpie_core::Tensor;

/// `logits`, `last_hidden_state` and, when asked for, `hidden_states` (transformers'
/// `output_hidden_states=True`: the embedding output, then each layer's output, the last one
/// replaced by the final norm's output for decoders).
#[derive(Clone, Debug)]
pub struct ModelOutput {
    /// `[B, T, vocab]`: the LM head (decoders, `BertForMaskedLM`); None for a bare encoder.
    pub logits: Option<Tensor>,
    /// `[B, T, hidden]`: the base model's output (after the final norm for decoders).
    pub last_hidden_state: Tensor,
    /// `L + 1` tensors `[B, T, hidden]`, empty unless requested.
    pub hidden_states: Vec<Tensor>,
    /// `[B, T, hidden]` per layer, before any final norm (transformers' decoder-layer outputs), empty
    /// unless hidden states were requested.
    pub layer_outputs: Vec<Tensor>,
    /// `[B, hidden]`: BERT's pooler (tanh of a projection of the first token), when the model has one.
    pub pooler_output: Option<Tensor>,
}

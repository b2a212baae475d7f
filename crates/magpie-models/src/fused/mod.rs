//! The fused inference path on CUDA: a decoder (GPT-2, Llama 3, Qwen2) as raw kernel launches over
//! preallocated device buffers: fused norm + residual, bias + rotary embedding + KV-cache write,
//! flash attention (prefill) and split-KV decoding, GEMV for decode projections (cuBLAS for wider
//! products), token selection on the GPU, and the whole decode step replayed as one CUDA graph.
//! Decode steps of 1-4 sequences fold the norms, residual adds, activations, biases, rotary
//! embedding and KV-cache write into the GEMVs themselves (six kernels per block).
//! BERT runs as a [`FusedEncoder`] (GEMMs, flash attention, fused bias/GELU/residual/LayerNorm, one
//! CUDA graph per input shape). Both read the weights the module path loaded and are tested against
//! it (`tests/fused.rs`). A GGUF model's quantized layers (Q8_0, Q4_0, Q4_K, Q6_K) stay in their
//! blocks on the device; bf16/f16 decode steps fold the small kernels into a Q4_K GEMV of the
//! engine's own ([`QuantFold`]), other types run the core's quantized GEMV (`tests/fused_quant.rs`).
//!
//! ```no_run
//! use magpie_models::auto::AutoModel;
//! use magpie_models::fused::{EngineConfig, FusedDecoder};
//! use magpie_models::generate::GenerationConfig;
//! use magpie_models::hub::LoadOptions;
//! # fn main() -> magpie_core::Result<()> {
//! let opts = LoadOptions { dtype: magpie_core::DType::BF16, device: magpie_core::Device::Cuda(0) };
//! let model = AutoModel::from_pretrained("path/to/llama", &opts)?;
//! let mut engine = FusedDecoder::from_model(&model, EngineConfig { max_len: 512, ..EngineConfig::default() })?;
//! drop(model); // the engine holds the weights it reads
//! let cfg = GenerationConfig { max_new_tokens: 32, ..GenerationConfig::default() };
//! let out = engine.generate(&[vec![1, 2, 3]], &cfg, |_| Ok(()))?;
//! # let _ = out; Ok(()) }
//! ```

mod buffers;
mod encoder;
mod engine;
mod generate;
mod kernels;
mod lt;
mod prefetch;
mod quant;
mod quant_fold;
mod short_attn;
mod weights;

pub use encoder::{EncoderOutput, FusedEncoder};
pub use engine::{EngineConfig, FusedDecoder, SHORT_ATTN_MAX_KEYS};
pub use generate::sample_args;
pub use kernels::{split_by_rounds, ActKind, GemvEpi, GemvNorm, SampleArgs};
pub use lt::{LtEpi, LtGemm};
pub use short_attn::ShortAttention;
pub use quant::{QuantProj, QuantSeg};
pub use quant_fold::{QuantFold, FOLD_MAX_ROWS};
pub use weights::{DecoderWeights, NormKind, Proj, Spec};

use crate::auto::AutoModel;
use magpie_core::Result;

impl FusedDecoder {
    /// The engine for a loaded decoder on CUDA (see [`DecoderWeights::from_model`] for what it
    /// covers); the model's weights are shared, not copied, except the fused q/k/v and gate/up
    /// matrices (and GPT-2's transposed projections) and quantized layers, whose blocks the engine
    /// uploads once more from the host copy (drop the model to free its device copy).
    pub fn from_model(model: &AutoModel, cfg: EngineConfig) -> Result<FusedDecoder> {
        FusedDecoder::new(DecoderWeights::from_model(model)?, cfg)
    }
}

/// Why `model` cannot run on the fused path (None when it can): an encoder, a CPU model, a dtype
/// other than float32/bfloat16/float16, quantized layers of widths the quantized GEMV does not
/// take. Quantized (GGUF) Llama layers otherwise run on it.
pub fn unsupported_reason(model: &AutoModel) -> Option<String> {
    use crate::auto::ModelKind;
    let w = match &model.kind {
        ModelKind::Llama(m) => &m.model.embed_tokens.weight,
        ModelKind::Gpt2(m) => &m.transformer.wte.weight,
        _ => return Some(format!("the fused path covers GPT-2, Llama and Qwen2, not {}", model.architecture.class_name())),
    };
    if !w.device().is_cuda() {
        return Some("the fused path runs on CUDA".into());
    }
    if !matches!(w.dtype(), magpie_core::DType::F32 | magpie_core::DType::BF16 | magpie_core::DType::F16) {
        return Some(format!("the fused path runs float32, bfloat16 or float16, not {}", w.dtype()));
    }
    if let ModelKind::Llama(m) = &model.kind {
        let c = &m.config;
        let quant = m.lm_head.as_ref().is_some_and(|l| l.is_quantized())
            || m.model.layers.iter().any(|l| {
                let (a, f) = (&l.self_attn, &l.mlp);
                [&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj, &f.gate_proj, &f.up_proj, &f.down_proj].iter().any(|p| p.is_quantized())
            });
        // the quantized GEMV reads its input rows with 16-byte loads (FusedDecoder::new checks the same)
        if quant && [c.hidden_size, c.num_attention_heads * c.head_dim, c.intermediate_size].iter().any(|d| !d.is_multiple_of(8)) {
            return Some("the fused path's quantized GEMV needs layer widths that are multiples of 8".into());
        }
    }
    None
}

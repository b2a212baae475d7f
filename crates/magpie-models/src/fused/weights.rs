//! The weights of a decoder as the fused engine reads them, taken from a loaded module-path model:
//! every projection as a `Linear` weight `[out, in]` (GPT-2's `Conv1D` weights transposed once),
//! q/k/v fused into one `[q + 2 kv, hidden]` matrix and gate/up into one `[2 inter, hidden]`, so a
//! decode step reads each weight once with one kernel per projection. Quantized (GGUF) layers stay
//! in their blocks ([`QuantProj`], their rows stacked the same way).

use super::kernels::ActKind;
use super::quant::QuantProj;
use crate::auto::{AutoModel, ModelKind};
use crate::blocks::activation::Activation;
use crate::blocks::rope::Rope;
use magpie_core::ops::shape_ops::cat;
use magpie_core::{Error, Result, Tensor};
use magpie_nn::{AnyLinear, LayerNorm, RMSNorm};

/// Which norm the blocks use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    Rms,
    Layer,
}

/// The shapes and rules of one decoder.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The transformers class it came from (for messages).
    pub class: &'static str,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub inter: usize,
    /// SwiGLU-style `act(gate) * up` (Llama, Qwen2) or a plain `act(fc)` (GPT-2).
    pub gated: bool,
    pub act: ActKind,
    pub norm: NormKind,
    pub eps: f32,
    pub vocab: usize,
    /// Learned positions (GPT-2): the model's limit.
    pub max_positions: Option<usize>,
    /// Attention scale.
    pub scale: f32,
    /// Rotary embeddings (Llama, Qwen2); None for learned positions.
    pub rope: Option<Rope>,
}

/// A norm's weight and optional bias.
pub struct NormW {
    pub w: Tensor,
    pub b: Option<Tensor>,
}

/// A projection's weight `[out, in]`: dense in the engine's dtype, or kept quantized.
pub enum Proj {
    Dense(Tensor),
    Quant(QuantProj),
}

impl Proj {
    /// Whether the weight is quantized.
    pub fn is_quantized(&self) -> bool {
        matches!(self, Proj::Quant(_))
    }
}

/// One block's weights.
pub struct LayerW {
    pub norm1: NormW,
    pub qkv_w: Proj,
    pub qkv_b: Option<Tensor>,
    pub o_w: Proj,
    pub o_b: Option<Tensor>,
    pub norm2: NormW,
    /// `[2 inter, hidden]` when gated, else `[inter, hidden]`.
    pub up_w: Proj,
    pub up_b: Option<Tensor>,
    pub down_w: Proj,
    pub down_b: Option<Tensor>,
}

/// Everything the engine reads.
pub struct DecoderWeights {
    pub spec: Spec,
    pub wte: Tensor,
    pub wpe: Option<Tensor>,
    pub layers: Vec<LayerW>,
    pub final_norm: NormW,
    /// `[vocab, hidden]` (the embedding when tied).
    pub lm_head: Proj,
}

pub(crate) fn act_kind(a: Activation) -> ActKind {
    match a {
        Activation::Silu => ActKind::Silu,
        Activation::Gelu => ActKind::Gelu,
        Activation::GeluTanh => ActKind::GeluTanh,
        Activation::Relu => ActKind::Relu,
    }
}

fn ones_like_dim(like: &Tensor, n: usize) -> Result<Tensor> {
    Tensor::ones(&[n])?.to_dtype(like.dtype())?.to_device(like.device())
}

fn rms(n: &RMSNorm, like: &Tensor, dim: usize) -> Result<NormW> {
    Ok(NormW { w: match &n.weight { Some(w) => w.clone(), None => ones_like_dim(like, dim)? }, b: None })
}

fn layer(n: &LayerNorm, like: &Tensor, dim: usize) -> Result<NormW> {
    Ok(NormW { w: match &n.weight { Some(w) => w.clone(), None => ones_like_dim(like, dim)? }, b: n.bias.clone() })
}

/// `[in, out]` Conv1D weight as a contiguous `[out, in]` one.
fn transposed(w: &Tensor) -> Result<Tensor> {
    w.t()?.contiguous()
}

/// Projections stacked by rows into one weight: quantized blocks when every part is quantized
/// (on `like`'s device), else one dense matrix of `like`'s dtype (quantized parts dequantized:
/// a GGUF file may mix kept and dequantized types within q/k/v or gate/up).
fn stack(parts: &[&AnyLinear], like: &Tensor) -> Result<Proj> {
    let quant: Vec<&magpie_core::quant::QuantMatrix> = parts.iter().filter_map(|p| if let AnyLinear::Quant(q) = p { Some(&q.weight) } else { None }).collect();
    if quant.len() == parts.len() {
        return Ok(Proj::Quant(QuantProj::from_parts(&quant, like.device())?));
    }
    let dense = parts.iter().map(|p| match p {
        AnyLinear::Dense(l) => Ok(l.weight.clone()),
        AnyLinear::Quant(q) => q.weight.dequantize()?.to_dtype(like.dtype())?.to_device(like.device()),
    });
    let ts = dense.collect::<Result<Vec<Tensor>>>()?;
    Ok(Proj::Dense(if ts.len() == 1 { ts[0].clone() } else { cat(&ts, 0)? }))
}

/// The biases of fused projections: all present (concatenated), all absent, or an error.
fn cat_bias(parts: &[&Option<Tensor>]) -> Result<Option<Tensor>> {
    if parts.iter().all(|p| p.is_none()) {
        return Ok(None);
    }
    let ts: Vec<Tensor> = parts.iter().filter_map(|p| (*p).clone()).collect();
    if ts.len() != parts.len() {
        return Err(Error::unsupported("fused", "projections where only some of q/k/v or gate/up have biases"));
    }
    Ok(Some(cat(&ts, 0)?))
}

impl DecoderWeights {
    /// The weights of a decoder model (GPT-2, Llama, Qwen2) on a CUDA device; an error naming the
    /// class for anything else (encoders, models on the CPU).
    pub fn from_model(model: &AutoModel) -> Result<DecoderWeights> {
        let op = "fused";
        // no autograd record: the fused copies must not keep the originals alive through a graph
        let _g = magpie_core::autograd::no_grad();
        match &model.kind {
            ModelKind::Llama(m) => {
                let c = &m.config;
                let wte = m.model.embed_tokens.weight.clone();
                if !wte.device().is_cuda() {
                    return Err(Error::device(op, "the fused engine runs on CUDA; the model is on the CPU"));
                }
                let mut layers = Vec::with_capacity(c.num_hidden_layers);
                for l in m.model.layers.iter() {
                    let a = &l.self_attn;
                    let g = &l.mlp;
                    layers.push(LayerW {
                        norm1: rms(&l.input_layernorm, &wte, c.hidden_size)?,
                        qkv_w: stack(&[&a.q_proj, &a.k_proj, &a.v_proj], &wte)?,
                        qkv_b: cat_bias(&[&a.q_proj.bias().cloned(), &a.k_proj.bias().cloned(), &a.v_proj.bias().cloned()])?,
                        o_w: stack(&[&a.o_proj], &wte)?,
                        o_b: a.o_proj.bias().cloned(),
                        norm2: rms(&l.post_attention_layernorm, &wte, c.hidden_size)?,
                        up_w: stack(&[&g.gate_proj, &g.up_proj], &wte)?,
                        up_b: cat_bias(&[&g.gate_proj.bias().cloned(), &g.up_proj.bias().cloned()])?,
                        down_w: stack(&[&g.down_proj], &wte)?,
                        down_b: g.down_proj.bias().cloned(),
                    });
                }
                let lm_head = match &m.lm_head { Some(l) => stack(&[l], &wte)?, None => Proj::Dense(wte.clone()) };
                let spec = Spec {
                    class: if model.architecture == crate::config::Architecture::Qwen2ForCausalLM { "Qwen2ForCausalLM" } else { "LlamaForCausalLM" },
                    hidden: c.hidden_size,
                    heads: c.num_attention_heads,
                    kv_heads: c.num_key_value_heads,
                    head_dim: c.head_dim,
                    inter: c.intermediate_size,
                    gated: true,
                    act: act_kind(c.hidden_act),
                    norm: NormKind::Rms,
                    eps: c.rms_norm_eps as f32,
                    vocab: c.vocab_size,
                    max_positions: None,
                    scale: 1.0 / (c.head_dim as f32).sqrt(),
                    rope: Some(m.rope.clone()),
                };
                Ok(DecoderWeights { spec, final_norm: rms(&m.model.norm, &wte, c.hidden_size)?, wte, wpe: None, layers, lm_head })
            }
            ModelKind::Gpt2(m) => {
                let c = &m.config;
                let tr = &m.transformer;
                let wte = tr.wte.weight.clone();
                if !wte.device().is_cuda() {
                    return Err(Error::device(op, "the fused engine runs on CUDA; the model is on the CPU"));
                }
                let d = c.n_embd;
                let mut layers = Vec::with_capacity(c.n_layer);
                for b in tr.h.iter() {
                    layers.push(LayerW {
                        norm1: layer(&b.ln_1, &wte, d)?,
                        qkv_w: Proj::Dense(transposed(&b.attn.c_attn.weight)?),
                        qkv_b: Some(b.attn.c_attn.bias.clone()),
                        o_w: Proj::Dense(transposed(&b.attn.c_proj.weight)?),
                        o_b: Some(b.attn.c_proj.bias.clone()),
                        norm2: layer(&b.ln_2, &wte, d)?,
                        up_w: Proj::Dense(transposed(&b.mlp.c_fc.weight)?),
                        up_b: Some(b.mlp.c_fc.bias.clone()),
                        down_w: Proj::Dense(transposed(&b.mlp.c_proj.weight)?),
                        down_b: Some(b.mlp.c_proj.bias.clone()),
                    });
                }
                let lm_head = Proj::Dense(m.lm_head.as_ref().map_or(wte.clone(), |l| l.weight.clone()));
                let hd = d / c.n_head;
                let spec = Spec {
                    class: "GPT2LMHeadModel",
                    hidden: d,
                    heads: c.n_head,
                    kv_heads: c.n_head,
                    head_dim: hd,
                    inter: c.n_inner,
                    gated: false,
                    act: act_kind(c.activation_function),
                    norm: NormKind::Layer,
                    eps: c.layer_norm_epsilon as f32,
                    vocab: c.vocab_size,
                    max_positions: Some(c.n_positions),
                    scale: if c.scale_attn_weights { 1.0 / (hd as f32).sqrt() } else { 1.0 },
                    rope: None,
                };
                Ok(DecoderWeights { spec, final_norm: layer(&tr.ln_f, &wte, d)?, wte, wpe: Some(tr.wpe.weight.clone()), layers, lm_head })
            }
            _ => Err(Error::unsupported(op, format!("the fused decoder covers GPT2LMHeadModel, LlamaForCausalLM and Qwen2ForCausalLM, not {}", model.architecture.class_name()))),
        }
    }
}

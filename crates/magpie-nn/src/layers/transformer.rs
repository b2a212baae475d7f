//! `TransformerEncoderLayer`, `TransformerDecoderLayer`, their stacks `TransformerEncoder` /
//! `TransformerDecoder`, and `Transformer`, with PyTorch's child names (`self_attn`,
//! `multihead_attn`, `linear1`, `linear2`, `norm1..3`, `dropout1..3`, `layers.N`, `norm`).

use crate::init;
use crate::layers::attention::{MhaArgs, MhaOptions, MultiheadAttention};
use crate::layers::container::ModuleList;
use crate::layers::dropout::Dropout;
use crate::layers::linear::Linear;
use crate::layers::norm::LayerNorm;
use crate::module::{Module, ModuleExt};
use magpie_core::{default_dtype, Device, Error, Result, Tensor};

/// The feed-forward activation of the transformer layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransformerActivation {
    Relu,
    /// Exact (erf) GELU, PyTorch's `"gelu"`.
    Gelu,
}

impl TransformerActivation {
    fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            TransformerActivation::Relu => x.relu(),
            TransformerActivation::Gelu => x.gelu("none"),
        }
    }
}

/// The constructor options shared by the transformer layers (PyTorch's defaults via `Default`:
/// `dim_feedforward = 2048`, `dropout = 0.1`, relu, `layer_norm_eps = 1e-5`, sequence-first,
/// post-norm, with biases).
#[derive(Debug, Clone, PartialEq)]
pub struct TransformerOptions {
    pub dim_feedforward: usize,
    pub dropout: f64,
    pub activation: TransformerActivation,
    pub layer_norm_eps: f64,
    pub batch_first: bool,
    pub norm_first: bool,
    pub bias: bool,
}

impl Default for TransformerOptions {
    fn default() -> Self {
        TransformerOptions { dim_feedforward: 2048, dropout: 0.1, activation: TransformerActivation::Relu, layer_norm_eps: 1e-5, batch_first: false, norm_first: false, bias: true }
    }
}

/// `nn.Transformer.generate_square_subsequent_mask(sz)`: a float `[sz, sz]` mask, `-inf` above
/// the diagonal and 0 elsewhere (position i attends to positions ≤ i).
pub fn generate_square_subsequent_mask(sz: usize) -> Result<Tensor> {
    let m = Tensor::full_on(&[sz, sz], f64::NEG_INFINITY, default_dtype(), Device::Cpu)?;
    m.triu(1)
}

/// Copies a freshly built module's parameters from `src` and its training mode (PyTorch's
/// `copy.deepcopy` of a layer).
fn copy_from<M: Module + Sized>(mut fresh: M, src: &M, training: bool) -> Result<M> {
    fresh.load_state_dict(&src.state_dict(), true)?;
    fresh.train(training);
    Ok(fresh)
}

/// The LayerNorm over `d_model` that every transformer norm is.
fn layer_norm(d_model: usize, o: &TransformerOptions) -> Result<LayerNorm> {
    LayerNorm::new(&[d_model], o.layer_norm_eps, true, o.bias)
}

/// `children` and `children_mut` listing the named fields, in PyTorch's registration order.
macro_rules! field_children {
    ($($f:ident),*) => {
        fn children(&self) -> Vec<(String, &dyn Module)> {
            vec![$((stringify!($f).into(), &self.$f)),*]
        }
        fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
            vec![$((stringify!($f).into(), &mut self.$f)),*]
        }
    };
}

/// The two inputs of a `forward_many` (`what` names them for the error).
fn two_inputs<'a>(op: &str, xs: &[&'a Tensor], what: &str) -> Result<(&'a Tensor, &'a Tensor)> {
    match xs {
        [a, b] => Ok((*a, *b)),
        _ => Err(Error::value(op, format!("forward takes {what}, but {} inputs were given", xs.len()))),
    }
}

fn mha(d_model: usize, nhead: usize, o: &TransformerOptions) -> Result<MultiheadAttention> {
    MultiheadAttention::with_options(d_model, nhead, &MhaOptions { dropout: o.dropout, bias: o.bias, batch_first: o.batch_first, ..MhaOptions::default() })
}

/// An attention block's output, `dropout(attn(x, kv, kv, masks))` (self-attention: `kv = x`).
fn attn_block(attn: &MultiheadAttention, drop: &Dropout, x: &Tensor, kv: &Tensor, mask: Option<&Tensor>, kpm: Option<&Tensor>, is_causal: bool) -> Result<Tensor> {
    let args = MhaArgs { key_padding_mask: kpm, need_weights: false, attn_mask: mask, average_attn_weights: true, is_causal };
    drop.forward(&attn.forward(x, kv, kv, &args)?.0)
}

/// `dropout2(linear2(dropout(activation(linear1(x)))))`.
fn ff_block(l1: &Linear, act: TransformerActivation, d: &Dropout, l2: &Linear, d2: &Dropout, x: &Tensor) -> Result<Tensor> {
    d2.forward(&l2.forward(&d.forward(&act.apply(&l1.forward(x)?)?)?)?)
}

/// One residual sub-layer with its LayerNorm: `x + block(norm(x))` with `norm_first`, else
/// `norm(x + block(x))`.
fn residual(x: &Tensor, norm: &LayerNorm, norm_first: bool, block: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    if norm_first {
        x.add(&block(&norm.forward(x)?)?)
    } else {
        norm.forward(&x.add(&block(x)?)?)
    }
}

/// `nn.TransformerEncoderLayer(d_model, nhead, ...)`: self-attention and a feed-forward block,
/// each with a residual connection and LayerNorm (after, or before with `norm_first`).
pub struct TransformerEncoderLayer {
    pub self_attn: MultiheadAttention,
    pub linear1: Linear,
    pub dropout: Dropout,
    pub linear2: Linear,
    pub norm1: LayerNorm,
    pub norm2: LayerNorm,
    pub dropout1: Dropout,
    pub dropout2: Dropout,
    pub d_model: usize,
    pub nhead: usize,
    pub options: TransformerOptions,
}

impl TransformerEncoderLayer {
    /// A new layer with PyTorch's initialisation of each sub-layer.
    pub fn new(d_model: usize, nhead: usize, o: &TransformerOptions) -> Result<TransformerEncoderLayer> {
        Ok(TransformerEncoderLayer {
            self_attn: mha(d_model, nhead, o)?,
            linear1: Linear::new(d_model, o.dim_feedforward, o.bias)?,
            dropout: Dropout::new(o.dropout)?,
            linear2: Linear::new(o.dim_feedforward, d_model, o.bias)?,
            norm1: layer_norm(d_model, o)?,
            norm2: layer_norm(d_model, o)?,
            dropout1: Dropout::new(o.dropout)?,
            dropout2: Dropout::new(o.dropout)?,
            d_model,
            nhead,
            options: o.clone(),
        })
    }

    /// An independent copy with the same parameter values (PyTorch's `copy.deepcopy`).
    pub fn deep_copy(&self) -> Result<TransformerEncoderLayer> {
        copy_from(Self::new(self.d_model, self.nhead, &self.options)?, self, self.dropout.training)
    }

    /// `forward(src, src_mask, src_key_padding_mask, is_causal)`; masks as in
    /// [`MultiheadAttention::forward`] (`is_causal` is a hint that `src_mask` is causal).
    pub fn forward_with(&self, src: &Tensor, src_mask: Option<&Tensor>, src_key_padding_mask: Option<&Tensor>, is_causal: bool) -> Result<Tensor> {
        let ff = |x: &Tensor| ff_block(&self.linear1, self.options.activation, &self.dropout, &self.linear2, &self.dropout2, x);
        let sa = |x: &Tensor| attn_block(&self.self_attn, &self.dropout1, x, x, src_mask, src_key_padding_mask, is_causal);
        let nf = self.options.norm_first;
        let x = residual(src, &self.norm1, nf, sa)?;
        residual(&x, &self.norm2, nf, ff)
    }
}

impl Module for TransformerEncoderLayer {
    fn type_name(&self) -> &'static str {
        "TransformerEncoderLayer"
    }
    fn forward(&self, src: &Tensor) -> Result<Tensor> {
        self.forward_with(src, None, None, false)
    }
    field_children!(self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2);
}

/// The masks of a decoder forward pass (all optional; `*_is_causal` are hints that the
/// corresponding mask is causal, as in PyTorch).
#[derive(Debug, Clone, Copy, Default)]
pub struct DecoderMasks<'a> {
    pub tgt_mask: Option<&'a Tensor>,
    pub memory_mask: Option<&'a Tensor>,
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    pub memory_key_padding_mask: Option<&'a Tensor>,
    pub tgt_is_causal: bool,
    pub memory_is_causal: bool,
}

/// `nn.TransformerDecoderLayer(d_model, nhead, ...)`: self-attention, attention over the
/// encoder's memory (`multihead_attn`) and a feed-forward block.
pub struct TransformerDecoderLayer {
    pub self_attn: MultiheadAttention,
    pub multihead_attn: MultiheadAttention,
    pub linear1: Linear,
    pub dropout: Dropout,
    pub linear2: Linear,
    pub norm1: LayerNorm,
    pub norm2: LayerNorm,
    pub norm3: LayerNorm,
    pub dropout1: Dropout,
    pub dropout2: Dropout,
    pub dropout3: Dropout,
    pub d_model: usize,
    pub nhead: usize,
    pub options: TransformerOptions,
}

impl TransformerDecoderLayer {
    /// A new layer with PyTorch's initialisation of each sub-layer.
    pub fn new(d_model: usize, nhead: usize, o: &TransformerOptions) -> Result<TransformerDecoderLayer> {
        let ln = || layer_norm(d_model, o);
        Ok(TransformerDecoderLayer {
            self_attn: mha(d_model, nhead, o)?,
            multihead_attn: mha(d_model, nhead, o)?,
            linear1: Linear::new(d_model, o.dim_feedforward, o.bias)?,
            dropout: Dropout::new(o.dropout)?,
            linear2: Linear::new(o.dim_feedforward, d_model, o.bias)?,
            norm1: ln()?,
            norm2: ln()?,
            norm3: ln()?,
            dropout1: Dropout::new(o.dropout)?,
            dropout2: Dropout::new(o.dropout)?,
            dropout3: Dropout::new(o.dropout)?,
            d_model,
            nhead,
            options: o.clone(),
        })
    }

    /// An independent copy with the same parameter values (PyTorch's `copy.deepcopy`).
    pub fn deep_copy(&self) -> Result<TransformerDecoderLayer> {
        copy_from(Self::new(self.d_model, self.nhead, &self.options)?, self, self.dropout.training)
    }

    /// `forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
    /// memory_key_padding_mask, tgt_is_causal, memory_is_causal)`.
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor, m: &DecoderMasks) -> Result<Tensor> {
        let sa = |x: &Tensor| attn_block(&self.self_attn, &self.dropout1, x, x, m.tgt_mask, m.tgt_key_padding_mask, m.tgt_is_causal);
        let mha = |x: &Tensor| attn_block(&self.multihead_attn, &self.dropout2, x, memory, m.memory_mask, m.memory_key_padding_mask, m.memory_is_causal);
        let ff = |x: &Tensor| ff_block(&self.linear1, self.options.activation, &self.dropout, &self.linear2, &self.dropout3, x);
        let nf = self.options.norm_first;
        let x = residual(tgt, &self.norm1, nf, sa)?;
        let x = residual(&x, &self.norm2, nf, mha)?;
        residual(&x, &self.norm3, nf, ff)
    }
}

impl Module for TransformerDecoderLayer {
    fn type_name(&self) -> &'static str {
        "TransformerDecoderLayer"
    }
    /// `[tgt, memory]` without masks.
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (t, m) = two_inputs(self.type_name(), xs, "tgt and memory")?;
        Ok(vec![TransformerDecoderLayer::forward(self, t, m, &DecoderMasks::default())?])
    }
    field_children!(self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3);
}

/// `num_layers` copies made by `copy` (the layers of a stack).
fn stack_layers<L: Module>(num_layers: usize, copy: impl Fn() -> Result<L>) -> Result<ModuleList<L>> {
    (0..num_layers).map(|_| copy().map(Box::new)).collect()
}

/// The stack's final norm, when it has one.
fn final_norm(norm: &Option<LayerNorm>, x: Tensor) -> Result<Tensor> {
    match norm {
        Some(n) => n.forward(&x),
        None => Ok(x),
    }
}

/// `children` / `children_mut` of a stack: `layers`, then `norm` when present.
macro_rules! stack_children {
    () => {
        fn children(&self) -> Vec<(String, &dyn Module)> {
            let mut v: Vec<(String, &dyn Module)> = vec![("layers".into(), &self.layers)];
            if let Some(n) = &self.norm {
                v.push(("norm".into(), n));
            }
            v
        }
        fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
            let mut v: Vec<(String, &mut dyn Module)> = vec![("layers".into(), &mut self.layers)];
            if let Some(n) = &mut self.norm {
                v.push(("norm".into(), n));
            }
            v
        }
    };
}

/// `nn.TransformerEncoder(encoder_layer, num_layers, norm)`: `num_layers` copies of the layer
/// (same initial values, as PyTorch's deep copies) and an optional final norm.
///
/// This is PyTorch's reference path. (PyTorch's inference fast path, taken without autograd,
/// turns a `src_key_padding_mask` into nested tensors and returns zeros at padded positions;
/// here those positions hold the values the reference path computes.)
pub struct TransformerEncoder {
    pub layers: ModuleList<TransformerEncoderLayer>,
    pub norm: Option<LayerNorm>,
}

impl TransformerEncoder {
    /// Stacks `num_layers` deep copies of `layer`.
    pub fn new(layer: &TransformerEncoderLayer, num_layers: usize, norm: Option<LayerNorm>) -> Result<TransformerEncoder> {
        let layers = stack_layers(num_layers, || layer.deep_copy())?;
        Ok(TransformerEncoder { layers, norm })
    }

    /// `forward(src, mask, src_key_padding_mask, is_causal)`.
    pub fn forward_with(&self, src: &Tensor, mask: Option<&Tensor>, src_key_padding_mask: Option<&Tensor>, is_causal: bool) -> Result<Tensor> {
        let mut x = src.clone();
        for l in self.layers.iter() {
            x = l.forward_with(&x, mask, src_key_padding_mask, is_causal)?;
        }
        final_norm(&self.norm, x)
    }
}

impl Module for TransformerEncoder {
    fn type_name(&self) -> &'static str {
        "TransformerEncoder"
    }
    fn forward(&self, src: &Tensor) -> Result<Tensor> {
        self.forward_with(src, None, None, false)
    }
    stack_children!();
}

/// `nn.TransformerDecoder(decoder_layer, num_layers, norm)`.
pub struct TransformerDecoder {
    pub layers: ModuleList<TransformerDecoderLayer>,
    pub norm: Option<LayerNorm>,
}

impl TransformerDecoder {
    /// Stacks `num_layers` deep copies of `layer`.
    pub fn new(layer: &TransformerDecoderLayer, num_layers: usize, norm: Option<LayerNorm>) -> Result<TransformerDecoder> {
        let layers = stack_layers(num_layers, || layer.deep_copy())?;
        Ok(TransformerDecoder { layers, norm })
    }

    /// `forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, ...)`.
    pub fn forward(&self, tgt: &Tensor, memory: &Tensor, m: &DecoderMasks) -> Result<Tensor> {
        let mut x = tgt.clone();
        for l in self.layers.iter() {
            x = l.forward(&x, memory, m)?;
        }
        final_norm(&self.norm, x)
    }
}

impl Module for TransformerDecoder {
    fn type_name(&self) -> &'static str {
        "TransformerDecoder"
    }
    /// `[tgt, memory]` without masks.
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (t, m) = two_inputs(self.type_name(), xs, "tgt and memory")?;
        Ok(vec![TransformerDecoder::forward(self, t, m, &DecoderMasks::default())?])
    }
    stack_children!();
}

/// The masks of a full `Transformer` forward pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct TransformerMasks<'a> {
    pub src_mask: Option<&'a Tensor>,
    pub tgt_mask: Option<&'a Tensor>,
    pub memory_mask: Option<&'a Tensor>,
    pub src_key_padding_mask: Option<&'a Tensor>,
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    pub memory_key_padding_mask: Option<&'a Tensor>,
    pub src_is_causal: bool,
    pub tgt_is_causal: bool,
    pub memory_is_causal: bool,
}

/// `nn.Transformer(d_model, nhead, num_encoder_layers, num_decoder_layers, ...)`: an encoder and
/// a decoder stack, each with a final LayerNorm; every parameter with more than one dim is
/// re-initialised xavier-uniform, as PyTorch does.
pub struct Transformer {
    pub encoder: TransformerEncoder,
    pub decoder: TransformerDecoder,
    pub d_model: usize,
    pub nhead: usize,
    pub batch_first: bool,
}

impl Transformer {
    /// PyTorch's defaults are `d_model = 512, nhead = 8`, 6 + 6 layers.
    pub fn new(d_model: usize, nhead: usize, num_encoder_layers: usize, num_decoder_layers: usize, o: &TransformerOptions) -> Result<Transformer> {
        let ln = || layer_norm(d_model, o);
        let encoder = TransformerEncoder::new(&TransformerEncoderLayer::new(d_model, nhead, o)?, num_encoder_layers, Some(ln()?))?;
        let decoder = TransformerDecoder::new(&TransformerDecoderLayer::new(d_model, nhead, o)?, num_decoder_layers, Some(ln()?))?;
        let t = Transformer { encoder, decoder, d_model, nhead, batch_first: o.batch_first };
        for p in t.parameters() {
            if p.ndim() > 1 {
                init::xavier_uniform_(&p, 1.0)?;
            }
        }
        Ok(t)
    }

    /// `Transformer.generate_square_subsequent_mask(sz)`: see [`generate_square_subsequent_mask`].
    pub fn generate_square_subsequent_mask(sz: usize) -> Result<Tensor> {
        generate_square_subsequent_mask(sz)
    }

    /// `forward(src, tgt, masks...)`: encodes `src` and decodes `tgt` against it.
    pub fn forward(&self, src: &Tensor, tgt: &Tensor, m: &TransformerMasks) -> Result<Tensor> {
        let batched = src.ndim() == 3;
        let bdim = if self.batch_first { 0 } else { 1 };
        if batched && tgt.ndim() == 3 && src.shape()[bdim] != tgt.shape()[bdim] {
            return Err(Error::shape("Transformer", "the batch number of src and tgt must be equal"));
        }
        if src.shape().last() != Some(&self.d_model) || tgt.shape().last() != Some(&self.d_model) {
            return Err(Error::shape("Transformer", "the feature number of src and tgt must be equal to d_model"));
        }
        let memory = self.encoder.forward_with(src, m.src_mask, m.src_key_padding_mask, m.src_is_causal)?;
        let dm = DecoderMasks {
            tgt_mask: m.tgt_mask,
            memory_mask: m.memory_mask,
            tgt_key_padding_mask: m.tgt_key_padding_mask,
            memory_key_padding_mask: m.memory_key_padding_mask,
            tgt_is_causal: m.tgt_is_causal,
            memory_is_causal: m.memory_is_causal,
        };
        self.decoder.forward(tgt, &memory, &dm)
    }
}

impl Module for Transformer {
    fn type_name(&self) -> &'static str {
        "Transformer"
    }
    /// `[src, tgt]` without masks.
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (s, t) = two_inputs(self.type_name(), xs, "src and tgt")?;
        Ok(vec![Transformer::forward(self, s, t, &TransformerMasks::default())?])
    }
    field_children!(encoder, decoder);
}

//! A GPT-2 style language model: token and learned position embeddings, pre-LayerNorm blocks of
//! causal self-attention and a GELU MLP, a final LayerNorm, and an LM head tied to the token
//! embedding. Parameter names follow GPT-2/nanoGPT (`wte.weight`, `h.0.attn.c_attn.weight`, ...),
//! with `nn.Linear`'s `[out, in]` weight layout.

use magpie_core::autograd::no_grad;
use magpie_core::ops::nn::add_layer_norm::add_layer_norm_residual;
use magpie_core::ops::nn::loss::Reduction;
use magpie_core::ops::nn::{linear, lm_head_cross_entropy, scaled_dot_product_attention};
use magpie_core::{Error, Result, Tensor};
use magpie_nn::{init, Dropout, Embedding, LayerNorm, Linear, Module, ModuleExt, ModuleList};
use serde::{Deserialize, Serialize};

/// The model's shape. `GptConfig::validate` rejects impossible combinations with a clear message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GptConfig {
    /// Number of token ids.
    pub vocab_size: usize,
    /// The longest context (number of learned positions).
    pub block_size: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_embd: usize,
    /// Dropout probability after embeddings, attention projection and MLP.
    pub dropout: f64,
}

impl GptConfig {
    /// Checks that the sizes make a model.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::value("GptConfig", m));
        if self.vocab_size == 0 {
            return bad("vocab_size must be at least 1".into());
        }
        if self.block_size == 0 {
            return bad("block_size must be at least 1".into());
        }
        if self.n_layer == 0 {
            return bad("n_layer must be at least 1".into());
        }
        if self.n_head == 0 || self.n_embd == 0 {
            return bad(format!("n_head ({}) and n_embd ({}) must be at least 1", self.n_head, self.n_embd));
        }
        if self.n_embd % self.n_head != 0 {
            return bad(format!("n_embd ({}) must be divisible by n_head ({})", self.n_embd, self.n_head));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout must lie in [0, 1), got {}", self.dropout));
        }
        // keep parameter counts in a range where sizes cannot overflow
        let big = 1usize << 31;
        if self.vocab_size > big || self.block_size > big || self.n_embd > (1 << 16) || self.n_layer > 4096 {
            return bad("model sizes are too large".into());
        }
        Ok(())
    }
}

/// Causal multi-head self-attention: one fused `c_attn` projection to q, k, v and `c_proj` out.
pub struct CausalSelfAttention {
    pub c_attn: Linear,
    pub c_proj: Linear,
    pub resid_dropout: Dropout,
    pub n_head: usize,
    pub dropout: f64,
    training: bool,
}

impl CausalSelfAttention {
    fn new(cfg: &GptConfig) -> Result<Self> {
        Ok(CausalSelfAttention {
            c_attn: Linear::new(cfg.n_embd, 3 * cfg.n_embd, true)?,
            c_proj: Linear::new(cfg.n_embd, cfg.n_embd, true)?,
            resid_dropout: Dropout::new(cfg.dropout)?,
            n_head: cfg.n_head,
            dropout: cfg.dropout,
            training: true,
        })
    }
}

impl Module for CausalSelfAttention {
    fn type_name(&self) -> &'static str {
        "CausalSelfAttention"
    }
    /// `x [B, T, C]` to `[B, T, C]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.resid_dropout.forward(&self.c_proj.forward(&self.heads(x)?)?)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("c_attn".into(), &self.c_attn), ("c_proj".into(), &self.c_proj), ("resid_dropout".into(), &self.resid_dropout)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![
            ("c_attn".into(), &mut self.c_attn),
            ("c_proj".into(), &mut self.c_proj),
            ("resid_dropout".into(), &mut self.resid_dropout),
        ]
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}

impl CausalSelfAttention {
    /// The heads' outputs `[B, T, C]` for `x [B, T, C]`: attention up to `c_proj`'s input.
    fn heads(&self, x: &Tensor) -> Result<Tensor> {
        let &[b, t, c] = x.shape() else {
            return Err(Error::shape("CausalSelfAttention", format!("expected [B, T, C], got {:?}", x.shape())));
        };
        let (b, t, c, h) = (b as i64, t as i64, c as i64, self.n_head as i64);
        let qkv = self.c_attn.forward(x)?;
        // one split node (nanoGPT's `qkv.split(n_embd, dim=2)`): its gradient is one buffer the
        // three parts are copied into, not three zero-filled buffers added together
        let parts = qkv.split(c, 2)?;
        let heads = |t_: &Tensor| t_.reshape(&[b, t, h, c / h])?.transpose(1, 2);
        let (q, k, v) = (heads(&parts[0])?, heads(&parts[1])?, heads(&parts[2])?);
        let p = if self.training { self.dropout } else { 0.0 };
        let y = scaled_dot_product_attention(&q, &k, &v, None, p, true, None, false)?;
        y.transpose(1, 2)?.reshape(&[b, t, c])
    }
}

/// The MLP: `c_fc` (C to 4C), GELU (tanh approximation, as GPT-2), `c_proj` (4C to C).
pub struct Mlp {
    pub c_fc: Linear,
    pub c_proj: Linear,
    pub dropout: Dropout,
}

impl Module for Mlp {
    fn type_name(&self) -> &'static str {
        "MLP"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.dropout.forward(&self.c_proj.forward(&self.hidden(x)?)?)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("c_fc".into(), &self.c_fc), ("c_proj".into(), &self.c_proj), ("dropout".into(), &self.dropout)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("c_fc".into(), &mut self.c_fc), ("c_proj".into(), &mut self.c_proj), ("dropout".into(), &mut self.dropout)]
    }
}

impl Mlp {
    /// `gelu(c_fc(x))`, the input of `c_proj`. Not `bias_gelu`: its kernels timed slower here
    /// than the bias add and the vectorized GELU (ncu, NVIDIA H200, GPT-2 small's [8192, 3072]:
    /// 69 + 77 µs against 27 + 40 and 50 µs; benchmark/NOTES.md).
    fn hidden(&self, x: &Tensor) -> Result<Tensor> {
        self.c_fc.forward(x)?.gelu("tanh")
    }
}

/// A pre-LN transformer block: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`.
pub struct Block {
    pub ln_1: LayerNorm,
    pub attn: CausalSelfAttention,
    pub ln_2: LayerNorm,
    pub mlp: Mlp,
}

impl Block {
    fn new(cfg: &GptConfig) -> Result<Self> {
        Ok(Block {
            ln_1: LayerNorm::new(&[cfg.n_embd], 1e-5, true, true)?,
            attn: CausalSelfAttention::new(cfg)?,
            ln_2: LayerNorm::new(&[cfg.n_embd], 1e-5, true, true)?,
            mlp: Mlp {
                c_fc: Linear::new(cfg.n_embd, 4 * cfg.n_embd, true)?,
                c_proj: Linear::new(4 * cfg.n_embd, cfg.n_embd, true)?,
                dropout: Dropout::new(cfg.dropout)?,
            },
        })
    }
}

impl Module for Block {
    fn type_name(&self) -> &'static str {
        "Block"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.add(&self.attn.forward(&self.ln_1.forward(x)?)?)?;
        x.add(&self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("ln_1".into(), &self.ln_1), ("attn".into(), &self.attn), ("ln_2".into(), &self.ln_2), ("mlp".into(), &self.mlp)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![
            ("ln_1".into(), &mut self.ln_1),
            ("attn".into(), &mut self.attn),
            ("ln_2".into(), &mut self.ln_2),
            ("mlp".into(), &mut self.mlp),
        ]
    }
}

/// The GPT model. `forward(idx [B, T] int64)` gives logits `[B, T, vocab_size]`.
pub struct Gpt {
    pub config: GptConfig,
    pub wte: Embedding,
    pub wpe: Embedding,
    pub drop: Dropout,
    pub h: ModuleList<Block>,
    pub ln_f: LayerNorm,
    /// Position ids on the model's device (no upload per forward).
    pos: crate::positions::PositionIds,
}

impl Gpt {
    /// A new model with GPT-2's initialisation (normal(0, 0.02) weights, zero biases, residual
    /// projections scaled by 1/√(2·n_layer)), drawn from the default generator.
    pub fn new(config: GptConfig) -> Result<Gpt> {
        config.validate()?;
        let mut h = ModuleList::new();
        for _ in 0..config.n_layer {
            h.items.push(Box::new(Block::new(&config)?));
        }
        let mut m = Gpt {
            wte: Embedding::new(config.vocab_size, config.n_embd, None)?,
            wpe: Embedding::new(config.block_size, config.n_embd, None)?,
            drop: Dropout::new(config.dropout)?,
            h,
            ln_f: LayerNorm::new(&[config.n_embd], 1e-5, true, true)?,
            config,
            pos: Default::default(),
        };
        m.init_weights()?;
        Ok(m)
    }

    fn init_weights(&mut self) -> Result<()> {
        let _g = no_grad();
        let proj_std = 0.02 / (2.0 * self.config.n_layer as f64).sqrt();
        for (name, p) in self.named_parameters() {
            if name.ends_with(".bias") {
                init::zeros_(&p)?;
            } else if name.starts_with("ln") || name.contains(".ln_") {
                init::ones_(&p)?;
            } else if name.ends_with("c_proj.weight") {
                init::normal_(&p, 0.0, proj_std)?;
            } else {
                init::normal_(&p, 0.0, 0.02)?;
            }
        }
        Ok(())
    }

    /// Checks that `idx` is a `[B, T]` integer tensor with `T <= block_size`.
    fn check_idx(&self, idx: &Tensor) -> Result<(usize, usize)> {
        let &[b, t] = idx.shape() else {
            return Err(Error::shape("GPT", format!("expected token ids of shape [B, T], got {:?}", idx.shape())));
        };
        if idx.dtype().is_float() || idx.dtype().is_bool() {
            return Err(Error::dtype("GPT", format!("token ids must be integers, got {}", idx.dtype())));
        }
        if t == 0 || t > self.config.block_size {
            return Err(Error::value("GPT", format!("cannot forward a sequence of length {t}, block size is {}", self.config.block_size)));
        }
        Ok((b, t))
    }

    /// Logits `[B, T, vocab]` for token ids `[B, T]`.
    pub fn logits(&self, idx: &Tensor) -> Result<Tensor> {
        // the LM head shares the token embedding's weight (weight tying, as GPT-2)
        linear(&self.hidden(idx)?, &self.wte.weight, None)
    }

    /// The last layer norm's output `[B, T, n_embd]` (the LM head's input) for token ids `[B, T]`.
    fn hidden(&self, idx: &Tensor) -> Result<Tensor> {
        let (_, t) = self.check_idx(idx)?;
        // positions live where the ids are (the embedding kernel reads them on the model's device)
        let pos = self.pos.get(t, idx.device())?;
        let x = self.wte.forward(idx)?.add(&self.wpe.forward(&pos)?)?;
        let mut x = self.drop.forward(&x)?;
        if self.config.dropout == 0.0 || !self.drop.training {
            return self.hidden_fused(x);
        }
        for blk in &self.h.items {
            x = blk.forward(&x)?;
        }
        self.ln_f.forward(&x)
    }

    /// The blocks and `ln_f` without dropout: each residual add, the projection's bias before
    /// it and the LayerNorm after it (the next sublayer's, or `ln_f`) as one
    /// `add_layer_norm_residual`, which returns the residual stream and its normalized value
    /// (on CUDA one kernel forward, and the residual's gradient added inside the norm's backward
    /// kernel). The same sums as [`Block::forward`], with the bias added to the projection in
    /// the sum's dtype (float32 under autocast) instead of the projection's.
    fn hidden_fused(&self, x: Tensor) -> Result<Tensor> {
        let blocks = &self.h.items;
        let Some(first) = blocks.first() else { return self.ln_f.forward(&x) };
        let mut a = first.ln_1.forward(&x)?;
        let mut x = x;
        for (i, blk) in blocks.iter().enumerate() {
            let ln_2 = &blk.ln_2;
            let p = linear(&blk.attn.heads(&a)?, &blk.attn.c_proj.weight, None)?;
            let (y, h) = add_ln(&p, &x, blk.attn.c_proj.bias.as_ref(), ln_2)?;
            let p = linear(&blk.mlp.hidden(&y)?, &blk.mlp.c_proj.weight, None)?;
            let next = blocks.get(i + 1).map_or(&self.ln_f, |b| &b.ln_1);
            (a, x) = add_ln(&p, &h, blk.mlp.c_proj.bias.as_ref(), next)?;
        }
        Ok(a)
    }

    /// Mean cross-entropy (nats per token) of predicting `targets [B, T]` from `idx [B, T]`.
    pub fn loss(&self, idx: &Tensor, targets: &Tensor) -> Result<Tensor> {
        // head and loss as one op: on CUDA with an odd vocabulary (GPT-2's 50257) it skips the
        // padded copies of the logits and of their gradient (the values of the two ops)
        let x = self.hidden(idx)?;
        let c = self.config.n_embd as i64;
        lm_head_cross_entropy(&x.reshape(&[-1, c])?, &self.wte.weight, &targets.reshape(&[-1])?, -100, Reduction::Mean)
    }

    /// The parameters split for AdamW as GPT-2 training does: matrices (decayed) and the rest
    /// (biases, LayerNorm weights: not decayed).
    pub fn decay_groups(&self) -> (Vec<Tensor>, Vec<Tensor>) {
        self.parameters().into_iter().partition(|p| p.ndim() >= 2)
    }
}

impl Module for Gpt {
    fn type_name(&self) -> &'static str {
        "GPT"
    }
    fn forward(&self, idx: &Tensor) -> Result<Tensor> {
        self.logits(idx)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("wte".into(), &self.wte),
            ("wpe".into(), &self.wpe),
            ("drop".into(), &self.drop),
            ("h".into(), &self.h),
            ("ln_f".into(), &self.ln_f),
        ]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![
            ("wte".into(), &mut self.wte),
            ("wpe".into(), &mut self.wpe),
            ("drop".into(), &mut self.drop),
            ("h".into(), &mut self.h),
            ("ln_f".into(), &mut self.ln_f),
        ]
    }
}

/// `(ln(p + bias + residual), p + bias + residual)` for the LayerNorm module `ln`.
fn add_ln(p: &Tensor, residual: &Tensor, bias: Option<&Tensor>, ln: &LayerNorm) -> Result<(Tensor, Tensor)> {
    let shape: Vec<i64> = ln.normalized_shape.iter().map(|&v| v as i64).collect();
    add_layer_norm_residual(p, residual, bias, &shape, ln.weight.as_ref(), ln.bias.as_ref(), ln.eps)
}

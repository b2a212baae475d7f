//! `MultiheadAttention`: PyTorch's parameter layout and `F.multi_head_attention_forward`
//! semantics (masks, padding, bias_kv, zero attention, averaged weights), built on
//! `scaled_dot_product_attention` when the weights are not asked for.

use crate::init;
use crate::layers::linear::Linear;
use crate::module::Module;
use magpie_core::ops::nn::{dropout, linear, scaled_dot_product_attention};
use magpie_core::ops::shape_ops::cat;
use magpie_core::{default_dtype, Device, Error, Result, Tensor};

const OP: &str = "MultiheadAttention";

/// Constructor options of `nn.MultiheadAttention` beyond `embed_dim` and `num_heads`
/// (PyTorch's defaults via `Default`).
#[derive(Debug, Clone, PartialEq)]
pub struct MhaOptions {
    /// Dropout on the attention weights (training only).
    pub dropout: f64,
    /// Biases on the input and output projections.
    pub bias: bool,
    /// Learned `bias_k`/`bias_v` appended to the key/value sequences.
    pub add_bias_kv: bool,
    /// A zero key/value appended to the sequences.
    pub add_zero_attn: bool,
    /// Key feature size (`None` = `embed_dim`).
    pub kdim: Option<usize>,
    /// Value feature size (`None` = `embed_dim`).
    pub vdim: Option<usize>,
    /// Inputs and outputs are `[batch, seq, feature]` instead of `[seq, batch, feature]`.
    pub batch_first: bool,
}

impl Default for MhaOptions {
    fn default() -> Self {
        MhaOptions { dropout: 0.0, bias: true, add_bias_kv: false, add_zero_attn: false, kdim: None, vdim: None, batch_first: false }
    }
}

/// The optional arguments of `MultiheadAttention.forward` (PyTorch's defaults via `Default`:
/// `need_weights = true`, `average_attn_weights = true`).
#[derive(Debug, Clone, Copy)]
pub struct MhaArgs<'a> {
    /// `[N, S]` (or `[S]` unbatched): bool (true = ignore that key) or float (added).
    pub key_padding_mask: Option<&'a Tensor>,
    /// Also return the attention weights (computed explicitly, not through SDPA).
    pub need_weights: bool,
    /// `[L, S]` or `[N*num_heads, L, S]`: bool (true = not allowed) or float (added).
    pub attn_mask: Option<&'a Tensor>,
    /// Average the returned weights over heads (else `[N, H, L, S]`).
    pub average_attn_weights: bool,
    /// A hint that `attn_mask` is the causal mask; it must then be given, as in PyTorch.
    pub is_causal: bool,
}

impl Default for MhaArgs<'_> {
    fn default() -> Self {
        MhaArgs { key_padding_mask: None, need_weights: true, attn_mask: None, average_attn_weights: true, is_causal: false }
    }
}

/// `nn.MultiheadAttention`. With equal q/k/v sizes the projections are packed in
/// `in_proj_weight [3E, E]`; otherwise `q_proj_weight [E, E]`, `k_proj_weight [E, kdim]`,
/// `v_proj_weight [E, vdim]`. `out_proj` is a `Linear(E, E)` child.
pub struct MultiheadAttention {
    pub in_proj_weight: Option<Tensor>,
    pub q_proj_weight: Option<Tensor>,
    pub k_proj_weight: Option<Tensor>,
    pub v_proj_weight: Option<Tensor>,
    pub in_proj_bias: Option<Tensor>,
    pub bias_k: Option<Tensor>,
    pub bias_v: Option<Tensor>,
    pub out_proj: Linear,
    pub embed_dim: usize,
    pub kdim: usize,
    pub vdim: usize,
    pub num_heads: usize,
    pub head_dim: usize,
    pub dropout: f64,
    pub add_zero_attn: bool,
    pub batch_first: bool,
    pub training: bool,
}

fn param(shape: &[usize]) -> Result<Tensor> {
    Tensor::zeros_on(shape, default_dtype(), Device::Cpu)
}

/// Appends one zero column to the last dim of a (float) mask.
fn pad_last(m: &Tensor) -> Result<Tensor> {
    let mut s = m.shape().to_vec();
    let last = s.len() - 1;
    s[last] = 1;
    cat(&[m.clone(), Tensor::zeros_on(&s, m.dtype(), m.device())?], -1)
}

/// PyTorch's `_canonical_mask`: bool masks become float masks (`-inf` where true) of `dtype`.
fn canonical_mask(m: &Tensor, like: &Tensor, name: &str) -> Result<Tensor> {
    if m.dtype().is_bool() {
        m.zeros_like()?.to_dtype(like.dtype())?.masked_fill(m, f64::NEG_INFINITY)
    } else if m.dtype().is_float() {
        m.to_dtype(like.dtype())
    } else {
        Err(Error::dtype(OP, format!("only bool and floating types of {name} are supported")))
    }
}

impl MultiheadAttention {
    /// `nn.MultiheadAttention(embed_dim, num_heads)` with PyTorch's default options.
    pub fn new(embed_dim: usize, num_heads: usize) -> Result<MultiheadAttention> {
        Self::with_options(embed_dim, num_heads, &MhaOptions::default())
    }

    /// `nn.MultiheadAttention(embed_dim, num_heads, **options)`, initialised as PyTorch does
    /// (xavier-uniform projections, zero biases, xavier-normal `bias_k`/`bias_v`).
    pub fn with_options(embed_dim: usize, num_heads: usize, o: &MhaOptions) -> Result<MultiheadAttention> {
        if embed_dim == 0 || num_heads == 0 {
            return Err(Error::value(OP, format!("embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and num_heads={num_heads} instead")));
        }
        if embed_dim % num_heads != 0 {
            return Err(Error::value(OP, "embed_dim must be divisible by num_heads"));
        }
        if !(0.0..=1.0).contains(&o.dropout) {
            return Err(Error::value(OP, format!("dropout probability has to be between 0 and 1, but got {}", o.dropout)));
        }
        let e = embed_dim;
        let (kdim, vdim) = (o.kdim.unwrap_or(e), o.vdim.unwrap_or(e));
        let same = kdim == e && vdim == e;
        let leaf = |t: Tensor| t.with_requires_grad();
        let (mut in_w, mut qw, mut kw, mut vw) = (None, None, None, None);
        if same {
            let w = param(&[3 * e, e])?;
            init::xavier_uniform_(&w, 1.0)?;
            in_w = Some(leaf(w)?);
        } else {
            for (slot, d) in [(&mut qw, e), (&mut kw, kdim), (&mut vw, vdim)] {
                let w = param(&[e, d])?;
                init::xavier_uniform_(&w, 1.0)?;
                *slot = Some(leaf(w)?);
            }
        }
        let in_b = if o.bias { Some(leaf(param(&[3 * e])?)?) } else { None };
        let out_proj = Linear::new(e, e, o.bias)?;
        if let Some(b) = &out_proj.bias {
            init::zeros_(b)?;
        }
        let (mut bias_k, mut bias_v) = (None, None);
        if o.add_bias_kv {
            for slot in [&mut bias_k, &mut bias_v] {
                let b = param(&[1, 1, e])?;
                init::xavier_normal_(&b, 1.0)?;
                *slot = Some(leaf(b)?);
            }
        }
        Ok(MultiheadAttention {
            in_proj_weight: in_w,
            q_proj_weight: qw,
            k_proj_weight: kw,
            v_proj_weight: vw,
            in_proj_bias: in_b,
            bias_k,
            bias_v,
            out_proj,
            embed_dim: e,
            kdim,
            vdim,
            num_heads,
            head_dim: e / num_heads,
            dropout: o.dropout,
            add_zero_attn: o.add_zero_attn,
            batch_first: o.batch_first,
            training: true,
        })
    }

    /// The q, k and v projection weights (views into `in_proj_weight` when packed) and biases.
    fn projections(&self) -> Result<[(Tensor, Option<Tensor>); 3]> {
        let e = self.embed_dim as i64;
        let bias = |i: i64| -> Result<Option<Tensor>> { self.in_proj_bias.as_ref().map(|b| b.narrow(0, i * e, e)).transpose() };
        let w = |i: i64, sep: &Option<Tensor>| -> Result<Tensor> {
            match (&self.in_proj_weight, sep) {
                (Some(w), _) => w.narrow(0, i * e, e),
                (None, Some(w)) => Ok(w.clone()),
                (None, None) => Err(Error::value(OP, "missing projection weight")),
            }
        };
        Ok([
            (w(0, &self.q_proj_weight)?, bias(0)?),
            (w(1, &self.k_proj_weight)?, bias(1)?),
            (w(2, &self.v_proj_weight)?, bias(2)?),
        ])
    }

    /// `forward(query, key, value, key_padding_mask, need_weights, attn_mask,
    /// average_attn_weights, is_causal)`: returns `(attn_output, attn_weights)`; the weights are
    /// `Some` only with `need_weights`. Inputs are `[L, N, E]` (`[N, L, E]` with `batch_first`)
    /// or unbatched `[L, E]`.
    pub fn forward(&self, query: &Tensor, key: &Tensor, value: &Tensor, args: &MhaArgs) -> Result<(Tensor, Option<Tensor>)> {
        let batched = query.ndim() == 3;
        if !(query.ndim() == 2 || batched) || key.ndim() != query.ndim() || value.ndim() != query.ndim() {
            return Err(Error::shape(
                OP,
                format!("query, key and value should be all 2-D (unbatched) or all 3-D (batched), got {}-D, {}-D and {}-D", query.ndim(), key.ndim(), value.ndim()),
            ));
        }
        // everything below works on sequence-first [L, N, E]
        let seq_first = |t: &Tensor| -> Result<Tensor> {
            if !batched {
                t.unsqueeze(1)
            } else if self.batch_first {
                t.transpose(0, 1)
            } else {
                Ok(t.clone())
            }
        };
        let (q_in, k_in, v_in) = (seq_first(query)?, seq_first(key)?, seq_first(value)?);
        let (l, n, e) = (q_in.shape()[0], q_in.shape()[1], q_in.shape()[2]);
        let (s, h, hd) = (k_in.shape()[0], self.num_heads, self.head_dim);
        if e != self.embed_dim {
            return Err(Error::shape(OP, format!("was expecting embedding dimension of {}, but got {e}", self.embed_dim)));
        }
        if k_in.shape()[2] != self.kdim || v_in.shape()[2] != self.vdim {
            return Err(Error::shape(OP, format!("key and value feature sizes must be {} and {}, got {} and {}", self.kdim, self.vdim, k_in.shape()[2], v_in.shape()[2])));
        }
        if k_in.shape()[..2] != v_in.shape()[..2] || k_in.shape()[1] != n {
            return Err(Error::shape(OP, format!("key shape {:?} does not match value shape {:?} or the query batch {n}", key.shape(), value.shape())));
        }
        if args.is_causal && args.attn_mask.is_none() {
            return Err(Error::value(OP, "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method `generate_square_subsequent_mask` to create this mask."));
        }
        let mut kpm = match args.key_padding_mask {
            Some(m) => {
                let m = if batched { m.clone() } else { m.unsqueeze(0)? };
                if m.shape() != [n, s] {
                    return Err(Error::shape(OP, format!("expecting key_padding_mask shape of {:?}, but got {:?}", [n, s], m.shape())));
                }
                Some(canonical_mask(&m, &q_in, "key_padding_mask")?)
            }
            None => None,
        };
        let mut mask = match args.attn_mask {
            Some(m) => {
                let m = canonical_mask(m, &q_in, "attn_mask")?;
                match m.ndim() {
                    2 if m.shape() == [l, s] => Some(m.unsqueeze(0)?),
                    2 => return Err(Error::shape(OP, format!("The shape of the 2D attn_mask is {:?}, but should be {:?}.", m.shape(), [l, s]))),
                    3 if m.shape() == [n * h, l, s] => Some(m),
                    3 => return Err(Error::shape(OP, format!("The shape of the 3D attn_mask is {:?}, but should be {:?}.", m.shape(), [n * h, l, s]))),
                    d => return Err(Error::shape(OP, format!("attn_mask's dimension {d} is not supported"))),
                }
            }
            None => None,
        };

        let [(wq, bq), (wk, bk), (wv, bv)] = self.projections()?;
        let q = linear(&q_in, &wq, bq.as_ref())?;
        let mut k = linear(&k_in, &wk, bk.as_ref())?;
        let mut v = linear(&v_in, &wv, bv.as_ref())?;
        if let (Some(bk), Some(bv)) = (&self.bias_k, &self.bias_v) {
            let ex = [1, n as i64, e as i64];
            k = cat(&[k, bk.expand(&ex)?], 0)?;
            v = cat(&[v, bv.expand(&ex)?], 0)?;
            mask = mask.as_ref().map(pad_last).transpose()?;
            kpm = kpm.as_ref().map(pad_last).transpose()?;
        }
        // [T, N, E] -> [N*H, T, hd]
        let heads = |t: &Tensor| -> Result<Tensor> { t.reshape(&[t.shape()[0] as i64, (n * h) as i64, hd as i64])?.transpose(0, 1) };
        let q = heads(&q)?;
        let (mut k, mut v) = (heads(&k)?, heads(&v)?);
        if self.add_zero_attn {
            let z = Tensor::zeros_on(&[n * h, 1, hd], k.dtype(), k.device())?;
            k = cat(&[k, z.clone()], 1)?;
            v = cat(&[v, z], 1)?;
            mask = mask.as_ref().map(pad_last).transpose()?;
            kpm = kpm.as_ref().map(pad_last).transpose()?;
        }
        let src = k.shape()[1];
        if let Some(p) = kpm {
            let p = p.reshape(&[n as i64, 1, 1, src as i64])?.expand(&[n as i64, h as i64, 1, src as i64])?.reshape(&[(n * h) as i64, 1, src as i64])?;
            mask = Some(match mask {
                Some(m) => m.add(&p)?,
                None => p,
            });
        }
        let p_drop = if self.training { self.dropout } else { 0.0 };

        let (out, weights) = if args.need_weights {
            let qs = q.mul_scalar((1.0 / hd as f64).sqrt())?;
            let mut w = qs.matmul(&k.transpose(-2, -1)?)?;
            if let Some(m) = &mask {
                w = m.add(&w)?;
            }
            let mut w = w.softmax(-1, None)?;
            if p_drop > 0.0 {
                w = dropout(&w, p_drop, true, false)?;
            }
            let o = w.matmul(&v)?.transpose(0, 1)?.contiguous()?.reshape(&[(l * n) as i64, e as i64])?;
            let mut w = w.reshape(&[n as i64, h as i64, l as i64, src as i64])?;
            if args.average_attn_weights {
                w = w.mean_dims(Some(&[1]), false, None)?;
            }
            (o, Some(w))
        } else {
            let m4 = match mask {
                Some(m) if m.shape()[0] == 1 => Some(m.unsqueeze(0)?),
                // [N*H, L or 1, S] -> [N, H, L or 1, S]
                Some(m) => Some(m.reshape(&[n as i64, h as i64, -1, src as i64])?),
                None => None,
            };
            let q4 = q.reshape(&[n as i64, h as i64, l as i64, hd as i64])?;
            let k4 = k.reshape(&[n as i64, h as i64, src as i64, hd as i64])?;
            let v4 = v.reshape(&[n as i64, h as i64, src as i64, hd as i64])?;
            let o = scaled_dot_product_attention(&q4, &k4, &v4, m4.as_ref(), p_drop, false, None, false)?;
            (o.permute(&[2, 0, 1, 3])?.contiguous()?.reshape(&[(l * n) as i64, e as i64])?, None)
        };
        let out = self.out_proj.forward(&out)?.reshape(&[l as i64, n as i64, e as i64])?;
        let out = if !batched {
            out.squeeze_dims(&[1])?
        } else if self.batch_first {
            out.transpose(0, 1)?
        } else {
            out
        };
        let weights = match weights {
            Some(w) if !batched => Some(w.squeeze_dims(&[0])?),
            w => w,
        };
        Ok((out, weights))
    }
}

impl Module for MultiheadAttention {
    fn type_name(&self) -> &'static str {
        "MultiheadAttention"
    }
    /// `[query, key, value]` with the default arguments: `[attn_output, attn_weights]`.
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let [q, k, v] = xs else {
            return Err(Error::value(OP, format!("forward takes query, key and value, but {} inputs were given", xs.len())));
        };
        let (o, w) = MultiheadAttention::forward(self, q, k, v, &MhaArgs::default())?;
        Ok(std::iter::once(o).chain(w).collect())
    }
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        let mut v = Vec::new();
        for (n, t) in [
            ("in_proj_weight", &self.in_proj_weight),
            ("q_proj_weight", &self.q_proj_weight),
            ("k_proj_weight", &self.k_proj_weight),
            ("v_proj_weight", &self.v_proj_weight),
            ("in_proj_bias", &self.in_proj_bias),
            ("bias_k", &self.bias_k),
            ("bias_v", &self.bias_v),
        ] {
            if let Some(t) = t {
                v.push((n, t));
            }
        }
        v
    }
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        let mut v = Vec::new();
        for (n, t) in [
            ("in_proj_weight", &mut self.in_proj_weight),
            ("q_proj_weight", &mut self.q_proj_weight),
            ("k_proj_weight", &mut self.k_proj_weight),
            ("v_proj_weight", &mut self.v_proj_weight),
            ("in_proj_bias", &mut self.in_proj_bias),
            ("bias_k", &mut self.bias_k),
            ("bias_v", &mut self.bias_v),
        ] {
            if let Some(t) = t {
                v.push((n, t));
            }
        }
        v
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("out_proj".into(), &self.out_proj)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("out_proj".into(), &mut self.out_proj)]
    }
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
    fn is_training(&self) -> bool {
        self.training
    }
}

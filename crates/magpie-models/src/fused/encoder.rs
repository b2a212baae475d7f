//! The fused BERT encoder (`BertModel`, the encoder of `BertForMaskedLM`): embeddings + LayerNorm,
//! then per layer one cuBLAS GEMM for q|k|v, flash attention over the packed projections (keys
//! past each sequence's length masked), the output projection with bias + residual + LayerNorm
//! fused, the MLP with bias + GELU fused, and the pooler. Buffers are allocated once for
//! (max batch, max length); each input shape's forward is captured once as a CUDA graph.

use super::buffers::{opt_ptr, ptr, upload, Buf};
use super::kernels::{ActKind, Kernels};
use crate::auto::{AutoModel, ModelKind};
use crate::bert::BertModel;
use magpie_core::backend::cuda::attention::{self, AttnOperand, Causal, FlashParams};
use magpie_core::backend::cuda::device::{self, CudaDevice};
use magpie_core::backend::cuda::graph::{self, CudaGraph};
use magpie_core::backend::cuda::{memcpy, ops as cuda_ops};
use magpie_core::{DType, Device, Error, Result, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

/// One layer's weight addresses (q|k|v fused; norms as (weight, bias)).
struct EncLayer {
    qkv_w: Tensor,
    qkv_b: Tensor,
    o_w: u64,
    o_b: u64,
    ln1: (u64, u64),
    i_w: u64,
    i_b: u64,
    d_w: u64,
    d_b: u64,
    ln2: (u64, u64),
}

/// What one forward returns: transformers' `last_hidden_state` and `pooler_output`.
pub struct EncoderOutput {
    /// `[B, T, hidden]`.
    pub last_hidden_state: Tensor,
    /// `[B, hidden]`, when the model has a pooler.
    pub pooler_output: Option<Tensor>,
}

/// BERT as fused CUDA work (see the module docs).
pub struct FusedEncoder {
    dev: Arc<CudaDevice>,
    dtype: DType,
    k: Kernels,
    /// Tensors kept alive for the addresses below.
    _keep: Vec<Tensor>,
    layers: Vec<EncLayer>,
    emb: (u64, u64, u64),
    emb_ln: (u64, u64),
    pooler: Option<(u64, u64)>,
    hidden: usize,
    heads: usize,
    inter: usize,
    eps: f32,
    act: ActKind,
    vocab: usize,
    type_vocab: usize,
    max_positions: usize,
    max_batch: usize,
    max_len: usize,
    x: [Buf; 2],
    qkv: Buf,
    attn: Buf,
    o: Buf,
    mid: Buf,
    cls: Buf,
    pooled: Buf,
    ids: Buf,
    pos: Buf,
    types: Buf,
    lens: Buf,
    graphs: HashMap<(usize, usize), (CudaGraph, usize)>,
    /// Replay recorded graphs (false: launch the kernels one by one).
    pub cuda_graphs: bool,
}

fn bert_of(model: &AutoModel) -> Result<&BertModel> {
    match &model.kind {
        ModelKind::Bert(m) => Ok(m),
        ModelKind::BertForMaskedLM(m) => Ok(&m.bert),
        _ => Err(Error::unsupported("fused", format!("the fused encoder covers BERT, not {}", model.architecture.class_name()))),
    }
}

fn norm(n: &magpie_nn::LayerNorm) -> Result<(u64, u64)> {
    match &n.weight {
        Some(w) => Ok((ptr(w)?, opt_ptr(&n.bias)?)),
        None => Err(Error::unsupported("fused", "a LayerNorm without weight")),
    }
}

fn need_bias(b: &Option<Tensor>) -> Result<Tensor> {
    b.clone().ok_or_else(|| Error::unsupported("fused", "BERT projections without biases"))
}

impl FusedEncoder {
    /// The engine for a loaded BERT on CUDA, for inputs of at most `max_batch` x `max_len` tokens.
    pub fn from_model(model: &AutoModel, max_batch: usize, max_len: usize) -> Result<FusedEncoder> {
        let op = "fused";
        // no autograd record: the fused copies must not keep the originals alive through a graph
        let _g = magpie_core::autograd::no_grad();
        let m = bert_of(model)?;
        let c = &m.config;
        let e = &m.embeddings;
        let Device::Cuda(ord) = e.word_embeddings.weight.device() else {
            return Err(Error::device(op, "the fused encoder runs on CUDA; the model is on the CPU"));
        };
        if max_batch == 0 || max_len == 0 || max_len > c.max_position_embeddings {
            return Err(Error::value(op, format!("max_batch {max_batch} and max_len {max_len} (at most the model's {} positions) must be positive", c.max_position_embeddings)));
        }
        let dtype = e.word_embeddings.weight.dtype();
        let dev = device::device(op, ord)?;
        let k = Kernels::new(&dev, dtype)?;
        let mut keep = Vec::new();
        let mut layers = Vec::new();
        for l in m.encoder.layer.iter() {
            let s = &l.attention.self_attn;
            let qkv_w = magpie_core::ops::shape_ops::cat(&[s.query.weight.clone(), s.key.weight.clone(), s.value.weight.clone()], 0)?;
            let qkv_b = magpie_core::ops::shape_ops::cat(&[need_bias(&s.query.bias)?, need_bias(&s.key.bias)?, need_bias(&s.value.bias)?], 0)?;
            let (o, i, d) = (&l.attention.output.dense, &l.intermediate.dense, &l.output.dense);
            for t in [&o.weight, &i.weight, &d.weight] {
                keep.push(t.clone());
            }
            layers.push(EncLayer {
                o_w: ptr(&o.weight)?,
                o_b: ptr(&need_bias(&o.bias)?)?,
                ln1: norm(&l.attention.output.layer_norm)?,
                i_w: ptr(&i.weight)?,
                i_b: ptr(&need_bias(&i.bias)?)?,
                d_w: ptr(&d.weight)?,
                d_b: ptr(&need_bias(&d.bias)?)?,
                ln2: norm(&l.output.layer_norm)?,
                qkv_w,
                qkv_b,
            });
            for n in [&l.attention.output.layer_norm, &l.output.layer_norm] {
                keep.extend(n.weight.iter().cloned());
                keep.extend(n.bias.iter().cloned());
            }
            for b in [&o.bias, &i.bias, &d.bias] {
                keep.extend(b.iter().cloned());
            }
        }
        for t in [&e.word_embeddings.weight, &e.position_embeddings.weight, &e.token_type_embeddings.weight] {
            keep.push(t.clone());
        }
        keep.extend(e.layer_norm.weight.iter().cloned());
        keep.extend(e.layer_norm.bias.iter().cloned());
        let pooler = match &m.pooler {
            Some(p) => {
                keep.push(p.dense.weight.clone());
                keep.push(need_bias(&p.dense.bias)?);
                Some((ptr(&p.dense.weight)?, ptr(&need_bias(&p.dense.bias)?)?))
            }
            None => None,
        };
        let (h, rows) = (c.hidden_size, max_batch * max_len);
        let bf = |dt: DType, n: usize, what: &str| Buf::new(&dev, dt, n, what);
        Ok(FusedEncoder {
            emb: (ptr(&e.word_embeddings.weight)?, ptr(&e.position_embeddings.weight)?, ptr(&e.token_type_embeddings.weight)?),
            emb_ln: norm(&e.layer_norm)?,
            pooler,
            hidden: h,
            heads: c.num_attention_heads,
            inter: c.intermediate_size,
            eps: c.layer_norm_eps as f32,
            act: super::weights::act_kind(c.hidden_act),
            vocab: c.vocab_size,
            type_vocab: c.type_vocab_size,
            max_positions: c.max_position_embeddings,
            max_batch,
            max_len,
            x: [bf(dtype, rows * h, "hidden states")?, bf(dtype, rows * h, "hidden states")?],
            qkv: bf(dtype, rows * 3 * h, "q/k/v projections")?,
            attn: bf(dtype, rows * h, "attention output")?,
            o: bf(dtype, rows * h, "projection output")?,
            mid: bf(dtype, rows * c.intermediate_size, "MLP activation")?,
            cls: bf(dtype, max_batch * h, "first tokens")?,
            pooled: bf(dtype, max_batch * h, "pooler projection")?,
            ids: bf(DType::I32, rows, "token ids")?,
            pos: bf(DType::I32, rows, "positions")?,
            types: bf(DType::I32, rows, "token types")?,
            lens: bf(DType::I32, max_batch, "sequence lengths")?,
            graphs: HashMap::new(),
            cuda_graphs: true,
            dev,
            dtype,
            k,
            _keep: keep,
            layers,
        })
    }

    /// `BertModel.forward(input_ids, attention_mask, token_type_ids)` for `input_ids [B, T]`
    /// (int64); the attention mask, when given, must keep a prefix of each row (right padding:
    /// ones then zeros), which is what tokenizers produce; other masks are an error (use the module
    /// path). Padded positions' outputs are computed like the module path's but attend to the row's
    /// tokens only.
    pub fn forward(&mut self, input_ids: &Tensor, attention_mask: Option<&Tensor>, token_type_ids: Option<&Tensor>) -> Result<EncoderOutput> {
        let op = "fused.bert";
        let &[b, t] = input_ids.shape() else {
            return Err(Error::shape(op, format!("input_ids must be [batch, seq], got {:?}", input_ids.shape())));
        };
        if b == 0 || t == 0 || b > self.max_batch || t > self.max_len {
            return Err(Error::value(op, format!("input of {b} x {t} tokens; the engine was built for 1..={} x 1..={} (at most {} positions)", self.max_batch, self.max_len, self.max_positions)));
        }
        let host_i64 = |x: &Tensor, what: &str| -> Result<Vec<i64>> {
            if x.shape() != [b, t] {
                return Err(Error::shape(op, format!("{what} must be [{b}, {t}] like input_ids, got {:?}", x.shape())));
            }
            x.to_device(Device::Cpu)?.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()
        };
        let ids = host_i64(input_ids, "input_ids")?;
        if let Some(&bad) = ids.iter().find(|&&v| v < 0 || v as usize >= self.vocab) {
            return Err(Error::index(op, format!("token id {bad} is outside the vocabulary (size {})", self.vocab)));
        }
        let lens: Vec<i32> = match attention_mask {
            None => vec![t as i32; b],
            Some(m) => {
                let m = host_i64(m, "attention_mask")?;
                let mut lens = Vec::with_capacity(b);
                for r in 0..b {
                    let row = &m[r * t..(r + 1) * t];
                    let n = row.iter().take_while(|&&v| v != 0).count();
                    if row[n..].iter().any(|&v| v != 0) {
                        return Err(Error::unsupported(op, "the fused encoder takes right-padded attention masks (ones, then zeros); use the module path for others"));
                    }
                    lens.push(n as i32);
                }
                lens
            }
        };
        let types: Vec<i32> = match token_type_ids {
            None => vec![0; b * t],
            Some(tt) => {
                let v = host_i64(tt, "token_type_ids")?;
                if let Some(&bad) = v.iter().find(|&&x| x < 0 || x as usize >= self.type_vocab) {
                    return Err(Error::index(op, format!("token type {bad} is outside 0..{}", self.type_vocab)));
                }
                v.into_iter().map(|x| x as i32).collect()
            }
        };
        let ids: Vec<i32> = ids.into_iter().map(|v| v as i32).collect();
        let pos: Vec<i32> = (0..b * t).map(|i| (i % t) as i32).collect();
        upload(&self.dev, self.ids.ptr, &ids)?;
        upload(&self.dev, self.pos.ptr, &pos)?;
        upload(&self.dev, self.types.ptr, &types)?;
        upload(&self.dev, self.lens.ptr, &lens)?;
        let out_buf = if self.cuda_graphs {
            if !self.graphs.contains_key(&(b, t)) {
                let dev = self.dev.clone();
                let mut which = 0;
                let g = graph::capture(&dev, || {
                    which = self.body(b, t)?;
                    Ok(())
                })?;
                self.graphs.insert((b, t), (g, which));
            }
            let (g, which) = self.graphs.get(&(b, t)).ok_or_else(|| Error::device(op, "the forward graph is missing"))?;
            g.replay()?;
            *which
        } else {
            self.body(b, t)?
        };
        let Device::Cuda(ord) = self.device() else { return Err(Error::device(op, "not a CUDA engine")) };
        let h = self.hidden;
        let last = cuda_ops::empty(op, ord, self.dtype, &[b, t, h])?;
        // SAFETY: both buffers hold b * t * h elements of the dtype.
        unsafe { memcpy::dtod(&self.dev, ptr(&last)?, self.x[out_buf].ptr, b * t * h * self.dtype.size()) }?;
        let pooler_output = match self.pooler {
            Some(_) => {
                let p = cuda_ops::empty(op, ord, self.dtype, &[b, h])?;
                // SAFETY: both buffers hold b * h elements of the dtype.
                unsafe { memcpy::dtod(&self.dev, ptr(&p)?, self.pooled.ptr, b * h * self.dtype.size()) }?;
                Some(p)
            }
            None => None,
        };
        Ok(EncoderOutput { last_hidden_state: last, pooler_output })
    }

    /// The device.
    pub fn device(&self) -> Device {
        Device::Cuda(self.dev.ordinal)
    }

    /// Queues the forward of `b` x `t` tokens from the id/position/type/length buffers; returns
    /// which of the two hidden-state buffers holds the output.
    fn body(&self, b: usize, t: usize) -> Result<usize> {
        let (d, k, dt) = (&*self.dev, &self.k, self.dtype);
        let (h, m) = (self.hidden, b * t);
        let hd = h / self.heads;
        let (x0, x1) = (self.x[0].ptr, self.x[1].ptr);
        k.embed(d, m, self.ids.ptr, self.pos.ptr, self.emb.0, self.emb.1, x1, h, 0, self.emb.2, self.types.ptr)?;
        k.add_norm(d, m, x1, 0, 0, self.emb_ln.0, self.emb_ln.1, x0, h, self.eps, false)?;
        // every layer reads x[0] and leaves its output there (x[1] holds the mid-layer residual)
        let cur = 0;
        for l in &self.layers {
            let (xa, xb) = (self.x[cur].ptr, self.x[1 - cur].ptr);
            k.linear(d, m, 3 * h, h, xa, ptr(&l.qkv_w)?, self.qkv.ptr, dt, false)?;
            k.act(d, m, 3 * h, self.qkv.ptr, ptr(&l.qkv_b)?, self.qkv.ptr, ActKind::Identity, false)?;
            let p = FlashParams { dtype: dt, batch: b, n_heads: self.heads, n_kv_heads: self.heads, head_dim: hd, q_len: t, kv_len: t, scale: 1.0 / (hd as f32).sqrt(), causal: Causal::None };
            let opd = |off: usize| AttnOperand { ptr: self.qkv.at(off, dt), sb: (t * 3 * h) as i64, sh: hd as i64, ss: (3 * h) as i64 };
            let out = AttnOperand { ptr: self.attn.ptr, sb: (t * h) as i64, sh: hd as i64, ss: h as i64 };
            attention::flash_forward(d, &p, opd(0), opd(h), opd(2 * h), out, Some(self.lens.ptr))?;
            k.linear(d, m, h, h, self.attn.ptr, l.o_w, self.o.ptr, dt, false)?;
            // post-LN: xb = LN(xa + o + b_o); the residual stream moves to xb
            k.add_norm(d, m, xa, self.o.ptr, l.o_b, l.ln1.0, l.ln1.1, xb, h, self.eps, false)?;
            k.linear(d, m, self.inter, h, xb, l.i_w, self.mid.ptr, dt, false)?;
            k.act(d, m, self.inter, self.mid.ptr, l.i_b, self.mid.ptr, self.act, false)?;
            k.linear(d, m, h, self.inter, self.mid.ptr, l.d_w, self.o.ptr, dt, false)?;
            k.add_norm(d, m, xb, self.o.ptr, l.d_b, l.ln2.0, l.ln2.1, xa, h, self.eps, false)?;
        }
        if let Some((w, bias)) = self.pooler {
            // pooler: tanh(W x[:, 0] + b) over each sequence's first token
            for r in 0..b {
                // SAFETY: row r * t of the output buffer and row r of `cls` hold h elements each.
                unsafe { memcpy::dtod(d, self.cls.at(r * h, dt), self.x[cur].at(r * t * h, dt), h * dt.size()) }?;
            }
            k.linear(d, b, h, h, self.cls.ptr, w, self.pooled.ptr, dt, false)?;
            k.act(d, b, h, self.pooled.ptr, bias, self.pooled.ptr, ActKind::Tanh, false)?;
        }
        Ok(cur)
    }
}

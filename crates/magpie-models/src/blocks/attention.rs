//! Multi-head attention after the projections, shared by every architecture: split heads, rotary
//! embeddings, the KV cache, `scaled_dot_product_attention` (GQA included) and merging heads.
//! The projections differ per model and stay in the model files.

use super::kv_cache::KvCache;
use super::rope;
use magpie_core::ops::nn::scaled_dot_product_attention;
use magpie_core::{Device, Error, Result, Tensor};

/// Which keys each query may see in one forward call.
pub struct AttnMask {
    /// Bool `[B, 1, T, S]` (or broadcastable), true where a query may attend to a key.
    mask: Option<Tensor>,
    /// Plain causal attention over a fresh sequence (no mask tensor needed).
    is_causal: bool,
}

fn key_mask(attention_mask: &Tensor, s: usize) -> Result<Tensor> {
    let &[b, sm] = attention_mask.shape() else {
        return Err(Error::shape("attention", format!("attention_mask must be [batch, seq], got {:?}", attention_mask.shape())));
    };
    if sm != s {
        return Err(Error::shape("attention", format!("attention_mask covers {sm} positions but the keys are {s}")));
    }
    attention_mask.ne_scalar(0)?.reshape(&[b as i64, 1, 1, s as i64])
}

impl AttnMask {
    /// Every query sees every key that `attention_mask [B, S]` (1 = token, 0 = padding) keeps.
    pub fn bidirectional(attention_mask: Option<&Tensor>, s: usize) -> Result<AttnMask> {
        Ok(AttnMask { mask: attention_mask.map(|m| key_mask(m, s)).transpose()?, is_causal: false })
    }

    /// Causal attention for `t` new queries after `past` cached positions; `attention_mask`
    /// (`[B, past + t]`, 1 = token) also hides padded keys.
    pub fn causal(attention_mask: Option<&Tensor>, past: usize, t: usize, device: Device) -> Result<AttnMask> {
        let s = past + t;
        let causal = || -> Result<Tensor> {
            let rows = Tensor::arange(past as i64, s as i64, 1i64)?.reshape(&[t as i64, 1])?;
            let cols = Tensor::arange(0i64, s as i64, 1i64)?.reshape(&[1, s as i64])?;
            cols.le(&rows)?.to_device(device)
        };
        match attention_mask {
            None if past == 0 && t > 1 => Ok(AttnMask { mask: None, is_causal: true }),
            None if t == 1 => Ok(AttnMask { mask: None, is_causal: false }),
            None => Ok(AttnMask { mask: Some(causal()?), is_causal: false }),
            Some(m) => {
                let keys = key_mask(m, s)?;
                let mask = if t == 1 { keys } else { keys.logical_and(&causal()?)? };
                Ok(AttnMask { mask: Some(mask), is_causal: false })
            }
        }
    }
}

/// Head counts of an attention layer.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

/// Attention of projected `q [B, T, H*D]` over `k`, `v` (`[B, T, H_kv*D]`): rotary embeddings
/// (`cos`, `sin` tables) when given, this step's keys and values appended to `cache` (layer `layer`)
/// when given, then `dropout(softmax(q kᵀ * scale + mask)) v` with heads merged back to `[B, T, H*D]`.
#[allow(clippy::too_many_arguments)]
pub fn attend(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    heads: Heads,
    rope_tables: Option<(&Tensor, &Tensor)>,
    mask: &AttnMask,
    cache: Option<(&mut KvCache, usize)>,
    scale: Option<f64>,
    dropout_p: f64,
) -> Result<Tensor> {
    let &[b, t, _] = q.shape() else {
        return Err(Error::shape("attention", format!("queries must be [B, T, H*D], got {:?}", q.shape())));
    };
    let (b, t) = (b as i64, t as i64);
    let d = heads.head_dim as i64;
    let split = |x: &Tensor, h: usize| x.reshape(&[b, t, h as i64, d])?.transpose(1, 2);
    let (mut q, mut k, v) = (split(q, heads.n_heads)?, split(k, heads.n_kv_heads)?, split(v, heads.n_kv_heads)?);
    if let Some((cos, sin)) = rope_tables {
        q = rope::apply(&q, cos, sin)?;
        k = rope::apply(&k, cos, sin)?;
    }
    let (k, v) = match cache {
        Some((c, layer)) => c.append(layer, &k, &v)?,
        None => (k, v),
    };
    let gqa = heads.n_kv_heads != heads.n_heads;
    let y = scaled_dot_product_attention(&q, &k, &v, mask.mask.as_ref(), dropout_p, mask.is_causal, scale, gqa)?;
    y.transpose(1, 2)?.reshape(&[b, t, (heads.n_heads * heads.head_dim) as i64])
}

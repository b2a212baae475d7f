//! `torch.ops.aten._scaled_dot_product_flash_attention_for_cpu`: attention that also returns the
//! log-sum-exp of each query's scores (what a flash-attention backward needs), as a composite of
//! the math path. The log-sum-exp is not differentiable, as in PyTorch.

use super::attention::causal_mask;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p=0.0,
/// is_causal=False, *, attn_mask=None, scale=None)`: `(output, logsumexp)` for `[B, H, L, E]`
/// query and `[B, H, S, E]` key/value; `logsumexp` is `[B, H, L]`, over the scaled and masked
/// scores. Dropout is refused (PyTorch's CPU kernel has none either).
///
/// ```
/// # use magpie_core::Tensor;
/// let q = Tensor::from_vec(vec![0.0f32; 8], &[1, 1, 2, 4])?;
/// let v = Tensor::from_vec((0..12).map(|i| i as f32).collect(), &[1, 1, 3, 4])?;
/// let (out, lse) = magpie_core::ops::nn::sdpa_with_lse(&q, &v, &v, 0.0, false, None, None)?;
/// assert_eq!(out.shape(), &[1, 1, 2, 4]);
/// assert!((lse.to_vec::<f32>()?[0] - 3f32.ln()).abs() < 1e-6); // equal scores over 3 keys
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn sdpa_with_lse(q: &Tensor, k: &Tensor, v: &Tensor, dropout_p: f64, is_causal: bool, mask: Option<&Tensor>, scale: Option<f64>) -> Result<(Tensor, Tensor)> {
    let op = "_scaled_dot_product_flash_attention_for_cpu";
    if dropout_p != 0.0 {
        return Err(Error::unsupported(op, "dropout_p > 0"));
    }
    if q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4 {
        return Err(Error::shape(op, format!("{op}: Accept only 4 dims inputs shape of {{B, H, T, K}}, got query {:?}, key {:?}, value {:?}", q.shape(), k.shape(), v.shape())));
    }
    if q.dtype() != k.dtype() || q.dtype() != v.dtype() {
        return Err(Error::dtype(op, format!("{op}: Q/K/V must have the same data type, got {}, {} and {}", q.dtype(), k.dtype(), v.dtype())));
    }
    super::util::check_float(op, q)?;
    if is_causal && mask.is_some() {
        return Err(Error::value(op, format!("{op}: Explicit attn_mask should not be set when is_causal=True")));
    }
    let e = q.shape()[3];
    let (l, s) = (q.shape()[2], k.shape()[2]);
    let sc = scale.unwrap_or(1.0 / (e as f64).sqrt());
    let mut att = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(sc)?;
    if is_causal {
        att = att.masked_fill(&causal_mask(l, s, att.device())?, f64::NEG_INFINITY)?;
    }
    if let Some(m) = mask {
        att = if m.dtype().is_bool() { m.where_(&att, &att.full_like(f64::NEG_INFINITY)?)? } else { att.add(m)? };
    }
    let lse = att.detach().logsumexp(&[-1], false)?;
    let out = att.safe_softmax(-1, None)?.matmul(v)?;
    Ok((out, lse))
}

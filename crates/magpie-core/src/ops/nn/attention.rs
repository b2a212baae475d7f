//! `scaled_dot_product_attention` as a composite, PyTorch's math path:
//! `safe_softmax(q k^T * scale + mask) v` (a row whose keys are all masked gives zeros, not NaN). The products
//! are `matmul`s (batched GEMMs reading the transposed key in place, parallel over the batch and
//! heads; their gradients are two more), the causal mask fills with a scalar.

use crate::tensor::Tensor;
use crate::{Error, Result};

/// Repeats each head of `[.., H, S, E]` `r` times (`repeat_interleave(r, dim=-3)`).
pub(super) fn repeat_heads(t: &Tensor, r: usize) -> Result<Tensor> {
    if r == 1 {
        return Ok(t.clone());
    }
    let nd = t.ndim();
    let mut s = t.shape().to_vec();
    let u = t.unsqueeze(nd as i64 - 2)?;
    let mut es = u.shape().to_vec();
    es[nd - 2] = r;
    let e = u.broadcast_to(&es)?;
    s[nd - 3] *= r;
    e.reshape(&s.iter().map(|&v| v as i64).collect::<Vec<_>>())
}

/// The `[l, s]` mask of `is_causal` (top-left aligned): true where key `j > i` is hidden.
pub(super) fn causal_mask(l: usize, s: usize, device: crate::device::Device) -> Result<Tensor> {
    let rows = Tensor::arange(0i64, l as i64, 1i64)?.reshape(&[l as i64, 1])?;
    let cols = Tensor::arange(0i64, s as i64, 1i64)?.reshape(&[1, s as i64])?;
    cols.gt(&rows)?.to_device(device)
}

/// `scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)`.
#[allow(clippy::too_many_arguments)]
pub fn scaled_dot_product_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, dropout_p: f64, is_causal: bool, scale: Option<f64>, enable_gqa: bool) -> Result<Tensor> {
    let _prof = crate::profiler::op_opt("scaled_dot_product_attention", &[Some(q), Some(k), Some(v), mask]);
    if let Some(c) = crate::amp::optional("scaled_dot_product_attention", &[Some(q), Some(k), Some(v), mask])? {
        return scaled_dot_product_attention(c.req(0)?, c.req(1)?, c.req(2)?, c.opt(3), dropout_p, is_causal, scale, enable_gqa);
    }
    let op = "scaled_dot_product_attention";
    if q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2 {
        return Err(Error::shape(op, "query, key and value must be at least 2-D"));
    }
    if q.dtype() != k.dtype() || q.dtype() != v.dtype() {
        return Err(Error::dtype(op, format!("Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: {} and value.dtype: {} instead.", q.dtype(), k.dtype(), v.dtype())));
    }
    super::util::check_float(op, q)?;
    if mask.is_some() && is_causal {
        return Err(Error::value(op, "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"));
    }
    if let Some(m) = mask {
        if !m.dtype().is_bool() && m.dtype() != q.dtype() {
            return Err(Error::dtype(op, format!("Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {} and  query.dtype: {} instead.", m.dtype(), q.dtype())));
        }
    }
    let e = q.shape()[q.ndim() - 1];
    let (l, s) = (q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]);
    let sc = scale.unwrap_or(1.0 / (e as f64).sqrt());
    #[cfg(feature = "cuda")]
    if mask.is_none() && dropout_p == 0.0 {
        if let Some(y) = super::attention_cuda::sdpa_flash(q, k, v, is_causal, sc, enable_gqa)? {
            return Ok(y);
        }
    }
    // half tensors (where CUDA's flash kernel does not apply): scores, softmax and products in
    // float32, rounded once (as PyTorch's CPU flash kernel, which accumulates in float32, and
    // its math backend, which upcasts half inputs); a float mask joins in float32 too
    if let Some(h) = crate::ops::acc::half_acc(&[q, k, v]) {
        use crate::ops::acc::{down, up, up_opt};
        let m = up_opt(mask)?;
        return down(scaled_dot_product_attention(&up(q)?, &up(k)?, &up(v)?, m.as_ref(), dropout_p, is_causal, Some(sc), enable_gqa)?, h);
    }
    if mask.is_none() && dropout_p == 0.0 {
        if let Some(y) = super::attention_fused::sdpa_fused(q, k, v, is_causal, sc, enable_gqa)? {
            return Ok(y);
        }
    }
    let (mut k, mut v) = (k.clone(), v.clone());
    if enable_gqa && q.ndim() >= 3 && k.ndim() >= 3 {
        let (hq, hk, hv) = (q.shape()[q.ndim() - 3], k.shape()[k.ndim() - 3], v.shape()[v.ndim() - 3]);
        if hk == 0 || hv == 0 || hq % hk != 0 || hq % hv != 0 {
            return Err(Error::value(op, format!("Number of heads in key and value must divide the number of heads in query (got {hq} query heads, {hk} key heads, {hv} value heads)")));
        }
        k = repeat_heads(&k, hq / hk)?;
        v = repeat_heads(&v, hq / hv)?;
    }
    let mut att = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(sc)?;
    let ninf = |t: &Tensor| t.full_like(f64::NEG_INFINITY);
    // on CUDA the causal mask is applied inside the softmax kernel (no masked copy of the scores,
    // no `where` in the backward); no row is fully masked there, so it equals the safe softmax
    let fused = if is_causal && mask.is_none() { crate::ops::softmax::causal_softmax_cuda(&att)? } else { None };
    let mut p = match fused {
        Some(p) => p,
        None => {
            if is_causal {
                att = att.masked_fill(&causal_mask(l, s, att.device())?, f64::NEG_INFINITY)?;
            }
            if let Some(m) = mask {
                att = if m.dtype().is_bool() { m.where_(&att, &ninf(&att)?)? } else { att.add(m)? };
            }
            // PyTorch's math backend uses `_safe_softmax`: fully masked rows are 0 (and so is their gradient)
            att.safe_softmax(-1, None)?
        }
    };
    if dropout_p > 0.0 {
        p = super::dropout::dropout(&p, dropout_p, true, false)?;
    }
    p.matmul(&v)
}

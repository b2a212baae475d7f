//! `scaled_dot_product_attention` as a composite: `softmax(q k^T * scale + mask) v`, with a small
//! batched GEMM primitive (its gradient is two more batched GEMMs).

use super::util::{from_real, real_vec, with_real};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;

/// `a [B, M, K] @ b [B, K, N]` for floating tensors of one dtype, differentiable.
pub(crate) fn bmm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (bs, m, k) = (a.shape()[0], a.shape()[1], a.shape()[2]);
    let n = b.shape()[2];
    if b.shape()[0] != bs || b.shape()[1] != k || a.dtype() != b.dtype() {
        return Err(Error::shape("bmm", format!("cannot multiply {:?} ({}) and {:?} ({})", a.shape(), a.dtype(), b.shape(), b.dtype())));
    }
    let out = with_real!(a.dtype(), R, {
        let (av, bv) = (real_vec::<R>(a)?, real_vec::<R>(b)?);
        let mut c = vec![R::default(); bs * m * n];
        if m * n > 0 {
            c.par_chunks_mut(m * n).enumerate().for_each(|(i, ci)| {
                let (ai, bi) = (&av[i * m * k..(i + 1) * m * k], &bv[i * k * n..(i + 1) * k * n]);
                for r in 0..m {
                    for l in 0..k {
                        let x = ai[r * k + l];
                        let row = &bi[l * n..(l + 1) * n];
                        for (o, &y) in ci[r * n..(r + 1) * n].iter_mut().zip(row) {
                            *o += x * y;
                        }
                    }
                }
            });
        }
        from_real(c, &[bs, m, n], a.dtype())?
    });
    let (sa, sb) = (autograd::Saved::new("bmm", a), autograd::Saved::new("bmm", b));
    autograd::record("Bmm", &[a, b], &[out.clone()], move |ctx, g| {
        let (a, b) = (sa.get()?, sb.get()?);
        let ga = if ctx.needs_input_grad(0) { Some(bmm(&g[0], &b.transpose(1, 2)?)?) } else { None };
        let gb = if ctx.needs_input_grad(1) { Some(bmm(&a.transpose(1, 2)?, &g[0])?) } else { None };
        Ok(vec![ga, gb])
    });
    Ok(out)
}

/// `a [.., M, K] @ b [.., K, N]` with broadcast batch dims.
fn batched_mm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (na, nb) = (a.ndim(), b.ndim());
    let batch = crate::shape::broadcast_shapes("matmul", &a.shape()[..na - 2], &b.shape()[..nb - 2])?;
    let mut sa = batch.clone();
    sa.extend(&a.shape()[na - 2..]);
    let mut sb = batch.clone();
    sb.extend(&b.shape()[nb - 2..]);
    let bsz: usize = batch.iter().product();
    let a3 = a.broadcast_to(&sa)?.reshape(&[bsz as i64, a.shape()[na - 2] as i64, a.shape()[na - 1] as i64])?;
    let b3 = b.broadcast_to(&sb)?.reshape(&[bsz as i64, b.shape()[nb - 2] as i64, b.shape()[nb - 1] as i64])?;
    let c = bmm(&a3, &b3)?;
    let mut so: Vec<i64> = batch.iter().map(|&v| v as i64).collect();
    so.extend([a.shape()[na - 2] as i64, b.shape()[nb - 1] as i64]);
    c.reshape(&so)
}

/// Repeats each head of `[.., H, S, E]` `r` times (`repeat_interleave(r, dim=-3)`).
fn repeat_heads(t: &Tensor, r: usize) -> Result<Tensor> {
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

/// `scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)`.
#[allow(clippy::too_many_arguments)]
pub fn scaled_dot_product_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, dropout_p: f64, is_causal: bool, scale: Option<f64>, enable_gqa: bool) -> Result<Tensor> {
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
    let e = q.shape()[q.ndim() - 1];
    let (l, s) = (q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]);
    let (mut k, mut v) = (k.clone(), v.clone());
    if enable_gqa && q.ndim() >= 3 && k.ndim() >= 3 {
        let (hq, hk, hv) = (q.shape()[q.ndim() - 3], k.shape()[k.ndim() - 3], v.shape()[v.ndim() - 3]);
        if hk == 0 || hv == 0 || hq % hk != 0 || hq % hv != 0 {
            return Err(Error::value(op, format!("number of heads in key/value ({hk}, {hv}) must divide the number of query heads ({hq})")));
        }
        k = repeat_heads(&k, hq / hk)?;
        v = repeat_heads(&v, hq / hv)?;
    }
    let sc = scale.unwrap_or(1.0 / (e as f64).sqrt());
    let mut att = batched_mm(q, &k.transpose(-2, -1)?)?.mul_scalar(sc)?;
    let ninf = |t: &Tensor| t.full_like(f64::NEG_INFINITY);
    if is_causal {
        let rows = Tensor::arange(0i64, l as i64, 1i64)?.reshape(&[l as i64, 1])?;
        let cols = Tensor::arange(0i64, s as i64, 1i64)?.reshape(&[1, s as i64])?;
        let keep = cols.le(&rows)?;
        att = keep.where_(&att, &ninf(&att)?)?;
    }
    if let Some(m) = mask {
        att = if m.dtype().is_bool() { m.where_(&att, &ninf(&att)?)? } else { att.add(m)? };
    }
    let mut p = att.nn_softmax(-1)?;
    if dropout_p > 0.0 {
        p = super::dropout::dropout(&p, dropout_p, true, false)?;
    }
    batched_mm(&p, &v)
}

//! `scaled_dot_product_attention` on CUDA tensors through the flash attention kernels
//! (`backend/cuda/attention.rs`, `attention_bwd.rs`) when no mask and no dropout is involved: the
//! inputs are read in place through their strides (last dim contiguous, else a copy), with
//! GQA heads mapped by the kernel. With autograd, the forward also keeps each row's log-sum-exp
//! and the backward runs the flash backward kernels; when the gradient's own graph is being built
//! (`create_graph`) it runs the composite gradients instead (differentiable again). The
//! composite in `attention.rs` stays the reference and the path for everything else.

use super::attention_fused::composite_backward;
use crate::autograd::{self, Saved};
use crate::backend::cuda::attention::{flash_forward_lse, AttnOperand, Causal, FlashParams};
use crate::backend::cuda::attention_f32::{self, MAX_TILED_HEAD_DIM};
use crate::backend::cuda::attention_bwd::{flash_backward, scalar_backward_min_scores, FlashBwdBuffers};
use crate::backend::cuda::kern::elem_ptr;
use crate::backend::cuda::ops::empty;
use crate::dtype::DType;
use crate::layout::Layout;
use crate::tensor::Tensor;
use crate::{Device, Result};

const OP: &str = "scaled_dot_product_attention";

/// `t` as `[B, H, S, E]` with a unit last stride (a view where possible, else a copy).
fn as_4d(t: &Tensor) -> Result<Tensor> {
    let nd = t.ndim();
    let s: Vec<i64> = t.shape().iter().map(|&v| v as i64).collect();
    let t = match nd {
        2 => t.reshape(&[1, 1, s[0], s[1]])?,
        3 => t.reshape(&[1, s[0], s[1], s[2]])?,
        4 => t.clone(),
        _ => t.reshape(&[-1, s[nd - 3], s[nd - 2], s[nd - 1]])?,
    };
    if t.strides()[3] == 1 || t.shape()[3] <= 1 {
        Ok(t)
    } else {
        t.contiguous()
    }
}

/// Dims of `t` from the largest stride to the smallest (ties in dim order), i.e. its memory order;
/// None unless the last dim comes last (the kernels read head rows contiguously).
fn memory_order(t: &Tensor) -> Option<Vec<usize>> {
    let st = t.strides();
    let mut order: Vec<usize> = (0..t.ndim()).collect();
    order.sort_by(|&a, &b| st[b].cmp(&st[a]).then(a.cmp(&b)));
    (order.last() == Some(&(t.ndim() - 1))).then_some(order)
}

/// A new uninitialised tensor of `t`'s shape, laid out densely in `t`'s memory order: for the
/// `[B, S, H, E]` data behind a `transpose(1, 2)` head view, `[B, S, H, E]` memory again, so that the
/// caller's inverse transpose and reshape are views rather than copies (as PyTorch's kernels keep
/// their inputs' layout). Contiguous where that order is the plain one or does not apply.
fn empty_in_order(t: &Tensor, ord: usize) -> Result<Tensor> {
    let shape = t.shape().to_vec();
    let order = match memory_order(t) {
        Some(o) if o.iter().enumerate().any(|(i, &d)| i != d) => o,
        _ => return empty(OP, ord, t.dtype(), &shape),
    };
    let mut strides = vec![0usize; shape.len()];
    let mut run = 1usize;
    for &d in order.iter().rev() {
        strides[d] = run;
        run *= shape[d];
    }
    let buf = empty(OP, ord, t.dtype(), &[t.numel()])?;
    Ok(buf.with_layout(Layout { shape, strides, offset: 0 }))
}

/// The gradients of `q`, `k`, `v` laid out as the three are when they are equally shaped and
/// strided views of one storage at offsets `o`, `o + d`, `o + 2d` that together fill a dense block
/// of memory (the q/k/v split of one fused projection, `[B, S, 3, H, E]`): one buffer holds the
/// three gradients the same way, so that the split's backward takes it whole instead of copying
/// the three in. None otherwise.
fn packed_grads(q: &Tensor, k: &Tensor, v: &Tensor, ord: usize) -> Result<Option<[Tensor; 3]>> {
    if !q.shares_storage(k) || !q.shares_storage(v) || q.shape() != k.shape() || q.shape() != v.shape() || q.strides() != k.strides() || q.strides() != v.strides() {
        return Ok(None);
    }
    let (oq, ok, ov) = (q.storage_offset(), k.storage_offset(), v.storage_offset());
    if ok <= oq || ov <= ok || ok - oq != ov - ok {
        return Ok(None);
    }
    let gap = ok - oq;
    // dense: every dim's stride is the product of the sizes of the dims inside it
    let mut dims: Vec<(usize, usize)> = q.shape().iter().copied().zip(q.strides().iter().copied()).filter(|&(n, _)| n > 1).collect();
    dims.push((3, gap));
    dims.sort_by_key(|&(_, st)| st);
    let mut run = 1usize;
    for (n, st) in dims {
        if st != run {
            return Ok(None);
        }
        run *= n;
    }
    let buf = empty(OP, ord, q.dtype(), &[3 * q.numel()])?;
    let view = |offset: usize| buf.with_layout(Layout { shape: q.shape().to_vec(), strides: q.strides().to_vec(), offset });
    Ok(Some([view(0), view(gap), view(2 * gap)]))
}

fn operand(t: &Tensor) -> Result<AttnOperand> {
    let (ptr, _) = elem_ptr(OP, t)?;
    let st = t.strides();
    Ok(AttnOperand { ptr, sb: st[0] as i64, sh: st[1] as i64, ss: st[2] as i64 })
}

/// The attention output by flash attention, or None where the composite must run.
pub(crate) fn sdpa_flash(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: f64, enable_gqa: bool) -> Result<Option<Tensor>> {
    let Device::Cuda(ord) = q.device() else { return Ok(None) };
    if k.device() != q.device() || v.device() != q.device() {
        return Ok(None);
    }
    if !matches!(q.dtype(), DType::F32 | DType::F16 | DType::BF16) || k.dtype() != q.dtype() || v.dtype() != q.dtype() {
        return Ok(None);
    }
    let nd = q.ndim();
    if nd < 2 || k.ndim() != nd || v.ndim() != nd || q.numel() == 0 || k.numel() == 0 {
        return Ok(None);
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let e = qs[nd - 1];
    if e == 0 || e > crate::backend::cuda::attention::MAX_HEAD_DIM || ks[nd - 1] != e || vs[nd - 1] != e || vs[nd - 2] != ks[nd - 2] {
        return Ok(None);
    }
    if nd >= 3 {
        if qs[..nd - 3] != ks[..nd - 3] || qs[..nd - 3] != vs[..nd - 3] {
            return Ok(None);
        }
        let (hq, hk, hv) = (qs[nd - 3], ks[nd - 3], vs[nd - 3]);
        if hk != hv || (hq != hk && !(enable_gqa && hk > 0 && hq % hk == 0)) {
            return Ok(None);
        }
    }
    if !scale.is_finite() {
        return Ok(None);
    }
    let grad = autograd::is_grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
    let scores = (q.numel() / e) * ks[nd - 2];
    // the scalar kernels lose to the composite below the threshold; the tensor-core and the tiled
    // float32 kernels are taken at every size (measured: benchmark/NOTES.md, "Float32 flash attention")
    let fast_bwd = matches!(q.dtype(), DType::F16 | DType::BF16) && matches!(e, 64 | 128) || q.dtype() == DType::F32 && e <= MAX_TILED_HEAD_DIM && attention_f32::enabled();
    if grad && !fast_bwd && scores < scalar_backward_min_scores() {
        return Ok(None);
    }
    let (q4, k4, v4) = (as_4d(q)?, as_4d(k)?, as_4d(v)?);
    let (b, h, l) = (q4.shape()[0], q4.shape()[1], q4.shape()[2]);
    let (hk, s) = (k4.shape()[1], k4.shape()[2]);
    // the output in q's memory order: [B, S, H, E] behind q's head view gives an output whose
    // transpose(1, 2).reshape(B, S, H * E) (the heads' merge) is a view
    let out = empty_in_order(&q4, ord)?;
    let (qo, ko, vo, oo) = (operand(&q4)?, operand(&k4)?, operand(&v4)?, operand(&out)?);
    let dev = crate::backend::cuda::device::device(OP, ord)?;
    let p = FlashParams {
        dtype: q.dtype(),
        batch: b,
        n_heads: h,
        n_kv_heads: hk,
        head_dim: e,
        q_len: l,
        kv_len: s,
        scale: scale as f32,
        causal: if causal { Causal::TopLeft } else { Causal::None },
    };
    // the log2-sum-exp of each query row, saved for the backward
    let lse = if grad { Some(empty(OP, ord, DType::F32, &[b * h * l])?) } else { None };
    let lse_ptr = match &lse {
        Some(t) => Some(elem_ptr(OP, t)?.0),
        None => None,
    };
    flash_forward_lse(&dev, &p, qo, ko, vo, oo, None, lse_ptr)?;
    let mut shape: Vec<i64> = qs.iter().map(|&v| v as i64).collect();
    shape[nd - 1] = e as i64;
    let y = out.reshape(&shape)?;
    if let Some(lse) = lse {
        let (sq, sk, sv) = (Saved::new(OP, q), Saved::new(OP, k), Saved::new(OP, v));
        let group = h / hk;
        autograd::record("ScaledDotProductFlashAttentionForCuda", &[q, k, v], &[y.clone()], move |ctx, g| {
            let (q, k, v) = (sq.get()?, sk.get()?, sv.get()?);
            let need = [ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)];
            let grads = if autograd::is_grad_enabled() {
                composite_backward(&g[0], &q, &k, &v, scale, causal, group)?
            } else {
                flash_grads(&g[0], &ctx.output(0)?, &q, &k, &v, &lse, p)?
            };
            Ok(grads.into_iter().zip(need).map(|(t, n)| if n { Some(t) } else { None }).collect())
        });
    }
    Ok(Some(y))
}

/// dq, dk, dv by the flash backward kernels, in the shapes of `q`, `k`, `v`.
fn flash_grads(g: &Tensor, y: &Tensor, q: &Tensor, k: &Tensor, v: &Tensor, lse: &Tensor, p: FlashParams) -> Result<Vec<Tensor>> {
    let Device::Cuda(ord) = q.device() else { return Err(crate::Error::device(OP, "expected CUDA tensors")) };
    let g = if g.device() == q.device() && g.dtype() == q.dtype() { g.clone() } else { g.to_device(q.device())?.to_dtype(q.dtype())? };
    let (q4, k4, v4, y4, g4) = (as_4d(q)?, as_4d(k)?, as_4d(v)?, as_4d(y)?, as_4d(&g)?);
    // the gradients in the inputs' layouts, so that the backward of the head views (and of the
    // q/k/v split) needs no copies
    let [dq, dk, dv] = match packed_grads(&q4, &k4, &v4, ord)? {
        Some(g) => g,
        None => [empty_in_order(&q4, ord)?, empty_in_order(&k4, ord)?, empty_in_order(&v4, ord)?],
    };
    let delta = empty(OP, ord, DType::F32, &[p.batch * p.n_heads * p.q_len])?;
    let bufs = FlashBwdBuffers {
        q: operand(&q4)?,
        k: operand(&k4)?,
        v: operand(&v4)?,
        o: operand(&y4)?,
        dout: operand(&g4)?,
        dq: operand(&dq)?,
        dk: operand(&dk)?,
        dv: operand(&dv)?,
        lse: elem_ptr(OP, lse)?.0,
        delta: elem_ptr(OP, &delta)?.0,
    };
    let dev = crate::backend::cuda::device::device(OP, ord)?;
    flash_backward(&dev, &p, &bufs)?;
    let shape_of = |t: &Tensor| -> Vec<i64> { t.shape().iter().map(|&v| v as i64).collect() };
    Ok(vec![dq.reshape(&shape_of(q))?, dk.reshape(&shape_of(k))?, dv.reshape(&shape_of(v))?])
}

//! `scaled_dot_product_attention` on CUDA tensors through the flash attention kernels
//! (`backend/cuda/attention.rs`) when no mask, no dropout and no autograd graph is involved: the
//! inputs are read in place through their strides (last dim contiguous, else a copy), with
//! GQA heads mapped by the kernel. The composite in `attention.rs` stays the reference and the
//! path for everything else.

use crate::backend::cuda::attention::{flash_forward, AttnOperand, Causal, FlashParams};
use crate::backend::cuda::kern::elem_ptr;
use crate::backend::cuda::ops::empty;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Device, Result};

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

fn operand(t: &Tensor) -> Result<AttnOperand> {
    let (ptr, _) = elem_ptr("scaled_dot_product_attention", t)?;
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
    if crate::autograd::is_grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad()) {
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
    let (q4, k4, v4) = (as_4d(q)?, as_4d(k)?, as_4d(v)?);
    let (b, h, l) = (q4.shape()[0], q4.shape()[1], q4.shape()[2]);
    let (hk, s) = (k4.shape()[1], k4.shape()[2]);
    let out = empty("scaled_dot_product_attention", ord, q.dtype(), &[b, h, l, e])?;
    let (qo, ko, vo, oo) = (operand(&q4)?, operand(&k4)?, operand(&v4)?, operand(&out)?);
    let dev = crate::backend::cuda::device::device("scaled_dot_product_attention", ord)?;
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
    flash_forward(&dev, &p, qo, ko, vo, oo, None)?;
    let mut shape: Vec<i64> = qs.iter().map(|&v| v as i64).collect();
    shape[nd - 1] = e as i64;
    Ok(Some(out.reshape(&shape)?))
}

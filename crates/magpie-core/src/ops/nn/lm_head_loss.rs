//! `cross_entropy(linear(x, weight, bias), target)` as one op: a language model's head and loss (PyTorch's
//! `F.linear_cross_entropy` with `ignore_index`; that name is `loss::linear_cross_entropy`). The
//! composite (the two ops) is the reference; on CUDA, f16/bf16 products (autocast's) over a
//! vocabulary that is not a multiple of 8 run fused: the weight is padded once to an aligned row
//! count, the logits stay in the padded product (the loss kernels read its rows through their
//! stride), and the backward writes the logits' gradient into padded rows with zero columns, so
//! the three GEMMs run on aligned operands without the padded copies of the `[N, vocab]` logits
//! and of their gradient that `matmul` makes for odd extents (`backend/cuda/blas.rs`).

use super::loss::Reduction;
use crate::tensor::Tensor;
use crate::Result;

/// `cross_entropy(linear(x, weight, None), target, None, ignore_index, reduction, 0.0)` for
/// `x: [N, C]`, `weight: [V, C]` and class indices `target: [N]`: the loss of a language model's
/// head (weight tying included: `weight` may be the token embedding's). Same values, autocast
/// behaviour and errors as the two ops; faster on CUDA for 16-bit products over an odd `V`.
///
/// ```
/// use magpie_core::ops::nn::{lm_head_cross_entropy, Reduction};
/// use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.0], &[2, 2])?;
/// let w = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2])?;
/// let t = Tensor::from_vec(vec![2i64, 0], &[2])?;
/// let loss = lm_head_cross_entropy(&x, &w, &t, -100, Reduction::Mean)?;
/// assert_eq!(loss.shape(), &[] as &[usize]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn lm_head_cross_entropy(x: &Tensor, weight: &Tensor, target: &Tensor, ignore_index: i64, reduction: Reduction) -> Result<Tensor> {
    lm_head_cross_entropy_with_bias(x, weight, None, target, ignore_index, reduction)
}

/// [`lm_head_cross_entropy`] with the head's bias `[V]` (BERT's masked-LM decoder):
/// `cross_entropy(linear(x, weight, bias), target, ...)`. On the fused path the bias is added to
/// the padded product (its rows stay 16-byte aligned) and its gradient is the column sum of the
/// logits' padded gradient.
///
/// ```
/// use magpie_core::ops::nn::lm_head_loss::lm_head_cross_entropy_with_bias;
/// use magpie_core::ops::nn::Reduction;
/// use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.0], &[2, 2])?;
/// let w = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2])?;
/// let b = Tensor::from_vec(vec![0.1f32, 0.2, 0.3], &[3])?;
/// let t = Tensor::from_vec(vec![2i64, 0], &[2])?;
/// let loss = lm_head_cross_entropy_with_bias(&x, &w, Some(&b), &t, -100, Reduction::Mean)?;
/// assert_eq!(loss.shape(), &[] as &[usize]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn lm_head_cross_entropy_with_bias(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, target: &Tensor, ignore_index: i64, reduction: Reduction) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if let Some(l) = cuda::fused(x, weight, bias, target, ignore_index, reduction)? {
        return Ok(l);
    }
    composite_with_bias(x, weight, bias, target, ignore_index, reduction)
}

/// The reference: the two ops.
#[doc(hidden)]
pub fn composite(x: &Tensor, weight: &Tensor, target: &Tensor, ignore_index: i64, reduction: Reduction) -> Result<Tensor> {
    composite_with_bias(x, weight, None, target, ignore_index, reduction)
}

/// The reference with a bias: the two ops.
#[doc(hidden)]
pub fn composite_with_bias(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, target: &Tensor, ignore_index: i64, reduction: Reduction) -> Result<Tensor> {
    super::loss::cross_entropy(&super::linear(x, weight, bias)?, target, None, ignore_index, reduction, 0.0)
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::Reduction;
    use crate::autograd::{self, Saved};
    use crate::backend::cuda::{blas, loss as kl};
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Error, Result};

    /// The fused path, or None where it does not apply (the caller runs the composite).
    pub(super) fn fused(x: &Tensor, w: &Tensor, b: Option<&Tensor>, t: &Tensor, ii: i64, r: Reduction) -> Result<Option<Tensor>> {
        let dev = x.device();
        if !dev.is_cuda() || w.device() != dev || t.device() != dev || x.ndim() != 2 || w.ndim() != 2 || t.ndim() != 1 || !t.dtype().is_int() {
            return Ok(None);
        }
        let (n, cin, v) = (x.shape()[0], x.shape()[1], w.shape()[0]);
        if w.shape()[1] != cin || t.shape()[0] != n || n == 0 || v == 0 {
            return Ok(None);
        }
        if b.is_some_and(|b| b.device() != dev || b.shape() != [v]) {
            return Ok(None);
        }
        // linear's autocast casts (held: autocast stays off inside); the loss then runs in float32
        // on the 16-bit logits, as autocast runs cross_entropy
        let auto = crate::amp::is_autocast_enabled(dev);
        if auto && crate::amp::policy("cross_entropy_loss", crate::amp::DeviceKind::Cuda) != Some(crate::amp::Policy::Fp32) {
            return Ok(None);
        }
        let cast = if auto { crate::amp::optional("linear", &[Some(x), Some(w), b])? } else { None };
        if auto && cast.is_none() {
            return Ok(None);
        }
        let (x16, w16, b16) = match &cast {
            Some(c) => (c.req(0)?.clone(), c.req(1)?.clone(), c.opt(2).cloned()),
            None => (x.clone(), w.clone(), b.cloned()),
        };
        let p = if auto { kl::Precision::F32Of16 } else { kl::Precision::Own };
        let dt = x16.dtype();
        if !matches!(dt, DType::F16 | DType::BF16) || w16.dtype() != dt || b16.as_ref().is_some_and(|b| b.dtype() != dt) {
            return Ok(None);
        }
        // only where matmul would pad (an odd vocabulary, a product big enough for it to pay)
        if v.is_multiple_of(8) || !cin.is_multiple_of(8) || n.saturating_mul(v).saturating_mul(cin) < blas::pad_min_macs() {
            return Ok(None);
        }
        let vp = v.div_ceil(8) * 8;
        let ng = autograd::no_grad();
        let wp = crate::ops::shape_ops::cat(&[w16.detach(), Tensor::zeros_on(&[vp - v, cin], dt, dev)?], 0)?;
        // [N, vp] on aligned operands; the logits are its first v columns (row stride vp); the
        // bias, padded with zeros, is added to whole rows so the add keeps to aligned vectors
        let prod = x16.detach().mm(&wp.t()?)?;
        let prod = match &b16 {
            Some(b16) => prod.add(&crate::ops::shape_ops::cat(&[b16.detach(), Tensor::zeros_on(&[vp - v], dt, dev)?], 0)?)?,
            None => prod,
        };
        let logits = prod.narrow(1, 0, v as i64)?;
        let Some(f) = kl::cross_entropy_forward(&logits, t, ii, p)? else { return Ok(None) };
        let count = match r {
            Reduction::Mean => Some(f.valid.sum()?),
            _ => None,
        };
        let out = match r {
            Reduction::None => f.loss.clone(),
            Reduction::Sum => f.loss.sum()?,
            Reduction::Mean => f.loss.sum()?.div(count.as_ref().ok_or_else(|| Error::value("cross_entropy", "no count"))?)?,
        };
        drop(ng);
        let (sx, sw) = (Saved::new("lm_head_cross_entropy", &x16), Saved::new("lm_head_cross_entropy", &w16));
        let sb = b16.as_ref().map(|b| Saved::new("lm_head_cross_entropy", b));
        let (target, lse) = (t.clone(), f.lse);
        let mut inputs = vec![&x16, &w16];
        inputs.extend(b16.as_ref());
        autograd::record("LinearCrossEntropy", &inputs, std::slice::from_ref(&out), move |ctx, g| {
            let (x16, w16) = (sx.get()?, sw.get()?);
            let (need_x, need_w) = (ctx.needs_input_grad(0), ctx.needs_input_grad(1));
            let need_b = sb.is_some() && ctx.needs_input_grad(2);
            if autograd::is_grad_enabled() {
                // to be differentiated again: the composite's gradient with tensor ops (one host
                // read of the count, on this rare path only)
                let lg = x16.mm(&w16.t()?)?;
                let lg = match &sb {
                    Some(sb) => lg.add(&sb.get()?)?,
                    None => lg,
                };
                let valid = target.ne_scalar(ii)?.sum()?.item()?.to_f64() as usize;
                let dl = if p == kl::Precision::F32Of16 {
                    super::super::cross_entropy::composite_grad(&lg.to_dtype(DType::F32)?, &target, &g[0], ii, r, valid)?.to_dtype(dt)?
                } else {
                    super::super::cross_entropy::composite_grad(&lg, &target, &g[0], ii, r, valid)?
                };
                let gx = if need_x { Some(dl.mm(&w16)?) } else { None };
                let gw = if need_w { Some(dl.t()?.mm(&x16)?) } else { None };
                let mut out = vec![gx, gw];
                if sb.is_some() {
                    out.push(if need_b { Some(dl.sum_dims(Some(&[0]), false, None)?) } else { None });
                }
                return Ok(out);
            }
            // [N, vp] with zero columns from v on: both products read it at its aligned row length
            let dl = kl::cross_entropy_backward_padded(&logits, &target, &lse, &g[0], count.as_ref(), ii, p, vp)?
                .ok_or_else(|| Error::value("lm_head_cross_entropy", "no CUDA kernel for the gradient"))?;
            let gx = if need_x { Some(dl.mm(&wp)?) } else { None };
            let gw = if need_w { Some(dl.t()?.mm(&x16)?.narrow(0, 0, v as i64)?) } else { None };
            let mut out = vec![gx, gw];
            if sb.is_some() {
                // the padded columns of dl are zeros: sum whole aligned rows, keep the first v
                out.push(if need_b { Some(dl.sum_dims(Some(&[0]), false, None)?.narrow(0, 0, v as i64)?) } else { None });
            }
            Ok(out)
        });
        Ok(Some(out))
    }
}

//! `cross_entropy` with class-index targets on f32 CPU logits `[N, C]` as one fused op: the
//! forward is a per-row log-sum-exp (no `[N, C]` log-probabilities are kept), the backward
//! writes `(softmax(x) - onehot(t)) * scale` in one pass. Without a class weight or label
//! smoothing only; everything else, and the reference it is tested against, is the
//! `log_softmax` + `nll_loss` composite in `loss.rs`.
//!
//! CUDA logits (float) with integer targets on the same GPU take `backend/cuda/loss.rs`: the
//! same two kernels, and the mean's divisor counted on the device, so no step synchronizes.
//! An out-of-range target there gives a NaN loss (PyTorch's CUDA kernel asserts on the device).

use super::loss::Reduction;
use crate::autograd::{self, Saved};
use crate::backend::cpu::{self, rows};
use crate::device::Device;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

/// The loss when the fused path applies, else None (the caller runs the composite).
pub(crate) fn cross_entropy_fused(x: &Tensor, t: &Tensor, ignore_index: i64, r: Reduction) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() {
        return cross_entropy_cuda(x, t, ignore_index, r);
    }
    if x.dtype() != DType::F32 || x.device() != Device::Cpu || x.ndim() != 2 || !t.dtype().is_int() || t.ndim() != 1 {
        return Ok(None);
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    if t.shape()[0] != n || c == 0 {
        return Ok(None);
    }
    let tv: Vec<i64> = t.to_vec()?;
    for &v in &tv {
        if v != ignore_index && (v < 0 || v >= c as i64) {
            return Err(Error::index("nll_loss", format!("Target {v} is out of bounds.")));
        }
    }
    let mut lse = vec![0f32; n];
    let mut loss = vec![0f32; n];
    cpu::read(x, |xs: &[f32]| {
        rows::par_rows(&mut lse, 1, c, |r0, o| rows::logsumexp_rows(&xs[r0 * c..(r0 + o.len()) * c], c, o));
        for (i, l) in loss.iter_mut().enumerate() {
            let ti = tv[i];
            *l = if ti == ignore_index { 0.0 } else { lse[i] - xs[i * c + ti as usize] };
        }
    })?;
    let count = tv.iter().filter(|&&v| v != ignore_index).count();
    let out = match r {
        Reduction::None => Tensor::from_vec(loss, &[n])?,
        Reduction::Sum => Tensor::from_vec(vec![rows::sum_f32(&loss)], &[])?,
        Reduction::Mean => Tensor::from_vec(vec![rows::sum_f32(&loss) / count as f32], &[])?,
    };
    let sx = Saved::new("cross_entropy", x);
    let (tv, lse) = (Arc::new(tv), Arc::new(lse));
    let target = t.clone();
    autograd::record("CrossEntropyLoss", &[x], &[out.clone()], move |_, g| {
        let x = sx.get()?;
        let gx = if autograd::is_grad_enabled() {
            composite_grad(&x, &target, &g[0], ignore_index, r, count)?
        } else {
            fused_grad(&x, &tv, &lse, &g[0], ignore_index, r, count)?
        };
        Ok(vec![Some(gx)])
    });
    Ok(Some(out))
}

/// `(softmax(x) - onehot(t)) * scale_i` with the kernel; ignored rows get zeros.
fn fused_grad(x: &Tensor, tv: &[i64], lse: &[f32], g: &Tensor, ignore_index: i64, r: Reduction, count: usize) -> Result<Tensor> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let gv: Vec<f32> = g.to_vec()?;
    let scale: Vec<f32> = (0..n)
        .map(|i| match r {
            Reduction::None => gv[i],
            Reduction::Sum => gv[0],
            Reduction::Mean => gv[0] / count as f32,
        })
        .collect();
    let mut out = vec![0f32; n * c];
    cpu::read(x, |xs: &[f32]| {
        rows::par_rows(&mut out, c, c, |r0, o| {
            let r1 = r0 + o.len() / c;
            rows::cross_entropy_backward_rows(&xs[r0 * c..r1 * c], &lse[r0..r1], &tv[r0..r1], &scale[r0..r1], ignore_index, c, o)
        })
    })?;
    Tensor::from_vec(out, &[n, c])
}

/// The same gradient with tensor ops (differentiable again, for double backward).
pub(crate) fn composite_grad(x: &Tensor, t: &Tensor, g: &Tensor, ignore_index: i64, r: Reduction, count: usize) -> Result<Tensor> {
    let c = x.shape()[1];
    let p = x.softmax(1, None)?;
    let classes = Tensor::arange(0i64, c as i64, 1i64)?.to_device(x.device())?.reshape(&[1, -1])?;
    let onehot = t.unsqueeze(1)?.eq(&classes)?.to_dtype(x.dtype())?;
    let valid = t.ne_scalar(ignore_index)?.to_dtype(x.dtype())?;
    let scale = match r {
        Reduction::None => g.mul(&valid)?,
        Reduction::Sum => valid.mul(g)?,
        Reduction::Mean => valid.mul(&g.div_scalar(count as f64)?)?,
    };
    p.sub(&onehot)?.mul(&scale.unsqueeze(1)?)
}

/// `cross_entropy` of CUDA f16/bf16 logits under autocast, whose policy runs the loss in float32
/// on the logits cast up: the float32 loss (and the gradient for the low-precision logits) by
/// kernels that read the logits as they are, so neither the `[N, C]` float32 cast nor its float32
/// gradient is made. The values of the cast path up to float32 rounding (the cast up is exact;
/// the forward sums its exponentials in one pass with per-thread rescaling; the gradient is the
/// float32 one rounded once). None where the fused kernels do not apply.
#[cfg(feature = "cuda")]
pub(crate) fn cross_entropy_autocast_f32(x: &Tensor, t: &Tensor, ignore_index: i64, r: Reduction) -> Result<Option<Tensor>> {
    if !x.device().is_cuda() || !matches!(x.dtype(), DType::F16 | DType::BF16) || x.ndim() != 2 || !t.dtype().is_int() || t.ndim() != 1 {
        return Ok(None);
    }
    cuda_kernels(x, t, ignore_index, r, true)
}

/// The CUDA path of [`cross_entropy_fused`]; None when the kernels do not take these inputs.
#[cfg(feature = "cuda")]
fn cross_entropy_cuda(x: &Tensor, t: &Tensor, ignore_index: i64, r: Reduction) -> Result<Option<Tensor>> {
    cuda_kernels(x, t, ignore_index, r, false)
}

/// The loss from `backend/cuda/loss.rs`'s kernels and its autograd record: in the logits' own
/// precision, or (`f32_of_16`) float32 from f16/bf16 logits. The gradient takes the backward
/// kernel, or the differentiable composite when it is to be differentiated again.
#[cfg(feature = "cuda")]
fn cuda_kernels(x: &Tensor, t: &Tensor, ignore_index: i64, r: Reduction, f32_of_16: bool) -> Result<Option<Tensor>> {
    use crate::backend::cuda::loss::{self, Precision};
    let p = if f32_of_16 { Precision::F32Of16 } else { Precision::Own };
    let Some(f) = loss::cross_entropy_forward(x, t, ignore_index, p)? else { return Ok(None) };
    let _ng = autograd::no_grad();
    let count = match r {
        Reduction::Mean => Some(f.valid.sum()?),
        _ => None,
    };
    let out = match r {
        Reduction::None => f.loss.clone(),
        Reduction::Sum => f.loss.sum()?,
        Reduction::Mean => f.loss.sum()?.div(count.as_ref().ok_or_else(|| Error::value("cross_entropy", "no count"))?)?,
    };
    drop(_ng);
    let sx = Saved::new("cross_entropy", x);
    let (target, lse) = (t.clone(), f.lse);
    autograd::record("CrossEntropyLoss", &[x], std::slice::from_ref(&out), move |_, g| {
        let x = sx.get()?;
        let kernel = if autograd::is_grad_enabled() { None } else { loss::cross_entropy_backward(&x, &target, &lse, &g[0], count.as_ref(), ignore_index, p)? };
        let gx = match kernel {
            Some(gx) => gx,
            None => {
                // the composite needs the count on the host (one read, only on this rare path);
                // for 16-bit logits under autocast it runs on the float32 logits, as the cast
                // path records
                let valid = target.ne_scalar(ignore_index)?.sum()?.item()?.to_f64() as usize;
                if f32_of_16 {
                    composite_grad(&x.to_dtype(DType::F32)?, &target, &g[0], ignore_index, r, valid)?.to_dtype(x.dtype())?
                } else {
                    composite_grad(&x, &target, &g[0], ignore_index, r, valid)?
                }
            }
        };
        Ok(vec![Some(gx)])
    });
    Ok(Some(out))
}

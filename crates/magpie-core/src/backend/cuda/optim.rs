//! Host side of kernels/optim.cu: fused in-place optimizer steps (SGD with momentum / Nesterov /
//! weight decay, Adam and AdamW with AMSGrad) on one CUDA parameter and its device-resident
//! state, and the squared-norm accumulation `clip_grad_norm_` uses. Each step is one kernel
//! launch per parameter and never synchronizes the host.

/// SGD's hyperparameters for [`sgd_step`].
#[derive(Clone, Copy, Debug)]
pub struct SgdHyper {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    pub maximize: bool,
    /// The step that creates the momentum buffer (it takes the update as is).
    pub first: bool,
}

/// One Adam step's scalars for [`adam_step`] (bias corrections already applied by the caller).
#[derive(Clone, Copy, Debug)]
pub struct AdamHyper {
    /// `lr / (1 - beta1^t)`.
    pub step_size: f64,
    /// `sqrt(1 - beta2^t)`.
    pub bc2_sqrt: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub lr: f64,
    pub weight_decay: f64,
    pub eps: f64,
    /// AdamW: decay the weights by `1 - lr * wd` instead of adding `wd * p` to the gradient.
    pub decoupled: bool,
    pub maximize: bool,
}

#[cfg(feature = "cuda")]
pub use imp::{adam_step, sgd_step, sum_of_squares, zeros_like};

#[cfg(feature = "cuda")]
mod imp {
    use super::super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile};
    use super::super::launch::{launch, Args};
    use super::super::ops::{contiguous, empty};
    use super::{AdamHyper, SgdHyper};
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Device, Error, Result};

    /// Checks that `t` is a contiguous CUDA tensor of `p`'s dtype, shape and device (parameters and
    /// state are written in place, so no copy may stand in for them).
    fn check_inplace(op: &str, what: &str, t: &Tensor, p: &Tensor) -> Result<()> {
        if t.device() != p.device() || t.dtype() != p.dtype() || t.shape() != p.shape() || !t.is_contiguous() {
            return Err(Error::value(
                op,
                format!("{what} must be a contiguous {} tensor of shape {:?} on {}, got {} {:?} on {}", p.dtype(), p.shape(), p.device(), t.dtype(), t.shape(), t.device()),
            ));
        }
        Ok(())
    }

    fn ordinal(op: &str, p: &Tensor) -> Result<usize> {
        match p.device() {
            Device::Cuda(n) if matches!(p.dtype(), DType::F32 | DType::F64) => Ok(n),
            _ => Err(Error::value(op, format!("fused CUDA optimizer steps take f32/f64 CUDA parameters, got {} on {}", p.dtype(), p.device()))),
        }
    }

    /// The gradient as a contiguous tensor of the parameter's dtype on its device.
    fn grad_like(op: &str, g: &Tensor, p: &Tensor) -> Result<Tensor> {
        if g.device() != p.device() || g.shape() != p.shape() {
            return Err(Error::shape(op, format!("gradient {:?} on {} for a parameter {:?} on {}", g.shape(), g.device(), p.shape(), p.device())));
        }
        let g = if g.dtype() != p.dtype() { super::super::ops::cast(g, p.dtype())? } else { g.clone() };
        if g.is_contiguous() { Ok(g) } else { contiguous(&g) }
    }

    /// A zero-filled state buffer for `p` (contiguous, same dtype and device).
    pub fn zeros_like(op: &str, p: &Tensor) -> Result<Tensor> {
        let t = empty(op, ordinal(op, p)?, p.dtype(), p.shape())?;
        super::super::ops::fill(&t, crate::Scalar::Float(0.0))?;
        Ok(t)
    }

    /// `p -= lr * update` with SGD's momentum buffer `buf` (required when momentum is not 0), in place.
    /// `p` must be contiguous (parameters are).
    pub fn sgd_step(p: &Tensor, g: &Tensor, buf: Option<&Tensor>, h: &SgdHyper) -> Result<()> {
        let op = "SGD";
        ordinal(op, p)?;
        check_inplace(op, "the parameter", p, p)?;
        if let Some(b) = buf {
            check_inplace(op, "momentum_buffer", b, p)?;
        } else if h.momentum != 0.0 {
            return Err(Error::value(op, "SGD with momentum needs its momentum buffer"));
        }
        let n = p.numel();
        if n == 0 {
            return Ok(());
        }
        let g = grad_like(op, g, p)?;
        let (pp, dev) = elem_ptr(op, p)?;
        let f = kfunc(&dev, KFile::Optim, p.dtype(), "sgd_step")?;
        let bp = match buf {
            Some(b) => elem_ptr(op, b)?.0,
            None => 0,
        };
        let mut a = Args::new();
        a.push(pp).push(elem_ptr(op, &g)?.0).push(bp).push(n as i64);
        a.push(h.lr).push(h.momentum).push(h.dampening).push(h.weight_decay);
        a.push(h.nesterov as i32).push(h.maximize as i32).push(h.first as i32);
        launch(&dev, op, f, (grid_stride_blocks(&dev, n), 1, 1), (256, 1, 1), 0, &mut a)
    }

    /// One Adam/AdamW step on `p` with moments `m`, `v` and (AMSGrad) `vmax`, all in place.
    pub fn adam_step(p: &Tensor, g: &Tensor, m: &Tensor, v: &Tensor, vmax: Option<&Tensor>, h: &AdamHyper) -> Result<()> {
        let op = if h.decoupled { "AdamW" } else { "Adam" };
        ordinal(op, p)?;
        check_inplace(op, "the parameter", p, p)?;
        check_inplace(op, "exp_avg", m, p)?;
        check_inplace(op, "exp_avg_sq", v, p)?;
        if let Some(x) = vmax {
            check_inplace(op, "max_exp_avg_sq", x, p)?;
        }
        let n = p.numel();
        if n == 0 {
            return Ok(());
        }
        let g = grad_like(op, g, p)?;
        let (pp, dev) = elem_ptr(op, p)?;
        let f = kfunc(&dev, KFile::Optim, p.dtype(), "adam_step")?;
        let xp = match vmax {
            Some(x) => elem_ptr(op, x)?.0,
            None => 0,
        };
        let mut a = Args::new();
        a.push(pp).push(elem_ptr(op, &g)?.0).push(elem_ptr(op, m)?.0).push(elem_ptr(op, v)?.0).push(xp).push(n as i64);
        a.push(h.step_size).push(h.bc2_sqrt).push(1.0 - h.beta1).push(h.beta2).push(1.0 - h.beta2).push(1.0 - h.lr * h.weight_decay);
        a.push(h.weight_decay).push(h.eps).push(h.decoupled as i32).push(h.maximize as i32);
        launch(&dev, op, f, (grid_stride_blocks(&dev, n), 1, 1), (256, 1, 1), 0, &mut a)
    }

    /// The sum of the squares of every element of `ts` (CUDA tensors of one device, f32 or f64), accumulated in f64 into a 0-d f64 CUDA tensor: one launch per
    /// tensor, no host synchronization. None when a tensor has no kernel (the caller takes the
    /// generic path).
    pub fn sum_of_squares(ts: &[Tensor]) -> Result<Option<Tensor>> {
        let op = "clip_grad_norm_";
        let Some(first) = ts.first() else { return Ok(None) };
        let Device::Cuda(ord) = first.device() else { return Ok(None) };
        if ts.iter().any(|t| t.device() != first.device() || !matches!(t.dtype(), DType::F32 | DType::F64)) {
            return Ok(None);
        }
        let acc = empty(op, ord, DType::F64, &[])?;
        super::super::ops::fill(&acc, crate::Scalar::Float(0.0))?;
        let ap = elem_ptr(op, &acc)?.0;
        for t in ts {
            let n = t.numel();
            if n == 0 {
                continue;
            }
            let t = if t.is_contiguous() { t.clone() } else { contiguous(t)? };
            let (tp, dev) = elem_ptr(op, &t)?;
            let f = kfunc(&dev, KFile::Optim, t.dtype(), "sumsq_acc")?;
            let mut a = Args::new();
            a.push(tp).push(n as i64).push(ap);
            let blocks = grid_stride_blocks(&dev, n).min(dev.sm_count as u32 * 2);
            launch(&dev, op, f, (blocks, 1, 1), (256, 1, 1), 0, &mut a)?;
        }
        Ok(Some(acc))
    }
}

#[cfg(not(feature = "cuda"))]
mod no_cuda {
    use super::{AdamHyper, SgdHyper};
    use crate::tensor::Tensor;
    use crate::Result;
    /// Without the CUDA backend there are no CUDA parameters to step.
    pub fn sgd_step(_p: &Tensor, _g: &Tensor, _buf: Option<&Tensor>, _h: &SgdHyper) -> Result<()> {
        Err(super::super::unavailable("SGD"))
    }
    /// Without the CUDA backend there are no CUDA parameters to step.
    pub fn adam_step(_p: &Tensor, _g: &Tensor, _m: &Tensor, _v: &Tensor, _vmax: Option<&Tensor>, _h: &AdamHyper) -> Result<()> {
        Err(super::super::unavailable("Adam"))
    }
    /// Never a CUDA tensor without the backend: None (the caller takes the generic path).
    pub fn sum_of_squares(_ts: &[Tensor]) -> Result<Option<Tensor>> {
        Ok(None)
    }
    /// Without the CUDA backend there are no CUDA parameters.
    pub fn zeros_like(op: &str, _p: &Tensor) -> Result<Tensor> {
        Err(super::super::unavailable(op))
    }
}
#[cfg(not(feature = "cuda"))]
pub use no_cuda::{adam_step, sgd_step, sum_of_squares, zeros_like};

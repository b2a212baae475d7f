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

/// One parameter of a multi-tensor Adam step (all of one dtype and device; see `adam_step`).
pub struct AdamItem<'a> {
    pub p: &'a crate::tensor::Tensor,
    pub g: &'a crate::tensor::Tensor,
    pub m: &'a crate::tensor::Tensor,
    pub v: &'a crate::tensor::Tensor,
    pub vmax: Option<&'a crate::tensor::Tensor>,
}

#[cfg(feature = "cuda")]
pub use imp::{adam_step, adam_step_multi, adam_step_multi_dyn, clip_scale_multi, sgd_step, sum_of_squares, zeros_like};

#[cfg(feature = "cuda")]
mod imp {
    use super::super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile};
    use super::super::launch::{launch, Args};
    use super::super::ops::{contiguous, empty};
    use super::{AdamHyper, AdamItem, SgdHyper};
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
    /// Tensors per multi-tensor launch (`MT_N` in optim.cu).
    const MT_N: usize = 48;

    /// `MtList` of optim.cu.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct MtList {
        a: [u64; MT_N],
        b: [u64; MT_N],
        c: [u64; MT_N],
        d: [u64; MT_N],
        e: [u64; MT_N],
        n: [i64; MT_N],
    }

    impl MtList {
        fn new() -> MtList {
            MtList { a: [0; MT_N], b: [0; MT_N], c: [0; MT_N], d: [0; MT_N], e: [0; MT_N], n: [0; MT_N] }
        }
    }

    /// `MtAdam` of optim.cu.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct MtAdam {
        step_size: f64,
        bc2_sqrt: f64,
        w1: f64,
        b2: f64,
        w2: f64,
        decay: f64,
        wd: f64,
        eps: f64,
        decoupled: i32,
        maximize: i32,
    }

    /// Blocks per tensor of a multi-tensor launch: enough for the largest tensor of the chunk (a
    /// block per 2048 elements), at most 4 per SM. Every tensor of the launch gets that many; the
    /// blocks of the small ones exit at once, so a large tensor (an embedding) is not left to a few
    /// blocks (capping by the tensor count left BERT's 23M-element word embedding to 22 blocks:
    /// AdamW took 3 ms of an 8.5 ms bf16 step on an H100).
    fn mt_blocks(dev: &super::super::device::CudaDevice, max_n: usize) -> u32 {
        let want = max_n.div_ceil(256 * 8).max(1);
        want.min(dev.sm_count as usize * 4) as u32
    }

    /// [`adam_step`] over many parameters sharing `h` (one group at one step count): one launch
    /// per 48 parameters.
    pub fn adam_step_multi(items: &[AdamItem], h: &AdamHyper) -> Result<()> {
        adam_step_multi_dyn(items, h, None)
    }

    /// [`adam_step_multi`] whose per-step scalars (`step_size`, `bc2_sqrt` and the decay
    /// `1 - lr * weight_decay`) are read by the kernel from `dyn`, a contiguous 3-element f64
    /// tensor on the parameters' device, instead of `h`: a CUDA graph captures the launch once and
    /// the host writes the next step's values into `dyn` before each replay.
    pub fn adam_step_multi_dyn(items: &[AdamItem], h: &AdamHyper, dyn_scalars: Option<&Tensor>) -> Result<()> {
        let op = if h.decoupled { "AdamW" } else { "Adam" };
        let Some(first) = items.first() else { return Ok(()) };
        let dyn_ptr = match dyn_scalars {
            Some(t) if t.dtype() == DType::F64 && t.numel() == 3 && t.is_contiguous() && t.device() == first.p.device() => elem_ptr(op, t)?.0,
            Some(t) => return Err(Error::value(op, format!("the step scalars must be 3 contiguous float64 values on {}, got {} {:?} on {}", first.p.device(), t.dtype(), t.shape(), t.device()))),
            None => 0,
        };
        ordinal(op, first.p)?;
        let mut grads = Vec::with_capacity(items.len());
        for it in items {
            ordinal(op, it.p)?;
            if it.p.device() != first.p.device() || it.p.dtype() != first.p.dtype() {
                return Err(Error::value(op, "a multi-tensor step takes parameters of one dtype on one device"));
            }
            check_inplace(op, "the parameter", it.p, it.p)?;
            check_inplace(op, "exp_avg", it.m, it.p)?;
            check_inplace(op, "exp_avg_sq", it.v, it.p)?;
            if let Some(x) = it.vmax {
                check_inplace(op, "max_exp_avg_sq", x, it.p)?;
            }
            grads.push(grad_like(op, it.g, it.p)?);
        }
        let hp = MtAdam {
            step_size: h.step_size,
            bc2_sqrt: h.bc2_sqrt,
            w1: 1.0 - h.beta1,
            b2: h.beta2,
            w2: 1.0 - h.beta2,
            decay: 1.0 - h.lr * h.weight_decay,
            wd: h.weight_decay,
            eps: h.eps,
            decoupled: h.decoupled as i32,
            maximize: h.maximize as i32,
        };
        let live: Vec<usize> = (0..items.len()).filter(|&i| items[i].p.numel() > 0).collect();
        for chunk in live.chunks(MT_N) {
            let mut l = MtList::new();
            let mut dev = None;
            let mut max_n = 0;
            for (j, &i) in chunk.iter().enumerate() {
                let it = &items[i];
                let (pp, d) = elem_ptr(op, it.p)?;
                l.a[j] = pp;
                l.b[j] = elem_ptr(op, &grads[i])?.0;
                l.c[j] = elem_ptr(op, it.m)?.0;
                l.d[j] = elem_ptr(op, it.v)?.0;
                l.e[j] = match it.vmax {
                    Some(x) => elem_ptr(op, x)?.0,
                    None => 0,
                };
                l.n[j] = it.p.numel() as i64;
                max_n = max_n.max(it.p.numel());
                dev = Some(d);
            }
            let Some(dev) = dev else { continue };
            let f = kfunc(&dev, KFile::Optim, first.p.dtype(), "adam_step_multi")?;
            let mut a = Args::new();
            a.push(l).push(hp).push(dyn_ptr);
            launch(&dev, op, f, (mt_blocks(&dev, max_n), chunk.len() as u32, 1), (256, 1, 1), 0, &mut a)?;
        }
        Ok(())
    }

    /// Contiguous f32/f64 CUDA tensors of one device and dtype for a multi-tensor launch, or None.
    fn mt_inputs(ts: &[Tensor]) -> Result<Option<(usize, DType, Vec<Tensor>)>> {
        let Some(first) = ts.first() else { return Ok(None) };
        let Device::Cuda(ord) = first.device() else { return Ok(None) };
        if ts.iter().any(|t| t.device() != first.device() || t.dtype() != first.dtype()) || !matches!(first.dtype(), DType::F32 | DType::F64) {
            return Ok(None);
        }
        let ts = ts.iter().filter(|t| t.numel() > 0).map(|t| if t.is_contiguous() { Ok(t.clone()) } else { contiguous(t) }).collect::<Result<Vec<_>>>()?;
        Ok(Some((ord, first.dtype(), ts)))
    }

    /// Runs `kernel` over `ts` in chunks of 48 (`a` = element pointer, `n` = count), with `extra` pushed after the list.
    fn mt_launch(op: &str, kernel: &'static str, ord: usize, dt: DType, ts: &[Tensor], extra: impl Fn(&mut Args)) -> Result<()> {
        let dev = super::super::device::device(op, ord)?;
        let f = kfunc(&dev, KFile::Optim, dt, kernel)?;
        for chunk in ts.chunks(MT_N) {
            let mut l = MtList::new();
            let mut max_n = 0;
            for (j, t) in chunk.iter().enumerate() {
                l.a[j] = elem_ptr(op, t)?.0;
                l.n[j] = t.numel() as i64;
                max_n = max_n.max(t.numel());
            }
            let mut a = Args::new();
            a.push(l);
            extra(&mut a);
            launch(&dev, op, f, (mt_blocks(&dev, max_n), chunk.len() as u32, 1), (256, 1, 1), 0, &mut a)?;
        }
        Ok(())
    }

    /// The sum of squares of every element of `ts` as a 0-d f64 CUDA tensor (one launch per 48
    /// tensors, accumulated on the device), or None unless all are f32/f64 on one CUDA device.
    pub fn sum_of_squares(ts: &[Tensor]) -> Result<Option<Tensor>> {
        let op = "clip_grad_norm_";
        let Some((ord, dt, ts)) = mt_inputs(ts)? else { return Ok(None) };
        let dev = super::super::device::device(op, ord)?;
        let acc = empty(op, ord, DType::F64, &[])?;
        // one partial sum per block, in launch order, then one fixed-order sum: reproducible bits
        let chunks: Vec<(usize, u32)> = ts.chunks(MT_N).map(|c| (c.len(), mt_blocks(&dev, c.iter().map(|t| t.numel()).max().unwrap_or(0)))).collect();
        let nparts: usize = chunks.iter().map(|&(n, b)| n * b as usize).sum();
        let part = empty(op, ord, DType::F64, &[nparts.max(1)])?;
        let (pp, _) = elem_ptr(op, &part)?;
        let f = kfunc(&dev, KFile::Optim, dt, "sumsq_multi")?;
        let mut base = 0usize;
        for (chunk, &(n, blocks)) in ts.chunks(MT_N).zip(&chunks) {
            let mut l = MtList::new();
            for (j, t) in chunk.iter().enumerate() {
                l.a[j] = elem_ptr(op, t)?.0;
                l.n[j] = t.numel() as i64;
            }
            let mut a = Args::new();
            a.push(l).push(pp + (base * 8) as u64);
            launch(&dev, op, f, (blocks, n as u32, 1), (256, 1, 1), 0, &mut a)?;
            base += n * blocks as usize;
        }
        let fs = kfunc(&dev, KFile::Optim, dt, "sum_partials")?;
        let mut a = Args::new();
        a.push(pp).push(nparts as i64).push(elem_ptr(op, &acc)?.0);
        launch(&dev, op, fs, (1, 1, 1), (1024, 1, 1), 0, &mut a)?;
        Ok(Some(acc))
    }

    /// Multiplies every tensor of `ts` in place by `min(max_norm / (sqrt(sumsq) + 1e-6), 1)`,
    /// where `sumsq` is the 0-d f64 device tensor of [`sum_of_squares`]: clip_grad_norm_'s scaling
    /// without reading the norm on the host. Returns false (nothing done) unless `ts` are
    /// contiguous f32/f64 tensors on one CUDA device.
    pub fn clip_scale_multi(ts: &[Tensor], sumsq: &Tensor, max_norm: f64) -> Result<bool> {
        let op = "clip_grad_norm_";
        if ts.iter().any(|t| !t.is_contiguous()) || sumsq.dtype() != DType::F64 || sumsq.numel() != 1 {
            return Ok(false);
        }
        let Some((ord, dt, ts)) = mt_inputs(ts)? else { return Ok(false) };
        if sumsq.device() != Device::Cuda(ord) {
            return Ok(false);
        }
        let sp = elem_ptr(op, sumsq)?.0;
        mt_launch(op, "clip_scale_multi", ord, dt, &ts, |a| {
            a.push(sp).push(max_norm);
        })?;
        Ok(true)
    }
}

#[cfg(not(feature = "cuda"))]
mod no_cuda {
    use super::{AdamHyper, AdamItem, SgdHyper};
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
    /// Without the CUDA backend there are no CUDA parameters to step.
    pub fn adam_step_multi(_items: &[AdamItem], _h: &AdamHyper) -> Result<()> {
        Err(super::super::unavailable("Adam"))
    }
    /// Without the CUDA backend there are no CUDA parameters to step.
    pub fn adam_step_multi_dyn(_items: &[AdamItem], _h: &AdamHyper, _dyn: Option<&Tensor>) -> Result<()> {
        Err(super::super::unavailable("Adam"))
    }
    /// Never a CUDA tensor without the backend: nothing done.
    pub fn clip_scale_multi(_ts: &[Tensor], _sumsq: &Tensor, _max_norm: f64) -> Result<bool> {
        Ok(false)
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
pub use no_cuda::{adam_step, adam_step_multi, adam_step_multi_dyn, clip_scale_multi, sgd_step, sum_of_squares, zeros_like};

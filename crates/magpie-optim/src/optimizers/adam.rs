//! `torch.optim.Adam` and `torch.optim.AdamW` (decoupled weight decay), with AMSGrad.

use super::{adam_hyper, adam_moments, b, check, optimizer};
use crate::core::{dev_buf, put, take, DevItem, Hyper, OptFloat, OptimizerState, ParamGroup, ParamState};
use magpie_core::backend::cuda::optim::{adam_step, adam_step_multi_dyn, AdamHyper, AdamItem};
use magpie_core::{DType, Error, Result, Tensor};

/// Adam's and AdamW's keyword arguments (`AdamConfig::default()` is Adam's defaults;
/// `AdamConfig::adamw()` is AdamW's, with weight_decay 1e-2).
#[derive(Clone, Debug)]
pub struct AdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
    pub maximize: bool,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0, amsgrad: false, maximize: false }
    }
}

impl AdamConfig {
    /// AdamW's defaults.
    pub fn adamw() -> Self {
        AdamConfig { weight_decay: 1e-2, ..Default::default() }
    }
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "Adam", format!("Invalid learning rate: {}", self.lr))?;
        check(self.eps >= 0.0, "Adam", format!("Invalid epsilon value: {}", self.eps))?;
        check((0.0..1.0).contains(&self.betas.0), "Adam", format!("Invalid beta parameter at index 0: {}", self.betas.0))?;
        check((0.0..1.0).contains(&self.betas.1), "Adam", format!("Invalid beta parameter at index 1: {}", self.betas.1))?;
        check(self.weight_decay >= 0.0, "Adam", format!("Invalid weight_decay value: {}", self.weight_decay))
    }
    fn hyper(&self) -> Hyper {
        adam_hyper(self.lr, self.betas, self.eps, self.weight_decay, &[("amsgrad", b(self.amsgrad))], self.maximize)
    }
}

/// One Adam step; `decoupled` is AdamW (decay the weights by `lr * wd` before the update).
fn adam_update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T], decoupled: bool) -> Result<()> {
    let c = T::c;
    let (lr, b1, b2, eps, wd) = (g.get("lr"), g.get("beta1"), g.get("beta2"), c(g.get("eps")), g.get("weight_decay"));
    let (amsgrad, maximize) = (g.flag("amsgrad"), g.flag("maximize"));
    let n = p.len();
    let mut m = take(ps, "exp_avg", n, T::zero())?;
    let mut v = take(ps, "exp_avg_sq", n, T::zero())?;
    let mut vmax = if amsgrad { take(ps, "max_exp_avg_sq", n, T::zero())? } else { Vec::new() };
    ps.step += 1.0;
    let step = ps.step;
    let bc1 = 1.0 - b1.powf(step);
    let bc2 = 1.0 - b2.powf(step);
    let step_size = c(lr / bc1);
    let bc2_sqrt = c(bc2.sqrt());
    let (w1, tb2, w2) = (c(1.0 - b1), c(b2), c(1.0 - b2));
    let decay = c(1.0 - lr * wd);
    let wdc = c(wd);
    let k = Consts { step_size, bc2_sqrt, eps, w1, tb2, w2, decay, wdc, maximize, decoupled, l2: !decoupled && wd != 0.0 };
    // one pass over (p, m, v, grad[, vmax]) per element; parameters split over threads when large
    let body = |p: &mut [T], m: &mut [T], v: &mut [T], vmax: &mut [T], grad: &[T]| {
        if amsgrad {
            for i in 0..p.len() {
                let d = k.decayed(&mut p[i], grad[i]);
                adam_moments(&mut m[i], &mut v[i], d, w1, tb2, w2);
                vmax[i] = vmax[i].max(v[i]);
                p[i] = p[i] - step_size * (m[i] / (vmax[i].sqrt() / bc2_sqrt + eps));
            }
        } else {
            // the common case, branch-free and without bounds checks so that it vectorizes (AVX2)
            magpie_core::backend::cpu::simd::with_best(|| adam_plain(p, m, v, grad, &k));
        }
    };
    if grad.len() != n {
        return Err(magpie_core::Error::shape("Adam", format!("gradient of {} elements for a parameter of {n}", grad.len())));
    }
    // ~10 us of work per task: parameters from 2 chunks up are split (a GPT's weight matrices)
    const CHUNK: usize = 1 << 12;
    if n >= 2 * CHUNK && !amsgrad && rayon::current_num_threads() > 1 {
        use rayon::prelude::*;
        p.par_chunks_mut(CHUNK).zip(m.par_chunks_mut(CHUNK)).zip(v.par_chunks_mut(CHUNK)).zip(grad.par_chunks(CHUNK)).for_each(
            |(((p, m), v), g)| body(p, m, v, &mut [], g),
        );
    } else {
        body(p, &mut m, &mut v, &mut vmax, grad);
    }
    put(ps, "exp_avg", m);
    put(ps, "exp_avg_sq", v);
    if amsgrad {
        put(ps, "max_exp_avg_sq", vmax);
    }
    Ok(())
}

/// Adam's per-step scalars, in the parameter's precision.
struct Consts<T> {
    step_size: T,
    bc2_sqrt: T,
    eps: T,
    w1: T,
    tb2: T,
    w2: T,
    decay: T,
    wdc: T,
    maximize: bool,
    decoupled: bool,
    l2: bool,
}

impl<T: OptFloat> Consts<T> {
    /// The (sign-adjusted) gradient after weight decay: AdamW scales the parameter, Adam adds
    /// `wd * p` to the gradient.
    #[inline(always)]
    fn decayed(&self, p: &mut T, g: T) -> T {
        let d = if self.maximize { -g } else { g };
        if self.decoupled {
            *p = *p * self.decay;
            d
        } else if self.l2 {
            d + self.wdc * *p
        } else {
            d
        }
    }
}

/// `p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)` after the moment updates (no amsgrad).
#[inline(always)]
fn adam_plain<T: OptFloat>(p: &mut [T], m: &mut [T], v: &mut [T], grad: &[T], k: &Consts<T>) {
    for (((p, m), v), &g) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(grad) {
        let d = k.decayed(p, g);
        adam_moments(m, v, d, k.w1, k.tb2, k.w2);
        *p = *p - k.step_size * (*m / (v.sqrt() / k.bc2_sqrt + k.eps));
    }
}

fn adam<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    adam_update(g, ps, p, grad, false)
}

fn adamw<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    adam_update(g, ps, p, grad, true)
}

/// The CUDA kernels' scalars for step number `step` (bias corrections from the host).
fn dev_hyper(g: &ParamGroup, step: f64, decoupled: bool) -> AdamHyper {
    let (lr, b1, b2) = (g.get("lr"), g.get("beta1"), g.get("beta2"));
    AdamHyper {
        step_size: lr / (1.0 - b1.powf(step)),
        bc2_sqrt: (1.0 - b2.powf(step)).sqrt(),
        beta1: b1,
        beta2: b2,
        lr,
        weight_decay: g.get("weight_decay"),
        eps: g.get("eps"),
        decoupled,
        maximize: g.flag("maximize"),
    }
}

/// The fused CUDA step: one kernel per parameter, moments on the device.
fn adam_update_dev(g: &ParamGroup, ps: &mut ParamState, p: &Tensor, grad: &Tensor, decoupled: bool) -> Result<()> {
    let m = dev_buf(ps, "exp_avg", p)?;
    let v = dev_buf(ps, "exp_avg_sq", p)?;
    let vmax = if g.flag("amsgrad") { Some(dev_buf(ps, "max_exp_avg_sq", p)?) } else { None };
    let step = ps.step + 1.0;
    adam_step(p, grad, &m, &v, vmax.as_ref(), &dev_hyper(g, step, decoupled))?;
    ps.step = step;
    Ok(())
}

/// The fused CUDA step of a whole group: multi-tensor launches (48 parameters each) when every
/// parameter is at the same step count, else one kernel per parameter.
///
/// The step's scalars go through `scalars` (3 f64 on the device, made on the first step): written
/// from the host before the launch, except during a CUDA-graph capture, where the launch alone is
/// recorded and the host state is not advanced ([`prepare_graphed`] does both before each replay).
fn adam_group_dev(g: &ParamGroup, items: &mut [DevItem], scalars: &mut Option<Tensor>, decoupled: bool) -> Result<()> {
    let op = if decoupled { "AdamW" } else { "Adam" };
    let steps_equal = items.windows(2).all(|w| w[0].ps.step == w[1].ps.step);
    let capturing = items.first().is_some_and(|it| magpie_core::cuda_graph::is_current_stream_capturing(it.p.device()));
    if capturing && !steps_equal {
        return Err(Error::value(op, "a captured step needs every parameter of a group at the same step count (warm up with eager steps first)"));
    }
    if !steps_equal {
        for it in items.iter_mut() {
            adam_update_dev(g, &mut it.ps, &it.p, &it.g, decoupled)?;
        }
        return Ok(());
    }
    let Some(first) = items.first() else { return Ok(()) };
    let step = first.ps.step + 1.0;
    let dev = first.p.device();
    let amsgrad = g.flag("amsgrad");
    let mut bufs = Vec::with_capacity(items.len());
    for it in items.iter_mut() {
        let m = dev_buf(&mut it.ps, "exp_avg", &it.p)?;
        let v = dev_buf(&mut it.ps, "exp_avg_sq", &it.p)?;
        let x = if amsgrad { Some(dev_buf(&mut it.ps, "max_exp_avg_sq", &it.p)?) } else { None };
        bufs.push((m, v, x));
    }
    let h = dev_hyper(g, step, decoupled);
    let buf = match scalars.take() {
        Some(t) if t.device() == dev => t,
        _ if capturing => return Err(Error::value(op, "a captured step needs the optimizer's step scalars on the device: run one eager step before capturing")),
        _ => Tensor::zeros_on(&[3], DType::F64, dev)?,
    };
    *scalars = Some(buf.clone());
    if !capturing {
        write_scalars(&buf, &h)?;
    }
    let list: Vec<AdamItem> = items.iter().zip(&bufs).map(|(it, (m, v, x))| AdamItem { p: &it.p, g: &it.g, m, v, vmax: x.as_ref() }).collect();
    adam_step_multi_dyn(&list, &h, Some(&buf))?;
    if !capturing {
        for it in items.iter_mut() {
            it.ps.step = step;
        }
    }
    Ok(())
}

/// Writes step `h`'s (step_size, bc2_sqrt, decay) into the group's device scalars.
fn write_scalars(buf: &Tensor, h: &AdamHyper) -> Result<()> {
    let v = Tensor::from_vec(vec![h.step_size, h.bc2_sqrt, 1.0 - h.lr * h.weight_decay], &[3])?;
    buf.copy_(&v)?;
    Ok(())
}

/// [`crate::Optimizer::prepare_graphed_step`] for Adam and AdamW: for every group whose fused
/// step was captured, the next step's scalars into its device tensor and the step counts of its
/// parameters with gradients advanced by one.
pub(crate) fn prepare_graphed(st: &mut OptimizerState) -> Result<()> {
    let op = "prepare_graphed_step";
    let _ng = magpie_core::autograd::no_grad();
    let mut any = false;
    for gi in 0..st.groups.len() {
        let Some(Some(buf)) = st.group_scalars.get(gi).cloned() else { continue };
        let g = st.groups[gi].clone();
        let ids: Vec<usize> = g.params.iter().filter(|p| p.grad().is_some()).map(|p| p.id()).collect();
        let steps: Vec<f64> = ids.iter().map(|id| st.state.get(id).map_or(0.0, |s| s.step)).collect();
        let Some(&s0) = steps.first() else { continue };
        if steps.iter().any(|&s| s != s0) {
            return Err(Error::value(op, "the parameters of a group are at different step counts"));
        }
        let step = s0 + 1.0;
        // `decoupled` does not change the three scalars
        write_scalars(&buf, &dev_hyper(&g, step, true))?;
        for id in ids {
            st.state.entry(id).or_default().step = step;
        }
        any = true;
    }
    if !any {
        return Err(Error::value(op, "no captured multi-tensor Adam/AdamW step: only Adam and AdamW on CUDA parameters can be replayed from a CUDA graph, after an eager step"));
    }
    Ok(())
}

fn adam_group(g: &ParamGroup, items: &mut [DevItem], scalars: &mut Option<Tensor>) -> Result<()> {
    adam_group_dev(g, items, scalars, false)
}

fn adamw_group(g: &ParamGroup, items: &mut [DevItem], scalars: &mut Option<Tensor>) -> Result<()> {
    adam_group_dev(g, items, scalars, true)
}

fn adam_dev(g: &ParamGroup, ps: &mut ParamState, p: &Tensor, grad: &Tensor) -> Result<()> {
    adam_update_dev(g, ps, p, grad, false)
}

fn adamw_dev(g: &ParamGroup, ps: &mut ParamState, p: &Tensor, grad: &Tensor) -> Result<()> {
    adam_update_dev(g, ps, p, grad, true)
}

optimizer!(
    /// Adam (`torch.optim.Adam`).
    Adam, AdamConfig, "Adam", adam, Some(adam_dev), Some(adam_group)
);
optimizer!(
    /// AdamW (`torch.optim.AdamW`): Adam with decoupled weight decay. Use `AdamConfig::adamw()` for its defaults.
    AdamW, AdamConfig, "AdamW", adamw, Some(adamw_dev), Some(adamw_group)
);

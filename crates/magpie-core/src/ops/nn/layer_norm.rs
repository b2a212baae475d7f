//! `native_layer_norm` on f32 CPU tensors as one recorded op over the fused kernels of
//! `backend/cpu/norm.rs`. Its backward runs the fused kernel when no graph of the gradient is
//! built, and otherwise the same gradient written with tensor ops (differentiable again). The
//! composite in `norm.rs` stays the reference both are tested against.
//!
//! On CUDA (float inputs, weight and bias on the same GPU) the forward is the norm kernel and
//! the backward `backend/cuda/norm_bwd.rs` (composite when a graph of the gradient is built);
//! the mean and rstd outputs get a node of their own, so their (rare) gradients cost nothing
//! when unused.

use crate::autograd::{self, Saved};
use crate::backend::cpu::{self, norm};
use crate::device::Device;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Result;
use std::sync::Arc;

fn on_cpu_f32(t: &Tensor) -> bool {
    t.dtype() == DType::F32 && t.device() == Device::Cpu
}

/// `(out, mean, rstd)` of layer norm over the last `k` dims when the fused path applies
/// (f32 CPU input, weight and bias; shapes validated by the caller), else None.
pub(crate) fn layer_norm_fused(x: &Tensor, k: usize, w: Option<&Tensor>, b: Option<&Tensor>, eps: f64) -> Result<Option<(Tensor, Tensor, Tensor)>> {
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() {
        return layer_norm_cuda(x, k, w, b, eps);
    }
    if !on_cpu_f32(x) || !w.is_none_or(on_cpu_f32) || !b.is_none_or(on_cpu_f32) {
        return Ok(None);
    }
    let nd = x.ndim();
    let n: usize = x.shape()[nd - k..].iter().product();
    let rows: usize = x.shape()[..nd - k].iter().product();
    let mut stat_shape = x.shape()[..nd - k].to_vec();
    stat_shape.extend(std::iter::repeat_n(1, k));
    let wv: Option<Vec<f32>> = w.map(cpu::to_vec).transpose()?;
    let bv: Option<Vec<f32>> = b.map(cpu::to_vec).transpose()?;
    let mut y = vec![0f32; rows * n];
    crate::storage::advise_huge_pages(&mut y);
    let (mut mean, mut rstd) = (vec![0f32; rows], vec![0f32; rows]);
    cpu::read(x, |xs: &[f32]| norm::layer_norm_forward(xs, n, wv.as_deref(), bv.as_deref(), eps as f32, &mut y, &mut mean, &mut rstd))?;
    let (mean, rstd) = (Arc::new(mean), Arc::new(rstd));
    let y = Tensor::from_vec(y, x.shape())?;
    let mt = Tensor::from_vec(mean.to_vec(), &stat_shape)?;
    let rt = Tensor::from_vec(rstd.to_vec(), &stat_shape)?;
    let sx = Saved::new("layer_norm", x);
    let sw = w.map(|w| Saved::new("layer_norm", w));
    let mut inputs = vec![x];
    inputs.extend(w);
    inputs.extend(b);
    let (has_w, has_b) = (w.is_some(), b.is_some());
    autograd::record("NativeLayerNorm", &inputs, &[y.clone(), mt.clone(), rt.clone()], move |ctx, gr| {
        let x = sx.get()?;
        let w = sw.as_ref().map(|s| s.get()).transpose()?;
        let (iw, ib) = (1, 1 + has_w as usize);
        let need_x = ctx.needs_input_grad(0);
        let need_w = has_w && ctx.needs_input_grad(iw);
        let need_b = has_b && ctx.needs_input_grad(ib);
        let (mut dx, dw, db) = if autograd::is_grad_enabled() {
            composite_backward(&gr[0], &x, w.as_ref(), k, eps, need_x, need_w || need_b)?
        } else {
            fused_backward(&gr[0], &x, w.as_ref(), k, n, &mean, &rstd, need_x, need_w || need_b)?
        };
        // gradients that reach the mean and rstd outputs (rare: they are usually unused)
        if need_x && (nonzero(&gr[1])? || nonzero(&gr[2])? || autograd::is_grad_enabled()) {
            let extra = stats_backward(&gr[1], &gr[2], &x, k, eps)?;
            dx = Some(match dx {
                Some(d) => d.add(&extra)?,
                None => extra,
            });
        }
        Ok(grad_list([(true, need_x, dx), (has_w, need_w, dw), (has_b, need_b, db)]))
    });
    Ok(Some((y, mt, rt)))
}

fn nonzero(t: &Tensor) -> Result<bool> {
    cpu::read(t, |v: &[f32]| v.iter().any(|&x| x != 0.0))
}

pub(crate) type Grads = (Option<Tensor>, Option<Tensor>, Option<Tensor>);

/// The fused kernel's dx and (dw, db), f32 on the CPU.
#[allow(clippy::too_many_arguments)]
fn fused_backward(g: &Tensor, x: &Tensor, w: Option<&Tensor>, k: usize, n: usize, mean: &[f32], rstd: &[f32], need_x: bool, need_wb: bool) -> Result<Grads> {
    let wv: Option<Vec<f32>> = w.map(cpu::to_vec).transpose()?;
    let mut dx = if need_x { Some(vec![0f32; x.numel()]) } else { None };
    let (mut dw, mut db) = (vec![0f32; if need_wb { n } else { 0 }], vec![0f32; if need_wb { n } else { 0 }]);
    cpu::read(g, |gs: &[f32]| {
        cpu::read(x, |xs: &[f32]| {
            let dwdb = if need_wb { Some((&mut dw[..], &mut db[..])) } else { None };
            norm::layer_norm_backward(gs, xs, n, mean, rstd, wv.as_deref(), dx.as_deref_mut(), dwdb)
        })
    })??;
    let wshape = &x.shape()[x.ndim() - k..];
    Ok((
        dx.map(|d| Tensor::from_vec(d, x.shape())).transpose()?,
        if need_wb { Some(Tensor::from_vec(dw, wshape)?) } else { None },
        if need_wb { Some(Tensor::from_vec(db, wshape)?) } else { None },
    ))
}

fn dims_of(nd: usize, k: usize) -> (Vec<i64>, Vec<i64>) {
    ((nd - k..nd).map(|d| d as i64).collect(), (0..nd - k).map(|d| d as i64).collect())
}

/// Sums over the leading (batch) dims; none to sum when the input is just the normalized shape.
fn sum_lead(t: &Tensor, lead: &[i64]) -> Result<Tensor> {
    if lead.is_empty() { Ok(t.clone()) } else { t.sum_dims(Some(lead), false, None) }
}

/// The same gradients with tensor ops (statistics recomputed from `x`), so they are
/// differentiable again.
pub(crate) fn composite_backward(g: &Tensor, x: &Tensor, w: Option<&Tensor>, k: usize, eps: f64, need_x: bool, need_wb: bool) -> Result<Grads> {
    let (dims, lead) = dims_of(x.ndim(), k);
    let m = x.mean_dims(Some(&dims), true, None)?;
    let c = x.sub(&m)?;
    let rstd = c.mul(&c)?.mean_dims(Some(&dims), true, None)?.add_scalar(eps)?.pow_scalar(-0.5)?;
    let xhat = c.mul(&rstd)?;
    let dx = if need_x {
        let gx = match w {
            Some(w) => g.mul(w)?,
            None => g.clone(),
        };
        let a = gx.mean_dims(Some(&dims), true, None)?;
        let b = gx.mul(&xhat)?.mean_dims(Some(&dims), true, None)?;
        Some(rstd.mul(&gx.sub(&a)?.sub(&xhat.mul(&b)?)?)?)
    } else {
        None
    };
    let (dw, db) = if need_wb { (Some(sum_lead(&g.mul(&xhat)?, &lead)?), Some(sum_lead(g, &lead)?)) } else { (None, None) };
    Ok((dx, dw, db))
}

/// dx from gradients of the mean and rstd outputs: `gm / n - grs * rstd^3 * (x - mean) / n`.
fn stats_backward(gm: &Tensor, grs: &Tensor, x: &Tensor, k: usize, eps: f64) -> Result<Tensor> {
    let (dims, _) = dims_of(x.ndim(), k);
    let n: usize = x.shape()[x.ndim() - k..].iter().product();
    let m = x.mean_dims(Some(&dims), true, None)?;
    let c = x.sub(&m)?;
    let rstd = c.mul(&c)?.mean_dims(Some(&dims), true, None)?.add_scalar(eps)?.pow_scalar(-0.5)?;
    let r3 = rstd.mul(&rstd)?.mul(&rstd)?;
    let from_rstd = c.mul(&grs.mul(&r3)?)?.mul_scalar(-1.0 / n as f64)?;
    from_rstd.add(&gm.div_scalar(n as f64)?.broadcast_to(x.shape())?)
}

/// The CUDA path of [`layer_norm_fused`]: None when the kernels do not take these inputs.
#[cfg(feature = "cuda")]
fn layer_norm_cuda(x: &Tensor, k: usize, w: Option<&Tensor>, b: Option<&Tensor>, eps: f64) -> Result<Option<(Tensor, Tensor, Tensor)>> {
    use crate::backend::cuda;
    let nd = x.ndim();
    let n: usize = x.shape()[nd - k..].iter().product();
    let Some(o) = cuda::norm::forward(x, n, w, b, eps, false)? else { return Ok(None) };
    let mut stat_shape: Vec<i64> = x.shape()[..nd - k].iter().map(|&v| v as i64).collect();
    stat_shape.extend(std::iter::repeat_n(1i64, k));
    let (y, mt, rt) = (o.y, o.mean.reshape(&stat_shape)?, o.rstd.reshape(&stat_shape)?);
    let sx = Saved::new("layer_norm", x);
    let sw = w.map(|w| Saved::new("layer_norm", w));
    let (smean, srstd) = (o.mean.clone(), o.rstd.clone());
    let mut inputs = vec![x];
    inputs.extend(w);
    inputs.extend(b);
    let (has_w, has_b) = (w.is_some(), b.is_some());
    autograd::record("NativeLayerNorm", &inputs, &[y.clone()], move |ctx, gr| {
        let x = sx.get()?;
        let w = sw.as_ref().map(|s| s.get()).transpose()?;
        let (iw, ib) = (1, 1 + has_w as usize);
        let need_x = ctx.needs_input_grad(0);
        let need_w = has_w && ctx.needs_input_grad(iw);
        let need_b = has_b && ctx.needs_input_grad(ib);
        let kernel = if autograd::is_grad_enabled() {
            None
        } else {
            cuda::norm_bwd::layer_norm_backward(&gr[0], &x, &smean, &srstd, w.as_ref(), n, need_x, need_w || need_b)?
        };
        let (dx, dw, db) = match kernel {
            Some((dx, dw, db)) => {
                let wshape: Vec<i64> = x.shape()[x.ndim() - k..].iter().map(|&v| v as i64).collect();
                (dx, dw.map(|t| t.reshape(&wshape)).transpose()?, db.map(|t| t.reshape(&wshape)).transpose()?)
            }
            None => composite_backward(&gr[0], &x, w.as_ref(), k, eps, need_x, need_w || need_b)?,
        };
        Ok(grad_list([(true, need_x, dx), (has_w, need_w, dw), (has_b, need_b, db)]))
    });
    // the statistics' own node: its backward runs only when a gradient reaches mean or rstd
    let sx2 = Saved::new("layer_norm", x);
    autograd::record("NativeLayerNormStats", &[x], &[mt.clone(), rt.clone()], move |_, gr| {
        let x = sx2.get()?;
        Ok(vec![Some(stats_backward(&gr[0], &gr[1], &x, k, eps)?)])
    });
    Ok(Some((y, mt, rt)))
}

/// The gradients of (x, weight, bias) for the inputs the op has (`present`), each kept only when
/// it is wanted.
fn grad_list(parts: [(bool, bool, Option<Tensor>); 3]) -> Vec<Option<Tensor>> {
    parts.into_iter().filter(|p| p.0).map(|(_, want, g)| if want { g } else { None }).collect()
}

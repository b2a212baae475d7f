//! `scaled_dot_product_attention` on f32 CPU tensors without an explicit mask or dropout, as one
//! recorded op over the fused kernels of `backend/cpu/attention.rs` (PyTorch takes its CPU
//! flash-attention path in the same cases). Inputs are read in place through their strides
//! (the head-split views of a fused QKV projection need no copy). The backward runs the fused
//! kernel when no graph of the gradient is built, and otherwise the same gradients written with
//! tensor ops from the saved inputs (differentiable again). The composite in `attention.rs`
//! stays the reference.

use super::attention::{causal_mask, repeat_heads};
use crate::autograd::{self, Saved};
use crate::backend::cpu::attention::{backward_task, forward_task, Dims, Grads, Mat};
use crate::device::Device;
use crate::dtype::DType;
use crate::element::Element;
use crate::layout::{for_each_index, Layout};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;
use std::sync::Arc;

/// Below this many multiply-adds (rows x keys x width) the tasks run on the calling thread.
const PAR_MIN_WORK: usize = 1 << 16;

/// `q`, `k`, `v` as the kernels read them: each tensor's element-contiguous (last stride 1)
/// form and the storage offsets of its matrices in row-major batch order.
struct Operand {
    t: Tensor,
    offsets: Vec<usize>,
    row_stride: usize,
    cols: usize,
}

impl Operand {
    fn new(t: &Tensor) -> Result<Operand> {
        let nd = t.ndim();
        let t = if t.strides()[nd - 1] == 1 || t.shape()[nd - 1] <= 1 { t.clone() } else { t.contiguous()? };
        let l = t.layout();
        let batch = Layout { shape: l.shape[..nd - 2].to_vec(), strides: l.strides[..nd - 2].to_vec(), offset: l.offset };
        let mut offsets = Vec::with_capacity(batch.numel());
        for_each_index(&batch, |o| offsets.push(o));
        Ok(Operand { row_stride: l.strides[nd - 2], cols: l.shape[nd - 1], offsets, t })
    }

    fn mat<'a>(&self, data: &'a [f32], b: usize) -> Mat<'a> {
        Mat { data, offset: self.offsets[b], row_stride: self.row_stride, cols: self.cols }
    }
}

/// Runs `f` on the f32 storages of `ts` (one read lock per distinct storage, so views of one
/// fused QKV tensor share it).
fn with_slices<R>(ts: &[&Tensor], f: impl FnOnce(&[&[f32]]) -> R) -> Result<R> {
    let mut owners: Vec<usize> = Vec::with_capacity(ts.len());
    for (i, t) in ts.iter().enumerate() {
        owners.push(ts[..i].iter().position(|u| u.shares_storage(t)).unwrap_or(i));
    }
    let guards: Vec<_> = ts.iter().enumerate().map(|(i, t)| if owners[i] == i { Some(t.storage().read()) } else { None }).collect();
    let mut slices: Vec<&[f32]> = Vec::with_capacity(ts.len());
    for &o in &owners {
        let g = guards[o].as_ref().ok_or_else(|| Error::value("scaled_dot_product_attention", "storage lock lost"))?;
        match &**g {
            Storage::Cpu(c) => slices.push(<f32 as Element>::slice(c).ok_or_else(|| Error::dtype("scaled_dot_product_attention", "storage dtype mismatch"))?),
            Storage::Cuda(_) => return Err(crate::backend::cuda::cpu_only("scaled_dot_product_attention")),
        }
    }
    Ok(f(&slices))
}

/// How many query matrices share each key/value matrix, when the fused path applies: equal
/// batch shapes, or (with `enable_gqa`) a head count of the keys that divides the queries'.
fn group_of(q: &Tensor, k: &Tensor, v: &Tensor, enable_gqa: bool) -> Option<usize> {
    let nd = q.ndim();
    let (qb, kb, vb) = (&q.shape()[..nd - 2], &k.shape()[..nd - 2], &v.shape()[..nd - 2]);
    if kb != vb {
        return None;
    }
    if qb == kb {
        return Some(1);
    }
    if !enable_gqa || nd < 3 || qb[..nd - 3] != kb[..nd - 3] {
        return None;
    }
    let (hq, hk) = (qb[nd - 3], kb[nd - 3]);
    (hk > 0 && hq % hk == 0).then_some(hq / hk)
}

/// The attention output when the fused path applies (f32 CPU `q`, `k`, `v` of one rank with
/// matching batch dims or GQA heads, nothing empty), else None. The caller has validated
/// dtypes and checked that there is no mask and no dropout.
pub(crate) fn sdpa_fused(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: f64, enable_gqa: bool) -> Result<Option<Tensor>> {
    let cpu_f32 = |t: &Tensor| t.dtype() == DType::F32 && t.device() == Device::Cpu;
    if !cpu_f32(q) || !cpu_f32(k) || !cpu_f32(v) || q.ndim() != k.ndim() || q.ndim() != v.ndim() || q.ndim() < 2 {
        return Ok(None);
    }
    let nd = q.ndim();
    let d = Dims { l: q.shape()[nd - 2], s: k.shape()[nd - 2], e: q.shape()[nd - 1], ev: v.shape()[nd - 1], scale: scale as f32, causal };
    if k.shape()[nd - 1] != d.e || v.shape()[nd - 2] != d.s || q.numel() == 0 || k.numel() == 0 || v.numel() == 0 {
        return Ok(None);
    }
    let Some(group) = group_of(q, k, v, enable_gqa) else { return Ok(None) };
    let (oq, ok, ov) = (Operand::new(q)?, Operand::new(k)?, Operand::new(v)?);
    let nkv = ok.offsets.len();
    let mut out = vec![0f32; oq.offsets.len() * d.l * d.ev];
    let mut lse = vec![0f32; oq.offsets.len() * d.l];
    let par = oq.offsets.len() * d.l * d.s * (d.e + d.ev) >= PAR_MIN_WORK && nkv > 1;
    with_slices(&[&oq.t, &ok.t, &ov.t], |s| {
        let task = |(b, (o, l)): (usize, (&mut [f32], &mut [f32]))| {
            let qs: Vec<Mat> = (b * group..(b + 1) * group).map(|i| oq.mat(s[0], i)).collect();
            forward_task(&qs, ok.mat(s[1], b), ov.mat(s[2], b), d, o, l);
        };
        let chunks = out.chunks_mut(group * d.l * d.ev).zip(lse.chunks_mut(group * d.l));
        if par {
            chunks.enumerate().collect::<Vec<_>>().into_par_iter().for_each(task);
        } else {
            chunks.enumerate().for_each(task);
        }
    })?;
    let mut shape = q.shape().to_vec();
    shape[nd - 1] = d.ev;
    let y = Tensor::from_vec(out, &shape)?;
    let lse = Arc::new(lse);
    let (sq, sk, sv) = (Saved::new("scaled_dot_product_attention", q), Saved::new("scaled_dot_product_attention", k), Saved::new("scaled_dot_product_attention", v));
    autograd::record("ScaledDotProductFlashAttentionForCpu", &[q, k, v], &[y.clone()], move |ctx, g| {
        let (q, k, v) = (sq.get()?, sk.get()?, sv.get()?);
        let need = [ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)];
        let grads = if autograd::is_grad_enabled() {
            composite_backward(&g[0], &q, &k, &v, d.scale as f64, d.causal, group)?
        } else {
            fused_backward(&g[0], &ctx.output(0)?, &q, &k, &v, &lse, d, group)?
        };
        Ok(grads.into_iter().zip(need).map(|(t, n)| if n { Some(t) } else { None }).collect())
    });
    Ok(Some(y))
}

/// dq, dk, dv by the fused kernel (one task per key/value matrix, as the forward).
#[allow(clippy::too_many_arguments)]
fn fused_backward(g: &Tensor, y: &Tensor, q: &Tensor, k: &Tensor, v: &Tensor, lse: &[f32], d: Dims, group: usize) -> Result<Vec<Tensor>> {
    let (og, oy) = (Operand::new(g)?, Operand::new(y)?);
    let (oq, ok, ov) = (Operand::new(q)?, Operand::new(k)?, Operand::new(v)?);
    let nkv = ok.offsets.len();
    let mut dq = vec![0f32; oq.offsets.len() * d.l * d.e];
    let mut dk = vec![0f32; nkv * d.s * d.e];
    let mut dv = vec![0f32; nkv * d.s * d.ev];
    let par = oq.offsets.len() * d.l * d.s * (d.e + d.ev) >= PAR_MIN_WORK / 2 && nkv > 1;
    with_slices(&[&oq.t, &ok.t, &ov.t, &og.t, &oy.t], |s| {
        let task = |(b, ((dq, dk), dv)): (usize, ((&mut [f32], &mut [f32]), &mut [f32]))| {
            let rows = b * group..(b + 1) * group;
            let qs: Vec<Mat> = rows.clone().map(|i| oq.mat(s[0], i)).collect();
            let gs: Vec<Mat> = rows.clone().map(|i| og.mat(s[3], i)).collect();
            let ys: Vec<Mat> = rows.map(|i| oy.mat(s[4], i)).collect();
            let l = &lse[b * group * d.l..(b + 1) * group * d.l];
            backward_task(&qs, &gs, &ys, l, ok.mat(s[1], b), ov.mat(s[2], b), d, Grads { dq, dk, dv });
        };
        let chunks = dq.chunks_mut(group * d.l * d.e).zip(dk.chunks_mut(d.s * d.e)).zip(dv.chunks_mut(d.s * d.ev));
        if par {
            chunks.enumerate().collect::<Vec<_>>().into_par_iter().for_each(task);
        } else {
            chunks.enumerate().for_each(task);
        }
    })?;
    Ok(vec![Tensor::from_vec(dq, q.shape())?, Tensor::from_vec(dk, k.shape())?, Tensor::from_vec(dv, v.shape())?])
}

/// The same gradients with tensor ops (probabilities recomputed from `q` and `k`), so they are
/// differentiable again: `dV = P^T dO`, `dS = P (dP - rowsum(dP P))` with `dP = dO V^T`,
/// `dQ = scale dS K`, `dK = scale dS^T Q`; under GQA the key/value gradients sum over the query
/// heads that share them.
pub(super) fn composite_backward(g: &Tensor, q: &Tensor, k: &Tensor, v: &Tensor, scale: f64, causal: bool, group: usize) -> Result<Vec<Tensor>> {
    let (kr, vr) = (repeat_heads(k, group)?, repeat_heads(v, group)?);
    let mut att = q.matmul(&kr.transpose(-2, -1)?)?.mul_scalar(scale)?;
    if causal {
        let (l, s) = (q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]);
        att = att.masked_fill(&causal_mask(l, s, att.device())?, f64::NEG_INFINITY)?;
    }
    let p = att.safe_softmax(-1, None)?;
    let dv = p.transpose(-2, -1)?.matmul(g)?;
    let dp = g.matmul(&vr.transpose(-2, -1)?)?;
    let ds = p.mul(&dp.sub(&dp.mul(&p)?.sum_dims(Some(&[-1]), true, None)?)?)?;
    let dq = ds.matmul(&kr)?.mul_scalar(scale)?;
    let dk = ds.transpose(-2, -1)?.matmul(q)?.mul_scalar(scale)?;
    let sum_groups = |t: Tensor, like: &Tensor| -> Result<Tensor> {
        if group == 1 {
            return Ok(t);
        }
        let nd = like.ndim();
        let mut s: Vec<i64> = like.shape().iter().map(|&x| x as i64).collect();
        s.insert(nd - 2, group as i64);
        t.reshape(&s)?.sum_dims(Some(&[nd as i64 - 2]), false, None)
    };
    Ok(vec![dq, sum_groups(dk, k)?, sum_groups(dv, v)?])
}

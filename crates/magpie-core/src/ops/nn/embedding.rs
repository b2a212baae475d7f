//! Embedding lookups (`embedding`, `embedding_bag`) and `one_hot`. Lookups are row gathers whose
//! gradient is a scatter-add (rows at `padding_idx` get none); bags are sparse row maps.

use super::embedding_rows::{self, Lookup};
use super::gather::{take_rows, RowIdx};
use super::resample::{apply_taps, Taps};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{DType, Error, Result};
use std::sync::Arc;

fn indices(op: &str, idx: &Tensor, n: usize) -> Result<Vec<usize>> {
    if !idx.dtype().is_int() {
        return Err(Error::dtype(op, format!("Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {} instead", idx.dtype())));
    }
    let v: Vec<i64> = idx.to_vec()?;
    v.iter()
        .map(|&i| if i < 0 || i as usize >= n { Err(Error::index(op, format!("index out of range in self (index {i}, {n} rows)"))) } else { Ok(i as usize) })
        .collect()
}

/// Renormalizes (in place, without grad) the rows of `w` listed in `rows` whose `p`-norm exceeds `max_norm`.
fn renorm_rows(w: &Tensor, rows: &[usize], max_norm: f64, p: f64) -> Result<()> {
    let _ng = autograd::no_grad();
    let (n, d) = (w.shape()[0], w.shape()[1]);
    let mut v: Vec<f64> = w.to_vec()?;
    let mut seen = vec![false; n];
    for &r in rows {
        if std::mem::replace(&mut seen[r], true) {
            continue;
        }
        let row = &mut v[r * d..(r + 1) * d];
        let norm = if p == 2.0 { row.iter().map(|x| x * x).sum::<f64>().sqrt() } else { row.iter().map(|x| x.abs().powf(p)).sum::<f64>().powf(1.0 / p) };
        if norm > max_norm {
            let s = max_norm / (norm + 1e-7);
            row.iter_mut().for_each(|x| *x *= s);
        }
    }
    let nw = Tensor::from_vec(v, &[n, d])?.to_dtype(w.dtype())?;
    crate::with_dtype!(w.dtype(), T, {
        let vals: Vec<T> = nw.to_vec()?;
        crate::backend::cpu::scatter_into(w, &vals)
    })
}

/// `embedding(input, weight, padding_idx, max_norm, norm_type)`: rows of `weight` at `input`.
pub fn embedding(idx: &Tensor, w: &Tensor, padding_idx: Option<i64>, max_norm: Option<f64>, norm_type: f64) -> Result<Tensor> {
    let _prof = crate::profiler::op("embedding", &[w, idx]);
    let op = "embedding";
    if w.ndim() != 2 {
        return Err(Error::shape(op, "'weight' must be 2-D"));
    }
    let (n, d) = (w.shape()[0], w.shape()[1]);
    let pad = match padding_idx {
        Some(p) if p >= n as i64 || p < -(n as i64) => return Err(Error::value(op, "Padding_idx must be within num_embeddings")),
        Some(p) if p < 0 => Some((p + n as i64) as usize),
        Some(p) => Some(p as usize),
        None => None,
    };
    #[cfg(feature = "cuda")]
    if max_norm.is_none() && w.device().is_cuda() && idx.device().is_cuda() && idx.dtype().is_int() {
        if let Some(out) = crate::backend::cuda::index::embedding(w, idx)? {
            let idx_c = idx.clone();
            autograd::record("Embedding", &[w], &[out.clone()], move |_, g| {
                // first-order: the deterministic row-sum kernel (no atomics); to be differentiated
                // again: the index_add composite below
                if !autograd::is_grad_enabled() {
                    if let Some(gw) = crate::backend::cuda::index::embedding_backward(&g[0], &idx_c, n, pad)? {
                        return Ok(vec![Some(gw)]);
                    }
                }
                // rows of the gradient added at their indices; the padding row gets none
                let flat_i = idx_c.reshape(&[-1])?;
                let mut gf = g[0].reshape(&[-1, d as i64])?;
                if let Some(p) = pad {
                    gf = gf.mul(&flat_i.ne_scalar(p as i64)?.to_dtype(gf.dtype())?.unsqueeze(1)?)?;
                }
                let z = Tensor::zeros_on(&[n, d], gf.dtype(), gf.device())?;
                Ok(vec![Some(z.index_add(0, &flat_i, &gf, crate::Scalar::Int(1))?)])
            });
            return Ok(out);
        }
    }
    let rows = indices(op, idx, n)?;
    if let Some(m) = max_norm {
        renorm_rows(w, &rows, m, norm_type)?;
    }
    let mut shape = idx.shape().to_vec();
    shape.push(d);
    let lk = Arc::new(Lookup { rows, n, d });
    embedding_rows::take(w, lk, None, pad, &shape)
}

/// `embedding_bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
/// sparse, per_sample_weights, include_last_offset, padding_idx)` for modes sum / mean / max.
#[allow(clippy::too_many_arguments)]
pub fn embedding_bag(
    idx: &Tensor,
    w: &Tensor,
    offsets: Option<&Tensor>,
    max_norm: Option<f64>,
    norm_type: f64,
    mode: &str,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: Option<i64>,
) -> Result<Tensor> {
    let op = "embedding_bag";
    // half weights: bags summed in float32, rounded once (PyTorch's acc_type); not with
    // max_norm, which renormalizes rows of `w` in place
    if let (Some(h), None) = (crate::ops::acc::half_acc_opt(w, &[per_sample_weights]), max_norm) {
        use crate::ops::acc::{down, up, up_opt};
        let psw = up_opt(per_sample_weights)?;
        return down(embedding_bag(idx, &up(w)?, offsets, max_norm, norm_type, mode, psw.as_ref(), include_last_offset, padding_idx)?, h);
    }
    if w.ndim() != 2 {
        return Err(Error::shape(op, "'weight' must be 2-D"));
    }
    let n = w.shape()[0];
    let (flat, starts): (Tensor, Vec<usize>) = match idx.ndim() {
        2 => {
            if offsets.is_some() {
                return Err(Error::value(op, "if input is 2D, then offsets has to be None"));
            }
            let (b, l) = (idx.shape()[0], idx.shape()[1]);
            (idx.reshape(&[-1])?, (0..b).map(|i| i * l).collect())
        }
        1 => {
            let off = offsets.ok_or_else(|| Error::value(op, "offsets has to be a 1D Tensor but got None"))?;
            if off.ndim() != 1 {
                return Err(Error::value(op, "offsets has to be a 1D Tensor"));
            }
            let ov: Vec<i64> = off.to_vec()?;
            if ov.first().is_some_and(|&v| v != 0) {
                return Err(Error::value(op, format!("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {}", ov[0])));
            }
            let mut st: Vec<usize> = Vec::new();
            for &o in &ov {
                if o < 0 || o as usize > idx.numel() || st.last().is_some_and(|&p| (o as usize) < p) {
                    return Err(Error::value(op, format!("offsets must be increasing and within the input, got {ov:?}")));
                }
                st.push(o as usize);
            }
            if include_last_offset {
                st.pop();
            }
            (idx.clone(), st)
        }
        _ => return Err(Error::value(op, format!("input has to be 1D or 2D Tensor, but got Tensor of dimension {}", idx.ndim()))),
    };
    if per_sample_weights.is_some() && mode != "sum" {
        return Err(Error::value(op, format!("embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' (got mode='{mode}'). Please open a feature request on the Pytorch GitHub.")));
    }
    let total = flat.numel();
    let rows = indices(op, &flat, n)?;
    let pad = padding_idx.map(|p| if p < 0 { (p + n as i64) as usize } else { p as usize });
    let mut emb = embedding(&flat, w, padding_idx, max_norm, norm_type)?;
    if let Some(psw) = per_sample_weights {
        emb = emb.mul(&psw.reshape(&[-1, 1])?)?;
    }
    let ends: Vec<usize> = (0..starts.len()).map(|b| if b + 1 < starts.len() { starts[b + 1] } else { total }).collect();
    let members = |b: usize| (starts[b]..ends[b]).filter(|&j| Some(rows[j]) != pad).collect::<Vec<_>>();
    match mode {
        "sum" | "mean" => {
            let mut t = Taps::new(total);
            for b in 0..starts.len() {
                let m = members(b);
                let wgt = if mode == "mean" && !m.is_empty() { 1.0 / m.len() as f64 } else { 1.0 };
                t.row(m.into_iter().map(|j| (j, wgt)));
            }
            apply_taps(&emb, 0, Arc::new(t))
        }
        "max" => {
            let d = w.shape()[1];
            let ev: Vec<f64> = emb.to_vec()?;
            let mut arg = Vec::new();
            let mut empty = Vec::new();
            for b in 0..starts.len() {
                let m = members(b);
                empty.push(m.is_empty());
                for k in 0..d {
                    let best = m.iter().copied().fold(None, |acc: Option<usize>, j| match acc {
                        Some(a) if ev[a * d + k] >= ev[j * d + k] => Some(a),
                        _ => Some(j),
                    });
                    arg.push(best.unwrap_or(0));
                }
            }
            let nb = starts.len();
            let et = emb.t()?; // [d, total]
            let mut idx2 = vec![0usize; d * nb];
            for b in 0..nb {
                for k in 0..d {
                    idx2[k * nb + b] = arg[b * d + k];
                }
            }
            let g = if total == 0 { Tensor::zeros_on(&[d, nb], w.dtype(), w.device())? } else { take_rows(&et, Arc::new(RowIdx { rows: d, per_row: nb, n_src: total, idx: idx2 }), &[d, nb])? };
            let out = g.t()?;
            let keep = Tensor::from_vec(empty.iter().map(|&e| !e).collect::<Vec<_>>(), &[nb, 1])?.to_device(out.device())?;
            keep.where_(&out, &out.zeros_like()?)
        }
        _ => Err(Error::value(op, format!("mode has to be one of sum, mean or max, got {mode}"))),
    }
}

/// `one_hot(tensor, num_classes=-1)`: int64 `[..., num_classes]`.
pub fn one_hot(t: &Tensor, num_classes: i64) -> Result<Tensor> {
    let op = "one_hot";
    if t.dtype() != DType::I64 {
        return Err(Error::dtype(op, "one_hot is only applicable to index tensor of type LongTensor."));
    }
    let v: Vec<i64> = t.to_vec()?;
    if v.iter().any(|&x| x < 0) {
        return Err(Error::value(op, "Class values must be non-negative."));
    }
    let c = if num_classes == -1 {
        if v.is_empty() {
            return Err(Error::value(op, "Can not infer total number of classes from empty tensor."));
        }
        v.iter().max().copied().unwrap_or(0) + 1
    } else {
        if num_classes < -1 {
            return Err(Error::value(op, "num_classes should be positive"));
        }
        if v.iter().any(|&x| x >= num_classes) {
            return Err(Error::value(op, "Class values must be smaller than num_classes."));
        }
        num_classes
    } as usize;
    let mut out = vec![0i64; v.len() * c];
    for (i, &x) in v.iter().enumerate() {
        out[i * c + x as usize] = 1;
    }
    let mut shape = t.shape().to_vec();
    shape.push(c);
    Tensor::from_vec(out, &shape)?.to_device(t.device())
}

//! Normalization layers as composites of mean / sub / mul / sqrt (autograd comes for free):
//! layer, RMS, group, batch and instance norm, local response norm, `normalize`, and the
//! distance ops built on vector norms (cosine similarity, pairwise / pdist / cdist).

use super::gather::{take_rows, RowIdx};
use crate::ops::acc::{down, half_acc_opt, up, up_opt};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

fn ishape(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&v| v as i64).collect()
}

/// Mean and biased variance over `dims` (keepdim).
fn moments(x: &Tensor, dims: &[i64]) -> Result<(Tensor, Tensor)> {
    let m = x.mean_dims(Some(dims), true, None)?;
    let c = x.sub(&m)?;
    let v = c.mul(&c)?.mean_dims(Some(dims), true, None)?;
    Ok((m, v))
}

/// `native_layer_norm(input, normalized_shape, weight, bias, eps)` -> (out, mean, rstd).
pub fn native_layer_norm(x: &Tensor, ns: &[i64], w: Option<&Tensor>, b: Option<&Tensor>, eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    let _prof = crate::profiler::op_opt("layer_norm", &[Some(x), w, b]);
    if let Some(c) = crate::amp::optional("layer_norm", &[Some(x), w, b])? {
        return native_layer_norm(c.req(0)?, ns, c.opt(1), c.opt(2), eps);
    }
    // PyTorch's mixed types: a bfloat16/float16 input with float32 parameters (what a CPU autocast
    // region hands over) is normalized in float32 and gives the input's dtype
    let params: Vec<&Tensor> = [w, b].into_iter().flatten().collect();
    if matches!(x.dtype(), crate::DType::BF16 | crate::DType::F16) && !params.is_empty() && params.iter().all(|p| p.dtype() == crate::DType::F32) {
        let (y, m, r) = native_layer_norm(&x.to_dtype(crate::DType::F32)?, ns, w, b, eps)?;
        return Ok((y.to_dtype(x.dtype())?, m, r));
    }
    let op = "layer_norm";
    let k = ns.len();
    let nsu: Vec<usize> = ns.iter().map(|&v| v.max(0) as usize).collect();
    if k == 0 || x.ndim() < k || x.shape()[x.ndim() - k..] != nsu[..] {
        return Err(Error::shape(op, format!("Given normalized_shape={ns:?}, expected input with shape [*, {}], but got input of size{:?}", ns.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "), x.shape())));
    }
    for (name, t) in [("weight", w), ("bias", b)] {
        if let Some(t) = t {
            if t.shape() != &nsu[..] {
                return Err(Error::shape(op, format!("Expected {name} to be of same shape as normalized_shape, but got {name} of shape {:?} and normalized_shape = {ns:?}", t.shape())));
            }
        }
    }
    super::util::check_float(op, x)?;
    if let Some(r) = cuda_norm(x, k, w, b, eps, false)? {
        return Ok(r);
    }
    // half tensors (where the fused CUDA kernel, which computes in float32, does not apply):
    // normalized in float32 and rounded once (PyTorch's acc_type)
    if let Some(h) = half_acc_opt(x, &[w, b]) {
        let (y, m, r) = native_layer_norm(&up(x)?, ns, up_opt(w)?.as_ref(), up_opt(b)?.as_ref(), eps)?;
        return Ok((down(y, h)?, down(m, h)?, down(r, h)?));
    }
    if let Some(r) = super::layer_norm::layer_norm_fused(x, k, w, b, eps)? {
        return Ok(r);
    }
    layer_norm_composite(x, ns, w, b, eps)
}

/// Layer norm as a composite of mean / sub / mul ops (autograd comes from them): the
/// reference the fused kernel is tested against. Expects validated arguments.
#[doc(hidden)]
pub fn layer_norm_composite(x: &Tensor, ns: &[i64], w: Option<&Tensor>, b: Option<&Tensor>, eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    let k = ns.len();
    let dims: Vec<i64> = (x.ndim() - k..x.ndim()).map(|d| d as i64).collect();
    let (m, v) = moments(x, &dims)?;
    let rstd = v.add_scalar(eps)?.pow_scalar(-0.5)?;
    let mut y = x.sub(&m)?.mul(&rstd)?;
    if let Some(w) = w {
        y = y.mul(w)?;
    }
    if let Some(b) = b {
        y = y.add(b)?;
    }
    Ok((y, m, rstd))
}

/// layer_norm (rms_norm when `rms`) over the last `k` dims by the fused CUDA kernel: for CUDA
/// inputs when no gradient is needed (the composite path below is the reference and carries
/// the gradient). Returns (y, mean, rstd) with mean / rstd shaped `[*, 1, ..., 1]` like the
/// composite's.
fn cuda_norm(x: &Tensor, k: usize, w: Option<&Tensor>, b: Option<&Tensor>, eps: f64, rms: bool) -> Result<Option<(Tensor, Tensor, Tensor)>> {
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() {
        let needs_grad = autograd::is_grad_enabled() && (x.requires_grad() || w.is_some_and(|t| t.requires_grad()) || b.is_some_and(|t| t.requires_grad()));
        if needs_grad {
            return Ok(None);
        }
        let n: usize = x.shape()[x.ndim() - k..].iter().product();
        let Some(o) = crate::backend::cuda::norm::forward(x, n, w, b, eps, rms)? else { return Ok(None) };
        let mut st: Vec<i64> = x.shape()[..x.ndim() - k].iter().map(|&v| v as i64).collect();
        st.extend(std::iter::repeat_n(1i64, k));
        return Ok(Some((o.y, o.mean.reshape(&st)?, o.rstd.reshape(&st)?)));
    }
    let _ = (x, k, w, b, eps, rms);
    Ok(None)
}

/// `rms_norm(input, normalized_shape, weight, eps)`; `eps` None is the dtype's epsilon.
pub fn rms_norm(x: &Tensor, ns: &[i64], w: Option<&Tensor>, eps: Option<f64>) -> Result<Tensor> {
    let op = "rms_norm";
    let k = ns.len();
    let nsu: Vec<usize> = ns.iter().map(|&v| v.max(0) as usize).collect();
    if k == 0 || x.ndim() < k || x.shape()[x.ndim() - k..] != nsu[..] {
        return Err(Error::shape(op, format!("Given normalized_shape={ns:?}, expected input with shape [*, {}], but got input of size{:?}", ns.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "), x.shape())));
    }
    if let Some(w) = w {
        if w.shape() != &nsu[..] {
            return Err(Error::shape(op, format!("Expected weight to be of same shape as normalized_shape, but got weight of shape {:?} and normalized_shape = {ns:?}", w.shape())));
        }
    }
    super::util::check_float(op, x)?;
    let eps = eps.unwrap_or(match x.dtype() {
        crate::DType::F64 => f64::EPSILON,
        crate::DType::F16 => 0.0009765625,
        crate::DType::BF16 => 0.0078125,
        _ => f32::EPSILON as f64,
    });
    if let Some((y, _, _)) = cuda_norm(x, k, w, None, eps, true)? {
        return Ok(y);
    }
    // half tensors: in float32, rounded once (PyTorch's acc_type). In float16 the composite's
    // `x * x` overflows for |x| > 256 (inf, then a zero output and NaN gradients)
    if let Some(h) = half_acc_opt(x, &[w]) {
        return down(rms_norm(&up(x)?, ns, up_opt(w)?.as_ref(), Some(eps))?, h);
    }
    let dims: Vec<i64> = (x.ndim() - k..x.ndim()).map(|d| d as i64).collect();
    let ms = x.mul(x)?.mean_dims(Some(&dims), true, None)?;
    let y = x.mul(&ms.add_scalar(eps)?.pow_scalar(-0.5)?)?;
    match w {
        Some(w) => y.mul(w),
        None => Ok(y),
    }
}

/// A per-channel `[C]` tensor shaped to broadcast against `[N, C, *]` of rank `nd`.
fn chan(t: &Tensor, nd: usize) -> Result<Tensor> {
    let mut s = vec![-1i64];
    s.extend(std::iter::repeat_n(1i64, nd.saturating_sub(2)));
    t.reshape(&s)
}

/// `native_group_norm` as `group_norm(input, num_groups, weight, bias, eps)` -> (out, mean, rstd).
pub fn native_group_norm(x: &Tensor, groups: i64, w: Option<&Tensor>, b: Option<&Tensor>, eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    let _prof = crate::profiler::op_opt("group_norm", &[Some(x), w, b]);
    if let Some(c) = crate::amp::optional("group_norm", &[Some(x), w, b])? {
        return native_group_norm(c.req(0)?, groups, c.opt(1), c.opt(2), eps);
    }
    if let Some(h) = half_acc_opt(x, &[w, b]) {
        let (y, m, r) = native_group_norm(&up(x)?, groups, up_opt(w)?.as_ref(), up_opt(b)?.as_ref(), eps)?;
        return Ok((down(y, h)?, down(m, h)?, down(r, h)?));
    }
    let op = "group_norm";
    if x.ndim() < 2 {
        return Err(Error::shape(op, format!("Expected at least 2 dimensions for input tensor but received {}", x.ndim())));
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    if c == 0 {
        return Err(Error::shape(op, format!("Expected number of channels to be greater than 0, got input of shape {:?}", x.shape())));
    }
    if groups <= 0 || c % groups as usize != 0 {
        return Err(Error::shape(op, format!("Expected number of channels in input to be divisible by num_groups, but got input of shape {:?} and num_groups={groups}", x.shape())));
    }
    for (name, t) in [("weight", w), ("bias", b)] {
        if let Some(t) = t {
            if t.ndim() != 1 || t.numel() != c {
                return Err(Error::shape(op, format!("Expected {name} to be a vector of size equal to the number of channels in input, but got {name} of shape {:?} and input of shape {:?}", t.shape(), x.shape())));
            }
        }
    }
    super::util::check_float(op, x)?;
    let g = groups as usize;
    let xg = x.reshape(&[n as i64, g as i64, -1])?;
    let (m, v) = moments(&xg, &[2])?;
    let rstd = v.add_scalar(eps)?.pow_scalar(-0.5)?;
    let mut y = xg.sub(&m)?.mul(&rstd)?.reshape(&ishape(x.shape()))?;
    if let Some(w) = w {
        y = y.mul(&chan(w, x.ndim())?)?;
    }
    if let Some(b) = b {
        y = y.add(&chan(b, x.ndim())?)?;
    }
    Ok((y, m.reshape(&[n as i64, g as i64])?, rstd.reshape(&[n as i64, g as i64])?))
}

/// Updates running statistics in place: `r = (1 - momentum) * r + momentum * new`.
fn update_running(r: &Tensor, new: &Tensor, momentum: f64) -> Result<()> {
    let _ng = autograd::no_grad();
    let v = r.mul_scalar(1.0 - momentum)?.add(&new.detach().mul_scalar(momentum)?.to_dtype(r.dtype())?)?;
    r.copy_(&v)?;
    Ok(())
}

/// `native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)`
/// -> (out, save_mean, save_invstd). Running statistics are updated in place when training.
#[allow(clippy::too_many_arguments)]
pub fn native_batch_norm(
    x: &Tensor,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    rm: Option<&Tensor>,
    rv: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "batch_norm";
    // half tensors: in float32, rounded once; the running statistics are updated in place in
    // their own dtype
    if let Some(h) = half_acc_opt(x, &[w, b]) {
        let (y, m, r) = native_batch_norm(&up(x)?, up_opt(w)?.as_ref(), up_opt(b)?.as_ref(), rm, rv, training, momentum, eps)?;
        return Ok((down(y, h)?, down(m, h)?, down(r, h)?));
    }
    if x.ndim() < 2 {
        return Err(Error::shape(op, format!("Expected 2D or more input (got {}D input)", x.ndim())));
    }
    let c = x.shape()[1];
    for (name, t) in [("weight", w), ("bias", b), ("running_mean", rm), ("running_var", rv)] {
        if let Some(t) = t {
            if t.numel() != c {
                return Err(Error::shape(op, format!("{name} should contain {c} elements not {}", t.numel())));
            }
        }
    }
    super::util::check_float(op, x)?;
    let dims: Vec<i64> = (0..x.ndim() as i64).filter(|&d| d != 1).collect();
    let (mean, invstd, y);
    if training {
        let per: usize = x.numel() / c.max(1);
        if per <= 1 {
            return Err(Error::value(op, format!("Expected more than 1 value per channel when training, got input size {:?}", x.shape())));
        }
        let (m, v) = moments(x, &dims)?;
        let is = v.add_scalar(eps)?.pow_scalar(-0.5)?;
        y = x.sub(&m)?.mul(&is)?;
        if let Some(rm) = rm {
            update_running(rm, &m.reshape(&[c as i64])?, momentum)?;
        }
        if let Some(rv) = rv {
            let unbiased = v.mul_scalar(per as f64 / (per as f64 - 1.0))?;
            update_running(rv, &unbiased.reshape(&[c as i64])?, momentum)?;
        }
        mean = m.reshape(&[c as i64])?;
        invstd = is.reshape(&[c as i64])?;
    } else {
        let (Some(rm), Some(rv)) = (rm, rv) else {
            return Err(Error::value(op, "running_mean and running_var must be defined in evaluation mode"));
        };
        let m = chan(&rm.to_dtype(x.dtype())?, x.ndim())?;
        let is = chan(&rv.to_dtype(x.dtype())?.add_scalar(eps)?.pow_scalar(-0.5)?, x.ndim())?;
        y = x.sub(&m)?.mul(&is)?;
        mean = Tensor::zeros_on(&[0], x.dtype(), x.device())?;
        invstd = Tensor::zeros_on(&[0], x.dtype(), x.device())?;
    }
    let mut y = y;
    if let Some(w) = w {
        y = y.mul(&chan(w, x.ndim())?)?;
    }
    if let Some(b) = b {
        y = y.add(&chan(b, x.ndim())?)?;
    }
    Ok((y, mean, invstd))
}

/// `instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)`.
#[allow(clippy::too_many_arguments)]
pub fn instance_norm(
    x: &Tensor,
    rm: Option<&Tensor>,
    rv: Option<&Tensor>,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    use_input_stats: bool,
    momentum: f64,
    eps: f64,
) -> Result<Tensor> {
    let op = "instance_norm";
    if let Some(h) = half_acc_opt(x, &[w, b]) {
        return down(instance_norm(&up(x)?, rm, rv, up_opt(w)?.as_ref(), up_opt(b)?.as_ref(), use_input_stats, momentum, eps)?, h);
    }
    if x.ndim() < 3 {
        return Err(Error::shape(op, format!("Expected 3D or more input (got {}D input)", x.ndim())));
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    if !use_input_stats {
        return Ok(native_batch_norm(x, w, b, rm, rv, false, momentum, eps)?.0);
    }
    let spatial: usize = x.shape()[2..].iter().product();
    if spatial <= 1 {
        return Err(Error::value(op, format!("Expected more than 1 spatial element when training, got input size {:?}", x.shape())));
    }
    super::util::check_float(op, x)?;
    let dims: Vec<i64> = (2..x.ndim() as i64).collect();
    let (m, v) = moments(x, &dims)?;
    let mut y = x.sub(&m)?.mul(&v.add_scalar(eps)?.pow_scalar(-0.5)?)?;
    if let Some(rm) = rm {
        update_running(rm, &m.reshape(&[n as i64, c as i64])?.mean_dims(Some(&[0]), false, None)?, momentum)?;
    }
    if let Some(rv) = rv {
        let unb = v.mul_scalar(spatial as f64 / (spatial as f64 - 1.0))?;
        update_running(rv, &unb.reshape(&[n as i64, c as i64])?.mean_dims(Some(&[0]), false, None)?, momentum)?;
    }
    if let Some(w) = w {
        y = y.mul(&chan(w, x.ndim())?)?;
    }
    if let Some(b) = b {
        y = y.add(&chan(b, x.ndim())?)?;
    }
    Ok(y)
}

/// `local_response_norm(input, size, alpha, beta, k)`: `x / (k + alpha * avg_c(x^2))^beta`
/// with the average over a window of `size` channels (zero padded).
pub fn local_response_norm(x: &Tensor, size: i64, alpha: f64, beta: f64, k: f64) -> Result<Tensor> {
    let op = "local_response_norm";
    if x.ndim() < 3 {
        return Err(Error::shape(op, format!("Expected 3D or higher dimensionality input (got {} dimensions)", x.ndim())));
    }
    if size <= 0 {
        return Err(Error::value(op, format!("size must be positive, got {size}")));
    }
    if x.numel() == 0 {
        return x.copy();
    }
    let xf = if x.dtype().is_float() { x.clone() } else { x.to_dtype(crate::default_dtype())? };
    let c = x.shape()[1];
    let (front, size_u) = ((size / 2) as i64, size as usize);
    let mut t = super::resample::Taps::new(c);
    for o in 0..c as i64 {
        let lo = (o - front).max(0);
        let hi = (o - front + size).min(c as i64);
        t.row((lo..hi.max(lo)).map(|j| (j as usize, 1.0 / size_u as f64)));
    }
    let div = if x.dtype().is_float() {
        let sq = xf.mul(&xf)?;
        super::resample::apply_taps(&sq, 1, Arc::new(t))?
    } else {
        // PyTorch averages the integer squares with an integer (truncating) average pool
        let sq = x.mul(x)?;
        let sums: Vec<i64> = super::resample::sum_taps_int(&sq, 1, std::slice::from_ref(&t))?.to_vec()?;
        let avg: Vec<i64> = sums.iter().map(|&v| v / size).collect();
        Tensor::from_vec(avg, x.shape())?.to_device(x.device())?.to_dtype(xf.dtype())?
    };
    let div = div.mul_scalar(alpha)?.add_scalar(k)?.pow_scalar(beta)?;
    xf.div(&div)
}

/// `normalize(input, p, dim, eps)`: `x / max(||x||_p, eps)` along `dim`.
pub fn normalize(x: &Tensor, p: f64, dim: i64, eps: f64) -> Result<Tensor> {
    let d = crate::shape::wrap_dim("normalize", dim, x.ndim())?;
    let n = if x.ndim() == 0 { x.nn_norm(p, &[], true)? } else { x.nn_norm(p, &[d as i64], true)? };
    x.div(&n.nn_clamp_min(eps)?)
}

/// `cosine_similarity(x1, x2, dim, eps)`.
pub fn cosine_similarity(x1: &Tensor, x2: &Tensor, dim: i64, eps: f64) -> Result<Tensor> {
    let _prof = crate::profiler::op("cosine_similarity", &[x1, x2]);
    if let Some(c) = crate::amp::tensors("cosine_similarity", &[x1, x2])? {
        return cosine_similarity(&c.args[0], &c.args[1], dim, eps);
    }
    let shape = crate::shape::broadcast_shapes("cosine_similarity", x1.shape(), x2.shape())?;
    let (a, b) = (x1.broadcast_to(&shape)?, x2.broadcast_to(&shape)?);
    let d = crate::shape::wrap_dim("cosine_similarity", dim, shape.len())? as i64;
    let dims: &[i64] = if shape.is_empty() { &[] } else { &[d] };
    let na = a.nn_norm(2.0, dims, true)?.nn_clamp_min(eps)?;
    let nb = b.nn_norm(2.0, dims, true)?.nn_clamp_min(eps)?;
    let p = a.div(&na)?.mul(&b.div(&nb)?)?;
    p.sum_dims(Some(dims), false, None)
}

/// `pairwise_distance(x1, x2, p, eps, keepdim)`: `||x1 - x2 + eps||_p` over the last dim.
pub fn pairwise_distance(x1: &Tensor, x2: &Tensor, p: f64, eps: f64, keepdim: bool) -> Result<Tensor> {
    let nd = x1.ndim().max(x2.ndim());
    let diff = x1.sub(x2)?.add_scalar(eps)?;
    if nd == 0 {
        return diff.nn_norm(p, &[], keepdim);
    }
    diff.nn_norm(p, &[-1], keepdim)
}

/// `pdist(input, p)`: distances between the rows of an `[N, M]` matrix, for `i < j`.
pub fn pdist(x: &Tensor, p: f64) -> Result<Tensor> {
    let _prof = crate::profiler::op("pdist", &[x]);
    if let Some(c) = crate::amp::tensors("pdist", &[x])? {
        return pdist(&c.args[0], p);
    }
    if x.ndim() != 2 {
        return Err(Error::shape("pdist", format!("pdist only supports 2D tensors, got: {}D", x.ndim())));
    }
    if p < 0.0 {
        return Err(Error::value("pdist", "pdist only supports non-negative p values"));
    }
    let (n, m) = (x.shape()[0], x.shape()[1]);
    // gather the two rows of every pair (i < j), then take the norm of their difference
    let (mut ii, mut jj) = (Vec::new(), Vec::new());
    for i in 0..n {
        for j in i + 1..n {
            ii.push(i);
            jj.push(j);
        }
    }
    let np = ii.len();
    let rows = |v: &[usize]| -> Result<Tensor> {
        let idx: Vec<usize> = (0..m).flat_map(|_| v.iter().copied()).collect();
        take_rows(&x.t()?, Arc::new(RowIdx { rows: m, per_row: np, n_src: n, idx }), &[m, np])?.t()
    };
    let d = rows(&ii)?.sub(&rows(&jj)?)?;
    d.nn_norm(p, &[-1], false)
}

/// `cdist(x1, x2, p)`: distances between the rows of `[.., P, M]` and `[.., R, M]`.
pub fn cdist(x1: &Tensor, x2: &Tensor, p: f64) -> Result<Tensor> {
    let _prof = crate::profiler::op("cdist", &[x1, x2]);
    if let Some(c) = crate::amp::tensors("cdist", &[x1, x2])? {
        return cdist(&c.args[0], &c.args[1], p);
    }
    if x1.ndim() < 2 || x2.ndim() < 2 {
        return Err(Error::shape("cdist", format!("cdist only supports at least 2D tensors, X1 got: {}D, X2 got: {}D", x1.ndim(), x2.ndim())));
    }
    if x1.shape()[x1.ndim() - 1] != x2.shape()[x2.ndim() - 1] {
        return Err(Error::shape("cdist", format!("X1 and X2 must have the same number of columns. X1: {} X2: {}", x1.shape()[x1.ndim() - 1], x2.shape()[x2.ndim() - 1])));
    }
    if p < 0.0 {
        return Err(Error::value("cdist", "cdist only supports non-negative p values"));
    }
    let d = x1.unsqueeze(-2)?.sub(&x2.unsqueeze(-3)?)?;
    d.nn_norm(p, &[-1], false)
}

//! Sparse linear maps along one dim ("taps"): each output position is a weighted sum of a few
//! input positions. Average and adaptive-average pooling, every interpolation mode and embedding
//! bags are products of such maps over their dims. The adjoint is the transposed map, so the op
//! is differentiable to any order.

use super::util::{from_real, real_vec, with_real, Real};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;
use std::sync::Arc;

/// A sparse `n_out x n_in` matrix in compressed rows.
#[derive(Clone, Debug)]
pub(crate) struct Taps {
    pub n_in: usize,
    pub ptr: Vec<usize>,
    pub idx: Vec<usize>,
    pub w: Vec<f64>,
}

impl Taps {
    /// An empty map from `n_in` positions.
    pub fn new(n_in: usize) -> Taps {
        Taps { n_in, ptr: vec![0], idx: Vec::new(), w: Vec::new() }
    }
    /// Appends one output row.
    pub fn row(&mut self, entries: impl IntoIterator<Item = (usize, f64)>) {
        for (i, w) in entries {
            self.idx.push(i);
            self.w.push(w);
        }
        self.ptr.push(self.idx.len());
    }
    /// Number of output positions.
    pub fn n_out(&self) -> usize {
        self.ptr.len() - 1
    }
    /// The transposed map (the adjoint).
    pub fn transpose(&self) -> Taps {
        let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); self.n_in];
        for o in 0..self.n_out() {
            for k in self.ptr[o]..self.ptr[o + 1] {
                rows[self.idx[k]].push((o, self.w[k]));
            }
        }
        let mut t = Taps::new(self.n_out());
        for r in rows {
            t.row(r);
        }
        t
    }
    /// The same map with every weight multiplied by `f(output position)`.
    pub fn scale_rows(mut self, f: impl Fn(usize) -> f64) -> Taps {
        for o in 0..self.n_out() {
            let s = f(o);
            for k in self.ptr[o]..self.ptr[o + 1] {
                self.w[k] *= s;
            }
        }
        self
    }
}

fn kernel<R: Real>(x: &[R], outer: usize, inner: usize, t: &Taps) -> Vec<R> {
    let (n_in, n_out) = (t.n_in, t.n_out());
    let mut out = vec![R::zero(); outer * n_out * inner];
    if out.is_empty() {
        return out;
    }
    let w: Vec<R> = t.w.iter().map(|&v| R::from_f64(v)).collect();
    let body = |(b, o_blk): (usize, &mut [R])| {
        let xb = &x[b * n_in * inner..(b + 1) * n_in * inner];
        for o in 0..n_out {
            let dst = &mut o_blk[o * inner..(o + 1) * inner];
            for k in t.ptr[o]..t.ptr[o + 1] {
                let (wk, src) = (w[k], &xb[t.idx[k] * inner..(t.idx[k] + 1) * inner]);
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wk * s;
                }
            }
        }
    };
    if out.len() >= 1 << 15 && outer > 1 {
        out.par_chunks_mut(n_out * inner).enumerate().for_each(body);
    } else {
        out.chunks_mut(n_out * inner).enumerate().for_each(body);
    }
    out
}

/// Applies the map `taps` along `dim` of a floating tensor: the result has `taps.n_out()` there.
pub(crate) fn apply_taps(x: &Tensor, dim: usize, taps: Arc<Taps>) -> Result<Tensor> {
    if x.shape().get(dim).copied() != Some(taps.n_in) {
        return Err(Error::shape("resample", format!("dim {dim} of {:?} is not {}", x.shape(), taps.n_in)));
    }
    if !x.dtype().is_float() {
        return Err(Error::dtype("resample", format!("expected a floating tensor, got {}", x.dtype())));
    }
    let outer: usize = x.shape()[..dim].iter().product();
    let inner: usize = x.shape()[dim + 1..].iter().product();
    let mut shape = x.shape().to_vec();
    shape[dim] = taps.n_out();
    let out = match crate::backend::cuda::rows::apply_taps(x, taps.n_in, inner, &taps.ptr, &taps.idx, &taps.w, &shape)? {
        Some(o) => o,
        None => {
            let out = with_real!(x.dtype(), R, {
                let v = real_vec::<R>(x)?;
                from_real(kernel::<R>(&v, outer, inner, &taps), &shape, x.dtype())?
            });
            crate::backend::cuda::host_result("host:apply_taps", out, x.device())?
        }
    };
    let t2 = taps.clone();
    autograd::record("Resample", &[x], &[out.clone()], move |_, g| {
        Ok(vec![Some(apply_taps(&g[0], dim, Arc::new(t2.transpose()))?)])
    });
    Ok(out)
}

/// Applies one map per trailing dim: `maps[i]` acts on dim `x.ndim() - maps.len() + i`.
pub(crate) fn apply_separable(x: &Tensor, maps: Vec<Taps>) -> Result<Tensor> {
    // half tensors: every pass in float32, one rounding at the end (PyTorch's acc_type)
    if let Some(h) = crate::ops::acc::half_acc(&[x]) {
        return crate::ops::acc::down(apply_separable(&crate::ops::acc::up(x)?, maps)?, h);
    }
    let first = x.ndim() - maps.len();
    let mut y = x.clone();
    for (i, m) in maps.into_iter().enumerate() {
        y = apply_taps(&y, first + i, Arc::new(m))?;
    }
    Ok(y)
}

/// Exact sums (weights taken as 1) of an integer tensor, `maps[i]` along dim `first + i`, in i64.
pub(crate) fn sum_taps_int(x: &Tensor, first: usize, maps: &[Taps]) -> Result<Tensor> {
    let mut cur: Vec<i64> = x.to_vec()?;
    let mut shape = x.shape().to_vec();
    for (i, t) in maps.iter().enumerate() {
        let dim = first + i;
        if shape.get(dim).copied() != Some(t.n_in) {
            return Err(Error::shape("resample", format!("dim {dim} of {shape:?} is not {}", t.n_in)));
        }
        let outer: usize = shape[..dim].iter().product();
        let inner: usize = shape[dim + 1..].iter().product();
        let mut out = vec![0i64; outer * t.n_out() * inner];
        for b in 0..outer {
            for o in 0..t.n_out() {
                for k in t.ptr[o]..t.ptr[o + 1] {
                    for j in 0..inner {
                        out[(b * t.n_out() + o) * inner + j] =
                            out[(b * t.n_out() + o) * inner + j].wrapping_add(cur[(b * t.n_in + t.idx[k]) * inner + j]);
                    }
                }
            }
        }
        shape[dim] = t.n_out();
        cur = out;
    }
    Tensor::from_vec(cur, &shape)
}

// ---- the 1-d maps of each mode ----

/// `nearest` (`exact` false) and `nearest-exact` source positions, PyTorch's float arithmetic.
pub(crate) fn nearest_taps(n_in: usize, n_out: usize, scale: Option<f64>, exact: bool) -> Taps {
    let s: f32 = match scale {
        Some(v) if v > 0.0 => (1.0 / v) as f32,
        _ => n_in as f32 / n_out.max(1) as f32,
    };
    let mut t = Taps::new(n_in);
    for o in 0..n_out {
        let src = if exact { ((o as f32 + 0.5) * s).floor() } else { (o as f32 * s).floor() };
        let i = (src.max(0.0) as usize).min(n_in.saturating_sub(1));
        t.row([(i, 1.0)]);
    }
    t
}

/// PyTorch's `area_pixel_compute_scale`.
fn pixel_scale(n_in: usize, n_out: usize, align: bool, scale: Option<f64>) -> f64 {
    if align {
        if n_out > 1 { (n_in as f64 - 1.0) / (n_out as f64 - 1.0) } else { 0.0 }
    } else {
        match scale {
            Some(v) if v > 0.0 => 1.0 / v,
            _ => n_in as f64 / n_out as f64,
        }
    }
}

/// Linear interpolation weights (`linear`, `bilinear`, `trilinear` are products of these).
pub(crate) fn linear_taps(n_in: usize, n_out: usize, align: bool, scale: Option<f64>) -> Taps {
    let s = pixel_scale(n_in, n_out, align, scale) as f32;
    let mut t = Taps::new(n_in);
    for o in 0..n_out {
        let src = if align { s * o as f32 } else { (s * (o as f32 + 0.5) - 0.5).max(0.0) };
        let i0 = (src as usize).min(n_in - 1);
        let i1 = if i0 < n_in - 1 { i0 + 1 } else { i0 };
        let l1 = (src - i0 as f32).min(1.0) as f64;
        let l1 = if i1 == i0 { 0.0 } else { l1 };
        t.row([(i0, 1.0 - l1), (i1, l1)]);
    }
    t
}

/// Bicubic interpolation weights (A = -0.75), borders clamped, as PyTorch's `upsample_bicubic2d`.
pub(crate) fn cubic_taps(n_in: usize, n_out: usize, align: bool, scale: Option<f64>) -> Taps {
    let s = pixel_scale(n_in, n_out, align, scale) as f32;
    let a = -0.75f32;
    let c1 = |x: f32| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    let c2 = |x: f32| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    let mut t = Taps::new(n_in);
    for o in 0..n_out {
        let src = if align { s * o as f32 } else { s * (o as f32 + 0.5) - 0.5 };
        let f = src.floor();
        let x = src - f;
        let w = [c2(x + 1.0), c1(x), c1(1.0 - x), c2(2.0 - x)];
        let base = f as i64 - 1;
        t.row((0..4).map(|k| ((base + k as i64).clamp(0, n_in as i64 - 1) as usize, w[k] as f64)));
    }
    t
}

/// Adaptive average pooling windows (`floor(o*in/out)` to `ceil((o+1)*in/out)`), weights `1/len`.
pub(crate) fn adaptive_taps(n_in: usize, n_out: usize) -> Taps {
    let mut t = Taps::new(n_in);
    for o in 0..n_out {
        let (s, e) = adaptive_range(o, n_in, n_out);
        let w = 1.0 / (e - s) as f64;
        t.row((s..e).map(|i| (i, w)));
    }
    t
}

/// The input range of adaptive pooling's output `o`.
pub(crate) fn adaptive_range(o: usize, n_in: usize, n_out: usize) -> (usize, usize) {
    ((o * n_in) / n_out, ((o + 1) * n_in).div_ceil(n_out))
}

//! Membership and counting: `torch.isin`, `torch.bincount`, `torch.histogram`. Computed on
//! the host (they read every value and return data-dependent sizes); results go back to the
//! input's device.

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.isin(elements, test_elements, *, assume_unique=False, invert=False)`: a bool tensor
/// shaped like `elements`, true where the element occurs in `test_elements`.
///
/// ```
/// use magpie_core::{ops::counting::isin, Tensor};
/// let x = Tensor::from_vec(vec![1i64, 2, 3], &[3])?;
/// let t = Tensor::from_vec(vec![3i64, 1], &[2])?;
/// assert_eq!(isin(&x, &t, false)?.to_vec::<bool>()?, vec![true, false, true]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn isin(elements: &Tensor, test: &Tensor, invert: bool) -> Result<Tensor> {
    let common = crate::dtype::result_type(&[elements.promo(), test.promo()])?;
    let hits: Vec<bool> = if common.is_integral() || common.is_bool() {
        // exact in i64 (f64 would merge large neighbours)
        let mut t = test.to_dtype(DType::I64)?.to_vec::<i64>()?;
        t.sort_unstable();
        elements.to_dtype(DType::I64)?.to_vec::<i64>()?.iter().map(|v| t.binary_search(v).is_ok() != invert).collect()
    } else if common.is_complex() {
        return Err(Error::unsupported("isin", "complex inputs"));
    } else {
        // compare in the common dtype: round both sides to it first
        let mut t = test.to_dtype(common)?.to_f64_vec()?;
        t.retain(|v| !v.is_nan());
        t.sort_by(|a, b| a.total_cmp(b));
        let e = elements.to_dtype(common)?.to_f64_vec()?;
        e.iter().map(|v| (!v.is_nan() && t.binary_search_by(|p| p.partial_cmp(v).unwrap_or(std::cmp::Ordering::Less)).is_ok()) != invert).collect()
    };
    Tensor::from_vec(hits, elements.shape())?.to_device(elements.device())
}

/// `torch.bincount(input, weights=None, minlength=0)`: how often each non-negative integer
/// occurs in the 1-d `input` (or the sum of its `weights`).
///
/// ```
/// use magpie_core::{ops::counting::bincount, Tensor};
/// let x = Tensor::from_vec(vec![0i64, 1, 1, 3], &[4])?;
/// assert_eq!(bincount(&x, None, 0)?.to_vec::<i64>()?, vec![1, 2, 0, 1]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn bincount(input: &Tensor, weights: Option<&Tensor>, minlength: i64) -> Result<Tensor> {
    const OP: &str = "bincount";
    if input.ndim() != 1 {
        return Err(Error::shape(OP, "bincount only supports 1-d non-negative integral inputs."));
    }
    if !input.dtype().is_integral() || input.dtype().is_bool() {
        return Err(Error::dtype(OP, format!("\"bincount_cpu\" not implemented for '{}'", input.dtype().name())));
    }
    if minlength < 0 {
        return Err(Error::value(OP, "minlength should be >= 0"));
    }
    let v = input.to_dtype(DType::I64)?.to_vec::<i64>()?;
    if v.iter().any(|&x| x < 0) {
        return Err(Error::value(OP, "bincount only supports 1-d non-negative integral inputs."));
    }
    let n = (v.iter().copied().max().map_or(0, |m| m + 1)).max(minlength) as usize;
    let dev = input.device();
    match weights {
        None => {
            let mut c = vec![0i64; n];
            for &x in &v {
                c[x as usize] += 1;
            }
            Tensor::from_vec(c, &[n])?.to_device(dev)
        }
        Some(w) => {
            if w.ndim() != 1 || w.numel() != v.len() {
                return Err(Error::shape(OP, "weights should be 1-d and have the same length as input"));
            }
            let wv = w.to_f64_vec()?;
            let mut c = vec![0f64; n];
            for (&x, &wx) in v.iter().zip(&wv) {
                c[x as usize] += wx;
            }
            // float weights keep their dtype; other weights count in double, as in PyTorch
            let dt = if w.dtype() == DType::F32 { DType::F32 } else { DType::F64 };
            Tensor::from_vec(c, &[n])?.to_dtype(dt)?.to_device(dev)
        }
    }
}

/// The bins of [`histogram`]: a count (with an optional range) or explicit edges.
#[derive(Clone, Debug)]
pub enum Bins<'a> {
    /// `bins` equal-width bins over `range`, or over `[min, max]` of the input.
    Count(i64, Option<(f64, f64)>),
    /// Increasing bin edges (a 1-d tensor).
    Edges(&'a Tensor),
}

/// `torch.histogram(input, bins, *, range=None, weight=None, density=False)`:
/// `(hist, bin_edges)`. The last bin includes its right edge, as in NumPy.
///
/// ```
/// use magpie_core::{ops::counting::{histogram, Bins}, Tensor};
/// let x = Tensor::from_vec(vec![1f32, 2., 1.], &[3])?;
/// let (h, e) = histogram(&x, Bins::Count(4, Some((0.0, 3.0))), None, false)?;
/// assert_eq!(h.to_vec::<f32>()?, vec![0., 2., 1., 0.]);
/// assert_eq!(e.to_vec::<f32>()?, vec![0., 0.75, 1.5, 2.25, 3.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn histogram(input: &Tensor, bins: Bins, weight: Option<&Tensor>, density: bool) -> Result<(Tensor, Tensor)> {
    const OP: &str = "histogram";
    let dt = input.dtype();
    if !dt.is_float() {
        return Err(Error::dtype(OP, format!("torch.histogram: input tensor and bins tensors should have the same dtype, but got input {} and bins {}", dt.name(), dt.name())));
    }
    let x = input.to_f64_vec()?;
    let w = match weight {
        Some(w) => {
            if w.shape() != input.shape() {
                return Err(Error::shape(OP, "torch.histogram: if weight tensor is provided it should have the same shape as the input tensor"));
            }
            Some(w.to_f64_vec()?)
        }
        None => None,
    };
    let edges: Vec<f64> = match bins {
        Bins::Count(n, range) => {
            if n <= 0 {
                return Err(Error::value(OP, "torch.histogram(): bins must be > 0, but got 0 for dimension 0".replace("got 0", &format!("got {n}"))));
            }
            let (mut lo, mut hi) = match range {
                Some(r) => r,
                None => {
                    let fin = x.iter().copied().filter(|v| v.is_finite());
                    let lo = fin.clone().fold(f64::INFINITY, f64::min);
                    let hi = fin.fold(f64::NEG_INFINITY, f64::max);
                    if lo > hi {
                        (0.0, 0.0)
                    } else {
                        (lo, hi)
                    }
                }
            };
            if lo > hi {
                return Err(Error::value(OP, format!("torch.histogram(): max must be larger than min, but got min {lo} max {hi}")));
            }
            if lo == hi {
                lo -= 0.5;
                hi += 0.5;
            }
            // edges computed in the input dtype, as PyTorch's linspace does
            let e = Tensor::linspace_on(lo, hi, n + 1, dt, crate::Device::Cpu)?;
            e.to_f64_vec()?
        }
        Bins::Edges(b) => {
            if b.ndim() != 1 || b.numel() < 1 {
                return Err(Error::shape(OP, "torch.histogram(): bins tensor should have one dimension and at least 1 element"));
            }
            b.to_dtype(dt)?.to_f64_vec()?
        }
    };
    let nb = edges.len().saturating_sub(1);
    let mut h = vec![0f64; nb];
    if nb > 0 {
        let (lo, hi) = (edges[0], edges[nb]);
        for (i, &v) in x.iter().enumerate() {
            if !(v >= lo && v <= hi) {
                continue;
            }
            // the last edge <= v; the right edge of the last bin belongs to it
            let k = edges.partition_point(|&e| e <= v).saturating_sub(1).min(nb - 1);
            h[k] += w.as_ref().map_or(1.0, |w| w[i]);
        }
    }
    if density {
        let total: f64 = h.iter().sum();
        for (k, c) in h.iter_mut().enumerate() {
            *c /= total * (edges[k + 1] - edges[k]);
        }
    }
    let dev = input.device();
    let hist = Tensor::from_vec(h, &[nb])?.to_dtype(dt)?.to_device(dev)?;
    let e = Tensor::from_vec(edges.clone(), &[edges.len()])?.to_dtype(dt)?.to_device(dev)?;
    Ok((hist, e))
}

/// The bins of one dim of [`histogramdd`].
#[derive(Clone, Debug)]
pub enum DimBins {
    /// This many equal-width bins over the dim's range.
    Count(i64),
    /// Increasing bin edges (a 1-d tensor).
    Edges(Tensor),
}

/// `torch.histogramdd(input, bins, *, range=None, weight=None, density=False)`: the histogram
/// of the `D`-dimensional points in the rows of `input` (`[..., D]`), `(hist, [edges; D])`.
///
/// ```
/// use magpie_core::{ops::counting::{histogramdd, DimBins}, Tensor};
/// let p = Tensor::from_vec(vec![0f32, 0., 1., 1., 1., 0.], &[3, 2])?;
/// let (h, e) = histogramdd(&p, &[DimBins::Count(2), DimBins::Count(2)], None, None, false)?;
/// assert_eq!(h.to_vec::<f32>()?, vec![1., 0., 1., 1.]);
/// assert_eq!(e[0].to_vec::<f32>()?, vec![0., 0.5, 1.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn histogramdd(input: &Tensor, bins: &[DimBins], range: Option<&[f64]>, weight: Option<&Tensor>, density: bool) -> Result<(Tensor, Vec<Tensor>)> {
    const OP: &str = "histogramdd";
    let dt = input.dtype();
    if !dt.is_float() {
        return Err(Error::dtype(OP, format!("torch.histogramdd: input tensor should have a floating point dtype, got {}", dt.name())));
    }
    if input.ndim() < 1 {
        return Err(Error::shape(OP, "torch.histogramdd: input tensor should have at least 1 dimension, but got 0"));
    }
    let d = input.shape()[input.ndim() - 1];
    if bins.len() != d {
        return Err(Error::shape(OP, "histogramdd: The size of bins must be equal to the innermost dimension of the input."));
    }
    if let Some(r) = range {
        if r.len() != 2 * d {
            return Err(Error::value(OP, format!("torch.histogramdd: for a {d}-dimensional histogram range should have {} elements, but got {}", 2 * d, r.len())));
        }
    }
    let n = input.numel().checked_div(d).unwrap_or(0);
    let x = input.to_f64_vec()?;
    let w = match weight {
        Some(w) => {
            if w.numel() != n {
                return Err(Error::shape(OP, "torch.histogramdd: if weight tensor is provided, it should have the same shape as the input tensor excluding its innermost dimension"));
            }
            Some(w.to_f64_vec()?)
        }
        None => None,
    };
    let mut edges: Vec<Vec<f64>> = Vec::with_capacity(d);
    for (k, b) in bins.iter().enumerate() {
        edges.push(match b {
            DimBins::Count(c) => {
                if *c <= 0 {
                    return Err(Error::value(OP, format!("torch.histogramdd(): bins must be > 0, but got {c} for dimension {k}")));
                }
                let (mut lo, mut hi) = match range {
                    Some(r) => (r[2 * k], r[2 * k + 1]),
                    None => {
                        let col = (0..n).map(|i| x[i * d + k]).filter(|v| v.is_finite());
                        let lo = col.clone().fold(f64::INFINITY, f64::min);
                        let hi = col.fold(f64::NEG_INFINITY, f64::max);
                        if lo > hi {
                            (0.0, 0.0)
                        } else {
                            (lo, hi)
                        }
                    }
                };
                if lo > hi {
                    return Err(Error::value(OP, format!("torch.histogramdd(): max must be larger than min, but got min {lo} max {hi}")));
                }
                if lo == hi {
                    lo -= 0.5;
                    hi += 0.5;
                }
                // edges in the input dtype, as PyTorch's linspace makes them
                Tensor::linspace_on(lo, hi, c + 1, dt, crate::Device::Cpu)?.to_f64_vec()?
            }
            DimBins::Edges(e) => {
                if e.ndim() != 1 || e.numel() < 1 {
                    return Err(Error::shape(OP, format!("torch.histogramdd(): bins tensor should have one dimension and at least 1 element, but got {} dimensions for dimension {k}", e.ndim())));
                }
                e.to_dtype(dt)?.to_f64_vec()?
            }
        });
    }
    let counts: Vec<usize> = edges.iter().map(|e| e.len().saturating_sub(1)).collect();
    let total_bins: usize = counts.iter().product();
    let mut h = vec![0f64; total_bins];
    if total_bins > 0 {
        'points: for i in 0..n {
            let mut flat = 0usize;
            for k in 0..d {
                let (v, e, nb) = (x[i * d + k], &edges[k], counts[k]);
                if !(v >= e[0] && v <= e[nb]) {
                    continue 'points;
                }
                // the last edge <= v; the right edge of the last bin belongs to it
                let b = e.partition_point(|&q| q <= v).saturating_sub(1).min(nb - 1);
                flat = flat * nb + b;
            }
            h[flat] += w.as_ref().map_or(1.0, |w| w[i]);
        }
    }
    if density && total_bins > 0 {
        let total: f64 = h.iter().sum();
        for (f, c) in h.iter_mut().enumerate() {
            let mut rem = f;
            let mut vol = 1.0;
            for k in (0..d).rev() {
                let b = rem % counts[k];
                rem /= counts[k];
                vol *= edges[k][b + 1] - edges[k][b];
            }
            *c /= total * vol;
        }
    }
    let dev = input.device();
    let hist = Tensor::from_vec(h, &counts)?.to_dtype(dt)?.to_device(dev)?;
    let e = edges.into_iter().map(|e| Tensor::from_vec(e.clone(), &[e.len()])?.to_dtype(dt)?.to_device(dev)).collect::<Result<Vec<_>>>()?;
    Ok((hist, e))
}

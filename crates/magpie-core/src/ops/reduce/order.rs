//! Order statistics: `median`, `nanmedian`, `mode`, `kthvalue`, `quantile`, `nanquantile`.

use super::minmax::even_backward;
use super::select::{gather_dim, take_reduced};
use super::{check_nonempty, dim_size, map_lines, nan_cmp, one_dim, sort_along, sort_perm};
use crate::autograd::{self, Saved};
use crate::ops::sort_cuda::{sorted_lines, Pick};
use crate::dtype::DType;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Index (into the line) of the lower median: the first NaN unless `ignore_nan`, else the
/// `(count - 1) / 2`-th smallest of the non-NaN values (ties by position).
fn median_index<K: PartialOrd + Copy>(l: &[K], ignore_nan: bool) -> usize {
    #[allow(clippy::eq_op)]
    if !ignore_nan {
        if let Some(i) = l.iter().position(|&v| v != v) {
            return i;
        }
    }
    #[allow(clippy::eq_op)]
    let valid = l.iter().filter(|&&v| v == v).count();
    let md = valid.saturating_sub(1) / 2;
    sort_perm(l, false)[md]
}

fn median_dim(op: &str, x: &Tensor, dim: i64, keepdim: bool, ignore_nan: bool) -> Result<(Tensor, Tensor)> {
    let d = one_dim(op, x, dim)?;
    if x.ndim() > 0 {
        check_nonempty(op, x, &[d], false)?;
    }
    if let Some((v, i)) = sorted_lines(op, x, d, false, Pick::Median(ignore_nan))? {
        return unkeep(x, d, keepdim, v, i);
    }
    let idx = crate::with_key!(op, x.dtype(), K, { map_lines::<K, i64>(x, d, 1, |l, o| o[0] = median_index(l, ignore_nan) as i64)? });
    let idx = if keepdim || x.ndim() == 0 { idx } else { idx.squeeze_dims(&[d as i64])? };
    Ok((take_reduced(x, d, &idx, keepdim)?, idx))
}

fn median_all(op: &'static str, x: &Tensor, ignore_nan: bool) -> Result<Tensor> {
    if x.numel() == 0 {
        if x.dtype().is_float() {
            return Tensor::full_on(&[], f64::NAN, x.dtype(), x.device());
        }
        return Err(Error::index(op, format!("{op}(): Expected reduction dim to be specified for input.numel() == 0.")));
    }
    let flat = x.detach().reshape(&[-1])?;
    let (v, _) = median_dim(op, &flat, 0, false, ignore_nan)?;
    let sx = Saved::new(op, x);
    let out = v.detach();
    let all: Vec<usize> = (0..x.ndim()).collect();
    autograd::record(if ignore_nan { "Nanmedian" } else { "Median" }, &[x], &[out.clone()], move |ctx, g| {
        Ok(vec![Some(even_backward(&sx.get()?, &ctx.output(0)?, &g[0], &all, false, true)?)])
    });
    Ok(out)
}

/// The GPU's kept-dim `(values, indices)` with `dim` dropped unless `keepdim` (or `x` is 0-d).
fn unkeep(x: &Tensor, dim: usize, keepdim: bool, v: Tensor, i: Tensor) -> Result<(Tensor, Tensor)> {
    if keepdim || x.ndim() == 0 {
        return Ok((v, i));
    }
    Ok((v.squeeze_dims(&[dim as i64])?, i.squeeze_dims(&[dim as i64])?))
}

/// The most frequent value of a line (the smallest on ties) and its last position.
fn mode_of<K: PartialOrd + Copy>(l: &[K]) -> usize {
    let mut p: Vec<usize> = (0..l.len()).collect();
    p.sort_by(|&a, &b| nan_cmp(&l[a], &l[b]).then(a.cmp(&b)));
    let (mut best, mut best_f, mut f) = (0, 0, 0);
    for i in 0..p.len() {
        f += 1;
        if i + 1 == p.len() || nan_cmp(&l[p[i]], &l[p[i + 1]]) != std::cmp::Ordering::Equal {
            if f > best_f {
                best_f = f;
                best = p[i];
            }
            f = 0;
        }
    }
    best
}

/// How `quantile` picks between the two ranks around `q * (n - 1)`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Interpolation {
    Linear,
    Lower,
    Higher,
    Midpoint,
    Nearest,
}

impl Interpolation {
    /// Parses PyTorch's names (`"linear"`, `"lower"`, `"higher"`, `"midpoint"`, `"nearest"`).
    pub fn parse(s: &str) -> Result<Interpolation> {
        Ok(match s {
            "linear" => Interpolation::Linear,
            "lower" => Interpolation::Lower,
            "higher" => Interpolation::Higher,
            "midpoint" => Interpolation::Midpoint,
            "nearest" => Interpolation::Nearest,
            _ => {
                return Err(Error::value(
                    "quantile",
                    format!("quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. Got {s}"),
                ))
            }
        })
    }
}

fn quantile_impl(op: &str, x: &Tensor, q: &[f64], q_scalar: bool, dim: Option<i64>, keepdim: bool, interp: Interpolation, ignore_nan: bool) -> Result<Tensor> {
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(Error::dtype(op, format!("{op}() input tensor must be either float or double dtype, got {}", x.dtype().name())));
    }
    if x.numel() == 0 {
        return Err(Error::index(op, format!("{op}() input tensor must be non-empty")));
    }
    for &v in q {
        if !(0.0..=1.0).contains(&v) {
            return Err(Error::value(op, format!("{op}() q values must be in the range [0, 1], got {v}")));
        }
    }
    let (xf, d) = match dim {
        None => (x.reshape(&[-1])?, 0),
        Some(dm) => {
            let d = one_dim(op, x, dm)?;
            (if x.ndim() == 0 { x.reshape(&[1])? } else { x.clone() }, d)
        }
    };
    let (sorted, _) = sort_along(op, &xf, d, false)?;
    let nq = q.len();
    // q as the input dtype sees it (PyTorch computes the ranks in that dtype)
    let qs: Vec<f64> = if x.dtype() == DType::F32 { q.iter().map(|&v| v as f32 as f64).collect() } else { q.to_vec() };
    let ranks = |l: &[f64]| -> Vec<(i64, i64, f64)> {
        let n = l.len();
        let valid = l.iter().filter(|v| !v.is_nan()).count();
        qs.iter()
            .map(|&qv| {
                let mut r = if ignore_nan { qv * (valid as f64 - 1.0) } else { qv * (n as f64 - 1.0) };
                if !ignore_nan && valid < n {
                    r = (n - 1) as f64;
                }
                if r < 0.0 {
                    r = 0.0;
                }
                let r = match interp {
                    Interpolation::Lower => r.floor(),
                    Interpolation::Higher => r.ceil(),
                    Interpolation::Nearest => {
                        let f = r.floor();
                        let diff = r - f;
                        if diff > 0.5 || (diff == 0.5 && f % 2.0 != 0.0) { f + 1.0 } else { f }
                    }
                    _ => r,
                };
                let lo = r.floor();
                let w = match interp {
                    Interpolation::Linear => r - lo,
                    Interpolation::Midpoint => 0.5,
                    _ => 0.0,
                };
                (lo as i64, r.ceil() as i64, w)
            })
            .collect()
    };
    let (lo, hi, w) = if sorted.device().is_cuda() {
        ranks_on_device(&sorted, d, &qs, interp, ignore_nan)?
    } else {
        ranks_on_host(&sorted, d, nq, &ranks, x.dtype())?
    };
    let below = gather_dim(&sorted, d, &lo)?;
    let above = gather_dim(&sorted, d, &hi)?;
    let v = below.add(&w.mul(&above.sub(&below)?)?)?;
    // [.., nq, ..] along d -> [nq, ..]
    let mut out = if xf.ndim() == 0 { v } else { v.movedim(&[d as i64], &[0])? };
    if keepdim {
        match dim {
            None => {
                let mut s = vec![nq];
                s.extend(std::iter::repeat_n(1, x.ndim()));
                out = out.reshape_to(&s)?;
            }
            Some(_) if x.ndim() > 0 => out = out.unsqueeze(d as i64 + 1)?,
            _ => {}
        }
    }
    if q_scalar {
        out = out.squeeze_dims(&[0])?;
    }
    Ok(out)
}

/// Each quantile level's (lower rank, upper rank, weight) in one sorted line.
type LineRanks<'a> = dyn Fn(&[f64]) -> Vec<(i64, i64, f64)> + Sync + 'a;

/// The lower and upper ranks and the weight of each quantile level along `d` of `sorted`
/// (shaped as `sorted` with `nq` along `d`), from `ranks` of each line on the host.
fn ranks_on_host(sorted: &Tensor, d: usize, nq: usize, ranks: &LineRanks<'_>, dt: DType) -> Result<(Tensor, Tensor, Tensor)> {
    let lo = map_lines::<f64, i64>(sorted, d, nq, |l, o| {
        for (o, r) in o.iter_mut().zip(ranks(l)) {
            *o = r.0;
        }
    })?;
    let hi = map_lines::<f64, i64>(sorted, d, nq, |l, o| {
        for (o, r) in o.iter_mut().zip(ranks(l)) {
            *o = r.1;
        }
    })?;
    let w = crate::with_dtype!(dt, T, {
        map_lines::<f64, T>(sorted, d, nq, |l, o| {
            for (o, r) in o.iter_mut().zip(ranks(l)) {
                *o = T::from_f64(r.2);
            }
        })?
    });
    Ok((lo, hi, w))
}

/// [`ranks_on_host`] with tensor ops on a CUDA `sorted` (NaNs last): each line's count of
/// non-NaN values is a reduction, the rank arithmetic of `quantile_impl`'s `ranks` is
/// elementwise in f64, so nothing is read back.
fn ranks_on_device(sorted: &Tensor, d: usize, qs: &[f64], interp: Interpolation, ignore_nan: bool) -> Result<(Tensor, Tensor, Tensor)> {
    let _ng = autograd::no_grad();
    let n = dim_size(sorted, d) as f64;
    let di = d as i64;
    let nan = sorted.ne(sorted)?;
    let nanc = nan.to_dtype(DType::F64)?.sum_dims(Some(&[di]), true, Some(DType::F64))?;
    let valid = nanc.neg()?.add_scalar(n)?;
    let (mut los, mut his, mut ws) = (Vec::new(), Vec::new(), Vec::new());
    for &qv in qs {
        let mut r = if ignore_nan { valid.add_scalar(-1.0)?.mul_scalar(qv)? } else { nanc.zeros_like()?.add_scalar(qv * (n - 1.0))? };
        if !ignore_nan {
            r = nanc.gt_scalar(0.0)?.where_(&r.full_like(n - 1.0)?, &r)?;
        }
        let r = r.clamp_min(0.0)?;
        let r = match interp {
            Interpolation::Lower => r.floor()?,
            Interpolation::Higher => r.ceil()?,
            Interpolation::Nearest => {
                let f = r.floor()?;
                let diff = r.sub(&f)?;
                // f is not negative: f % 2 != 0 is f - 2 floor(f / 2) != 0
                let odd = f.sub(&f.mul_scalar(0.5)?.floor()?.mul_scalar(2.0)?)?.ne_scalar(0.0)?;
                let up = diff.gt_scalar(0.5)?.logical_or(&diff.eq_scalar(0.5)?.logical_and(&odd)?)?;
                f.add(&up.to_dtype(DType::F64)?)?
            }
            _ => r,
        };
        let lo = r.floor()?;
        let w = match interp {
            Interpolation::Linear => r.sub(&lo)?,
            Interpolation::Midpoint => r.full_like(0.5)?,
            _ => r.zeros_like()?,
        };
        his.push(r.ceil()?.to_dtype(DType::I64)?);
        los.push(lo.to_dtype(DType::I64)?);
        ws.push(w.to_dtype(sorted.dtype())?);
    }
    let cat = |v: Vec<Tensor>| crate::ops::shape_ops::cat(&v, di);
    Ok((cat(los)?, cat(his)?, cat(ws)?))
}

impl Tensor {
    /// `torch.median(x)`: the lower median of all elements (NaN if any is NaN).
    pub fn median(&self) -> Result<Tensor> {
        median_all("median", self, false)
    }
    /// `torch.nanmedian(x)`: the lower median of the non-NaN elements.
    pub fn nanmedian(&self) -> Result<Tensor> {
        median_all("nanmedian", self, true)
    }
    /// `torch.median(x, dim, keepdim)`: `(values, indices)`.
    pub fn median_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        median_dim("median", self, dim, keepdim, false)
    }
    /// `torch.nanmedian(x, dim, keepdim)`: `(values, indices)` ignoring NaNs.
    pub fn nanmedian_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        median_dim("nanmedian", self, dim, keepdim, true)
    }
    /// `torch.mode(x, dim=-1, keepdim)`: the most frequent value (smallest on ties) and its last index.
    pub fn mode(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = one_dim("mode", self, dim)?;
        if self.ndim() > 0 {
            check_nonempty("mode", self, &[d], false)?;
        }
        if let Some((v, i)) = sorted_lines("mode", self, d, false, Pick::Mode)? {
            return unkeep(self, d, keepdim, v, i);
        }
        let idx = crate::with_key!("mode", self.dtype(), K, { map_lines::<K, i64>(self, d, 1, |l, o| o[0] = mode_of(l) as i64)? });
        let idx = if keepdim || self.ndim() == 0 { idx } else { idx.squeeze_dims(&[d as i64])? };
        Ok((take_reduced(self, d, &idx, keepdim)?, idx))
    }
    /// `torch.kthvalue(x, k, dim=-1, keepdim)`: the k-th smallest (1-based) and its index.
    pub fn kthvalue(&self, k: i64, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let d = one_dim("kthvalue", self, dim)?;
        let n = dim_size(self, d);
        if k < 1 || k as usize > n {
            return Err(Error::index("kthvalue", format!("kthvalue(): selected number k out of range for dimension {d}")));
        }
        let kk = (k - 1) as usize;
        if let Some((v, i)) = sorted_lines("kthvalue", self, d, false, Pick::Kth(kk))? {
            return unkeep(self, d, keepdim, v, i);
        }
        // quickselect picks the same one of equal values as PyTorch's CPU kernel
        let idx = crate::with_key!("kthvalue", self.dtype(), K, {
            map_lines::<K, i64>(self, d, 1, |l, o| {
                o[0] = super::quickselect::select_index(l, kk) as i64;
            })?
        });
        let idx = if keepdim || self.ndim() == 0 { idx } else { idx.squeeze_dims(&[d as i64])? };
        Ok((take_reduced(self, d, &idx, keepdim)?, idx))
    }
    /// `torch.quantile(x, q, dim, keepdim, interpolation=)`; `q` holds one or more levels in
    /// [0, 1] (`q_scalar`: a single level without its own output dim). NaN lines give NaN.
    pub fn quantile(&self, q: &[f64], q_scalar: bool, dim: Option<i64>, keepdim: bool, interpolation: Interpolation) -> Result<Tensor> {
        quantile_impl("quantile", self, q, q_scalar, dim, keepdim, interpolation, false)
    }
    /// `torch.nanquantile(...)`: `quantile` of the non-NaN values.
    pub fn nanquantile(&self, q: &[f64], q_scalar: bool, dim: Option<i64>, keepdim: bool, interpolation: Interpolation) -> Result<Tensor> {
        quantile_impl("nanquantile", self, q, q_scalar, dim, keepdim, interpolation, true)
    }
}

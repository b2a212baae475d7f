//! Sorting and selection: `sort`, `argsort`, `msort`, `topk`, `unique`, `unique_consecutive`,
//! `searchsorted`, `bucketize`, `histc`.

use crate::backend::cpu;
use crate::dtype::DType;
use crate::element::Element;
use crate::ops::reduce::select::gather_dim;
use crate::ops::reduce::{dim_size, map_lines, nan_cmp, nan_lt, one_dim, sort_along, sort_perm};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::cmp::Ordering;

/// What `unique` / `unique_consecutive` return besides the values.
pub struct Unique {
    /// The unique values (or slices along `dim`).
    pub values: Tensor,
    /// For each input element (or slice), the position of its value in `values`.
    pub inverse: Tensor,
    /// How many times each unique value occurs.
    pub counts: Tensor,
}

/// Groups consecutive equal keys of `order` (positions into rows) and builds the outputs.
fn group(n: usize, order: &[usize], eq: impl Fn(usize, usize) -> bool) -> (Vec<usize>, Vec<i64>, Vec<i64>) {
    let mut firsts = Vec::new();
    let mut inverse = vec![0i64; n];
    let mut counts: Vec<i64> = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        if k == 0 || !eq(order[k - 1], i) {
            firsts.push(i);
            counts.push(0);
        }
        inverse[i] = (firsts.len() - 1) as i64;
        if let Some(c) = counts.last_mut() {
            *c += 1;
        }
    }
    (firsts, inverse, counts)
}

fn unique_impl(op: &str, x: &Tensor, dim: Option<i64>, sort: bool) -> Result<Unique> {
    if x.dtype().is_complex() {
        return Err(Error::unsupported(op, "complex inputs"));
    }
    let xd = x.detach();
    match dim {
        None if x.device().is_cuda() => unique_on_device(&xd, sort),
        None => {
            let flat = xd.reshape(&[-1])?;
            let n = flat.numel();
            let (firsts, inv, counts) = crate::with_key!(op, x.dtype(), K, {
                let v: Vec<K> = cpu::to_vec(&flat)?;
                let order: Vec<usize> = if sort { sort_perm(&v, false) } else { (0..n).collect() };
                // NaN is never equal to NaN, so each NaN stays its own value (as PyTorch)
                group(n, &order, |a, b| v[a] == v[b])
            });
            let idx = Tensor::from_vec(firsts.iter().map(|&i| i as i64).collect::<Vec<_>>(), &[firsts.len()])?;
            Ok(Unique {
                values: gather_dim(&flat, 0, &idx)?.detach(),
                inverse: Tensor::from_vec(inv, x.shape())?,
                counts: Tensor::from_vec(counts.clone(), &[counts.len()])?,
            })
        }
        Some(dm) => {
            if x.ndim() == 0 {
                return Err(Error::index(op, "unique with dim on a 0-d tensor"));
            }
            let d = one_dim(op, x, dm)?;
            let rows = xd.movedim(&[d as i64], &[0])?.contiguous()?;
            let n = rows.shape()[0];
            let w = if n == 0 { 0 } else { rows.numel() / n };
            let (firsts, inv, counts) = crate::with_key!(op, x.dtype(), K, {
                let v: Vec<K> = cpu::to_vec(&rows)?;
                let row = |i: usize| &v[i * w..(i + 1) * w];
                let cmp = |a: usize, b: usize| -> Ordering {
                    for (p, q) in row(a).iter().zip(row(b)) {
                        let c = nan_cmp(p, q);
                        if c != Ordering::Equal {
                            return c;
                        }
                    }
                    Ordering::Equal
                };
                let mut order: Vec<usize> = (0..n).collect();
                if sort {
                    order.sort_by(|&a, &b| cmp(a, b));
                }
                group(n, &order, |a, b| row(a) == row(b))
            });
            let idx = Tensor::from_vec(firsts.iter().map(|&i| i as i64).collect::<Vec<_>>(), &[firsts.len()])?;
            let picked = rows.reshape(&[n as i64, -1])?;
            let picked = if w == 0 {
                let mut s = rows.shape().to_vec();
                s[0] = firsts.len();
                Tensor::zeros_on(&s, x.dtype(), x.device())?
            } else {
                let ix = idx.unsqueeze(1)?.broadcast_to(&[firsts.len(), w])?.contiguous()?;
                let mut s = rows.shape().to_vec();
                s[0] = firsts.len();
                gather_dim(&picked, 0, &ix)?.reshape_to(&s)?
            };
            Ok(Unique {
                values: picked.movedim(&[0], &[d as i64])?.contiguous()?.detach(),
                inverse: Tensor::from_vec(inv.clone(), &[inv.len()])?,
                counts: Tensor::from_vec(counts.clone(), &[counts.len()])?,
            })
        }
    }
}

/// [`unique_impl`] over all elements of a CUDA tensor, with device ops: sort (when `sort`), mark
/// each element that differs from its predecessor (NaN differs from everything, as on the
/// CPU), number the groups by a cumulative sum, and scatter positions, inverse and counts by
/// group; the number of groups is read back (one sync, as PyTorch's CUDA `unique`).
fn unique_on_device(xd: &Tensor, sort: bool) -> Result<Unique> {
    let _ng = crate::autograd::no_grad();
    let dev = xd.device();
    let flat = xd.reshape(&[-1])?;
    let n = flat.numel();
    if n == 0 {
        let empty_i = Tensor::zeros_on(&[0], DType::I64, dev)?;
        return Ok(Unique { values: flat.contiguous()?, inverse: Tensor::zeros_on(xd.shape(), DType::I64, dev)?, counts: empty_i });
    }
    let (sorted, perm) = if sort { flat.sort(0, false)? } else { (flat.clone(), Tensor::arange_on(0i64.into(), (n as i64).into(), 1i64.into(), DType::I64, dev)?) };
    let starts = if n == 1 {
        Tensor::full_on(&[1], true, DType::Bool, dev)?
    } else {
        let differs = sorted.narrow(0, 1, n as i64 - 1)?.ne(&sorted.narrow(0, 0, n as i64 - 1)?)?;
        crate::ops::shape_ops::cat(&[Tensor::full_on(&[1], true, DType::Bool, dev)?, differs], 0)?
    };
    let gid = starts.to_dtype(DType::I64)?.cumsum(0, None)?.sub_scalar(1i64)?;
    let k = gid.narrow(0, n as i64 - 1, 1)?.to_vec::<i64>()?.first().copied().unwrap_or(0) as usize + 1;
    // the sorted position of each group's first element: the sum of `i * start` over the group
    let pos = Tensor::arange_on(0i64.into(), (n as i64).into(), 1i64.into(), DType::I64, dev)?;
    let first = Tensor::zeros_on(&[k], DType::I64, dev)?.scatter_add(0, &gid, &pos.mul(&starts.to_dtype(DType::I64)?)?)?;
    let values = sorted.gather(0, &first)?;
    let inverse = Tensor::zeros_on(&[n], DType::I64, dev)?.scatter_add(0, &perm, &gid)?.reshape_to(xd.shape())?;
    let counts = Tensor::zeros_on(&[k], DType::I64, dev)?.scatter_add(0, &gid, &Tensor::full_on(&[n], 1i64, DType::I64, dev)?)?;
    Ok(Unique { values, inverse, counts })
}

/// Binary search of `v` in a sorted line: the first position whose value is `>= v`
/// (`> v` when `right`), NaN sorting last.
fn search<K: PartialOrd + Copy>(line: &[K], v: K, right: bool, at: impl Fn(usize) -> usize) -> usize {
    let (mut lo, mut hi) = (0usize, line.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        let m = line[at(mid)];
        let go_right = if right { !nan_lt(v, m) } else { nan_lt(m, v) };
        if go_right {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl Tensor {
    /// `torch.sort(x, dim=-1, descending=False, stable=)`: `(values, indices)`. Always stable
    /// (a stable sort is a valid unstable one); NaN sorts as the largest value.
    pub fn sort(&self, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
        let d = one_dim("sort", self, dim)?;
        sort_along("sort", self, d, descending)
    }
    /// `torch.argsort(x, dim=-1, descending=False, stable=)`.
    pub fn argsort(&self, dim: i64, descending: bool) -> Result<Tensor> {
        Ok(self.sort(dim, descending)?.1)
    }
    /// `torch.msort(x)`: values sorted along dim 0.
    pub fn msort(&self) -> Result<Tensor> {
        Ok(self.sort(0, false)?.0)
    }
    /// `torch.topk(x, k, dim=-1, largest=True, sorted=True)`: the `k` largest (smallest)
    /// values along `dim` with their indices, in sorted order.
    pub fn topk(&self, k: i64, dim: i64, largest: bool) -> Result<(Tensor, Tensor)> {
        let d = one_dim("topk", self, dim)?;
        let n = dim_size(self, d);
        if k < 0 || k as usize > n {
            return Err(Error::index("topk", format!("selected index k out of range (k = {k}, size of dim {d} = {n})")));
        }
        let k = k as usize;
        if let Some(r) = crate::ops::sort_cuda::sorted_lines("topk", self, d, largest, crate::ops::sort_cuda::Pick::Prefix(k))? {
            return Ok(r);
        }
        let idx = crate::with_key!("topk", self.dtype(), K, {
            map_lines::<K, i64>(self, d, k, |l, o| {
                for (o, s) in o.iter_mut().zip(sort_perm(l, largest)) {
                    *o = s as i64;
                }
            })?
        });
        Ok((gather_dim(self, d, &idx)?, idx))
    }
    /// `torch.unique(x, sorted=True, return_inverse, return_counts, dim=None)` (always sorted).
    pub fn unique(&self, dim: Option<i64>) -> Result<Unique> {
        unique_impl("unique", self, dim, true)
    }
    /// `torch.unique_consecutive(x, return_inverse, return_counts, dim=None)`: collapses runs.
    pub fn unique_consecutive(&self, dim: Option<i64>) -> Result<Unique> {
        unique_impl("unique_consecutive", self, dim, false)
    }
    /// `torch.searchsorted(sorted_sequence, values, out_int32=, right=, sorter=)` with
    /// `self` as the sorted sequence: 1-d, or with leading dims matching `values`.
    pub fn searchsorted(&self, values: &Tensor, out_int32: bool, right: bool, sorter: Option<&Tensor>) -> Result<Tensor> {
        let op = "searchsorted";
        let seq = self;
        if seq.ndim() == 0 {
            return Err(Error::value(op, "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension"));
        }
        let lead_ok = seq.ndim() == 1 || (seq.ndim() == values.ndim() && seq.shape()[..seq.ndim() - 1] == values.shape()[..values.ndim() - 1]);
        if !lead_ok {
            return Err(Error::shape(
                op,
                format!("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor {:?} and input value tensor {:?}", seq.shape(), values.shape()),
            ));
        }
        if let Some(s) = sorter {
            if s.shape() != seq.shape() {
                return Err(Error::shape(op, format!("torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor {:?}and got sorter tensor {:?}", seq.shape(), s.shape())));
            }
            if s.dtype() != DType::I64 {
                return Err(Error::dtype(op, format!("torch.searchsorted(): sorter must be a tensor of long dtype but got dtype {}", s.dtype().name())));
            }
        }
        if seq.dtype().is_complex() || values.dtype().is_complex() {
            return Err(Error::unsupported(op, "complex inputs"));
        }
        let m = *seq.shape().last().unwrap_or(&0);
        let per = if seq.ndim() == 1 { values.numel() } else { *values.shape().last().unwrap_or(&1) };
        if let (Some(s), true) = (sorter, seq.device().is_cuda() && m > 0) {
            // the sequence taken in the sorter's order, searched without a sorter: the same
            // positions, on the device
            let bad = s.lt_scalar(0)?.logical_or(&s.ge_scalar(m as i64)?)?.any_dims(None, false)?.to_vec::<bool>()?;
            if bad.first().copied().unwrap_or(false) {
                return Err(Error::index(op, format!("torch.searchsorted(): sorter index out of range for dimension of size {m}")));
            }
            let s = if s.device() == seq.device() { s.clone() } else { s.to_device(seq.device())? };
            let sorted = seq.detach().gather(-1, &s)?;
            return sorted.searchsorted(values, out_int32, right, None);
        }
        #[cfg(feature = "cuda")]
        if (sorter.is_none() || m == 0) && seq.device().is_cuda() && (values.device() == seq.device() || values.ndim() == 0) {
            // a Python number comes as a 0-d CPU tensor
            let v = values.to_device(seq.device())?;
            let float = seq.dtype().is_float() || values.dtype().is_float();
            let out = crate::backend::cuda::adv_index::searchsorted(seq, &v, m, per, right, float)?;
            return if out_int32 { out.to_dtype(DType::I32) } else { Ok(out) };
        }
        let sort_idx: Option<Vec<i64>> = sorter.map(cpu::to_vec).transpose()?;
        if let Some(si) = &sort_idx {
            if si.iter().any(|&i| i < 0 || i as usize >= m) {
                return Err(Error::index(op, format!("torch.searchsorted(): sorter index out of range for dimension of size {m}")));
            }
        }
        let float = seq.dtype().is_float() || values.dtype().is_float();
        let pos: Vec<i64> = if float {
            let s: Vec<f64> = cpu::to_vec(seq)?;
            let v: Vec<f64> = cpu::to_vec(values)?;
            positions(&s, &v, m, per, right, sort_idx.as_deref())
        } else {
            let s: Vec<i64> = cpu::to_vec(seq)?;
            let v: Vec<i64> = cpu::to_vec(values)?;
            positions(&s, &v, m, per, right, sort_idx.as_deref())
        };
        let out = Tensor::from_vec(pos, values.shape())?;
        if out_int32 {
            out.to_dtype(DType::I32)
        } else {
            Ok(out)
        }
    }
    /// `torch.bucketize(x, boundaries, out_int32=, right=)`: the bucket index of each element.
    pub fn bucketize(&self, boundaries: &Tensor, out_int32: bool, right: bool) -> Result<Tensor> {
        if boundaries.ndim() != 1 {
            return Err(Error::value("bucketize", format!("boundaries tensor must be 1 dimension, but got dim({})", boundaries.ndim())));
        }
        boundaries.searchsorted(self, out_int32, right, None)
    }
    /// `torch.histc(x, bins=100, min=0, max=0)`: equal-width histogram; `min == max` uses the
    /// data's range, elements outside `[min, max]` are ignored.
    pub fn histc(&self, bins: i64, min: f64, max: f64) -> Result<Tensor> {
        let op = "histc";
        if !self.dtype().is_float() {
            return Err(Error::dtype(op, format!("\"histogram_cpu\" not implemented for '{}'", self.dtype().name())));
        }
        if bins <= 0 {
            return Err(Error::value(op, format!("torch.histc(): bins must be > 0, but got {bins} for dimension 0")));
        }
        if min > max {
            return Err(Error::value(op, format!("torch.histc(): max must be larger than min, but got min {min} and max {max}")));
        }
        if self.device().is_cuda() {
            return histc_on_device(self, bins as usize, min, max);
        }
        let v: Vec<f64> = cpu::to_vec(self)?;
        let (mut lo, mut hi) = (min, max);
        if lo == hi && !v.is_empty() {
            lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
            hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        }
        if lo == hi {
            lo -= 1.0;
            hi += 1.0;
        }
        if !lo.is_finite() || !hi.is_finite() {
            return Err(Error::value(op, format!("torch.histc(): range of [{lo}, {hi}] is not finite")));
        }
        let nb = bins as usize;
        let mut counts = vec![0f64; nb];
        for &x in &v {
            if !(x >= lo && x <= hi) {
                continue;
            }
            let mut b = ((x - lo) * nb as f64 / (hi - lo)) as usize;
            if b >= nb {
                b = nb - 1;
            }
            counts[b] += 1.0;
        }
        crate::with_dtype!(self.dtype(), T, { Tensor::from_vec(counts.iter().map(|&c| T::from_f64(c)).collect::<Vec<T>>(), &[nb]) })
    }
}

/// [`Tensor::histc`] with tensor ops on `x`'s device: the data's range (when `min == max`) is
/// read back as two numbers, each element's bin is computed in f64 as on the CPU, and the counts
/// are a `scatter_add` of ones (zeros for the elements outside the range).
fn histc_on_device(x: &Tensor, nb: usize, min: f64, max: f64) -> Result<Tensor> {
    let op = "histc";
    let _ng = crate::autograd::no_grad();
    let v = x.detach().reshape(&[-1])?.to_dtype(DType::F64)?;
    let (mut lo, mut hi) = (min, max);
    if lo == hi && v.numel() > 0 {
        // NaN propagates through min/max; the CPU fold skips it, so drop the NaNs first
        let fin = v.ne(&v)?;
        let big = v.full_like(f64::INFINITY)?;
        lo = fin.where_(&big, &v)?.min()?.to_vec::<f64>()?.first().copied().unwrap_or(lo);
        hi = fin.where_(&big.neg()?, &v)?.max()?.to_vec::<f64>()?.first().copied().unwrap_or(hi);
    }
    if lo == hi {
        lo -= 1.0;
        hi += 1.0;
    }
    if !lo.is_finite() || !hi.is_finite() {
        return Err(Error::value(op, format!("torch.histc(): range of [{lo}, {hi}] is not finite")));
    }
    let inside = v.ge_scalar(lo)?.logical_and(&v.le_scalar(hi)?)?;
    let bin = v.sub_scalar(lo)?.mul_scalar(nb as f64)?.div_scalar(hi - lo)?.floor()?.clamp_max((nb - 1) as f64)?;
    let idx = inside.where_(&bin, &bin.zeros_like()?)?.to_dtype(DType::I64)?;
    let ones = inside.to_dtype(x.dtype())?;
    Tensor::zeros_on(&[nb], x.dtype(), x.device())?.scatter_add(0, &idx, &ones)
}

fn positions<K: PartialOrd + Copy>(s: &[K], v: &[K], m: usize, per: usize, right: bool, sorter: Option<&[i64]>) -> Vec<i64> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            let row = if per == 0 { 0 } else { i / per };
            let base = if s.len() == m { 0 } else { row * m };
            let line = &s[base..base + m];
            match sorter {
                Some(si) => {
                    let srow = &si[base..base + m];
                    search(line, x, right, |k| srow[k] as usize) as i64
                }
                None => search(line, x, right, |k| k) as i64,
            }
        })
        .collect()
}


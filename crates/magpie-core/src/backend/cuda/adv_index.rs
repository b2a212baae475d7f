//! Host side of kernels/adv_index.cu: advanced indexing by storage offsets on CUDA tensors (what
//! `ops::indexing` runs for `aten::index`, `index_put` and the scatters with reductions) and
//! `nonzero`. Index values never come to the host: out-of-range indices set a device flag that is
//! read back once per call (only on an error is the offending index looked up for the message).

use super::elementwise::storage_of;
use super::kern::{elem_ptr, grid_stride_blocks, kfunc, KDims, KFile};
use super::launch::{launch, Args};
use super::ops::{contiguous, empty, full, to_cpu};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Device, Error, Result};

/// True for the dtypes the advanced-indexing kernels are built for (all but complex and float8).
pub fn supported(d: DType) -> bool {
    super::elementwise::ctype(d).is_some()
}

/// One indexed dim: its number, the index tensor (contiguous i64 on the device, broadcast to the
/// index shape), and the dim's size and stride in the indexed tensor.
pub struct IndexDim {
    /// The dim of the indexed tensor.
    pub dim: usize,
    /// Contiguous int64 indices, one per broadcast index position.
    pub idx: Tensor,
    /// Size of the dim.
    pub size: usize,
    /// Stride of the dim, in elements.
    pub stride: usize,
}

fn ordinal(op: &str, t: &Tensor) -> Result<usize> {
    match t.device() {
        Device::Cuda(n) => Ok(n),
        d => Err(Error::device(op, format!("expected a CUDA tensor, got one on {d}"))),
    }
}

/// Storage offsets `offset + Σ wrap(idx_d) * stride_d` of the `n` broadcast index positions, as a
/// contiguous int64 tensor on device `ord`. An index outside `[-size, size)` gives PyTorch's
/// IndexError (`index 7 is out of bounds for dimension 0 with size 5`).
pub fn base_offsets(op: &str, ord: usize, offset: usize, n: usize, dims: &[IndexDim]) -> Result<Tensor> {
    let base = full(ord, &[n], Scalar::Int(offset as i64), DType::I64)?;
    if n == 0 || dims.is_empty() {
        return Ok(base);
    }
    let flags = full(ord, &[dims.len()], Scalar::Int(0), DType::I32)?;
    let (bp, dev) = elem_ptr(op, &base)?;
    let fp = elem_ptr(op, &flags)?.0;
    let f = kfunc(&dev, KFile::AdvIndex, DType::I64, "adv_base_add")?;
    for (k, d) in dims.iter().enumerate() {
        let mut a = Args::new();
        a.push(elem_ptr(op, &d.idx)?.0).push(n as i64).push(d.size as i64).push(d.stride as i64).push(bp).push(fp + 4 * k as u64);
        launch(&dev, op, f, (grid_stride_blocks(&dev, n), 1, 1), (256, 1, 1), 0, &mut a)?;
    }
    // a graph replay cannot stop for the host: out-of-range indices are then skipped, unread
    if super::alloc::is_capturing(&dev) {
        return Ok(base);
    }
    let fl: Vec<i32> = crate::backend::cpu::to_vec(&to_cpu(&flags)?)?;
    if let Some(k) = fl.iter().position(|&v| v != 0) {
        let d = &dims[k];
        let v: Vec<i64> = crate::backend::cpu::to_vec(&to_cpu(&d.idx)?)?;
        let s = d.size as i64;
        let bad = v.iter().copied().find(|&i| i < -s || i >= s).unwrap_or(s);
        return Err(Error::index(op, format!("index {bad} is out of bounds for dimension {} with size {}", d.dim, d.size)));
    }
    Ok(base)
}

/// The offsets of the non-indexed positions as an int64 tensor on device `ord`.
pub fn rest_offsets(ord: usize, rest: &[usize]) -> Result<Tensor> {
    let v: Vec<i64> = rest.iter().map(|&r| r as i64).collect();
    super::ops::to_cuda(&Tensor::from_vec(v, &[rest.len()])?, ord)
}

/// `out[b, r] = x.storage[base[b] + rest[r]]` as a new contiguous tensor of `shape`
/// (`base.numel() * rest.numel()` elements, front form).
pub fn gather(op: &str, x: &Tensor, base: &Tensor, rest: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let ord = ordinal(op, x)?;
    let out = empty(op, ord, x.dtype(), shape)?;
    let total = out.numel();
    let rn = rest.numel();
    if total == 0 || rn == 0 {
        return Ok(out);
    }
    if total != base.numel() * rn {
        return Err(Error::shape(op, format!("{} positions for an output of {total} elements", base.numel() * rn)));
    }
    let (sp, dev) = storage_of(op, x)?;
    let f = kfunc(&dev, KFile::AdvIndex, x.dtype(), "adv_gather")?;
    let mut a = Args::new();
    a.push(sp).push(elem_ptr(op, &out)?.0).push(elem_ptr(op, base)?.0).push(elem_ptr(op, rest)?.0).push(rn as i64).push(total as i64);
    launch(&dev, op, f, (grid_stride_blocks(&dev, total), 1, 1), (256, 1, 1), 0, &mut a)?;
    Ok(out)
}

/// How [`scatter`] combines values that meet at one position (`ops::indexing::Reduce`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// The last value in index order is written.
    Assign = 0,
    /// Sum.
    Sum = 1,
    /// Product.
    Prod = 2,
    /// Mean (floor division for integers).
    Mean = 3,
    /// Maximum, NaN propagating.
    Amax = 4,
    /// Minimum, NaN propagating.
    Amin = 5,
}

/// Writes `vals[b, r]` (front form, `dst`'s dtype) into `dst`'s storage at `base[b] + rest[r]`,
/// combining values that meet with `mode` in index order (the original value first when
/// `include_self`). Deterministic: the bases are sorted stably and each run of equal bases is
/// reduced by one thread per rest position, with no atomics.
pub fn scatter(op: &str, dst: &Tensor, base: &Tensor, rest: &Tensor, vals: &Tensor, mode: Combine, include_self: bool) -> Result<()> {
    let nb = base.numel();
    let rn = rest.numel();
    if nb == 0 || rn == 0 {
        return Ok(());
    }
    if vals.numel() != nb * rn || vals.dtype() != dst.dtype() {
        return Err(Error::shape(op, format!("{} values of {} for {} indexed positions of {}", vals.numel(), vals.dtype().name(), nb * rn, dst.dtype().name())));
    }
    let (key, perm) = {
        let _ng = crate::autograd::no_grad();
        base.sort(0, false)?
    };
    let key = if key.is_contiguous() { key } else { contiguous(&key)? };
    let perm = if perm.is_contiguous() { perm } else { contiguous(&perm)? };
    let vals = if vals.is_contiguous() { vals.clone() } else { contiguous(vals)? };
    drop(dst.storage().write()); // an in-place write: bump the version
    let (dp, dev) = storage_of(op, dst)?;
    let f = kfunc(&dev, KFile::AdvIndex, dst.dtype(), "adv_scatter_runs")?;
    let mut a = Args::new();
    a.push(dp)
        .push(elem_ptr(op, &vals)?.0)
        .push(elem_ptr(op, &key)?.0)
        .push(elem_ptr(op, &perm)?.0)
        .push(nb as i64)
        .push(elem_ptr(op, rest)?.0)
        .push(rn as i64)
        .push(mode as i32)
        .push(include_self as i32);
    let total = nb * rn;
    launch(&dev, op, f, (grid_stride_blocks(&dev, total), 1, 1), (256, 1, 1), 0, &mut a)?;
    Ok(())
}

/// `torch.nonzero(x)` on CUDA: `[n, ndim]` int64 coordinates in row-major order. The count is
/// read back (one sync, as in PyTorch). None for more than 8 dims (the CPU path takes those).
pub fn nonzero(x: &Tensor) -> Result<Option<Tensor>> {
    let op = "nonzero";
    let ord = ordinal(op, x)?;
    let nd = x.ndim();
    if nd > KDims::MAXN {
        return Ok(None);
    }
    let _ng = crate::autograd::no_grad();
    let n = x.numel();
    if n == 0 {
        return Ok(Some(empty(op, ord, DType::I64, &[0, nd])?));
    }
    let mask = x.ne_scalar(0)?.to_dtype(DType::I64)?.reshape(&[-1])?;
    let mask = if mask.is_contiguous() { mask } else { contiguous(&mask)? };
    let csum = mask.cumsum(0, None)?;
    let csum = if csum.is_contiguous() { csum } else { contiguous(&csum)? };
    let count = csum.narrow(0, n as i64 - 1, 1)?.item()?.to_i64().max(0) as usize;
    let out = empty(op, ord, DType::I64, &[count, nd])?;
    if count == 0 || nd == 0 {
        return Ok(Some(out));
    }
    let dims: Vec<(usize, usize)> = x.shape().iter().map(|&s| (s, 0)).collect();
    let kd = KDims::new(&dims).ok_or_else(|| Error::shape(op, "too many dims"))?;
    let (mp, dev) = elem_ptr(op, &mask)?;
    let f = kfunc(&dev, KFile::AdvIndex, DType::I64, "adv_nonzero")?;
    let mut a = Args::new();
    a.push(mp).push(elem_ptr(op, &csum)?.0).push(n as i64).push(kd).push(elem_ptr(op, &out)?.0);
    launch(&dev, op, f, (grid_stride_blocks(&dev, n), 1, 1), (256, 1, 1), 0, &mut a)?;
    Ok(Some(out))
}

/// `torch.searchsorted(seq, values, right=)` on CUDA without a sorter: int64 positions of
/// `values`' shape, by binary search in f64 (`float`) or i64, NaN sorting last as on the CPU.
/// `seq` is 1-d (`per` = all values) or has one line of `m` per `per` values.
pub fn searchsorted(seq: &Tensor, values: &Tensor, m: usize, per: usize, right: bool, float: bool) -> Result<Tensor> {
    let op = "searchsorted";
    let ord = ordinal(op, values)?;
    let _ng = crate::autograd::no_grad();
    let out = empty(op, ord, DType::I64, values.shape())?;
    let total = values.numel();
    if total == 0 {
        return Ok(out);
    }
    let kt = if float { DType::F64 } else { DType::I64 };
    let s = seq.to_dtype(kt)?;
    let s = if s.is_contiguous() { s } else { contiguous(&s)? };
    let v = values.to_dtype(kt)?;
    let v = if v.is_contiguous() { v } else { contiguous(&v)? };
    let lines = if seq.ndim() == 1 { 1 } else { (seq.numel() / m.max(1)).max(1) };
    let (sp, dev) = elem_ptr(op, &s)?;
    let f = kfunc(&dev, KFile::AdvIndex, kt, "adv_searchsorted")?;
    let mut a = Args::new();
    a.push(sp).push(elem_ptr(op, &v)?.0).push(lines as i64).push(m as i64).push(per.max(1) as i64).push(total as i64).push(right as i32).push(elem_ptr(op, &out)?.0);
    launch(&dev, op, f, (grid_stride_blocks(&dev, total), 1, 1), (256, 1, 1), 0, &mut a)?;
    Ok(out)
}

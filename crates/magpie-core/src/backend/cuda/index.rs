//! Host side of kernels/index.cu and kernels/scatter.cu: gather, index_select, embedding rows,
//! scatter_add and index_add on CUDA tensors. Indices are checked on the device: an
//! out-of-range index sets a flag that is read back after the launch (one small read, as
//! PyTorch's device-side assert also surfaces at the next sync), giving PyTorch's IndexError.

use super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile, KMAXD};
use super::launch::{launch, Args};
use super::ops::{cast, contiguous, copy_into, empty, full, to_cpu};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Device, Error, Result};

/// The `IdxIter` kernel parameter (kcommon.cuh; used by index.cu / scatter.cu).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct IdxIter {
    n: i32,
    pad: i32,
    size: [i64; KMAXD],
    s_idx: [i64; KMAXD],
    s_src: [i64; KMAXD],
    s_out: [i64; KMAXD],
    lim: i64,
    dstride: i64,
}

pub(super) fn iter(size: &[usize], s_idx: &[i64], s_src: &[i64], s_out: &[i64], lim: usize, dstride: usize) -> Option<IdxIter> {
    if size.len() > KMAXD {
        return None;
    }
    let mut it = IdxIter { n: size.len() as i32, pad: 0, size: [1; KMAXD], s_idx: [0; KMAXD], s_src: [0; KMAXD], s_out: [0; KMAXD], lim: lim as i64, dstride: dstride as i64 };
    for d in 0..size.len() {
        it.size[d] = size[d] as i64;
        it.s_idx[d] = s_idx[d];
        it.s_src[d] = s_src[d];
        it.s_out[d] = s_out[d];
    }
    Some(it)
}

/// True for the dtypes gather / index_select are built for.
pub fn gather_supported(d: DType) -> bool {
    super::elementwise::ctype(d).is_some()
}

/// True for the dtypes scatter_add / index_add accumulate atomically.
pub fn scatter_supported(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I64 | DType::I32)
}

fn istrides(t: &Tensor) -> Vec<i64> {
    t.strides().iter().map(|&s| s as i64).collect()
}

/// The index tensor as i64 on the device.
fn as_i64(idx: &Tensor) -> Result<Tensor> {
    if idx.dtype() == DType::I64 { Ok(idx.clone()) } else { cast(idx, DType::I64) }
}

/// A zeroed device flag for out-of-range indices.
pub(super) fn flag(ord: usize) -> Result<Tensor> {
    full(ord, &[1], Scalar::Int(0), DType::I32)
}

/// Reads the flag back (waits for the stream) and fails like PyTorch when it was set. During a
/// CUDA graph capture nothing is read (a replay cannot stop for the host): the kernels skip
/// out-of-range indices without reading or writing through them.
fn check(op: &str, flag: &Tensor, lim: usize) -> Result<()> {
    if let Device::Cuda(n) = flag.device() {
        if super::alloc::is_capturing(&*super::device::device(op, n)?) {
            return Ok(());
        }
    }
    let v: Vec<i32> = crate::backend::cpu::to_vec(&to_cpu(flag)?)?;
    if v.first().copied().unwrap_or(0) != 0 {
        return Err(Error::index(op, format!("index out of range in self (indices must be in [0, {lim}))")));
    }
    Ok(())
}

/// `out[i...] = x[..., idx[i...], ...]` over the iteration space `size` (out contiguous with
/// that shape); `s_idx` walks the index, `s_src` the other dims of `x`.
fn gather_launch(op: &str, x: &Tensor, idx: &Tensor, size: &[usize], s_idx: &[i64], s_src: &[i64], dim: usize) -> Result<Option<Tensor>> {
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    let Some(it) = iter(size, s_idx, s_src, &vec![0; size.len()], x.shape()[dim], x.strides()[dim]) else { return Ok(None) };
    let out = empty(op, ord, x.dtype(), size)?;
    let total = out.numel();
    if total == 0 {
        return Ok(Some(out));
    }
    let fl = flag(ord)?;
    let (xp, dev) = elem_ptr(op, x)?;
    let f = kfunc(&dev, KFile::Index, x.dtype(), "gather_k")?;
    let mut a = Args::new();
    a.push(xp).push(elem_ptr(op, &out)?.0).push(elem_ptr(op, idx)?.0).push(it).push(total as i64).push(elem_ptr(op, &fl)?.0);
    launch(&dev, op, f, (grid_stride_blocks(&dev, total), 1, 1), (256, 1, 1), 0, &mut a)?;
    check(op, &fl, x.shape()[dim])?;
    Ok(Some(out))
}

/// `torch.gather(x, dim, index)` on CUDA (index of x's rank, sizes checked by the caller).
pub fn gather(x: &Tensor, dim: usize, index: &Tensor) -> Result<Option<Tensor>> {
    if !gather_supported(x.dtype()) || !index.device().is_cuda() {
        return Ok(None);
    }
    let idx = as_i64(index)?;
    let mut s_src = istrides(x);
    s_src[dim] = 0;
    gather_launch("gather", x, &idx, index.shape(), &istrides(&idx), &s_src, dim)
}

/// `torch.index_select(x, dim, index)` with a 1-d (or 0-d) index on CUDA; contiguous 2-d row
/// selections (embedding lookups) copy whole rows with 16-byte accesses.
pub fn index_select(x: &Tensor, dim: usize, index: &Tensor) -> Result<Option<Tensor>> {
    let op = "index_select";
    if !gather_supported(x.dtype()) || !index.device().is_cuda() || index.ndim() > 1 || x.ndim() == 0 {
        return Ok(None);
    }
    let idx = as_i64(index)?;
    let k = idx.numel();
    if dim == 0 && x.is_contiguous() {
        let d: usize = x.shape()[1..].iter().product();
        let mut shape = x.shape().to_vec();
        shape[0] = k;
        return take_rows(op, x, &idx, x.shape()[0], d, &shape).map(Some);
    }
    let mut size = x.shape().to_vec();
    size[dim] = k;
    let mut s_idx = vec![0i64; x.ndim()];
    s_idx[dim] = idx.strides().first().copied().unwrap_or(1) as i64;
    let mut s_src = istrides(x);
    s_src[dim] = 0;
    gather_launch(op, x, &idx, &size, &s_idx, &s_src, dim)
}

/// `embedding(weight, indices)`: rows of a 2-d weight, output `[indices.shape..., d]`.
pub fn embedding(weight: &Tensor, indices: &Tensor) -> Result<Option<Tensor>> {
    if !gather_supported(weight.dtype()) || !indices.device().is_cuda() || weight.ndim() != 2 {
        return Ok(None);
    }
    let w = if weight.is_contiguous() { weight.clone() } else { contiguous(weight)? };
    let idx = as_i64(indices)?;
    let idx = if idx.is_contiguous() { idx } else { contiguous(&idx)? };
    let mut shape = indices.shape().to_vec();
    shape.push(w.shape()[1]);
    take_rows("embedding", &w, &idx, w.shape()[0], w.shape()[1], &shape).map(Some)
}

/// The gradient of `embedding` for a `[rows, d]` table: `g` (`[..., d]`, the gradient of the
/// lookup) summed into the rows named by `indices` in index order, without atomics (so two runs,
/// or an eager step and its CUDA-graph replay, give the same bits); the row `skip`
/// (padding_idx) gets zeros. A counting sort of the positions by row (one launch for few lookups,
/// else ranks over many blocks and the prefix sum in one), then one block per row summing only its own hits (per 32-column slice of a row when rows
/// have 32 hits or more on average, as the token-type table's). None when `g`'s dtype has no kernel, or
/// for 2^31 rows or indices and more.
pub fn embedding_backward(g: &Tensor, indices: &Tensor, rows: usize, skip: Option<usize>) -> Result<Option<Tensor>> {
    let op = "embedding_backward";
    let Device::Cuda(ord) = g.device() else { return Ok(None) };
    if !gather_supported(g.dtype()) || !g.dtype().is_float() || indices.device() != g.device() || g.ndim() == 0 {
        return Ok(None);
    }
    let d = g.shape()[g.ndim() - 1];
    let g = if g.is_contiguous() { g.clone() } else { contiguous(g)? };
    let idx = as_i64(indices)?;
    let idx = if idx.is_contiguous() { idx } else { contiguous(&idx)? };
    if idx.numel() * d != g.numel() {
        return Err(Error::shape(op, format!("gradient {:?} for {} indices of rows of {d}", g.shape(), idx.numel())));
    }
    let n = idx.numel();
    if rows >= i32::MAX as usize || n >= i32::MAX as usize {
        return Ok(None);
    }
    let out = empty(op, ord, g.dtype(), &[rows, d])?;
    if rows == 0 || d == 0 {
        return Ok(Some(out));
    }
    // int32 scratch: off[rows + 1], rank[n], pos[n]; cnt[rows] zeroed apart
    let scratch = empty(op, ord, DType::I32, &[rows + 1 + 2 * n])?;
    let (sp, dev) = elem_ptr(op, &scratch)?;
    let off = sp;
    let (rank, pos) = (off + 4 * (rows as u64 + 1), off + 4 * (rows + 1 + n) as u64);
    if n <= PLAN_SMALL_MAX {
        // few lookups (BERT's 512 into a 30522-row table): the plan over many blocks, each
        // thread on its own, instead of one block walking every row's count
        let plan = kfunc(&dev, KFile::Index, g.dtype(), "embedding_bwd_plan_small")?;
        let mut a = Args::new();
        a.push(elem_ptr(op, &idx)?.0).push(n as i32).push(rows as i32).push(off).push(pos);
        launch(&dev, op, plan, ((rows + 1).max(n).div_ceil(256) as u32, 1, 1), (256, 1, 1), 0, &mut a)?;
    } else {
        // ranks and counts over many blocks (a thread a lookup), then the prefix sum over the
        // rows and the slots in one block: GPT-2's 8192 lookups into 50257 rows took 0.47 ms in
        // one block doing both (ncu, NVIDIA H200)
        let cnt_t = full(ord, &[rows], Scalar::Int(0), DType::I32)?;
        let cnt = elem_ptr(op, &cnt_t)?.0;
        let f = kfunc(&dev, KFile::Index, g.dtype(), "embedding_bwd_rank")?;
        let mut a = Args::new();
        a.push(elem_ptr(op, &idx)?.0).push(n as i32).push(rows as i32).push(cnt).push(rank);
        // 64 threads a block: every thread walks all lookups, so more blocks (SMs) beat wider ones
        launch(&dev, op, f, (n.div_ceil(64) as u32, 1, 1), (64, 1, 1), 0, &mut a)?;
        let f = kfunc(&dev, KFile::Index, g.dtype(), "embedding_bwd_offsets")?;
        let mut a = Args::new();
        a.push(elem_ptr(op, &idx)?.0).push(n as i32).push(rows as i32).push(cnt).push(off).push(rank).push(pos);
        launch(&dev, op, f, (1, 1, 1), (1024, 1, 1), 0, &mut a)?;
    }
    // many hits a row on average (token types): 32-column slices of each row over blocks, the
    // hits' loads staged 128 at a time; else a block a row
    let slices = d.div_ceil(32);
    let cols = n >= 32 * rows && slices <= 65535;
    let kname = if cols { "embedding_bwd_sum_cols" } else { "embedding_bwd_sum" };
    let f = kfunc(&dev, KFile::Index, g.dtype(), kname)?;
    let mut a = Args::new();
    let skip = skip.map_or(-1, |s| s as i64);
    a.push(elem_ptr(op, &g)?.0).push(off).push(pos).push(d as i64).push(rows as i64).push(skip).push(elem_ptr(op, &out)?.0);
    let (grid, block) = if cols { ((rows.min(65535) as u32, slices as u32, 1), (512, 1, 1)) } else { ((rows.min(65535) as u32, 1, 1), (256, 1, 1)) };
    launch(&dev, op, f, grid, block, 0, &mut a)?;
    Ok(Some(out))
}

/// Most lookups for `embedding_bwd_plan_small` (its work grows as lookups x (rows + lookups)).
const PLAN_SMALL_MAX: usize = 2048;

/// Rows `idx` (contiguous i64) of the contiguous `[rows, d]` table `w`, as a tensor of `shape`.
fn take_rows(op: &str, w: &Tensor, idx: &Tensor, rows: usize, d: usize, shape: &[usize]) -> Result<Tensor> {
    let Device::Cuda(ord) = w.device() else { return Err(Error::device(op, "expected a CUDA tensor")) };
    let idx = if idx.is_contiguous() { idx.clone() } else { contiguous(idx)? };
    let out = empty(op, ord, w.dtype(), shape)?;
    let n = idx.numel();
    if n == 0 || d == 0 {
        return Ok(out);
    }
    let fl = flag(ord)?;
    let (wp, dev) = elem_ptr(op, w)?;
    let vsz = 16 / w.dtype().size().max(1);
    let vec = wp % 16 == 0 && d % vsz == 0;
    let threads = (if vec { d / vsz } else { d }).div_ceil(32).clamp(1, 8) as u32 * 32;
    let f = kfunc(&dev, KFile::Index, w.dtype(), "take_rows")?;
    let mut a = Args::new();
    a.push(wp).push(elem_ptr(op, &out)?.0).push(elem_ptr(op, &idx)?.0).push(n as i64).push(d as i64).push(rows as i64).push(vec as i32).push(elem_ptr(op, &fl)?.0);
    launch(&dev, op, f, (n.min(65535 * 32) as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    check(op, &fl, rows)?;
    Ok(out)
}

/// `out = self.clone(); out[..., index[i...], ...] += alpha * src[i...]` over the iteration space
/// `size` (index's shape for scatter_add, source's for index_add).
#[allow(clippy::too_many_arguments)]
fn scatter_launch(op: &str, base: &Tensor, dim: usize, idx: &Tensor, src: &Tensor, size: &[usize], s_idx: &[i64], alpha: f64) -> Result<Option<Tensor>> {
    let Device::Cuda(ord) = base.device() else { return Ok(None) };
    let dt = base.dtype();
    if !scatter_supported(dt) || src.dtype() != dt || size.len() > KMAXD {
        return Ok(None);
    }
    let out = empty(op, ord, dt, base.shape())?;
    copy_into(&out, base)?;
    let total: usize = size.iter().product();
    if total == 0 {
        return Ok(Some(out));
    }
    let mut s_out = istrides(&out);
    s_out[dim] = 0;
    let Some(it) = iter(size, s_idx, &istrides(src), &s_out, out.shape()[dim], out.strides()[dim]) else { return Ok(None) };
    let fl = flag(ord)?;
    let (optr, dev) = elem_ptr(op, &out)?;
    let f = kfunc(&dev, KFile::Scatter, dt, "scatter_add_k")?;
    let mut a = Args::new();
    a.push(optr).push(elem_ptr(op, src)?.0).push(elem_ptr(op, idx)?.0).push(it).push(total as i64).push(alpha).push(elem_ptr(op, &fl)?.0);
    launch(&dev, op, f, (grid_stride_blocks(&dev, total), 1, 1), (256, 1, 1), 0, &mut a)?;
    check(op, &fl, out.shape()[dim])?;
    Ok(Some(out))
}

/// `self.scatter_add(dim, index, src)` on CUDA (shapes checked by the caller).
pub fn scatter_add(base: &Tensor, dim: usize, index: &Tensor, src: &Tensor) -> Result<Option<Tensor>> {
    if !index.device().is_cuda() || !src.device().is_cuda() || base.ndim() == 0 {
        return Ok(None);
    }
    let idx = as_i64(index)?;
    scatter_launch("scatter_add", base, dim, &idx, src, index.shape(), &istrides(&idx), 1.0)
}

/// `self.index_add(dim, index, source, alpha)` on CUDA with a 1-d index (shapes checked by the caller).
pub fn index_add(base: &Tensor, dim: usize, index: &Tensor, source: &Tensor, alpha: f64) -> Result<Option<Tensor>> {
    if !index.device().is_cuda() || !source.device().is_cuda() || index.ndim() > 1 || base.ndim() == 0 || source.ndim() != base.ndim() {
        return Ok(None);
    }
    let idx = as_i64(index)?;
    let mut s_idx = vec![0i64; source.ndim()];
    s_idx[dim] = idx.strides().first().copied().unwrap_or(1) as i64;
    scatter_launch("index_add", base, dim, &idx, source, source.shape(), &s_idx, alpha)
}

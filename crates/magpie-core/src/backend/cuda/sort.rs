//! Host side of kernels/sort.cu: segmented stable sorts of contiguous rows on raw device buffers
//! (storage, layout, dtype), and what is picked from each sorted row (a prefix for sort / argsort
//! / topk, the k-th smallest, the lower median, the mode). Rows of up to 4096 elements sort in
//! shared memory, a block per row; longer rows through a padded scratch buffer (tile sorts,
//! global bitonic merge steps, shared-memory merges). Nothing here reads the device.

use super::amp::Buffer;
use super::device::CudaDevice;
use super::kern::{grid_stride_blocks, kfunc, KFile};
use super::launch::{launch, Args};
use crate::dtype::DType;
use crate::storage::Storage;
use crate::{Error, Result};
use std::sync::Arc;

/// Rows of at most this many elements sort in shared memory (`SORT_TILE` in sort.cu).
pub const TILE: usize = 4096;

/// Scratch bytes one launch group of long rows may use (rows are sorted in groups below it).
const SCRATCH_BUDGET: usize = 256 << 20;

/// What is written per row after the sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// The first `k` of the sorted row (values and positions).
    Prefix(usize),
    /// The k-th smallest (0-based here), at the first position holding its value.
    Kth(usize),
    /// The lower median; NaN ignored or (when absent from the flag) the first NaN's position.
    Median { ignore_nan: bool },
    /// The most frequent value (the smallest on ties), at its last position.
    Mode,
}

impl Select {
    /// Elements written per row.
    pub fn width(self) -> usize {
        match self {
            Select::Prefix(k) => k,
            _ => 1,
        }
    }
    /// The kernel's (mode, param).
    fn code(self) -> (i32, i64) {
        match self {
            Select::Prefix(_) => (0, 0),
            Select::Kth(k) => (1, k as i64),
            Select::Median { ignore_nan } => (2, ignore_nan as i64),
            Select::Mode => (3, 0),
        }
    }
}

/// True for the dtypes the sort kernels are built for (every real dtype).
pub fn supported(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::Bool | DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64)
}

/// The device address of a buffer's first element and its device; checks the dtype and that the
/// elements are contiguous and on a GPU.
pub(super) fn buf_addr(op: &str, what: &str, b: Buffer, want: DType, numel: usize) -> Result<(u64, Arc<CudaDevice>)> {
    let (st, l, dt) = b;
    if dt != want {
        return Err(Error::dtype(op, format!("{what} must be {}, got {dt}", want.name())));
    }
    if !l.is_contiguous() || l.numel() != numel {
        return Err(Error::value(op, format!("{what} must be {numel} contiguous elements, got shape {:?}", l.shape)));
    }
    match st {
        Storage::Cuda(c) => Ok((c.ptr() + (l.offset * dt.size()) as u64, c.cuda_device().clone())),
        Storage::Cpu(_) => Err(Error::device(op, format!("{what} must be on a CUDA device"))),
    }
}

/// Sorts each of the `rows` rows of `n` contiguous elements of `x` (stably; NaN greatest, -0
/// equal to +0; `descending` reverses the order but keeps ties in position order) and writes
/// what `sel` picks: `sel.width()` values per row into `vals` (x's dtype) and their positions in
/// the row into `idx` (int64). `descending` must be false for every `sel` but `Prefix`.
///
/// ```no_run
/// use magpie_core::backend::cuda::sort::{sort_rows, Select};
/// use magpie_core::{DType, Device, Tensor};
/// let x = Tensor::from_vec(vec![3f32, 1.0, 2.0], &[1, 3])?.to_device(Device::Cuda(0))?;
/// let v = Tensor::zeros_on(&[1, 3], DType::F32, Device::Cuda(0))?;
/// let i = Tensor::zeros_on(&[1, 3], DType::I64, Device::Cuda(0))?;
/// {
///     let (xs, vs, is) = (x.storage().read(), v.storage().write(), i.storage().write());
///     sort_rows("sort", (&xs, x.layout(), x.dtype()), (&vs, v.layout(), v.dtype()), (&is, i.layout(), DType::I64), 1, 3, false, Select::Prefix(3))?;
/// }
/// assert_eq!(i.to_vec::<i64>()?, vec![1, 2, 0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn sort_rows(op: &str, x: Buffer, vals: Buffer, idx: Buffer, rows: usize, n: usize, descending: bool, sel: Select) -> Result<()> {
    let dt = x.2;
    if !supported(dt) {
        return Err(Error::dtype(op, format!("no CUDA sort for dtype {}", dt.name())));
    }
    if descending && !matches!(sel, Select::Prefix(_)) {
        return Err(Error::value(op, "only a prefix can be picked from a descending sort"));
    }
    let m = sel.width();
    match sel {
        Select::Prefix(k) if k > n => return Err(Error::index(op, format!("selected index k out of range (k = {k}, row of {n})"))),
        Select::Kth(k) if k >= n => return Err(Error::index(op, format!("selected number k out of range (k = {}, row of {n})", k + 1))),
        _ => {}
    }
    let (xp, dev) = buf_addr(op, "the input", x, dt, rows * n)?;
    let (vp, _) = buf_addr(op, "the values", vals, dt, rows * m)?;
    let (ip, _) = buf_addr(op, "the indices", idx, DType::I64, rows * m)?;
    if rows == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    if n > i32::MAX as usize {
        return Err(Error::value(op, format!("rows of {n} elements are longer than the CUDA sort handles (2^31 - 1)")));
    }
    let (mode, param) = sel.code();
    let ksize = if dt.size() == 8 { 8 } else { 4 };
    // bytes per element of x and of the values
    let (xs, vs) = (dt.size() as u64, dt.size() as u64);
    if n <= TILE {
        let p = n.next_power_of_two();
        let threads = (p / 2).clamp(32, 1024) as u32;
        let f = kfunc(&dev, KFile::Sort, dt, "sort_rows_smem")?;
        // a grid dimension holds 2^31 - 1 blocks: launch in groups of rows
        let group = i32::MAX as usize;
        let mut r0 = 0;
        while r0 < rows {
            let g = (rows - r0).min(group);
            let mut a = Args::new();
            a.push(xp + (r0 * n) as u64 * xs).push(vp + (r0 * m) as u64 * vs).push(ip + (r0 * m) as u64 * 8);
            a.push(n as i64).push(p as i32).push(descending as i32).push(mode).push(m as i64).push(param);
            launch(&dev, op, f, (g as u32, 1, 1), (threads, 1, 1), (p * (ksize + 4)) as u32, &mut a)?;
            r0 += g;
        }
        return Ok(());
    }
    let p = n.next_power_of_two();
    let per_row = p * (ksize + 4);
    let group = (SCRATCH_BUDGET / per_row).clamp(1, 65_535);
    let tiles = (p / TILE) as u32;
    let f_tiles = kfunc(&dev, KFile::Sort, dt, "sort_tiles")?;
    let f_step = kfunc(&dev, KFile::Sort, dt, "sort_global_step")?;
    let f_merge = kfunc(&dev, KFile::Sort, dt, "sort_tile_merge")?;
    let f_emit = kfunc(&dev, KFile::Sort, dt, "sort_emit_rows")?;
    let f_prefix = kfunc(&dev, KFile::Sort, dt, "sort_emit_prefix")?;
    let mut r0 = 0;
    while r0 < rows {
        let g = (rows - r0).min(group);
        // freed on drop after the launches: the allocator reuses blocks in stream order
        let scratch = super::alloc::alloc(&dev, g * per_row)?;
        let gk = scratch.ptr();
        let gp = gk + (g * p * ksize) as u64;
        let xg = xp + (r0 * n) as u64 * xs;
        let mut a = Args::new();
        a.push(xg).push(gk).push(gp).push(n as i64).push(p as i64).push(descending as i32);
        launch(&dev, op, f_tiles, (tiles, g as u32, 1), (1024, 1, 1), 0, &mut a)?;
        let mut k = 2 * TILE;
        while k <= p {
            let mut j = k / 2;
            while j >= TILE {
                let mut a = Args::new();
                a.push(gk).push(gp).push(g as i64).push(p as i64).push(k as i64).push(j as i64);
                launch(&dev, op, f_step, (grid_stride_blocks(&dev, g * p / 2), 1, 1), (256, 1, 1), 0, &mut a)?;
                j /= 2;
            }
            let mut a = Args::new();
            a.push(gk).push(gp).push(p as i64).push(k as i64);
            launch(&dev, op, f_merge, (tiles, g as u32, 1), (1024, 1, 1), 0, &mut a)?;
            k *= 2;
        }
        let (vg, ig) = (vp + (r0 * m) as u64 * vs, ip + (r0 * m) as u64 * 8);
        let mut a = Args::new();
        if mode == 0 {
            a.push(xg).push(gp).push(vg).push(ig).push(g as i64).push(n as i64).push(p as i64).push(m as i64);
            launch(&dev, op, f_prefix, (grid_stride_blocks(&dev, g * m), 1, 1), (256, 1, 1), 0, &mut a)?;
        } else {
            a.push(xg).push(gk).push(gp).push(vg).push(ig).push(n as i64).push(p as i64).push(mode).push(m as i64).push(param);
            launch(&dev, op, f_emit, (g as u32, 1, 1), (256, 1, 1), 0, &mut a)?;
        }
        drop(scratch);
        r0 += g;
    }
    Ok(())
}

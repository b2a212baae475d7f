//! Host side of kernels/scan.cu: inclusive scans along the middle dim of a contiguous
//! `[outer, n, inner]` buffer (cumsum, cumprod, logcumsumexp, cummax, cummin) on raw device
//! buffers (storage, layout, dtype). Lines along the last dim take a block per line (or, for a
//! few long lines, several blocks with a reduce-then-scan pass); lines along another dim a thread
//! per line. Nothing here reads the device.

use super::amp::Buffer;
use super::kern::{grid_stride_blocks, kfunc, KFile};
use super::launch::{launch, Args};
use super::sort::buf_addr;
use crate::dtype::DType;
use crate::{Error, Result};

/// Elements per thread of the row kernels (`SCAN_IT` in scan.cu).
const IT: usize = 4;

/// Bytes of the largest scan state (cummax / cummin: a value and a position).
const STATE_BYTES: usize = 16;

/// The combining operation of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOp {
    /// Running sum (wrapping int64 for integers, double for floats).
    Sum,
    /// Running product.
    Prod,
    /// Running log-sum-exp (floating dtypes).
    LogSumExp,
    /// Running maximum and the last position where it was reached (NaN sticks).
    Max,
    /// Running minimum and the last position where it was reached (NaN sticks).
    Min,
}

impl ScanOp {
    /// True for the ops that also write positions.
    pub fn has_indices(self) -> bool {
        matches!(self, ScanOp::Max | ScanOp::Min)
    }
}

fn kname(op: ScanOp, kind: &str) -> &'static str {
    match (op, kind) {
        (ScanOp::Sum, "rows") => "scan_rows_sum",
        (ScanOp::Sum, "parts") => "scan_parts_sum",
        (ScanOp::Sum, _) => "scan_cols_sum",
        (ScanOp::Prod, "rows") => "scan_rows_prod",
        (ScanOp::Prod, "parts") => "scan_parts_prod",
        (ScanOp::Prod, _) => "scan_cols_prod",
        (ScanOp::LogSumExp, "rows") => "scan_rows_lse",
        (ScanOp::LogSumExp, "parts") => "scan_parts_lse",
        (ScanOp::LogSumExp, _) => "scan_cols_lse",
        (ScanOp::Max, "rows") => "scan_rows_max",
        (ScanOp::Max, "parts") => "scan_parts_max",
        (ScanOp::Max, _) => "scan_cols_max",
        (ScanOp::Min, "rows") => "scan_rows_min",
        (ScanOp::Min, "parts") => "scan_parts_min",
        (ScanOp::Min, _) => "scan_cols_min",
    }
}

/// Scans the `outer * inner` lines of `n` elements of `x` (a contiguous `[outer, n, inner]`
/// buffer) with `sop`, from the end when `reverse`, into `out` (x's dtype, same shape) and, for
/// cummax / cummin, the positions along the line into `idx` (int64, same shape). Floating inputs
/// accumulate in double, integer ones in wrapping int64 (the output dtype wraps them).
///
/// ```no_run
/// use magpie_core::backend::cuda::scan::{scan, ScanOp};
/// use magpie_core::{DType, Device, Tensor};
/// let x = Tensor::from_vec(vec![1f32, 2.0, 3.0], &[3])?.to_device(Device::Cuda(0))?;
/// let y = Tensor::zeros_on(&[3], DType::F32, Device::Cuda(0))?;
/// {
///     let (xs, ys) = (x.storage().read(), y.storage().write());
///     scan("cumsum", (&xs, x.layout(), x.dtype()), (&ys, y.layout(), y.dtype()), None, 1, 3, 1, ScanOp::Sum, false)?;
/// }
/// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 3.0, 6.0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn scan(op: &str, x: Buffer, out: Buffer, idx: Option<Buffer>, outer: usize, n: usize, inner: usize, sop: ScanOp, reverse: bool) -> Result<()> {
    let dt = x.2;
    if !super::sort::supported(dt) {
        return Err(Error::dtype(op, format!("no CUDA scan for dtype {}", dt.name())));
    }
    if sop == ScanOp::LogSumExp && !dt.is_float() {
        return Err(Error::dtype(op, format!("\"logcumsumexp\" not implemented for '{}'", dt.name())));
    }
    let total = outer * n * inner;
    let (xp, dev) = buf_addr(op, "the input", x, dt, total)?;
    let (op_, _) = buf_addr(op, "the output", out, dt, total)?;
    let ip = match (idx, sop.has_indices()) {
        (Some(b), true) => buf_addr(op, "the indices", b, DType::I64, total)?.0,
        (None, false) => 0u64,
        _ => return Err(Error::value(op, "indices are written by cummax / cummin only, and always")),
    };
    if total == 0 {
        return Ok(());
    }
    let rev = reverse as i32;
    if inner > 1 {
        let lines = outer * inner;
        let f = kfunc(&dev, KFile::Scan, dt, kname(sop, "cols"))?;
        let mut a = Args::new();
        a.push(xp).push(op_).push(ip).push(outer as i64).push(n as i64).push(inner as i64).push(rev);
        return launch(&dev, op, f, (grid_stride_blocks(&dev, lines), 1, 1), (256, 1, 1), 0, &mut a);
    }
    let rows = outer;
    let threads = n.div_ceil(IT).next_multiple_of(32).clamp(32, 1024);
    // few long lines: split each over several blocks (a chunk = 4 passes of a 1024-thread block)
    let chunk_len = 1024 * IT * 4;
    let fill = 2 * dev.sm_count as usize;
    let chunks = if rows < fill && n > chunk_len { n.div_ceil(chunk_len) } else { 1 };
    let chunk = if chunks > 1 { chunk_len } else { n };
    let blocks = rows * chunks;
    if blocks > i32::MAX as usize {
        return Err(Error::value(op, format!("{rows} lines are more than the CUDA scan launches at once")));
    }
    let parts = if chunks > 1 { Some(super::alloc::alloc(&dev, blocks * STATE_BYTES)?) } else { None };
    let pp = parts.as_ref().map_or(0u64, |b| b.ptr());
    if chunks > 1 {
        let f = kfunc(&dev, KFile::Scan, dt, kname(sop, "parts"))?;
        let mut a = Args::new();
        a.push(xp).push(n as i64).push(chunk as i64).push(chunks as i64).push(pp).push(rev);
        launch(&dev, op, f, (blocks as u32, 1, 1), (1024, 1, 1), 0, &mut a)?;
    }
    let f = kfunc(&dev, KFile::Scan, dt, kname(sop, "rows"))?;
    let mut a = Args::new();
    a.push(xp).push(op_).push(ip).push(n as i64).push(chunk as i64).push(chunks as i64).push(pp).push(rev);
    let threads = if chunks > 1 { 1024 } else { threads };
    launch(&dev, op, f, (blocks as u32, 1, 1), (threads as u32, 1, 1), 0, &mut a)?;
    drop(parts);
    Ok(())
}

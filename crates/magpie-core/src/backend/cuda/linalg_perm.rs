//! Host side of kernels/linalg.cu on raw device buffers: permutation matrices from LAPACK's
//! 1-based pivots and determinants from LU factors, queued without waiting for the GPU.

use super::device::CudaDevice;
use super::kern::{kfunc, KFile};
use super::launch::{launch_1d, Args};
use super::linalg::Real;
use super::storage::CudaStorage;
use crate::dtype::DType;
use crate::Result;
use std::sync::Arc;

fn dtype(ty: Real) -> DType {
    match ty {
        Real::F32 => DType::F32,
        Real::F64 => DType::F64,
    }
}

/// Writes the `count` row-major `m×m` permutation matrices `P` (with `A = P L U`) of the int64
/// pivots at `piv` (`k` per matrix) into `p`.
#[allow(clippy::too_many_arguments)]
pub fn pivots_to_perm(op: &str, dev: &Arc<CudaDevice>, ty: Real, piv: u64, k: usize, m: usize, count: usize, p: u64) -> Result<()> {
    if count == 0 || m == 0 {
        return Ok(());
    }
    let order = CudaStorage::alloc(dev, DType::I64, count * m)?;
    let f = kfunc(dev, KFile::Linalg, dtype(ty), "lu_order")?;
    let mut a = Args::new();
    a.push(piv).push(count as i64).push(k as i32).push(m as i32).push(order.ptr());
    launch_1d(dev, op, f, count, &mut a)?;
    let f = kfunc(dev, KFile::Linalg, dtype(ty), "lu_perm")?;
    let mut a = Args::new();
    a.push(order.ptr()).push(count as i64).push(m as i32).push(p);
    launch_1d(dev, op, f, count * m * m, &mut a)
}

/// The output buffers of [`lu_dets`]: one element per matrix each.
pub struct Dets {
    pub det: u64,
    pub sign: u64,
    pub logabs: u64,
}

/// Determinant, sign and `log|det|` of `count` `n×n` LU factorizations at `lu` (int64 pivots
/// at `piv`, `n` per matrix).
#[allow(clippy::too_many_arguments)]
pub fn lu_dets(op: &str, dev: &Arc<CudaDevice>, ty: Real, lu: u64, piv: u64, n: usize, count: usize, out: &Dets) -> Result<()> {
    let f = kfunc(dev, KFile::Linalg, dtype(ty), "lu_dets")?;
    let mut a = Args::new();
    a.push(lu).push(piv).push(count as i64).push(n as i32).push(out.det).push(out.sign).push(out.logabs);
    launch_1d(dev, op, f, count, &mut a)
}

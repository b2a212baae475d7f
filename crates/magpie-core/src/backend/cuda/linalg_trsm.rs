//! Triangular solves through cuBLAS `trsm` on raw device buffers: a batch of column-major
//! triangular matrices and right-hand sides, solved in place, queued on the device's stream.

use super::blas::with_handle;
use super::device::{drv, CudaDevice};
use super::linalg::Real;
use crate::Result;
use cudarc::cublas::sys as cs;

/// Solves `T_b X_b = B_b` in place in `b` for `count` column-major `n×n` triangular matrices
/// at `t` (only the `upper` or lower triangle is read; a unit diagonal when `unit`) and `n×nrhs`
/// right-hand sides at `b`, each batch entry stored after the previous one.
#[allow(clippy::too_many_arguments)]
pub fn trsm(op: &str, dev: &CudaDevice, ty: Real, t: u64, b: u64, n: usize, nrhs: usize, count: usize, upper: bool, unit: bool) -> Result<()> {
    if count == 0 || n == 0 || nrhs == 0 {
        return Ok(());
    }
    let side = cs::cublasSideMode_t::CUBLAS_SIDE_LEFT;
    let uplo = if upper { cs::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER } else { cs::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER };
    let trans = cs::cublasOperation_t::CUBLAS_OP_N;
    let diag = if unit { cs::cublasDiagType_t::CUBLAS_DIAG_UNIT } else { cs::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT };
    let (ni, ri) = (n as i32, nrhs as i32);
    let sz = ty.size();
    with_handle(dev, |h| {
        for i in 0..count {
            let (tb, bb) = (t + (i * n * n * sz) as u64, b + (i * n * nrhs * sz) as u64);
            // SAFETY: matrix `i` and its right-hand sides lie inside the caller's buffers; alpha is
            // read from the host (cuBLAS's default pointer mode) before the call returns.
            let st = unsafe {
                match ty {
                    Real::F32 => cs::cublasStrsm_v2(h, side, uplo, trans, diag, ni, ri, &1.0f32, tb as *const f32, ni, bb as *mut f32, ni),
                    Real::F64 => cs::cublasDtrsm_v2(h, side, uplo, trans, diag, ni, ri, &1.0f64, tb as *const f64, ni, bb as *mut f64, ni),
                }
            };
            if st != cs::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                return Err(drv(op, format!("cublas trsm: {st:?}")));
            }
        }
        Ok(())
    })
}

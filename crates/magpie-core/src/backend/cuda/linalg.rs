//! cuSOLVER's dense factorizations on raw device buffers (cudarc's `cusolver` bindings, loaded at
//! run time like cuBLAS): LU (`getrf`/`getrs`), Cholesky (`potrf`), QR (`geqrf`/`orgqr`), the
//! symmetric eigensolver (`syevd`) and the Jacobi SVD (`gesvdj`), each over a batch of
//! column-major matrices stored one after another. Every call is queued on the device's stream;
//! the `info` results stay in device memory, so nothing here waits for the GPU (cuSOLVER itself
//! may, inside `gesvdj` and `syevd`). One handle per device.

use super::device::{drv, CudaDevice};
use super::storage::CudaStorage;
use crate::dtype::DType;
use crate::{Error, Result};
use cudarc::cusolver::{result as sres, sys as ss};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// One cuSOLVER handle (bound to the device's stream) and the 64-bit API's parameter object.
struct Handle(ss::cusolverDnHandle_t, ss::cusolverDnParams_t);
// SAFETY: a cuSOLVER handle may be used from any thread as long as calls on it do not overlap;
// every use holds the HANDLES lock.
unsafe impl Send for Handle {}

static HANDLES: Mutex<Option<HashMap<usize, Handle>>> = Mutex::new(None);

/// Whether libcusolver can be loaded (cudarc panics on a missing library otherwise).
pub fn cusolver_present() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: only tries to open the library.
    *P.get_or_init(|| std::panic::catch_unwind(|| unsafe { ss::is_culib_present() }).unwrap_or(false))
}

/// Runs `f` with the device's handle and parameters (created on first use), holding the lock.
fn with_solver<R>(op: &str, dev: &CudaDevice, f: impl FnOnce(ss::cusolverDnHandle_t, ss::cusolverDnParams_t) -> Result<R>) -> Result<R> {
    if !cusolver_present() {
        return Err(Error::device(op, "cuSOLVER (libcusolver) was not found; add the CUDA toolkit's lib64 to LD_LIBRARY_PATH"));
    }
    let mut g = HANDLES.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if let std::collections::hash_map::Entry::Vacant(slot) = map.entry(dev.ordinal) {
        dev.bind()?;
        let h = std::panic::catch_unwind(sres::dn_create)
            .map_err(|_| Error::device(op, "loading cuSOLVER failed"))?
            .map_err(|e| drv(op, format!("cusolverDnCreate: {e:?}")))?;
        // SAFETY: a fresh handle and the device's live stream (cudarc's stream type is the driver's).
        unsafe { sres::dn_set_stream(h, dev.cu_stream() as _) }.map_err(|e| drv(op, format!("cusolverDnSetStream: {e:?}")))?;
        let mut p = std::ptr::null_mut();
        // SAFETY: writes one parameter object handle into `p`.
        unsafe { ss::cusolverDnCreateParams(&mut p) }.result().map_err(|e| drv(op, format!("cusolverDnCreateParams: {e:?}")))?;
        slot.insert(Handle(h, p));
    }
    let (h, p) = map.get(&dev.ordinal).map(|h| (h.0, h.1)).ok_or_else(|| Error::device(op, "no cuSOLVER handle"))?;
    dev.bind()?;
    f(h, p)
}

/// The real element types cuSOLVER factors here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Real {
    F32,
    F64,
}

impl Real {
    /// `F32` or `F64`, else a dtype error naming `op`.
    pub fn of(op: &str, dt: DType) -> Result<Real> {
        match dt {
            DType::F32 => Ok(Real::F32),
            DType::F64 => Ok(Real::F64),
            d => Err(Error::dtype(op, format!("{op}: cuSOLVER path supports float32 and float64, got {}", d.name()))),
        }
    }
    fn cuda(self) -> ss::cudaDataType {
        match self {
            Real::F32 => ss::cudaDataType::CUDA_R_32F,
            Real::F64 => ss::cudaDataType::CUDA_R_64F,
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Real::F32 => 4,
            Real::F64 => 8,
        }
    }
}

fn check(op: &str, what: &str, st: ss::cusolverStatus_t) -> Result<()> {
    st.result().map_err(|e| drv(op, format!("{what}: {e:?}")))
}

/// Device workspace of `bytes` from the caching allocator (reused in stream order, so it may be
/// dropped as soon as the calls using it are queued).
fn workspace(dev: &Arc<CudaDevice>, bytes: usize) -> Result<CudaStorage> {
    CudaStorage::alloc(dev, DType::U8, bytes.max(1))
}

fn fill(upper: bool) -> ss::cublasFillMode_t {
    if upper {
        ss::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER
    } else {
        ss::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER
    }
}

fn vp(p: u64) -> *mut c_void {
    p as *mut c_void
}

/// LU with partial pivoting of `count` column-major `m×n` matrices at `a` (in place, LAPACK's
/// packing); 1-based int64 pivots (`min(m, n)` per matrix) at `ipiv`, int32 `info` per matrix.
#[allow(clippy::too_many_arguments)]
pub fn getrf(op: &str, dev: &Arc<CudaDevice>, ty: Real, a: u64, m: usize, n: usize, count: usize, ipiv: u64, info: u64) -> Result<()> {
    if count == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    let (mi, ni, lda) = (m as i64, n as i64, m.max(1) as i64);
    let k = m.min(n);
    with_solver(op, dev, |h, p| {
        let (mut dbytes, mut hbytes) = (0usize, 0usize);
        // SAFETY: sizes only; `a` is a valid device buffer of the stated shape.
        check(op, "cusolverDnXgetrf_bufferSize", unsafe { ss::cusolverDnXgetrf_bufferSize(h, p, mi, ni, ty.cuda(), a as *const c_void, lda, ty.cuda(), &mut dbytes, &mut hbytes) })?;
        let work = workspace(dev, dbytes)?;
        let mut host = vec![0u8; hbytes.max(1)];
        for b in 0..count {
            let ab = a + (b * m * n * ty.size()) as u64;
            // SAFETY: each matrix, its pivots and info lie inside the caller's buffers; the
            // workspaces have the sizes cuSOLVER asked for.
            check(op, "cusolverDnXgetrf", unsafe {
                ss::cusolverDnXgetrf(h, p, mi, ni, ty.cuda(), vp(ab), lda, (ipiv + (b * k * 8) as u64) as *mut i64, ty.cuda(), vp(work.ptr()), dbytes, host.as_mut_ptr() as *mut c_void, hbytes, (info + (b * 4) as u64) as *mut i32)
            })?;
        }
        Ok(())
    })
}

/// Solves `op(A_b) X_b = B_b` in place in `b` (`count` column-major `n×nrhs` matrices) from the
/// LU factors of [`getrf`] (`transpose`: `Aᵀ`). `info` gets one int32 per matrix.
#[allow(clippy::too_many_arguments)]
pub fn getrs(op: &str, dev: &Arc<CudaDevice>, ty: Real, lu: u64, ipiv: u64, b: u64, n: usize, nrhs: usize, count: usize, transpose: bool, info: u64) -> Result<()> {
    if count == 0 || n == 0 || nrhs == 0 {
        return Ok(());
    }
    let trans = if transpose { ss::cublasOperation_t::CUBLAS_OP_T } else { ss::cublasOperation_t::CUBLAS_OP_N };
    with_solver(op, dev, |h, p| {
        for i in 0..count {
            // SAFETY: the factors, pivots, right-hand sides and info of matrix `i` lie inside the
            // caller's buffers.
            check(op, "cusolverDnXgetrs", unsafe {
                ss::cusolverDnXgetrs(
                    h,
                    p,
                    trans,
                    n as i64,
                    nrhs as i64,
                    ty.cuda(),
                    (lu + (i * n * n * ty.size()) as u64) as *const c_void,
                    n as i64,
                    (ipiv + (i * n * 8) as u64) as *const i64,
                    ty.cuda(),
                    vp(b + (i * n * nrhs * ty.size()) as u64),
                    n as i64,
                    (info + (i * 4) as u64) as *mut i32,
                )
            })?;
        }
        Ok(())
    })
}

/// Cholesky factorization in place of `count` column-major `n×n` matrices, from and into the
/// `upper` (else lower) triangle; the other triangle is left as it was. int32 `info` per matrix
/// (0, or the order of the first minor that is not positive-definite).
#[allow(clippy::too_many_arguments)]
pub fn potrf(op: &str, dev: &Arc<CudaDevice>, ty: Real, a: u64, n: usize, count: usize, upper: bool, info: u64) -> Result<()> {
    if count == 0 || n == 0 {
        return Ok(());
    }
    let (ni, uplo) = (n as i64, fill(upper));
    with_solver(op, dev, |h, p| {
        let (mut dbytes, mut hbytes) = (0usize, 0usize);
        // SAFETY: sizes only.
        check(op, "cusolverDnXpotrf_bufferSize", unsafe { ss::cusolverDnXpotrf_bufferSize(h, p, uplo, ni, ty.cuda(), a as *const c_void, ni, ty.cuda(), &mut dbytes, &mut hbytes) })?;
        let work = workspace(dev, dbytes)?;
        let mut host = vec![0u8; hbytes.max(1)];
        for b in 0..count {
            // SAFETY: matrix `b` and its info lie inside the caller's buffers.
            check(op, "cusolverDnXpotrf", unsafe {
                ss::cusolverDnXpotrf(h, p, uplo, ni, ty.cuda(), vp(a + (b * n * n * ty.size()) as u64), ni, ty.cuda(), vp(work.ptr()), dbytes, host.as_mut_ptr() as *mut c_void, hbytes, (info + (b * 4) as u64) as *mut i32)
            })?;
        }
        Ok(())
    })
}

/// Householder QR in place of `count` column-major `m×n` matrices (LAPACK `geqrf`: `R` on and
/// above the diagonal, the reflectors below); `min(m, n)` scalars per matrix at `tau`.
#[allow(clippy::too_many_arguments)]
pub fn geqrf(op: &str, dev: &Arc<CudaDevice>, ty: Real, a: u64, m: usize, n: usize, count: usize, tau: u64, info: u64) -> Result<()> {
    if count == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    let (mi, ni, k) = (m as i64, n as i64, m.min(n));
    with_solver(op, dev, |h, p| {
        let (mut dbytes, mut hbytes) = (0usize, 0usize);
        // SAFETY: sizes only.
        check(op, "cusolverDnXgeqrf_bufferSize", unsafe { ss::cusolverDnXgeqrf_bufferSize(h, p, mi, ni, ty.cuda(), a as *const c_void, mi, ty.cuda(), tau as *const c_void, ty.cuda(), &mut dbytes, &mut hbytes) })?;
        let work = workspace(dev, dbytes)?;
        let mut host = vec![0u8; hbytes.max(1)];
        for b in 0..count {
            // SAFETY: matrix `b`, its scalars and info lie inside the caller's buffers.
            check(op, "cusolverDnXgeqrf", unsafe {
                ss::cusolverDnXgeqrf(
                    h,
                    p,
                    mi,
                    ni,
                    ty.cuda(),
                    vp(a + (b * m * n * ty.size()) as u64),
                    mi,
                    ty.cuda(),
                    vp(tau + (b * k * ty.size()) as u64),
                    ty.cuda(),
                    vp(work.ptr()),
                    dbytes,
                    host.as_mut_ptr() as *mut c_void,
                    hbytes,
                    (info + (b * 4) as u64) as *mut i32,
                )
            })?;
        }
        Ok(())
    })
}

/// LAPACK `orgqr`: overwrites each of `count` column-major `m×q` matrices at `a` (the first `k`
/// columns holding reflectors from [`geqrf`], `tau` with `tau_stride` scalars per matrix) with
/// the first `q` columns of `H_0 … H_{k-1}`.
#[allow(clippy::too_many_arguments)]
pub fn orgqr(op: &str, dev: &Arc<CudaDevice>, ty: Real, a: u64, m: usize, q: usize, k: usize, count: usize, tau: u64, tau_stride: usize, info: u64) -> Result<()> {
    if count == 0 || m == 0 || q == 0 {
        return Ok(());
    }
    let (mi, qi, ki) = (m as i32, q as i32, k as i32);
    with_solver(op, dev, |h, _| {
        let mut lwork = 0i32;
        // SAFETY: sizes only.
        let st = unsafe {
            match ty {
                Real::F32 => ss::cusolverDnSorgqr_bufferSize(h, mi, qi, ki, a as *const f32, mi, tau as *const f32, &mut lwork),
                Real::F64 => ss::cusolverDnDorgqr_bufferSize(h, mi, qi, ki, a as *const f64, mi, tau as *const f64, &mut lwork),
            }
        };
        check(op, "cusolverDnorgqr_bufferSize", st)?;
        let work = workspace(dev, lwork.max(1) as usize * ty.size())?;
        for b in 0..count {
            let (ab, tb, ib) = (a + (b * m * q * ty.size()) as u64, tau + (b * tau_stride * ty.size()) as u64, (info + (b * 4) as u64) as *mut i32);
            // SAFETY: matrix `b`, its scalars and info lie inside the caller's buffers; the
            // workspace has the `lwork` elements cuSOLVER asked for.
            let st = unsafe {
                match ty {
                    Real::F32 => ss::cusolverDnSorgqr(h, mi, qi, ki, ab as *mut f32, mi, tb as *const f32, work.ptr() as *mut f32, lwork, ib),
                    Real::F64 => ss::cusolverDnDorgqr(h, mi, qi, ki, ab as *mut f64, mi, tb as *const f64, work.ptr() as *mut f64, lwork, ib),
                }
            };
            check(op, "cusolverDnorgqr", st)?;
        }
        Ok(())
    })
}

/// Eigenvalues (ascending, `n` per matrix at `w`) and eigenvectors (overwriting `a`, as columns)
/// of `count` symmetric column-major `n×n` matrices read from their `upper` (else lower) triangle.
#[allow(clippy::too_many_arguments)]
pub fn syevd(op: &str, dev: &Arc<CudaDevice>, ty: Real, a: u64, n: usize, count: usize, upper: bool, w: u64, info: u64) -> Result<()> {
    if count == 0 || n == 0 {
        return Ok(());
    }
    let (ni, uplo, job) = (n as i64, fill(upper), ss::cusolverEigMode_t::CUSOLVER_EIG_MODE_VECTOR);
    with_solver(op, dev, |h, p| {
        let (mut dbytes, mut hbytes) = (0usize, 0usize);
        // SAFETY: sizes only.
        check(op, "cusolverDnXsyevd_bufferSize", unsafe { ss::cusolverDnXsyevd_bufferSize(h, p, job, uplo, ni, ty.cuda(), a as *const c_void, ni, ty.cuda(), w as *const c_void, ty.cuda(), &mut dbytes, &mut hbytes) })?;
        let work = workspace(dev, dbytes)?;
        let mut host = vec![0u8; hbytes.max(1)];
        for b in 0..count {
            // SAFETY: matrix `b`, its eigenvalues and info lie inside the caller's buffers.
            check(op, "cusolverDnXsyevd", unsafe {
                ss::cusolverDnXsyevd(
                    h,
                    p,
                    job,
                    uplo,
                    ni,
                    ty.cuda(),
                    vp(a + (b * n * n * ty.size()) as u64),
                    ni,
                    ty.cuda(),
                    vp(w + (b * n * ty.size()) as u64),
                    ty.cuda(),
                    vp(work.ptr()),
                    dbytes,
                    host.as_mut_ptr() as *mut c_void,
                    hbytes,
                    (info + (b * 4) as u64) as *mut i32,
                )
            })?;
        }
        Ok(())
    })
}

/// The buffers of one batched SVD: `count` column-major `m×n` inputs at `a` (destroyed),
/// `min(m, n)` singular values each at `s` (descending), left vectors at `u` (`m×m`, or `m×k`
/// when `econ`) and right vectors at `v` (`n×n`, or `n×k`; `V`, not `Vᵀ`), int32 `info` each.
pub struct SvdBufs {
    pub a: u64,
    pub s: u64,
    pub u: u64,
    pub v: u64,
    pub info: u64,
}

/// Singular value decomposition by cuSOLVER's Jacobi method (`gesvdj`; any `m`, `n`).
#[allow(clippy::too_many_arguments)]
pub fn gesvdj(op: &str, dev: &Arc<CudaDevice>, ty: Real, bufs: &SvdBufs, m: usize, n: usize, count: usize, econ: bool) -> Result<()> {
    if count == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    let k = m.min(n);
    let (uc, vc) = if econ { (k, k) } else { (m, n) };
    let (mi, ni, e) = (m as i32, n as i32, econ as i32);
    let job = ss::cusolverEigMode_t::CUSOLVER_EIG_MODE_VECTOR;
    with_solver(op, dev, |h, _| {
        let mut params: ss::gesvdjInfo_t = std::ptr::null_mut();
        // SAFETY: creates one parameter object, destroyed below.
        check(op, "cusolverDnCreateGesvdjInfo", unsafe { ss::cusolverDnCreateGesvdjInfo(&mut params) })?;
        let run = || -> Result<()> {
            let mut lwork = 0i32;
            let SvdBufs { a, s, u, v, info } = *bufs;
            // SAFETY: sizes only.
            let st = unsafe {
                match ty {
                    Real::F32 => ss::cusolverDnSgesvdj_bufferSize(h, job, e, mi, ni, a as *const f32, mi, s as *const f32, u as *const f32, mi, v as *const f32, ni, &mut lwork, params),
                    Real::F64 => ss::cusolverDnDgesvdj_bufferSize(h, job, e, mi, ni, a as *const f64, mi, s as *const f64, u as *const f64, mi, v as *const f64, ni, &mut lwork, params),
                }
            };
            check(op, "cusolverDngesvdj_bufferSize", st)?;
            let work = workspace(dev, lwork.max(1) as usize * ty.size())?;
            let sz = ty.size();
            for b in 0..count {
                let (ab, sb, ub, vb) = (a + (b * m * n * sz) as u64, s + (b * k * sz) as u64, u + (b * m * uc * sz) as u64, v + (b * n * vc * sz) as u64);
                let ib = (info + (b * 4) as u64) as *mut i32;
                // SAFETY: the buffers of matrix `b` lie inside the caller's; the workspace has the
                // `lwork` elements cuSOLVER asked for.
                let st = unsafe {
                    match ty {
                        Real::F32 => ss::cusolverDnSgesvdj(h, job, e, mi, ni, ab as *mut f32, mi, sb as *mut f32, ub as *mut f32, mi, vb as *mut f32, ni, work.ptr() as *mut f32, lwork, ib, params),
                        Real::F64 => ss::cusolverDnDgesvdj(h, job, e, mi, ni, ab as *mut f64, mi, sb as *mut f64, ub as *mut f64, mi, vb as *mut f64, ni, work.ptr() as *mut f64, lwork, ib, params),
                    }
                };
                check(op, "cusolverDngesvdj", st)?;
            }
            Ok(())
        };
        let r = run();
        // SAFETY: `params` was created above and is not used after this.
        let _ = unsafe { ss::cusolverDnDestroyGesvdjInfo(params) };
        r
    })
}

//! GEMM through cuBLAS (loaded at run time): batched products of f32 (TF32 off unless
//! [`set_allow_tf32`]), f64, f16 and bf16 (f32 accumulation), with transposed and broadcast
//! views passed as cuBLAS operation flags and strides instead of copies. Only operands whose
//! strides no cuBLAS layout can express (neither dim of unit stride, batch dims that do not fold
//! into one stride) are copied to contiguous memory first.

use super::device::{device, drv, CudaDevice};
use super::elementwise::storage_of;
use super::ops::{contiguous, empty};
use crate::dtype::DType;
use crate::layout::Layout;
use crate::tensor::Tensor;
use crate::{Device, Error, Result};
use cudarc::cublas::{result as cres, sys as csys};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ALLOW_TF32: AtomicBool = AtomicBool::new(false);

/// `torch.backends.cuda.matmul.allow_tf32 = flag`: lets f32 products use the TF32 tensor cores
/// (about 10 mantissa bits per product). Off by default, as in PyTorch.
pub fn set_allow_tf32(flag: bool) {
    ALLOW_TF32.store(flag, Ordering::Relaxed);
}

/// Whether f32 products may use TF32.
pub fn allow_tf32() -> bool {
    ALLOW_TF32.load(Ordering::Relaxed)
}

/// One cuBLAS handle per device, bound to the device's stream.
struct Handle(csys::cublasHandle_t);
// SAFETY: a cuBLAS handle may be used from any thread as long as calls on it do not overlap;
// every use holds the HANDLES lock.
unsafe impl Send for Handle {}

static HANDLES: Mutex<Option<HashMap<usize, Handle>>> = Mutex::new(None);

/// Whether the cuBLAS library can be loaded (cudarc panics on a missing library otherwise).
fn cublas_present() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: only tries to open the library.
    *P.get_or_init(|| std::panic::catch_unwind(|| unsafe { csys::is_culib_present() }).unwrap_or(false))
}

/// Runs `f` with the device's handle (created on first use).
fn with_handle<R>(dev: &CudaDevice, f: impl FnOnce(csys::cublasHandle_t) -> Result<R>) -> Result<R> {
    if !cublas_present() {
        return Err(Error::device("matmul", "cuBLAS (libcublas) was not found; add the CUDA toolkit's lib64 to LD_LIBRARY_PATH"));
    }
    let mut g = HANDLES.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if !map.contains_key(&dev.ordinal) {
        dev.bind()?;
        let h = std::panic::catch_unwind(cres::create_handle)
            .map_err(|_| Error::device("matmul", "loading cuBLAS failed"))?
            .map_err(|e| drv("matmul", format!("cublasCreate: {e:?}")))?;
        // SAFETY: a fresh handle and the device's live stream (cudarc's stream type is the driver's).
        unsafe { cres::set_stream(h, dev.cu_stream() as _) }.map_err(|e| drv("matmul", format!("cublasSetStream: {e:?}")))?;
        map.insert(dev.ordinal, Handle(h));
    }
    let h = map.get(&dev.ordinal).map(|h| h.0).ok_or_else(|| Error::device("matmul", "no cuBLAS handle"))?;
    dev.bind()?;
    f(h)
}

/// How one row-major operand `X[rows, cols]` (strides `rs`, `cs`) is handed to column-major
/// cuBLAS as `Xᵀ` (`cols x rows`): no transpose with leading dim `rs` when rows are contiguous,
/// transpose with leading dim `cs` when columns are. None when neither fits.
fn mat_op(rows: usize, cols: usize, rs: usize, cs: usize) -> Option<(csys::cublasOperation_t, i64)> {
    use csys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
    if cs == 1 || cols == 1 {
        let ld = if rows == 1 { cols.max(1) } else { rs };
        if ld >= cols.max(1) {
            return Some((CUBLAS_OP_N, ld as i64));
        }
    }
    if rs == 1 || rows == 1 {
        let ld = if cols == 1 { rows.max(1) } else { cs };
        if ld >= rows.max(1) {
            return Some((CUBLAS_OP_T, ld as i64));
        }
    }
    None
}

/// The single stride that walks the batch dims of `l` (all but the last two) in row-major
/// order, if there is one (0 for broadcast batches; anything for one batch).
fn batch_stride(l: &Layout) -> Option<i64> {
    let nd = l.ndim();
    let dims: Vec<(usize, usize)> = (0..nd - 2).map(|d| (l.shape[d], l.strides[d])).filter(|&(s, _)| s != 1).collect();
    if dims.is_empty() {
        return Some(0);
    }
    for w in dims.windows(2) {
        if w[0].1 != w[1].1 * w[1].0 {
            return None;
        }
    }
    dims.last().map(|&(_, s)| s as i64)
}

/// An operand ready for cuBLAS: the tensor (maybe a contiguous copy), its op flag, leading dim
/// and batch stride.
struct Opd {
    t: Tensor,
    op: csys::cublasOperation_t,
    ld: i64,
    bstride: i64,
}

fn prepare(t: &Tensor) -> Result<Opd> {
    let nd = t.ndim();
    let (r, c) = (t.shape()[nd - 2], t.shape()[nd - 1]);
    let l = t.layout();
    if let (Some((op, ld)), Some(bs)) = (mat_op(r, c, l.strides[nd - 2], l.strides[nd - 1]), batch_stride(l)) {
        if ld <= i32::MAX as i64 {
            return Ok(Opd { t: t.clone(), op, ld, bstride: bs });
        }
    }
    let cont = contiguous(t)?;
    Ok(Opd { t: cont, op: csys::cublasOperation_t::CUBLAS_OP_N, ld: c.max(1) as i64, bstride: (r * c) as i64 })
}

/// The device address of a tensor's first element.
fn elem_ptr(op: &str, t: &Tensor) -> Result<u64> {
    let (p, _) = storage_of(op, t)?;
    Ok(p + (t.storage_offset() * t.dtype().size()) as u64)
}

/// `a @ b` for CUDA tensors `a: [batch..., m, k]`, `b: [batch..., k, n]` of equal batch shape and
/// dtype: a new contiguous `[batch..., m, n]`. None for dtypes cuBLAS has no product for here
/// (integers, bool, complex, float8: the caller falls back). Not recorded by autograd.
pub fn batched_matmul(a: &Tensor, b: &Tensor) -> Result<Option<Tensor>> {
    use csys::cublasComputeType_t as Ct;
    use csys::cudaDataType_t as Dt;
    let op = "matmul";
    let dt = a.dtype();
    let (ctype, compute) = match dt {
        DType::F32 => (Dt::CUDA_R_32F, if allow_tf32() { Ct::CUBLAS_COMPUTE_32F_FAST_TF32 } else { Ct::CUBLAS_COMPUTE_32F }),
        DType::F64 => (Dt::CUDA_R_64F, Ct::CUBLAS_COMPUTE_64F),
        DType::F16 => (Dt::CUDA_R_16F, Ct::CUBLAS_COMPUTE_32F),
        DType::BF16 => (Dt::CUDA_R_16BF, Ct::CUBLAS_COMPUTE_32F),
        _ => return Ok(None),
    };
    let Device::Cuda(ord) = a.device() else { return Ok(None) };
    let nd = a.ndim();
    let (m, k, n) = (a.shape()[nd - 2], a.shape()[nd - 1], b.shape()[nd - 1]);
    let mut out_shape = a.shape()[..nd - 2].to_vec();
    out_shape.extend([m, n]);
    let batch: usize = a.shape()[..nd - 2].iter().product();
    if m * n * batch == 0 || k == 0 {
        let z = super::ops::full(ord, &out_shape, crate::scalar::Scalar::Int(0), dt)?;
        return Ok(Some(z));
    }
    if [m, n, k].iter().any(|&v| v > i32::MAX as usize) {
        return Err(Error::value(op, "matrix dims above 2^31 - 1 are not supported on CUDA"));
    }
    let dev = device(op, ord)?;
    let out = empty(op, ord, dt, &out_shape)?;
    let (pa, pb) = (prepare(a)?, prepare(b)?);
    // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ: cuBLAS's first operand is B.
    let (ptr_a, ptr_b, ptr_c) = (elem_ptr(op, &pa.t)?, elem_ptr(op, &pb.t)?, elem_ptr(op, &out)?);
    let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
    let (alpha, beta): (*const c_void, *const c_void) = if dt == DType::F64 {
        (&one64 as *const f64 as _, &zero64 as *const f64 as _)
    } else {
        (&one32 as *const f32 as _, &zero32 as *const f32 as _)
    };
    // cuBLAS limits one strided-batched call to 2^31 - 1 batches... and i32 strides are fine
    // as i64; split huge batches in chunks.
    let chunk = (i32::MAX as usize).min(batch).max(1);
    let esz = dt.size() as u64;
    with_handle(&dev, |h| {
        let mut done = 0usize;
        while done < batch {
            let cnt = chunk.min(batch - done);
            let (oa, ob, oc) = (pa.bstride as u64 * done as u64 * esz, pb.bstride as u64 * done as u64 * esz, (m * n * done) as u64 * esz);
            // SAFETY: the pointers address live device storages (the tensors are held until the
            // call is queued; the allocator reuses memory only in stream order), and the sizes,
            // leading dims and strides describe memory inside them (checked by `prepare`).
            unsafe {
                cres::gemm_strided_batched_ex(
                    h,
                    pb.op,
                    pa.op,
                    n as i32,
                    m as i32,
                    k as i32,
                    alpha,
                    (ptr_b + ob) as *const c_void,
                    ctype,
                    pb.ld as i32,
                    pb.bstride,
                    (ptr_a + oa) as *const c_void,
                    ctype,
                    pa.ld as i32,
                    pa.bstride,
                    beta,
                    (ptr_c + oc) as *mut c_void,
                    ctype,
                    n as i32,
                    (m * n) as i64,
                    cnt as i32,
                    compute,
                    csys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(|e| drv(op, format!("cublasGemmStridedBatchedEx: {e:?}")))?;
            done += cnt;
        }
        Ok(())
    })?;
    Ok(Some(out))
}

/// `c[m, n] = a[m, k] · w[n, k]ᵀ` on raw device buffers (row-major, contiguous rows; `w` is a
/// `Linear` weight), as one cuBLAS call on `dev`'s stream: what fused engines use for their
/// projections. `ab` is the dtype of `a` and `w` (f32, f16, bf16, f64), `out` that of `c` (`ab`, or
/// f32 for f16/bf16 inputs). f32 follows [`allow_tf32`]. Asynchronous; capturable in a CUDA graph.
#[allow(clippy::too_many_arguments)]
pub fn gemm_nt(dev: &CudaDevice, ab: DType, out: DType, m: usize, n: usize, k: usize, a: u64, w: u64, c: u64) -> Result<()> {
    use csys::cublasComputeType_t as Ct;
    use csys::cudaDataType_t as Dt;
    let op = "linear";
    let dt = |d: DType| match d {
        DType::F32 => Some(Dt::CUDA_R_32F),
        DType::F64 => Some(Dt::CUDA_R_64F),
        DType::F16 => Some(Dt::CUDA_R_16F),
        DType::BF16 => Some(Dt::CUDA_R_16BF),
        _ => None,
    };
    let (Some(tab), Some(tc)) = (dt(ab), dt(out)) else {
        return Err(Error::dtype(op, format!("no cuBLAS product of {ab} into {out}")));
    };
    if out != ab && !(out == DType::F32 && matches!(ab, DType::F16 | DType::BF16)) {
        return Err(Error::dtype(op, format!("no cuBLAS product of {ab} into {out}")));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if [m, n, k].iter().any(|&v| v > i32::MAX as usize) || k == 0 {
        return Err(Error::value(op, format!("unsupported GEMM size {m}x{n}x{k}")));
    }
    let compute = match ab {
        DType::F64 => Ct::CUBLAS_COMPUTE_64F,
        DType::F32 if allow_tf32() => Ct::CUBLAS_COMPUTE_32F_FAST_TF32,
        _ => Ct::CUBLAS_COMPUTE_32F,
    };
    let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
    let (alpha, beta): (*const c_void, *const c_void) =
        if ab == DType::F64 { (&one64 as *const f64 as _, &zero64 as *const f64 as _) } else { (&one32 as *const f32 as _, &zero32 as *const f32 as _) };
    with_handle(dev, |h| {
        // Row-major c = a wᵀ is column-major cᵀ[n, m] = w aᵀ: row-major w [n, k] is column-major
        // [k, n] (ld k), taken transposed; row-major a [m, k] is column-major aᵀ [k, m] (ld k).
        // SAFETY: the caller passes device addresses of buffers holding m*k, n*k and m*n elements.
        unsafe {
            cres::gemm_ex(
                h,
                csys::cublasOperation_t::CUBLAS_OP_T,
                csys::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                alpha,
                w as *const c_void,
                tab,
                k as i32,
                a as *const c_void,
                tab,
                k as i32,
                beta,
                c as *mut c_void,
                tc,
                n as i32,
                compute,
                csys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| drv(op, format!("cublasGemmEx: {e:?}")))
    })
}

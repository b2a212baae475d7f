//! GEMM through cuBLAS (loaded at run time): batched products of f32 (TF32 off unless
//! [`set_allow_tf32`]), f64, f16 and bf16 (f32 accumulation), with transposed and broadcast
//! views passed as cuBLAS operation flags and strides instead of copies. Only operands whose
//! strides no cuBLAS layout can express (neither dim of unit stride, batch dims that do not fold
//! into one stride) are copied to contiguous memory first. Large f16/bf16 products whose
//! contiguous extents or leading dims are not multiples of 8 elements run on zero-padded aligned
//! copies (`blas_pad.rs`), since cuBLAS's kernels for such operands are an order of magnitude slower.

use super::blas_pad::{pad_copy, Mat};
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
pub(crate) fn with_handle<R>(dev: &CudaDevice, f: impl FnOnce(csys::cublasHandle_t) -> Result<R>) -> Result<R> {
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
    batched_matmul_to(a, b, a.dtype())
}

/// [`batched_matmul`] with the product stored as `out`: `a`'s dtype, or float32 for f16/bf16
/// operands (cuBLAS accumulates those in float32 anyway; storing the accumulator skips the
/// rounding to 16 bits and the cast a float32 weight's gradient would need). An error for other
/// pairs.
///
/// ```no_run
/// use magpie_core::backend::cuda::blas::batched_matmul_to;
/// use magpie_core::{DType, Device, Tensor};
/// let a = Tensor::from_vec(vec![1f32; 6], &[2, 3])?.to_dtype(DType::BF16)?.to_device(Device::Cuda(0))?;
/// let b = Tensor::from_vec(vec![1f32; 12], &[3, 4])?.to_dtype(DType::BF16)?.to_device(Device::Cuda(0))?;
/// if let Some(c) = batched_matmul_to(&a, &b, DType::F32)? {
///     assert_eq!((c.dtype(), c.shape()), (DType::F32, &[2usize, 4][..]));
/// }
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn batched_matmul_to(a: &Tensor, b: &Tensor, out: DType) -> Result<Option<Tensor>> {
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
    let cout = if out == dt {
        ctype
    } else if out == DType::F32 && matches!(dt, DType::F16 | DType::BF16) {
        Dt::CUDA_R_32F
    } else {
        return Err(Error::dtype(op, format!("no cuBLAS product of {dt} into {out}")));
    };
    let Device::Cuda(ord) = a.device() else { return Ok(None) };
    let nd = a.ndim();
    let (m, k, n) = (a.shape()[nd - 2], a.shape()[nd - 1], b.shape()[nd - 1]);
    let mut out_shape = a.shape()[..nd - 2].to_vec();
    out_shape.extend([m, n]);
    let batch: usize = a.shape()[..nd - 2].iter().product();
    if m * n * batch == 0 || k == 0 {
        let z = super::ops::full(ord, &out_shape, crate::scalar::Scalar::Int(0), out)?;
        return Ok(Some(z));
    }
    if [m, n, k].iter().any(|&v| v > i32::MAX as usize) {
        return Err(Error::value(op, "matrix dims above 2^31 - 1 are not supported on CUDA"));
    }
    let dev = device(op, ord)?;
    let (pa, pb) = (prepare(a)?, prepare(b)?);
    let (ptr_a, ptr_b) = (elem_ptr(op, &pa.t)?, elem_ptr(op, &pb.t)?);
    let mut ga = Gop { ptr: ptr_a, op: pa.op, ld: pa.ld, bstride: pa.bstride };
    let mut gb = Gop { ptr: ptr_b, op: pb.op, ld: pb.ld, bstride: pb.bstride };
    let (mut mm, mut nn, mut kk) = (m, n, k);
    // buffers of padded operands and of a padded product: alive until the call is queued
    let mut keep: Vec<Tensor> = Vec::new();
    let out_padded = match pad_plan(dt, m, n, k, batch, &ga, &gb) {
        Some((mp, np, kp)) => {
            ga = pad_operand(&dev, ord, dt, batch, &ga, (m, k), (mp, kp), &mut keep)?;
            gb = pad_operand(&dev, ord, dt, batch, &gb, (k, n), (kp, np), &mut keep)?;
            (mm, nn, kk) = (mp, np, kp);
            (mp, np) != (m, n)
        }
        None => false,
    };
    // the product's buffer: the result itself, or a padded one the result is cut from
    let prod = if out_padded { empty(op, ord, out, &[batch * mm * nn])? } else { empty(op, ord, out, &out_shape)? };
    let ptr_c = elem_ptr(op, &prod)?;
    gemm_batched(&dev, dt, (ctype, cout, out.size()), compute, batch, (mm, nn, kk), &ga, &gb, ptr_c)?;
    drop(keep);
    if !out_padded {
        return Ok(Some(prod));
    }
    if nn == n && batch == 1 {
        // only rows were added: the result is the buffer's first m rows, already contiguous
        let dims: Vec<i64> = out_shape.iter().map(|&v| v as i64).collect();
        return Ok(Some(prod.narrow(0, 0, (m * n) as i64)?.reshape(&dims)?));
    }
    let res = empty(op, ord, out, &out_shape)?;
    let src = Mat { ptr: ptr_c, bs: (mm * nn) as i64, ld: nn as i64, rows: m, cols: n };
    let dst = Mat { ptr: elem_ptr(op, &res)?, bs: (m * n) as i64, ld: n as i64, rows: m, cols: n };
    pad_copy(&dev, out.size(), batch, &src, &dst)?;
    Ok(Some(res))
}

/// One cuBLAS operand of [`gemm_batched`]: its first element, op flag, leading dim, batch stride.
#[derive(Clone, Copy)]
struct Gop {
    ptr: u64,
    op: csys::cublasOperation_t,
    ld: i64,
    bstride: i64,
}

static PAD_MIN_MACS: AtomicUsize = AtomicUsize::new(1 << 27);

/// Sets the product size (multiply-adds, batch included) from which a misaligned f16/bf16 product
/// runs on zero-padded aligned copies of its operands (0: always); for tests and benchmarks.
#[doc(hidden)]
pub fn set_pad_min_macs(n: usize) {
    PAD_MIN_MACS.store(n, Ordering::Relaxed);
}

/// The product size from which misaligned f16/bf16 products are padded (see [`set_pad_min_macs`]).
pub fn pad_min_macs() -> usize {
    PAD_MIN_MACS.load(Ordering::Relaxed)
}

/// Elements of 16 bytes for the dtypes whose products are padded.
fn pad_align(dt: DType) -> Option<usize> {
    matches!(dt, DType::F16 | DType::BF16).then_some(8)
}

/// The padded extents (m, n, k) of a row-major product `C[m, n] = A[m, k] B[k, n]` whose
/// operands are `a`, `b` as cuBLAS takes them, when the product is misaligned for cuBLAS's 16-byte
/// kernels and large enough for the copies to pay: an extent is padded where it is the contiguous
/// extent of an operand or of the result (n always; k for an untransposed A or transposed B; m for
/// a transposed A); an operand is also copied when its address, leading dim or batch stride is off.
fn pad_plan(dt: DType, m: usize, n: usize, k: usize, batch: usize, a: &Gop, b: &Gop) -> Option<(usize, usize, usize)> {
    use csys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
    let al = pad_align(dt)?;
    if m.saturating_mul(n).saturating_mul(k).saturating_mul(batch) < pad_min_macs() {
        return None;
    }
    let up = |v: usize| v.div_ceil(al) * al;
    let mp = if a.op == CUBLAS_OP_T { up(m) } else { m };
    let kp = if a.op == CUBLAS_OP_N || b.op == CUBLAS_OP_T { up(k) } else { k };
    let np = up(n);
    let ok = |g: &Gop| gop_aligned(g, dt.size(), al, batch);
    if (mp, np, kp) == (m, n, k) && ok(a) && ok(b) {
        return None;
    }
    if [mp, np, kp].iter().any(|&v| v > i32::MAX as usize) {
        return None;
    }
    Some((mp, np, kp))
}

/// Whether an operand's address, leading dim and batch stride suit 16-byte loads.
fn gop_aligned(g: &Gop, esz: usize, al: usize, batch: usize) -> bool {
    g.ptr.is_multiple_of(16) && (g.ld as usize).is_multiple_of(al) && (batch <= 1 || (g.bstride.unsigned_abs() as usize * esz).is_multiple_of(16))
}

/// The operand `g` of logical extents `(rows, cols)` (row-major, as in `A[m, k]`), copied into a
/// new zero-padded contiguous buffer of extents `(prow, pcol)` in `g`'s own memory order, unless
/// it is aligned already and needs no padding. The buffer is pushed to `keep`.
#[allow(clippy::too_many_arguments)]
fn pad_operand(dev: &CudaDevice, ord: usize, dt: DType, batch: usize, g: &Gop, (rows, cols): (usize, usize), (prow, pcol): (usize, usize), keep: &mut Vec<Tensor>) -> Result<Gop> {
    use csys::cublasOperation_t::CUBLAS_OP_N;
    let al = pad_align(dt).unwrap_or(1);
    if (prow, pcol) == (rows, cols) && gop_aligned(g, dt.size(), al, batch) {
        return Ok(*g);
    }
    // in memory, an untransposed operand is `rows` lines of `cols`; a transposed one the reverse
    let (lines, len, plines, plen) = if g.op == CUBLAS_OP_N { (rows, cols, prow, pcol) } else { (cols, rows, pcol, prow) };
    // a broadcast operand (batch stride 0) is copied once and stays broadcast
    let copies = if g.bstride == 0 { 1 } else { batch };
    let buf = empty("matmul", ord, dt, &[copies * plines * plen])?;
    let ptr = elem_ptr("matmul", &buf)?;
    let src = Mat { ptr: g.ptr, bs: g.bstride, ld: g.ld, rows: lines, cols: len };
    let dst = Mat { ptr, bs: (plines * plen) as i64, ld: plen as i64, rows: plines, cols: plen };
    pad_copy(dev, dt.size(), copies, &src, &dst)?;
    keep.push(buf);
    Ok(Gop { ptr, op: g.op, ld: plen as i64, bstride: if copies == 1 && g.bstride == 0 { 0 } else { (plines * plen) as i64 } })
}

/// Row-major `C[b] = A[b] B[b]` for `batch` products of extents `(m, n, k)` through
/// `cublasGemmStridedBatchedEx` (huge batches in chunks), C contiguous at `c` (ld n, stride m n).
/// `types`: the cuBLAS types of A and B, of C, and C's element size.
#[allow(clippy::too_many_arguments)]
fn gemm_batched(
    dev: &CudaDevice,
    dt: DType,
    (ctype, cout, csz): (csys::cudaDataType_t, csys::cudaDataType_t, usize),
    compute: csys::cublasComputeType_t,
    batch: usize,
    (m, n, k): (usize, usize, usize),
    a: &Gop,
    b: &Gop,
    c: u64,
) -> Result<()> {
    let op = "matmul";
    let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
    let (alpha, beta): (*const c_void, *const c_void) = if dt == DType::F64 {
        (&one64 as *const f64 as _, &zero64 as *const f64 as _)
    } else {
        (&one32 as *const f32 as _, &zero32 as *const f32 as _)
    };
    // cuBLAS limits one strided-batched call to 2^31 - 1 batches; split huge batches in chunks.
    let chunk = (i32::MAX as usize).min(batch).max(1);
    let esz = dt.size() as u64;
    with_handle(dev, |h| {
        let mut done = 0usize;
        while done < batch {
            let cnt = chunk.min(batch - done);
            let (oa, ob, oc) = (a.bstride as u64 * done as u64 * esz, b.bstride as u64 * done as u64 * esz, (m * n * done * csz) as u64);
            // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ: cuBLAS's first operand is B.
            // SAFETY: the pointers address live device storages (held by the caller until the
            // call is queued; the allocator reuses memory only in stream order), and the sizes,
            // leading dims and strides describe memory inside them (checked by `prepare` and
            // `pad_operand`).
            unsafe {
                cres::gemm_strided_batched_ex(
                    h,
                    b.op,
                    a.op,
                    n as i32,
                    m as i32,
                    k as i32,
                    alpha,
                    (b.ptr + ob) as *const c_void,
                    ctype,
                    b.ld as i32,
                    b.bstride,
                    (a.ptr + oa) as *const c_void,
                    ctype,
                    a.ld as i32,
                    a.bstride,
                    beta,
                    (c + oc) as *mut c_void,
                    cout,
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
    })
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

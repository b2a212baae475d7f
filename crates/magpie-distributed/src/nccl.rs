//! NCCL through cudarc's bindings (`cudarc::nccl::sys`, loaded at run time): finding the library,
//! one communicator, and the collectives on raw device addresses and a raw stream, with NCCL's
//! error strings in the messages.

use cudarc::driver::sys::CUstream;
use cudarc::nccl::sys;
use magpie_core::{DType, Error, Result};
use std::ffi::{c_void, CStr};

/// The reduction of `all_reduce` / `reduce_scatter` (PyTorch's `ReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    /// The sum divided by the world size (NCCL's `ncclAvg`).
    Avg,
    Max,
    Min,
    Product,
}

impl ReduceOp {
    fn raw(self) -> sys::ncclRedOp_t {
        match self {
            ReduceOp::Sum => sys::ncclRedOp_t::ncclSum,
            ReduceOp::Avg => sys::ncclRedOp_t::ncclAvg,
            ReduceOp::Max => sys::ncclRedOp_t::ncclMax,
            ReduceOp::Min => sys::ncclRedOp_t::ncclMin,
            ReduceOp::Product => sys::ncclRedOp_t::ncclProd,
        }
    }
}

/// NCCL's element type for `dtype` (complex, bool and float8 are not sent through NCCL here).
pub(crate) fn nccl_dtype(op: &str, dtype: DType) -> Result<sys::ncclDataType_t> {
    use sys::ncclDataType_t as N;
    Ok(match dtype {
        DType::F32 => N::ncclFloat32,
        DType::F64 => N::ncclFloat64,
        DType::F16 => N::ncclFloat16,
        DType::BF16 => N::ncclBfloat16,
        DType::I32 => N::ncclInt32,
        DType::I64 => N::ncclInt64,
        DType::I8 => N::ncclInt8,
        DType::U8 => N::ncclUint8,
        d => return Err(Error::dtype(op, format!("NCCL collectives take float32, float64, float16, bfloat16, int8, uint8, int32 or int64 tensors, got {d}"))),
    })
}

/// True when cudarc can load libnccl (it looks for `libnccl.so` and versioned names, not
/// `libnccl.so.2`: see [`crate::launch::prepare_nccl_library_path`]).
pub fn is_available() -> bool {
    // SAFETY: only tries to open the library.
    std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
}

/// Why NCCL cannot be used, as a sentence for errors.
pub(crate) fn unavailable_message() -> String {
    "NCCL was not found: cudarc loads libnccl.so (or libnccl.so.<CUDA major>) from the library path. \
     pip's nvidia-nccl-cu13 ships lib/libnccl.so.2: put a libnccl.so link to it in a folder on LD_LIBRARY_PATH, \
     or set MAGPIE_NCCL_LIB=/path/to/libnccl.so.2 and start the ranks with `magpie train --nproc-per-node N`, which makes the link"
        .into()
}

/// NCCL's version as major.minor.patch.
pub fn version() -> Result<String> {
    if !is_available() {
        return Err(Error::device("nccl", unavailable_message()));
    }
    let mut v = 0;
    // SAFETY: writes one int.
    check("ncclGetVersion", unsafe { sys::ncclGetVersion(&mut v) }, None)?;
    // 2.19+ encodes major*10000 + minor*100 + patch
    Ok(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100))
}

fn error_string(r: sys::ncclResult_t) -> String {
    // SAFETY: NCCL returns a static string for every result code.
    let p = unsafe { sys::ncclGetErrorString(r) };
    if p.is_null() {
        return format!("{r:?}");
    }
    // SAFETY: a NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn last_error(comm: Option<sys::ncclComm_t>) -> String {
    // SAFETY: NCCL keeps the last error message per thread (or per comm); null comm is allowed.
    let p = unsafe { sys::ncclGetLastError(comm.unwrap_or(std::ptr::null_mut())) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated string owned by NCCL.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn check(op: &str, r: sys::ncclResult_t, comm: Option<sys::ncclComm_t>) -> Result<()> {
    match r {
        sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress => Ok(()),
        r => {
            let last = last_error(comm);
            let detail = if last.is_empty() { String::new() } else { format!(" ({last})") };
            Err(Error::device(op, format!("NCCL error: {}{detail}", error_string(r))))
        }
    }
}

/// A new NCCL unique id (rank 0 makes it and the rendezvous hands it to the others).
pub fn unique_id() -> Result<Vec<u8>> {
    if !is_available() {
        return Err(Error::device("init_process_group", unavailable_message()));
    }
    let mut id = sys::ncclUniqueId { internal: [0; 128] };
    // SAFETY: writes the 128-byte id.
    check("ncclGetUniqueId", unsafe { sys::ncclGetUniqueId(&mut id) }, None)?;
    Ok(id.internal.iter().map(|&c| c as u8).collect())
}

/// One NCCL communicator (a rank's member of the job's clique).
pub(crate) struct Comm {
    raw: sys::ncclComm_t,
}

// SAFETY: an NCCL communicator may be used from any thread; this crate issues collectives from
// one thread at a time (the process group's lock) and only aborts or polls errors from another,
// which NCCL allows.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

impl Comm {
    /// `ncclCommInitRank` on the current device (its context must be current on this thread).
    /// Blocks until every rank has called it.
    pub(crate) fn init(world: usize, id: &[u8], rank: usize) -> Result<Comm> {
        let op = "init_process_group";
        if id.len() != 128 {
            return Err(Error::value(op, format!("an NCCL unique id has 128 bytes, the rendezvous gave {}", id.len())));
        }
        let mut uid = sys::ncclUniqueId { internal: [0; 128] };
        for (d, s) in uid.internal.iter_mut().zip(id) {
            *d = *s as std::ffi::c_char;
        }
        let mut raw: sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `raw` receives the new communicator; the id came from ncclGetUniqueId on rank 0.
        check("ncclCommInitRank", unsafe { sys::ncclCommInitRank(&mut raw, world as i32, uid, rank as i32) }, None)?;
        Ok(Comm { raw })
    }

    /// The raw handle (for error polling and abort from the watchdog).
    pub(crate) fn raw(&self) -> sys::ncclComm_t {
        self.raw
    }

    /// `ncclAllReduce` of `count` elements, `send` into `recv` (may be the same address).
    ///
    /// # Safety
    /// Both addresses must hold `count` elements of `dtype` of live memory of this comm's device,
    /// ordered on `stream` after their writers.
    pub(crate) unsafe fn all_reduce(&self, send: u64, recv: u64, count: usize, dtype: DType, op: ReduceOp, stream: CUstream) -> Result<()> {
        let dt = nccl_dtype("all_reduce", dtype)?;
        // SAFETY: the caller's contract.
        let r = unsafe { sys::ncclAllReduce(send as *const c_void, recv as *mut c_void, count, dt, op.raw(), self.raw, stream as sys::cudaStream_t) };
        check("all_reduce", r, Some(self.raw))
    }

    /// `ncclBroadcast` of `count` elements from `root`'s `send` into every rank's `recv`.
    ///
    /// # Safety
    /// As [`Comm::all_reduce`].
    pub(crate) unsafe fn broadcast(&self, send: u64, recv: u64, count: usize, dtype: DType, root: usize, stream: CUstream) -> Result<()> {
        let dt = nccl_dtype("broadcast", dtype)?;
        // SAFETY: the caller's contract.
        let r = unsafe { sys::ncclBroadcast(send as *const c_void, recv as *mut c_void, count, dt, root as i32, self.raw, stream as sys::cudaStream_t) };
        check("broadcast", r, Some(self.raw))
    }

    /// `ncclAllGather`: `send_count` elements from each rank into `recv` (world × send_count).
    ///
    /// # Safety
    /// As [`Comm::all_reduce`], with `recv` holding `world * send_count` elements.
    pub(crate) unsafe fn all_gather(&self, send: u64, recv: u64, send_count: usize, dtype: DType, stream: CUstream) -> Result<()> {
        let dt = nccl_dtype("all_gather", dtype)?;
        // SAFETY: the caller's contract.
        let r = unsafe { sys::ncclAllGather(send as *const c_void, recv as *mut c_void, send_count, dt, self.raw, stream as sys::cudaStream_t) };
        check("all_gather", r, Some(self.raw))
    }

    /// `ncclReduceScatter`: reduces `send` (world × recv_count) and leaves block `rank` in `recv`.
    ///
    /// # Safety
    /// As [`Comm::all_reduce`], with `send` holding `world * recv_count` elements.
    pub(crate) unsafe fn reduce_scatter(&self, send: u64, recv: u64, recv_count: usize, dtype: DType, op: ReduceOp, stream: CUstream) -> Result<()> {
        let dt = nccl_dtype("reduce_scatter", dtype)?;
        // SAFETY: the caller's contract.
        let r = unsafe { sys::ncclReduceScatter(send as *const c_void, recv as *mut c_void, recv_count, dt, op.raw(), self.raw, stream as sys::cudaStream_t) };
        check("reduce_scatter", r, Some(self.raw))
    }
}

/// An asynchronous error NCCL has recorded on `comm` (a network failure, a remote rank's abort).
pub(crate) fn async_error(comm: sys::ncclComm_t) -> Option<String> {
    let mut r = sys::ncclResult_t::ncclSuccess;
    // SAFETY: a live communicator; NCCL allows polling from another thread.
    let q = unsafe { sys::ncclCommGetAsyncError(comm, &mut r) };
    match (q, r) {
        (sys::ncclResult_t::ncclSuccess, sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress) => None,
        (sys::ncclResult_t::ncclSuccess, r) => Some(format!("{}: {}", error_string(r), last_error(Some(comm)))),
        (q, _) => Some(format!("ncclCommGetAsyncError failed: {}", error_string(q))),
    }
}

/// `ncclCommAbort`: stops the communicator's kernels and frees it (any thread).
///
/// # Safety
/// `comm` must be live and not used again.
pub(crate) unsafe fn abort(comm: sys::ncclComm_t) {
    // SAFETY: the caller's contract.
    let _ = unsafe { sys::ncclCommAbort(comm) };
}

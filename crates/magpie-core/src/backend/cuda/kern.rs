//! Loading the op-family kernels (reduce, softmax, norm, index, scatter, RNG): each `.cu` file
//! is compiled once per (device, dtype) as one module with the backend preamble and
//! `kcommon.cuh` in front and `T` defined as the dtype's C type; all kernels of the module come
//! from that one compilation (NVRTC's disk cache is shared with the elementwise kernels).
//! Also the small helpers the host side of these kernels shares: element pointers, the `Dims`
//! kernel parameter, dim coalescing.

use super::compile::cubin;
use super::device::{drv, CudaDevice, Func};
use super::elementwise::{ctype, storage_of};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};
use cudarc::driver::result as dres;
use std::collections::HashMap;
use std::sync::Mutex;

const KCOMMON: &str = include_str!("kernels/kcommon.cuh");

/// A kernel source file of the op families.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum KFile {
    Reduce,
    Softmax,
    Norm,
    Index,
    Scatter,
    Rng,
    /// Fused optimizer steps (`optim.rs`).
    Optim,
    /// layer_norm backward (`norm_bwd.rs`).
    NormBwd,
    /// cross_entropy forward and backward (`loss.rs`).
    Loss,
    /// Flash attention prefill and decode (`attention.rs`).
    Attention,
    /// Flash attention backward (`attention_bwd.rs`).
    AttentionBwd,
    /// Float32 flash attention forward and backward, register-tiled (`attention_f32.rs`).
    AttentionF32,
    /// Loss scaling for mixed precision (`amp.rs`).
    Amp,
    /// Quantized decode GEMV (`quant.rs`).
    Quant,
    /// Padded copies of GEMM operands (`blas_pad.rs`).
    GemmPad,
    /// Segmented sorts and selection (`sort.rs`).
    Sort,
    /// Scans along a dim (`scan.rs`).
    Scan,
    /// Fixed-index row gathers, scatter-adds and tap maps (`rows.rs`).
    Rows,
    /// Advanced indexing by storage offsets, sorted-run scatters, nonzero (`adv_index.rs`).
    AdvIndex,
    /// LU pivots to permutations, determinants (`linalg_perm.rs`).
    Linalg,
    /// Residual add + layer_norm forward and backward (`add_norm.rs`).
    AddNorm,
}

impl KFile {
    fn name(self) -> &'static str {
        match self {
            KFile::Reduce => "reduce",
            KFile::Softmax => "softmax",
            KFile::Norm => "norm",
            KFile::Index => "index",
            KFile::Scatter => "scatter",
            KFile::Rng => "rng",
            KFile::Optim => "optim",
            KFile::NormBwd => "norm_bwd",
            KFile::Loss => "loss",
            KFile::Attention => "attention",
            KFile::AttentionBwd => "attention_bwd",
            KFile::AttentionF32 => "attention_f32",
            KFile::Amp => "amp",
            KFile::Quant => "quant_gemv",
            KFile::GemmPad => "gemm_pad",
            KFile::Sort => "sort",
            KFile::Scan => "scan",
            KFile::Rows => "rows",
            KFile::AdvIndex => "adv_index",
            KFile::Linalg => "linalg",
            KFile::AddNorm => "add_norm",
        }
    }
    fn body(self) -> &'static str {
        match self {
            KFile::Reduce => include_str!("kernels/reduce.cu"),
            KFile::Softmax => include_str!("kernels/softmax.cu"),
            KFile::Norm => include_str!("kernels/norm.cu"),
            KFile::Index => include_str!("kernels/index.cu"),
            KFile::Scatter => include_str!("kernels/scatter.cu"),
            KFile::Rng => include_str!("kernels/rng.cu"),
            KFile::Optim => include_str!("kernels/optim.cu"),
            KFile::NormBwd => include_str!("kernels/norm_bwd.cu"),
            KFile::Loss => include_str!("kernels/loss.cu"),
            KFile::Attention => concat!(include_str!("kernels/attention_common.cuh"), include_str!("kernels/attention.cu")),
            KFile::AttentionBwd => concat!(include_str!("kernels/attention_common.cuh"), include_str!("kernels/attention_bwd.cu")),
            KFile::AttentionF32 => concat!(include_str!("kernels/attention_common.cuh"), include_str!("kernels/attention_f32.cu")),
            KFile::Amp => include_str!("kernels/amp.cu"),
            KFile::Quant => include_str!("kernels/quant_gemv.cu"),
            KFile::GemmPad => include_str!("kernels/gemm_pad.cu"),
            KFile::Sort => include_str!("kernels/sort.cu"),
            KFile::Scan => include_str!("kernels/scan.cu"),
            KFile::Rows => include_str!("kernels/rows.cu"),
            KFile::AdvIndex => include_str!("kernels/adv_index.cu"),
            KFile::Linalg => include_str!("kernels/linalg.cu"),
            KFile::AddNorm => include_str!("kernels/add_norm.cu"),
        }
    }
}

/// A loaded module handle (modules stay loaded for the life of the process).
#[derive(Clone, Copy)]
struct Module(cudarc::driver::sys::CUmodule);
// SAFETY: a CUmodule is a driver handle usable from any thread with its context current.
unsafe impl Send for Module {}

type Key = (usize, KFile, DType);
static MODULES: Mutex<Option<HashMap<Key, Module>>> = Mutex::new(None);
static FUNCS: Mutex<Option<HashMap<(Key, &'static str), Func>>> = Mutex::new(None);

/// The kernel `kernel` of `file` instantiated for `dt` on `dev` (compiled on first use).
pub fn kfunc(dev: &CudaDevice, file: KFile, dt: DType, kernel: &'static str) -> Result<Func> {
    let key = (dev.ordinal, file, dt);
    if let Some(f) = FUNCS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).get(&(key, kernel)) {
        return Ok(*f);
    }
    let ct = ctype(dt).ok_or_else(|| Error::unsupported(kernel, format!("no CUDA kernel for dtype {}", dt.name())))?;
    let module = {
        let mut mods = MODULES.lock().unwrap_or_else(|e| e.into_inner());
        let mods = mods.get_or_insert_with(HashMap::new);
        match mods.get(&key) {
            Some(m) => *m,
            None => {
                let name = format!("{}_{}", file.name(), ct);
                let src = format!("{}\n{}\n#define T {}\n{}", super::compile::PREAMBLE, KCOMMON, ct, file.body());
                let bin = cubin(dev, &name, &src)?;
                dev.bind()?;
                // SAFETY: `bin` is a complete cubin image produced by NVRTC for this device.
                let m = unsafe { dres::module::load_data(bin.as_ptr() as *const _) }.map_err(|e| drv(kernel, format!("loading the kernels: {e}")))?;
                mods.insert(key, Module(m));
                Module(m)
            }
        }
    };
    let cname = std::ffi::CString::new(kernel).map_err(|_| Error::value(kernel, "kernel name contains NUL"))?;
    // SAFETY: the module is loaded and never unloaded.
    let f = unsafe { dres::module::get_function(module.0, cname) }.map_err(|e| drv(kernel, format!("kernel not found in its module: {e}")))?;
    let f = Func(f);
    FUNCS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert((key, kernel), f);
    Ok(f)
}

/// The device address of `t`'s first element, and its device.
pub fn elem_ptr(op: &str, t: &Tensor) -> Result<(u64, std::sync::Arc<CudaDevice>)> {
    let (p, dev) = storage_of(op, t)?;
    Ok((p + (t.storage_offset() * t.dtype().size()) as u64, dev))
}

/// Most dims of a [`KDims`] (`MP_RMAXD` in kcommon.cuh).
pub const KMAXD: usize = 8;

/// The `Dims` kernel parameter: sizes and strides (in elements) mapping a row-major linear index
/// to an element offset.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KDims {
    pub n: i32,
    pub pad: i32,
    pub size: [i64; KMAXD],
    pub stride: [i64; KMAXD],
}

impl KDims {
    /// Most dims.
    pub const MAXN: usize = KMAXD;
    /// No dims (offset 0 for index 0).
    pub fn empty() -> KDims {
        KDims { n: 0, pad: 0, size: [1; KMAXD], stride: [0; KMAXD] }
    }
    /// From (size, stride) pairs, outermost first; None when there are more than [`KMAXD`].
    pub fn new(d: &[(usize, usize)]) -> Option<KDims> {
        if d.len() > KMAXD {
            return None;
        }
        let mut k = KDims { n: d.len() as i32, pad: 0, size: [1; KMAXD], stride: [0; KMAXD] };
        for (i, &(s, st)) in d.iter().enumerate() {
            k.size[i] = s as i64;
            k.stride[i] = st as i64;
        }
        Some(k)
    }
}

/// Drops size-1 dims and merges each dim into its predecessor when they walk memory as one
/// (`stride[i] == stride[i + 1] * size[i + 1]`), keeping the row-major order of the linear index.
pub fn coalesce(d: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &(s, st) in d {
        if s == 1 {
            continue;
        }
        if let Some(last) = out.last_mut() {
            if last.1 == st * s {
                *last = (last.0 * s, st);
                continue;
            }
        }
        out.push((s, st));
    }
    out
}

/// Blocks for a grid-stride loop over `n` items with 256 threads per block.
pub fn grid_stride_blocks(dev: &CudaDevice, n: usize) -> u32 {
    (n.div_ceil(256).max(1)).min(dev.sm_count as usize * 8) as u32
}

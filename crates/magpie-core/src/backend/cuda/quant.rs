//! Host side of the quantized decode GEMV (`kernels/quant_gemv.cu`): `y[m, n] = x[m, k] · Wᵀ`
//! for 1..=8 activation rows, W `[n, k]` in GGUF blocks (Q8_0, Q4_0, Q4_K, Q6_K) on the device,
//! x and y f32, f16 or bf16 (y in x's dtype), f32 accumulation; and W's dequantization to
//! f32/f16/bf16 on the device (for prefill-sized inputs, multiplied by cuBLAS). On raw device
//! buffers, for engines that own them, and on `CudaStorage`s with x's layout.
//!
//! Numerics: f32 activations get f32 products of the exact weights (as the CPU kernels). Q4_K
//! with f16/bf16 activations takes llama.cpp's integer route (see [`Q8_MAX_SHARED`]): x rounded
//! to 8-bit codes per 32 values, `dp4a` dot products; `docs/gguf.md` derives its error.

use super::device::CudaDevice;
use super::kern::{kfunc, KFile};
use super::launch::{launch, launch_pdl, Args};
use super::storage::CudaStorage;
use crate::backend::cpu::quant::QuantType;
use crate::{DType, Error, Layout, Result};

/// The most activation rows one launch takes.
pub const MAX_ROWS: usize = 8;
/// Most threads per block (`QG_MAXW` warps in the kernel).
const MAX_THREADS: usize = 256;

/// One-row launches of matrices with at least this many rows take 8 weight rows per thread block
/// (the `_r1w8` kernels: x's loads and conversions shared by twice the rows; blocks stay plentiful).
const TALL: usize = 32768;

/// Q4_K with f16/bf16 activations runs the 8-bit-activation kernels (`quant_gemv_q4_k_q8_r*`)
/// when x's codes fit in this much shared memory (`m * k / 64` records of 80 bytes, i.e.
/// `m * k <= 39321`: k up to 32768 for one row, 4096 for 8); larger inputs take the f32 kernels.
pub const Q8_MAX_SHARED: usize = 48 * 1024;

/// Bytes of shared memory the 8-bit-activation Q4_K kernel needs for `m` rows of `k` values.
fn q8_shared(m: usize, k: usize) -> usize {
    m * (k / 64) * 80
}

/// Weight rows per thread block for `m` activation rows and `n` weight rows (`QG_NR` in the
/// kernel, 8 for the `_r1w8` kernels).
fn rows_per_block(m: usize, n: usize) -> usize {
    match m {
        1 if n >= TALL => 8,
        1 | 2 => 4,
        _ => 2,
    }
}

/// Weights per thread-unit of work (`ELEMS / UNITS` in the kernel).
fn unit_elems(ty: QuantType) -> usize {
    match ty {
        QuantType::Q4_K => 64,
        QuantType::Q6_K | QuantType::Q8_0 | QuantType::Q4_0 => 32,
    }
}

/// What one GEMV computes.
#[derive(Clone, Copy, Debug)]
pub struct QuantGemv {
    /// W's block format.
    pub ty: QuantType,
    /// x's and y's dtype.
    pub dtype: DType,
    /// Activation rows (1..=[`MAX_ROWS`]).
    pub m: usize,
    /// Output features (W's rows).
    pub n: usize,
    /// Input features (W's columns; a multiple of the block size).
    pub k: usize,
}

const NAMES: [[&str; MAX_ROWS]; 4] = [
    ["quant_gemv_q8_0_r1", "quant_gemv_q8_0_r2", "quant_gemv_q8_0_r3", "quant_gemv_q8_0_r4", "quant_gemv_q8_0_r5", "quant_gemv_q8_0_r6", "quant_gemv_q8_0_r7", "quant_gemv_q8_0_r8"],
    ["quant_gemv_q4_0_r1", "quant_gemv_q4_0_r2", "quant_gemv_q4_0_r3", "quant_gemv_q4_0_r4", "quant_gemv_q4_0_r5", "quant_gemv_q4_0_r6", "quant_gemv_q4_0_r7", "quant_gemv_q4_0_r8"],
    ["quant_gemv_q4_k_r1", "quant_gemv_q4_k_r2", "quant_gemv_q4_k_r3", "quant_gemv_q4_k_r4", "quant_gemv_q4_k_r5", "quant_gemv_q4_k_r6", "quant_gemv_q4_k_r7", "quant_gemv_q4_k_r8"],
    ["quant_gemv_q6_k_r1", "quant_gemv_q6_k_r2", "quant_gemv_q6_k_r3", "quant_gemv_q6_k_r4", "quant_gemv_q6_k_r5", "quant_gemv_q6_k_r6", "quant_gemv_q6_k_r7", "quant_gemv_q6_k_r8"],
];

const Q8_NAMES: [&str; MAX_ROWS] = [
    "quant_gemv_q4_k_q8_r1",
    "quant_gemv_q4_k_q8_r2",
    "quant_gemv_q4_k_q8_r3",
    "quant_gemv_q4_k_q8_r4",
    "quant_gemv_q4_k_q8_r5",
    "quant_gemv_q4_k_q8_r6",
    "quant_gemv_q4_k_q8_r7",
    "quant_gemv_q4_k_q8_r8",
];

const TALL_NAMES: [&str; 4] = ["quant_gemv_q8_0_r1w8", "quant_gemv_q4_0_r1w8", "quant_gemv_q4_k_r1w8", "quant_gemv_q6_k_r1w8"];

impl QuantGemv {
    /// Checks the sizes and dtype; returns W's byte size.
    pub fn check(&self) -> Result<usize> {
        let op = "quant_gemv";
        if !(1..=MAX_ROWS).contains(&self.m) {
            return Err(Error::shape(op, format!("takes 1 to {MAX_ROWS} activation rows, got {}", self.m)));
        }
        if !matches!(self.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::dtype(op, format!("activations must be float32, float16 or bfloat16, got {}", self.dtype)));
        }
        if self.n > i32::MAX as usize || self.k > i32::MAX as usize {
            return Err(Error::shape(op, format!("{}x{} is too large for 32-bit row and column indices", self.n, self.k)));
        }
        self.ty.matrix_bytes(op, self.n, self.k)
    }

    /// True when this GEMV runs on 8-bit activation codes (Q4_K, f16/bf16 x, codes fitting in
    /// [`Q8_MAX_SHARED`]); false when it multiplies the exact weights by x in f32.
    pub fn rounds_activations(&self) -> bool {
        self.ty == QuantType::Q4_K && self.dtype != DType::F32 && q8_shared(self.m, self.k) <= Q8_MAX_SHARED
    }

    fn kernel(&self) -> &'static str {
        let t = match self.ty {
            QuantType::Q8_0 => 0,
            QuantType::Q4_0 => 1,
            QuantType::Q4_K => 2,
            QuantType::Q6_K => 3,
        };
        if rows_per_block(self.m, self.n) == 8 {
            return TALL_NAMES[t];
        }
        NAMES[t][self.m - 1]
    }
}

/// Queues the GEMV on `dev`'s stream: `w` (W's blocks), `x` (m rows of k values, row stride
/// `ldx` elements), `y` (m rows of n values, row stride `ldy`). x's rows are read with 16-byte
/// loads: `x` must be 16-byte aligned and `ldx` a multiple of 8 (an error otherwise).
///
/// # Safety
/// `w` must address W's `n * k / block * block_bytes` bytes (16-byte aligned for Q4_K, 2-byte
/// for the others), `x` and `y` live device memory of `dev` of the given rows, strides and dtype;
/// `y` must not overlap `x` or `w`.
pub unsafe fn quant_gemv_raw(dev: &CudaDevice, g: &QuantGemv, w: u64, x: u64, ldx: usize, y: u64, ldy: usize) -> Result<()> {
    // SAFETY: the caller's contract is this function's.
    unsafe { gemv(dev, g, w, x, ldx, y, ldy, false) }
}

/// [`quant_gemv_raw`] launched as a programmatic dependent launch (on sm_90 and newer; a plain
/// launch before): the kernel may start while the previous kernel on the stream drains, loads
/// its first weights, then waits for that kernel's grid before reading x or writing y. For
/// chains of GEMVs (a decode step's layers, captured in a CUDA graph or launched back to back),
/// where it hides most of each launch's start behind the previous kernel's tail.
///
/// # Safety
/// As [`quant_gemv_raw`], and W must not be written by a kernel that may still run when this one
/// starts (W is read before waiting): the kernel queued just before it and, when that one was
/// itself launched this way, the one before it, and so on.
pub unsafe fn quant_gemv_raw_pdl(dev: &CudaDevice, g: &QuantGemv, w: u64, x: u64, ldx: usize, y: u64, ldy: usize) -> Result<()> {
    // SAFETY: the caller's contract is this function's.
    unsafe { gemv(dev, g, w, x, ldx, y, ldy, dev.arch.0 >= 9) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn gemv(dev: &CudaDevice, g: &QuantGemv, w: u64, x: u64, ldx: usize, y: u64, ldy: usize, pdl: bool) -> Result<()> {
    let op = "quant_gemv";
    g.check()?;
    let align = if g.ty == QuantType::Q4_K { 16 } else { 2 };
    if !w.is_multiple_of(align) {
        return Err(Error::value(op, format!("{} weights must be {align}-byte aligned on the device", g.ty)));
    }
    if !x.is_multiple_of(16) || !ldx.is_multiple_of(8) || !y.is_multiple_of(g.dtype.size() as u64) || ldx < g.k || ldy < g.n {
        return Err(Error::value(op, "x must be 16-byte aligned with a row stride that is a multiple of 8 and at least k, y aligned to its dtype with a row stride of at least n"));
    }
    if g.n == 0 {
        return Ok(());
    }
    let launcher = if pdl { launch_pdl } else { launch };
    let mut a = Args::new();
    a.push(w).push(x).push(y).push(g.n as i32).push(g.k as i32).push(ldx as i64).push(ldy as i64);
    if g.rounds_activations() {
        // persistent grid: two blocks of 8 warps per SM at most, a warp per 2 rows at a time
        let f = kfunc(dev, KFile::Quant, g.dtype, Q8_NAMES[g.m - 1])?;
        let blocks = g.n.div_ceil(2).div_ceil(8).clamp(1, 2 * dev.sm_count.max(1) as usize);
        return launcher(dev, op, f, (blocks as u32, 1, 1), (256, 1, 1), q8_shared(g.m, g.k) as u32, &mut a);
    }
    let f = kfunc(dev, KFile::Quant, g.dtype, g.kernel())?;
    // threads: a row's units in one pass where they fit in 256 (K up to 8192), a few passes above
    let threads = (g.k / unit_elems(g.ty)).next_multiple_of(32).clamp(32, MAX_THREADS);
    let blocks = g.n.div_ceil(rows_per_block(g.m, g.n));
    launcher(dev, op, f, (blocks as u32, 1, 1), (threads as u32, 1, 1), 0, &mut a)
}

/// [`quant_gemv_raw`] on storages: `w` holds W's blocks (u8), `x` the activations at
/// `x_layout` (`[m, k]`, unit column stride), `y` m x n contiguous values of x's dtype.
pub fn quant_gemv(g: &QuantGemv, w: &CudaStorage, x: &CudaStorage, x_layout: &Layout, y: &CudaStorage) -> Result<()> {
    let op = "quant_gemv";
    let wbytes = g.check()?;
    if w.dtype() != DType::U8 || w.len() != wbytes {
        return Err(Error::value(op, format!("W must be {wbytes} bytes (u8 storage), got {} elements of {}", w.len(), w.dtype())));
    }
    if x.dtype() != g.dtype || y.dtype() != g.dtype {
        return Err(Error::dtype(op, format!("x and y must be {}, got {} and {}", g.dtype, x.dtype(), y.dtype())));
    }
    let (shape, strides) = (&x_layout.shape[..], &x_layout.strides[..]);
    if shape != [g.m, g.k] || (g.k > 1 && strides[1] != 1) || (g.m > 1 && strides[0] < g.k) {
        return Err(Error::shape(op, format!("x must be [{}, {}] with unit column stride, got shape {shape:?} strides {strides:?}", g.m, g.k)));
    }
    let ldx = if g.m > 1 { strides[0] } else { g.k };
    if x_layout.offset + (g.m - 1) * ldx + g.k > x.len() || y.len() < g.m * g.n {
        return Err(Error::shape(op, "x's layout or y lies outside its storage"));
    }
    if w.device() != x.device() || y.device() != x.device() {
        return Err(Error::device(op, "W, x and y must be on one device"));
    }
    if y.ptr() == x.ptr() || y.ptr() == w.ptr() {
        return Err(Error::value(op, "y must be a storage of its own (it is x's or W's)"));
    }
    let es = g.dtype.size() as u64;
    // SAFETY: sizes, strides and dtypes were checked against the storages just above; y is its
    // own allocation (storages are whole allocator blocks, so distinct base addresses do not
    // overlap).
    unsafe { quant_gemv_raw(x.cuda_device(), g, w.ptr(), x.ptr() + x_layout.offset as u64 * es, ldx, y.ptr(), g.n) }
}

/// Queues W's dequantization on `dev`'s stream: `out` receives the `n x k` weights row-major as
/// `dtype` (f32, f16 or bf16), equal to the CPU dequantizer's f32 values rounded to `dtype`.
///
/// # Safety
/// `w` must address W's `n * k / block * block_bytes` bytes and `out` `n * k` values of `dtype`
/// of live device memory of `dev`, not overlapping.
pub unsafe fn dequantize_raw(dev: &CudaDevice, ty: QuantType, dtype: DType, n: usize, k: usize, w: u64, out: u64) -> Result<()> {
    let op = "quant_dequantize";
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(Error::dtype(op, format!("dequantizes to float32, float16 or bfloat16, got {dtype}")));
    }
    ty.matrix_bytes(op, n, k)?;
    if !w.is_multiple_of(2) || !out.is_multiple_of(dtype.size() as u64) {
        return Err(Error::value(op, "weights must be 2-byte aligned and the output aligned to its dtype"));
    }
    // one thread per run of 32 weights (a block of Q8_0 / Q4_0, a sub-block of the K-quants)
    let runs = n * k / 32;
    if runs == 0 {
        return Ok(());
    }
    let name = match ty {
        QuantType::Q8_0 => "quant_dequant_q8_0",
        QuantType::Q4_0 => "quant_dequant_q4_0",
        QuantType::Q4_K => "quant_dequant_q4_k",
        QuantType::Q6_K => "quant_dequant_q6_k",
    };
    let f = kfunc(dev, KFile::Quant, dtype, name)?;
    let mut a = Args::new();
    a.push(w).push(out).push(runs as i64);
    let threads = 256usize;
    let blocks = u32::try_from(runs.div_ceil(threads)).map_err(|_| Error::shape(op, format!("{n}x{k} is too large for one launch")))?;
    launch(dev, op, f, (blocks, 1, 1), (threads as u32, 1, 1), 0, &mut a)
}

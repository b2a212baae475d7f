//! Host side of the quantized decode GEMV (`kernels/quant_gemv.cu`): `y[m, n] = x[m, k] · Wᵀ`
//! for 1..=8 activation rows, W `[n, k]` in GGUF blocks (Q8_0, Q4_0, Q4_K, Q6_K) on the device,
//! x and y f32, f16 or bf16 (y in x's dtype), f32 accumulation; and W's dequantization to
//! f32/f16/bf16 on the device (for prefill-sized inputs, multiplied by cuBLAS). On raw device
//! buffers, for engines that own them, and on `CudaStorage`s with x's layout.
//!
//! Numerics: f32 activations get f32 products of the exact weights (as the CPU kernels). Q4_K
//! with f16/bf16 activations takes llama.cpp's integer route (see [`Q8_MAX_SHARED`]): x rounded
//! to 8-bit codes per 32 values, `dp4a` dot products; `docs/gguf.md` derives its error. Its
//! [`quant_gemv_parts_raw`] runs up to three matrices of one x in one launch (q|k|v, gate|up),
//! with K optionally split over warps ([`Q8Launch`]).

use super::device::CudaDevice;
use super::kern::{kfunc, KFile};
use super::launch::{launch as launch_plain, launch_pdl, Args};
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
/// when x's codes and the split-K partial sums fit in this much shared memory (`m * k / 64`
/// records of 80 bytes + 512 bytes, i.e. `m * k <= 38912`: k up to 32768 for one row, 4096 for
/// 8); larger inputs take the f32 kernels.
pub const Q8_MAX_SHARED: usize = 48 * 1024;

/// Bytes of shared memory the 8-bit-activation Q4_K kernel needs for `m` rows of `k` values.
fn q8_shared(m: usize, k: usize) -> usize {
    m * (k / 64) * 80
}

/// Most matrices one launch of the 8-bit-activation Q4_K kernel takes ([`quant_gemv_parts_raw`]).
pub const MAX_PARTS: usize = 3;

/// Launch shape of the 8-bit-activation Q4_K kernel (`quant_gemv_q4_k_q8_r*`): its persistent
/// grid of `blocks_per_sm` blocks of 8 warps per SM, and `split`, the warps (1, 2 or 4) that share
/// a weight row's K (their partial sums added in a fixed order: deterministic).
/// [`Q8Launch::auto`] is what the GEMV functions take unless given one.
///
/// ```
/// use magpie_core::backend::cuda::quant::Q8Launch;
/// // 1 row, the 2048x8192 `down` shape on 132 SMs
/// let l = Q8Launch::auto(1, 2048, 8192, 132, true);
/// assert!(l.split >= 1 && 8192 / 2048 % l.split == 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Q8Launch {
    /// Thread blocks per SM (1 or 2).
    pub blocks_per_sm: usize,
    /// Warps per weight row (1, 2 or 4; must divide `ceil(k / 2048)`).
    pub split: usize,
}

impl Q8Launch {
    /// The launch for `m` activation rows and `rows` weight rows (all matrices of the launch) of
    /// `k` columns on `sms` SMs, launched with programmatic dependent launch or not (`pdl`): two
    /// blocks per SM (one was slower for every shape measured), and, with `pdl`, K split over 2
    /// warps when the matrix has fewer 2-row groups than the grid has warps and K an even number
    /// of 2048-chunks (the 2048x8192 `down` shape: in a graph of PDL launches split 2 beat 1 and
    /// 4, launched alone it lost to 1; `benchmark/NOTES.md`, 2026-11-27).
    pub fn auto(m: usize, rows: usize, k: usize, sms: usize, pdl: bool) -> Q8Launch {
        let _ = m;
        let blocks_per_sm = 2;
        let warps = blocks_per_sm * sms.max(1) * QK_WARPS;
        let split = if pdl && k.div_ceil(2048).is_multiple_of(2) && rows.div_ceil(2) < warps { 2 } else { 1 };
        Q8Launch { blocks_per_sm, split }
    }

    fn check(&self, k: usize) -> Result<()> {
        if !(1..=2).contains(&self.blocks_per_sm) || ![1, 2, 4].contains(&self.split) || !k.div_ceil(2048).is_multiple_of(self.split) {
            return Err(Error::value("quant_gemv", format!("launch {self:?} needs 1-2 blocks per SM and a split of 1, 2 or 4 dividing ceil(k / 2048) = {}", k.div_ceil(2048))));
        }
        Ok(())
    }
}

/// Warps per block of the 8-bit-activation Q4_K kernel (`QK_WARPS`).
const QK_WARPS: usize = 8;

/// One matrix of a launch that shares x ([`quant_gemv_parts_raw`]): W's blocks at `w` (`n` rows),
/// y at `y` (the activation rows' `n` outputs each, at the launch's row stride).
#[derive(Clone, Copy, Debug)]
pub struct QuantPart {
    /// Device address of W's blocks.
    pub w: u64,
    /// W's rows (output features).
    pub n: usize,
    /// Device address of y.
    pub y: u64,
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

/// The 8-bit-activation kernels for several matrices or a split K (`quant_gemv_q4_k_q8m_r*`).
const Q8M_NAMES: [&str; MAX_ROWS] = [
    "quant_gemv_q4_k_q8m_r1",
    "quant_gemv_q4_k_q8m_r2",
    "quant_gemv_q4_k_q8m_r3",
    "quant_gemv_q4_k_q8m_r4",
    "quant_gemv_q4_k_q8m_r5",
    "quant_gemv_q4_k_q8m_r6",
    "quant_gemv_q4_k_q8m_r7",
    "quant_gemv_q4_k_q8m_r8",
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
        self.ty == QuantType::Q4_K && self.dtype != DType::F32 && q8_shared(self.m, self.k) + QK_WARPS * 64 <= Q8_MAX_SHARED
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
    let launcher = if pdl { launch_pdl } else { launch_plain };
    let mut a = Args::new();
    a.push(w).push(x).push(y).push(g.n as i32).push(g.k as i32).push(ldx as i64).push(ldy as i64);
    if g.rounds_activations() {
        let part = QuantPart { w, n: g.n, y };
        // SAFETY: the caller's contract is this function's.
        return unsafe { q8_launch(dev, g, &[part], x, ldx, ldy, None, pdl) };
    }
    let f = kfunc(dev, KFile::Quant, g.dtype, g.kernel())?;
    // threads: a row's units in one pass where they fit in 256 (K up to 8192), a few passes above
    let threads = (g.k / unit_elems(g.ty)).next_multiple_of(32).clamp(32, MAX_THREADS);
    let blocks = g.n.div_ceil(rows_per_block(g.m, g.n));
    launcher(dev, op, f, (blocks as u32, 1, 1), (threads as u32, 1, 1), 0, &mut a)
}

/// Several GEMVs of one x: `y_i = x · W_iᵀ` for each part (q|k|v, gate|up), all of `g.ty`,
/// `g.dtype`, `g.m` rows and `g.k` columns (`g.n` is ignored). Q4_K with f16/bf16 activations runs
/// them in one launch of up to [`MAX_PARTS`] matrices, over one coding of x; other cases, or more
/// parts, launch one GEMV per part. `launch` overrides the kernel's launch shape
/// ([`Q8Launch::auto`] when `None`); `pdl` launches as [`quant_gemv_raw_pdl`] does.
///
/// # Safety
/// As [`quant_gemv_raw`] for each part (y's row stride `ldy` at least each part's n), and, with
/// `pdl`, as [`quant_gemv_raw_pdl`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn quant_gemv_parts_raw(dev: &CudaDevice, g: &QuantGemv, parts: &[QuantPart], x: u64, ldx: usize, ldy: usize, launch: Option<Q8Launch>, pdl: bool) -> Result<()> {
    let pdl = pdl && dev.arch.0 >= 9;
    let total: usize = parts.iter().map(|p| p.n).sum();
    let probe = QuantGemv { n: total.max(1), ..*g };
    if probe.rounds_activations() && parts.len() <= MAX_PARTS {
        // SAFETY: the caller's contract is this function's.
        return unsafe { q8_launch(dev, g, parts, x, ldx, ldy, launch, pdl) };
    }
    for p in parts {
        let one = QuantGemv { n: p.n, ..*g };
        // SAFETY: as above, per part.
        unsafe { gemv(dev, &one, p.w, x, ldx, p.y, ldy, pdl)? };
    }
    Ok(())
}

/// One launch of `quant_gemv_q4_k_q8_r*` over up to [`MAX_PARTS`] matrices.
#[allow(clippy::too_many_arguments)]
unsafe fn q8_launch(dev: &CudaDevice, g: &QuantGemv, parts: &[QuantPart], x: u64, ldx: usize, ldy: usize, launch: Option<Q8Launch>, pdl: bool) -> Result<()> {
    let op = "quant_gemv";
    if parts.is_empty() || parts.len() > MAX_PARTS {
        return Err(Error::value(op, format!("takes 1 to {MAX_PARTS} matrices in one launch, got {}", parts.len())));
    }
    for p in parts {
        QuantGemv { n: p.n, ..*g }.check()?;
        if !p.w.is_multiple_of(16) {
            return Err(Error::value(op, "Q4_K weights must be 16-byte aligned on the device"));
        }
        if !p.y.is_multiple_of(g.dtype.size() as u64) || ldy < p.n {
            return Err(Error::value(op, "y must be aligned to its dtype with a row stride of at least n"));
        }
    }
    if !x.is_multiple_of(16) || !ldx.is_multiple_of(8) || ldx < g.k {
        return Err(Error::value(op, "x must be 16-byte aligned with a row stride that is a multiple of 8 and at least k"));
    }
    let rows: usize = parts.iter().map(|p| p.n).sum();
    if rows == 0 {
        return Ok(());
    }
    let sms = dev.sm_count.max(1) as usize;
    let l = launch.unwrap_or_else(|| Q8Launch::auto(g.m, rows, g.k, sms, pdl));
    l.check(g.k)?;
    let launcher = if pdl { launch_pdl } else { launch_plain };
    let mut a = Args::new();
    if parts.len() == 1 && l.split == 1 {
        // one matrix without a split: the kernel without the part selection and the team sums
        let f = kfunc(dev, KFile::Quant, g.dtype, Q8_NAMES[g.m - 1])?;
        let p = parts[0];
        a.push(p.w).push(x).push(p.y).push(p.n as i32).push(g.k as i32).push(ldx as i64).push(ldy as i64);
        let blocks = p.n.div_ceil(2).div_ceil(QK_WARPS).clamp(1, l.blocks_per_sm * sms);
        return launcher(dev, op, f, (blocks as u32, 1, 1), ((32 * QK_WARPS) as u32, 1, 1), q8_shared(g.m, g.k) as u32, &mut a);
    }
    let f = kfunc(dev, KFile::Quant, g.dtype, Q8M_NAMES[g.m - 1])?;
    let part = |i: usize| parts.get(i).copied().unwrap_or(QuantPart { w: parts[0].w, n: 0, y: parts[0].y });
    let (p0, p1, p2) = (part(0), part(1), part(2));
    a.push(p0.w).push(p1.w).push(p2.w).push(p0.y).push(p1.y).push(p2.y);
    a.push(p0.n as i32).push(p1.n as i32).push(p2.n as i32);
    a.push(x).push(g.k as i32).push(ldx as i64).push(ldy as i64).push(l.split as i32);
    // persistent grid; teams of `split` warps take 2 weight rows at a time
    let teams = rows.div_ceil(2).div_ceil(QK_WARPS / l.split);
    let blocks = teams.clamp(1, l.blocks_per_sm * sms);
    let shared = q8_shared(g.m, g.k) + QK_WARPS * 64;  // codes, then the partial sums
    launcher(dev, op, f, (blocks as u32, 1, 1), ((32 * QK_WARPS) as u32, 1, 1), shared as u32, &mut a)
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
    launch_plain(dev, op, f, (blocks, 1, 1), (threads as u32, 1, 1), 0, &mut a)
}

//! Flash attention on raw device pointers (host side of `kernels/attention.cu`): the prefill
//! forward [`flash_forward`] (tensor cores for f16/bf16 with head_dim 64 or 128 on aligned
//! operands, register-tiled float32 kernels for float32 with head_dim up to 128 (`attention_f32.rs`),
//! a scalar f32-math kernel otherwise) and the split-KV decode [`flash_decode`], whose
//! launch configuration depends only on its [`DecodeParams`] so that it can be captured in a
//! CUDA graph and replayed while the key counts (read on the device) change.

use super::device::{drv, CudaDevice, Func};
use super::kern::{kfunc, KFile};
use super::launch::{launch, Args};
use crate::{DType, Error, Result};
use cudarc::driver::{result as dres, sys};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One attention operand in device memory: element (b, h, s, d) is at
/// `ptr + (b*sb + h*sh + s*ss + d) * dtype.size()` (d is contiguous; strides in elements).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AttnOperand {
    pub ptr: u64,
    pub sb: i64,
    pub sh: i64,
    pub ss: i64,
}

/// Which keys a query sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Causal {
    /// Every key (up to the sequence's key length).
    None,
    /// PyTorch's `is_causal`: query i sees keys 0..=i (top-left aligned).
    TopLeft,
    /// Query i of q_len sits at position kv_len - q_len + i and sees keys 0..=that (a KV cache's prefill chunk).
    BottomRight,
}

/// The shape of one [`flash_forward`] call.
#[derive(Clone, Copy, Debug)]
pub struct FlashParams {
    /// F32, F16 or BF16: q, k, v, o all of this dtype; accumulation in f32.
    pub dtype: DType,
    pub batch: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Divides n_heads (GQA: query head h uses kv head h / (n_heads / n_kv_heads)).
    pub n_kv_heads: usize,
    /// 1..=256; the tensor-core path covers 64 and 128.
    pub head_dim: usize,
    pub q_len: usize,
    /// Keys per sequence (the maximum when kv_lens is given).
    pub kv_len: usize,
    pub scale: f32,
    pub causal: Causal,
}

/// The shape of one [`flash_decode`] call.
#[derive(Clone, Copy, Debug)]
pub struct DecodeParams {
    pub dtype: DType,
    pub batch: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Capacity of the cache (the largest kv length any call will see): fixes the split count.
    pub max_kv_len: usize,
    pub scale: f32,
}

/// The largest head_dim.
pub const MAX_HEAD_DIM: usize = 256;

pub(super) const LOG2E: f32 = std::f32::consts::LOG2_E;

// ---- kernel parameter blocks (match FaParams / DecParams in attention.cu) ----

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct KParams {
    batch: i32,
    n_heads: i32,
    n_kv_heads: i32,
    head_dim: i32,
    q_len: i32,
    kv_len: i32,
    causal: i32,
    scale_log2: f32,
    q: AttnOperand,
    k: AttnOperand,
    v: AttnOperand,
    o: AttnOperand,
    kv_lens: u64,
    lse: u64,
    bk: i32,
    pad: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct KDecParams {
    batch: i32,
    n_heads: i32,
    n_kv_heads: i32,
    head_dim: i32,
    splits: i32,
    chunk: i32,
    tk: i32,
    gb: i32,
    hgroups: i32,
    vec: i32,
    max_kv_len: i32,
    scale_log2: f32,
    q: AttnOperand,
    k: AttnOperand,
    v: AttnOperand,
    o: AttnOperand,
    kv_lens: u64,
    ws_o: u64,
    ws_lse: u64,
}

/// "No variant picked yet": the first use reads the environment (see [`tc_variant`]).
const UNSET: usize = usize::MAX;

/// The head_dim-64 tensor-core kernel variant (see [`set_tc_variant_d64`]); a tuning knob.
static TC_VARIANT_D64: AtomicUsize = AtomicUsize::new(UNSET);

/// The head_dim-64 variants, by number: kernel name, warps, query rows per warp, and whether it
/// folds the scale into the exponential (FA_FOLD: scale > 0 only) and exponentiates pairs in 16 bits
/// (FA_X2: sm_90 and later).
const TC_D64: [(&str, usize, usize, bool, bool); 7] = [
    ("flash_tc_d64_w4", 4, 16, false, false),
    ("flash_tc_d64_w8", 8, 16, false, false),
    ("flash_tc_d64_w4m2", 4, 32, false, false),
    ("flash_tc_d64_w4m2_f", 4, 32, true, false),
    ("flash_tc_d64_w4m2_fq", 4, 32, true, false),
    ("flash_tc_d64_w4m2_fx", 4, 32, true, true),
    ("flash_tc_d64_w4m2_fqx", 4, 32, true, true),
];
/// The first head_dim-64 variant number of the Hopper kernels (`attention_sm90::VARIANTS`).
const SM90_FIRST: usize = TC_D64.len();
/// Number of head_dim-64 variants: [`TC_D64`], then the Hopper kernels.
pub const TC_D64_VARIANTS: usize = TC_D64.len() + super::attention_sm90::VARIANTS.len();
/// FA_FOLD (variant 3). The Hopper kernels (7-12) are correct on an H200 but not yet timed, so
/// they are picked by `MAGPIE_FLASH_D64` only until a measurement shows which is faster.
const TC_D64_DEFAULT: usize = 3;

/// The head_dim-128 variants, as [`TC_D64`].
const TC_D128: [(&str, usize, usize, bool, bool); 4] = [
    ("flash_tc_d128_w4", 4, 16, false, false),
    ("flash_tc_d128_w4e", 4, 16, false, false),
    ("flash_tc_d128_w4_f", 4, 16, true, false),
    ("flash_tc_d128_w4_fx", 4, 16, true, true),
];
const TC_D128_DEFAULT: usize = 2;

/// The head_dim-128 tensor-core kernel variant (see [`set_tc_variant_d128`]).
static TC_VARIANT_D128: AtomicUsize = AtomicUsize::new(UNSET);

/// Picks the head_dim-64 tensor-core kernel variant, for benchmarks and tests: 0 = 4 warps x 16
/// query rows, 1 = 8 warps x 16 rows, 2 = 4 warps x 32 rows, 3 = 2 with the scale folded into the
/// exponential and the rescale skipped while the row max stays (FA_FOLD; the default), 4 = 3 with Q
/// reloaded per tile (3 blocks per multiprocessor), 5 = 3 with exponentials in 16-bit pairs
/// (FA_X2), 6 = 4 with FA_X2, 7-12 = the Hopper (wgmma) kernels of `attention_sm90` (7: two
/// consumer warpgroups and a producer warp, 2 K/V stages; 8: 7 with P V left in flight while the
/// next S issues; 9: 7 with three warpgroups; 10: 8 with a producer warpgroup giving
/// registers to the consumers; 11: 10 with S of the next tile issued before the softmax; 12: 11
/// with 3 stages). Without a call, `MAGPIE_FLASH_D64` (a number) picks it. Variants 3-12 need
/// scale > 0 (else 2 runs), 5-6 sm_90 (else 3 or 4), 7-12 an sm_90 device (else 3).
#[doc(hidden)]
pub fn set_tc_variant_d64(v: usize) {
    TC_VARIANT_D64.store(v.min(TC_D64_VARIANTS - 1), Ordering::Relaxed);
}

/// Picks the head_dim-128 tensor-core kernel variant, for benchmarks and tests: 0 = P packed next
/// to its use, 1 = P packed right after the softmax, 2 = 0 with FA_FOLD (the default), 3 = 1 with
/// FA_FOLD and FA_X2 (as for [`set_tc_variant_d64`]). Without a call, `MAGPIE_FLASH_D128` picks it.
#[doc(hidden)]
pub fn set_tc_variant_d128(v: usize) {
    TC_VARIANT_D128.store(v.min(TC_D128.len() - 1), Ordering::Relaxed);
}

/// Forgets the variants picked by [`set_tc_variant_d64`] / [`set_tc_variant_d128`]: the next call
/// takes the environment's or the default.
#[doc(hidden)]
pub fn reset_tc_variants() {
    TC_VARIANT_D64.store(UNSET, Ordering::Relaxed);
    TC_VARIANT_D128.store(UNSET, Ordering::Relaxed);
}

/// The variant in `cell`: set, else from the environment variable `var`, else `default`.
fn tc_variant(cell: &AtomicUsize, var: &str, default: usize, n: usize) -> usize {
    let v = cell.load(Ordering::Relaxed);
    if v != UNSET {
        return v;
    }
    let v = std::env::var(var).ok().and_then(|s| s.trim().parse::<usize>().ok()).map_or(default, |v| v.min(n - 1));
    // a concurrent setter wins
    match cell.compare_exchange(UNSET, v, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => v,
        Err(cur) => cur,
    }
}

/// A table of tensor-core kernel variants: name, warps, query rows per warp, FA_FOLD, FA_X2.
type TcTable = [(&'static str, usize, usize, bool, bool)];

/// The tensor-core kernel picked for `p` on `dev`.
enum TcPick {
    /// A kernel of attention.cu: name, warps, query rows per warp.
    Tc(&'static str, usize, usize),
    /// An index of `attention_sm90::VARIANTS`.
    Sm90(usize),
}

/// The tensor-core kernel for `p` on `dev`.
fn tc_pick(p: &FlashParams, dev: &CudaDevice) -> TcPick {
    let arch = dev.arch.0;
    let (table, mut v, fallback): (&TcTable, usize, usize) = if p.head_dim == 64 {
        let v = tc_variant(&TC_VARIANT_D64, "MAGPIE_FLASH_D64", TC_D64_DEFAULT, TC_D64_VARIANTS);
        if v >= SM90_FIRST {
            if super::attention_sm90::applies(dev, p) {
                return TcPick::Sm90(v - SM90_FIRST);
            }
            (&TC_D64, 3, 2)
        } else {
            (&TC_D64, v, 2)
        }
    } else {
        (&TC_D128, tc_variant(&TC_VARIANT_D128, "MAGPIE_FLASH_D128", TC_D128_DEFAULT, TC_D128.len()), 0)
    };
    let (_, _, _, fold, x2) = table[v];
    if x2 && arch < 9 {
        // the same variant without FA_X2 (bf16 pairs need sm_90)
        v = if p.head_dim == 64 { v - 2 } else { 2 };
    }
    if fold && p.scale <= 0.0 {
        // FA_FOLD takes the row max of the unscaled scores
        v = fallback;
    }
    let (name, warps, rows, _, _) = table[v];
    TcPick::Tc(name, warps, rows)
}

pub(super) fn check_common(op: &str, dtype: DType, n_heads: usize, n_kv_heads: usize, head_dim: usize) -> Result<()> {
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Err(Error::dtype(op, format!("expected float32, float16 or bfloat16, got {}", dtype.name())));
    }
    if head_dim == 0 || head_dim > MAX_HEAD_DIM {
        return Err(Error::value(op, format!("head_dim must be in 1..={MAX_HEAD_DIM}, got {head_dim}")));
    }
    if n_kv_heads == 0 || !n_heads.is_multiple_of(n_kv_heads) {
        return Err(Error::value(op, format!("n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads})")));
    }
    Ok(())
}

pub(super) fn fits_i32(op: &str, what: &str, v: usize) -> Result<()> {
    if v > i32::MAX as usize {
        return Err(Error::value(op, format!("{what} = {v} is too large")));
    }
    Ok(())
}

pub(super) fn check_ptrs(op: &str, ops: &[(&str, &AttnOperand)]) -> Result<()> {
    for (n, o) in ops {
        if o.ptr == 0 {
            return Err(Error::value(op, format!("{n} is a null device pointer")));
        }
    }
    Ok(())
}

/// 16-byte aligned base and strides (for 16-byte loads of rows).
pub(super) fn aligned16(o: &AttnOperand, esz: usize) -> bool {
    let a = |s: i64| (s.unsigned_abs() as usize * esz).is_multiple_of(16);
    o.ptr.is_multiple_of(16) && a(o.sb) && a(o.sh) && a(o.ss)
}

pub(super) fn set_smem(op: &str, f: Func, bytes: usize) -> Result<()> {
    if bytes > 48 * 1024 {
        // SAFETY: `f` is a loaded kernel; the attribute only raises its dynamic shared memory limit.
        unsafe { dres::function::set_function_attribute(f.0, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32) }
            .map_err(|e| drv(op, format!("setting the shared memory size ({bytes} bytes): {e}")))?;
    }
    Ok(())
}

/// The name of the tensor-core kernel [`flash_forward`] runs for `p` on `dev` (when
/// [`uses_tensor_cores`] holds); for benchmarks.
#[doc(hidden)]
pub fn tc_kernel_name(dev: &CudaDevice, p: &FlashParams) -> &'static str {
    match tc_pick(p, dev) {
        TcPick::Tc(name, _, _) => name,
        TcPick::Sm90(i) => super::attention_sm90::VARIANTS[i].0,
    }
}

/// True when [`flash_forward`] takes the tensor-core kernel for these params and operands.
pub fn uses_tensor_cores(dev: &CudaDevice, p: &FlashParams, ops: &[AttnOperand; 4]) -> bool {
    matches!(p.dtype, DType::F16 | DType::BF16) && matches!(p.head_dim, 64 | 128) && dev.arch.0 >= 8 && ops.iter().all(|o| aligned16(o, 2))
}

/// softmax(q kᵀ * scale + causal mask) v, tiled with an online softmax (O(q_len + kv_len) memory,
/// nothing of size q_len * kv_len). `kv_lens`: optional device pointer to i32[batch], the key count
/// of each sequence (keys at or past it are masked; for BottomRight the query positions use this
/// per-sequence length). A query row that sees no key writes zeros. Asynchronous on dev's stream.
pub fn flash_forward(dev: &CudaDevice, p: &FlashParams, q: AttnOperand, k: AttnOperand, v: AttnOperand, o: AttnOperand, kv_lens: Option<u64>) -> Result<()> {
    flash_forward_lse(dev, p, q, k, v, o, kv_lens, None)
}

/// [`flash_forward`] that also writes, when `lse` (a device pointer to f32[batch * n_heads *
/// q_len], row (b, h, i) at `(b * n_heads + h) * q_len + i`) is given, each query row's
/// log2-sum-exp of its scaled scores (`log2 sum_j 2^(s_ij * scale * log2 e)`, +inf for a row that
/// sees no key): what [`flash_backward`](super::attention_bwd::flash_backward) needs to recompute
/// the probabilities.
#[allow(clippy::too_many_arguments)]
pub fn flash_forward_lse(dev: &CudaDevice, p: &FlashParams, q: AttnOperand, k: AttnOperand, v: AttnOperand, o: AttnOperand, kv_lens: Option<u64>, lse: Option<u64>) -> Result<()> {
    let op = "flash_attention";
    if lse == Some(0) {
        return Err(Error::value(op, "lse is a null device pointer"));
    }
    check_common(op, p.dtype, p.n_heads, p.n_kv_heads, p.head_dim)?;
    if p.batch == 0 || p.n_heads == 0 || p.q_len == 0 {
        return Ok(());
    }
    if p.batch > 65535 || p.n_heads > 65535 {
        return Err(Error::value(op, format!("batch ({}) and n_heads ({}) must be at most 65535", p.batch, p.n_heads)));
    }
    fits_i32(op, "q_len", p.q_len)?;
    fits_i32(op, "kv_len", p.kv_len)?;
    if !p.scale.is_finite() {
        return Err(Error::value(op, format!("scale must be finite, got {}", p.scale)));
    }
    check_ptrs(op, &[("q", &q), ("o", &o)])?;
    if p.kv_len > 0 {
        check_ptrs(op, &[("k", &k), ("v", &v)])?;
    }
    if kv_lens == Some(0) {
        return Err(Error::value(op, "kv_lens is a null device pointer"));
    }
    dev.bind()?;
    if kv_lens.is_none() && super::attention_f32::applies(p) {
        return super::attention_f32::forward(dev, op, p, [q, k, v, o], lse.unwrap_or(0));
    }
    let mut kp = KParams {
        batch: p.batch as i32,
        n_heads: p.n_heads as i32,
        n_kv_heads: p.n_kv_heads as i32,
        head_dim: p.head_dim as i32,
        q_len: p.q_len as i32,
        kv_len: p.kv_len as i32,
        causal: match p.causal {
            Causal::None => 0,
            Causal::TopLeft => 1,
            Causal::BottomRight => 2,
        },
        scale_log2: p.scale * LOG2E,
        q,
        k,
        v,
        o,
        kv_lens: kv_lens.unwrap_or(0),
        lse: lse.unwrap_or(0),
        bk: 32,
        pad: 0,
    };
    if uses_tensor_cores(dev, p, &[q, k, v, o]) {
        let (name, warps, rows) = match tc_pick(p, dev) {
            TcPick::Tc(name, warps, rows) => (name, warps, rows),
            TcPick::Sm90(i) => return super::attention_sm90::forward(dev, op, p, i, kp),
        };
        let bm = rows * warps;
        let smem = (bm + 4 * 64) * p.head_dim * 2;
        let f = kfunc(dev, KFile::Attention, p.dtype, name)?;
        set_smem(op, f, smem)?;
        let mblocks = p.q_len.div_ceil(bm);
        let mut a = Args::new();
        a.push(kp);
        return launch(dev, op, f, (mblocks as u32, p.n_heads as u32, p.batch as u32), ((32 * warps) as u32, 1, 1), smem as u32, &mut a);
    }
    let bk = if p.head_dim <= 128 { 32 } else { 16 };
    kp.bk = bk as i32;
    let smem = (bk * (p.head_dim + 1) + bk * p.head_dim + 8 * p.head_dim) * 4;
    let f = kfunc(dev, KFile::Attention, p.dtype, "flash_generic")?;
    set_smem(op, f, smem)?;
    let mut a = Args::new();
    a.push(kp);
    launch(dev, op, f, (p.q_len.div_ceil(8) as u32, p.n_heads as u32, p.batch as u32), (256, 1, 1), smem as u32, &mut a)
}

/// How a decode is cut: splits, keys per split, keys per tile, query heads per block, head groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodePlan {
    pub splits: usize,
    pub chunk: usize,
    pub tile: usize,
    pub heads_per_block: usize,
    pub head_groups: usize,
}

/// The most splits any device may use for `p` (sizes the workspace).
fn max_splits(p: &DecodeParams) -> usize {
    p.max_kv_len.max(1).div_ceil(64).clamp(1, 256)
}

/// Lanes per key of the register decode kernel (`decode_vec`) for `p`'s head_dim and dtype, when it
/// has an instance for them.
fn vec_lanes(p: &DecodeParams) -> Option<usize> {
    let lk = p.head_dim * p.dtype.size() / 16;
    (matches!(p.head_dim, 64 | 128 | 256) && lk <= 32).then_some(lk)
}

/// The split plan of `p` on a GPU with `sm_count` multiprocessors.
pub fn decode_plan(p: &DecodeParams, sm_count: u32) -> DecodePlan {
    let d = p.head_dim.max(1);
    let g = (p.n_heads / p.n_kv_heads.max(1)).max(1);
    let (tile, gb) = match vec_lanes(p) {
        // decode_vec: 4 keys per thread and tile, 1/2/4/8 heads per block
        Some(lk) => (512 / lk, g.min(8).next_power_of_two()),
        None => ((8192 / (d * p.dtype.size().max(1))).clamp(8, 64), g.min((2048 / d).max(1))),
    };
    let hgroups = g.div_ceil(gb);
    let pairs = (p.batch * p.n_kv_heads * hgroups).max(1);
    let target = sm_count.max(1) as usize * 8;
    let mut splits = target.div_ceil(pairs).clamp(1, max_splits(p));
    let kv = p.max_kv_len.max(1);
    let chunk = kv.div_ceil(splits).div_ceil(tile) * tile;
    splits = kv.div_ceil(chunk).max(1);
    DecodePlan { splits, chunk, tile, heads_per_block: gb, head_groups: hgroups }
}

/// Bytes of device workspace `flash_decode` needs for these params (partial outputs + log-sum-exps).
pub fn decode_workspace_bytes(p: &DecodeParams) -> usize {
    p.batch * p.n_heads * max_splits(p) * (p.head_dim + 1) * 4
}

/// One query per sequence (q's `ss` unused; o likewise) over keys 0..kv_lens[b] (device i32[batch],
/// read ON THE DEVICE: the launch configuration depends only on `p`, so the call can be captured in a
/// CUDA graph once and replayed while the lengths change). Split-KV ("flash decoding"): the keys are
/// cut into a fixed number of splits chosen from max_kv_len and the SM count, each block handles one
/// (batch, kv head, split) for ALL query heads of that kv head (so K/V are read once), then a second
/// kernel combines the splits. kv_lens[b] == 0 writes zeros.
#[allow(clippy::too_many_arguments)]
pub fn flash_decode(dev: &CudaDevice, p: &DecodeParams, q: AttnOperand, k: AttnOperand, v: AttnOperand, o: AttnOperand, kv_lens: u64, workspace: u64) -> Result<()> {
    let op = "flash_decode";
    check_common(op, p.dtype, p.n_heads, p.n_kv_heads, p.head_dim)?;
    if p.batch == 0 || p.n_heads == 0 {
        return Ok(());
    }
    fits_i32(op, "max_kv_len", p.max_kv_len)?;
    if !p.scale.is_finite() {
        return Err(Error::value(op, format!("scale must be finite, got {}", p.scale)));
    }
    check_ptrs(op, &[("q", &q), ("k", &k), ("v", &v), ("o", &o)])?;
    if kv_lens == 0 || workspace == 0 {
        return Err(Error::value(op, "kv_lens and workspace must be device pointers"));
    }
    if !workspace.is_multiple_of(4) {
        return Err(Error::value(op, "the workspace must be 4-byte aligned"));
    }
    let plan = decode_plan(p, dev.sm_count);
    let rows = p.batch * p.n_heads;
    if p.batch > 65535 || p.n_kv_heads * plan.head_groups > 65535 || rows > i32::MAX as usize {
        return Err(Error::value(op, format!("batch ({}) or n_kv_heads ({}) too large", p.batch, p.n_kv_heads)));
    }
    dev.bind()?;
    let esz = p.dtype.size();
    let d = p.head_dim;
    let vec = (d * esz).is_multiple_of(16) && aligned16(&k, esz) && aligned16(&v, esz);
    let kp = KDecParams {
        batch: p.batch as i32,
        n_heads: p.n_heads as i32,
        n_kv_heads: p.n_kv_heads as i32,
        head_dim: d as i32,
        splits: plan.splits as i32,
        chunk: plan.chunk as i32,
        tk: plan.tile as i32,
        gb: plan.heads_per_block as i32,
        hgroups: plan.head_groups as i32,
        vec: vec as i32,
        max_kv_len: p.max_kv_len as i32,
        scale_log2: p.scale * LOG2E,
        q,
        k,
        v,
        o,
        kv_lens,
        ws_o: workspace,
        ws_lse: workspace + (rows * plan.splits * d * 4) as u64,
    };
    let (gb, tk) = (plan.heads_per_block, plan.tile);
    let grid = (plan.splits as u32, (p.n_kv_heads * plan.head_groups) as u32, p.batch as u32);
    match vec_lanes(p) {
        Some(lk) if vec => {
            let name = match (d, gb) {
                (64, 1) => "decode_vec_d64_g1",
                (64, 2) => "decode_vec_d64_g2",
                (64, 4) => "decode_vec_d64_g4",
                (64, _) => "decode_vec_d64_g8",
                (128, 1) => "decode_vec_d128_g1",
                (128, 2) => "decode_vec_d128_g2",
                (128, 4) => "decode_vec_d128_g4",
                (128, _) => "decode_vec_d128_g8",
                (_, 1) => "decode_vec_d256_g1",
                (_, 2) => "decode_vec_d256_g2",
                (_, 4) => "decode_vec_d256_g4",
                _ => "decode_vec_d256_g8",
            };
            let key_slots = 4 * (32 / lk);
            let smem = 4 * (gb * tk + 3 * gb + key_slots * gb * d);
            let f = kfunc(dev, KFile::Attention, p.dtype, name)?;
            set_smem(op, f, smem)?;
            let mut a = Args::new();
            a.push(kp);
            launch(dev, op, f, grid, (128, 1, 1), smem as u32, &mut a)?;
        }
        _ => {
            let floats = gb * d + gb * tk + 3 * gb;
            let floats = floats.div_ceil(4) * 4;
            let kpitch = if vec { d + 16 / esz } else { d + 1 };
            let smem = floats * 4 + tk * (kpitch + d) * esz;
            let f = kfunc(dev, KFile::Attention, p.dtype, "decode_split")?;
            set_smem(op, f, smem)?;
            let mut a = Args::new();
            a.push(kp);
            launch(dev, op, f, grid, (128, 1, 1), smem as u32, &mut a)?;
        }
    }
    let f = kfunc(dev, KFile::Attention, p.dtype, "decode_combine")?;
    let mut a = Args::new();
    a.push(kp);
    launch(dev, op, f, (rows as u32, 1, 1), (128, 1, 1), 0, &mut a)
}

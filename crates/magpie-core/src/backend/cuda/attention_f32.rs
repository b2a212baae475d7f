//! Float32 flash attention forward and backward in register-tiled SIMT math (host side of
//! `kernels/attention_f32.cu`), for head dims up to 128: what PyTorch's memory-efficient kernels
//! do for float32 without TF32. [`flash_forward_lse`](super::attention::flash_forward_lse) and
//! [`flash_backward`](super::attention_bwd::flash_backward) send float32 calls here when
//! [`applies`] holds; the older scalar kernels stay for head dims above 128.

use super::attention::{aligned16, set_smem, AttnOperand, Causal, FlashParams, LOG2E};
use super::attention_bwd::FlashBwdBuffers;
use super::device::CudaDevice;
use super::kern::{kfunc, KFile};
use super::launch::{launch, Args};
use crate::{DType, Result};
use std::sync::atomic::{AtomicBool, Ordering};

/// The largest head_dim of the tiled kernels (dims are padded with zeros to 32, 64 or 128).
pub const MAX_TILED_HEAD_DIM: usize = 128;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the tiled float32 kernels off (`false`: float32 takes the older scalar kernels) or back
/// on; for benchmarks and tests that compare the two.
#[doc(hidden)]
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether the tiled float32 kernels are on (see [`set_enabled`]).
///
/// ```
/// // on unless a benchmark or test turned them off
/// assert!(magpie_core::backend::cuda::attention_f32::enabled());
/// ```
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// True when float32 flash attention with these params runs the tiled kernels: dtype float32,
/// head_dim at most [`MAX_TILED_HEAD_DIM`], and the kernels on.
///
/// ```
/// use magpie_core::backend::cuda::attention::{Causal, FlashParams};
/// use magpie_core::backend::cuda::attention_f32::applies;
/// use magpie_core::DType;
/// let p = FlashParams { dtype: DType::F32, batch: 2, n_heads: 6, n_kv_heads: 6, head_dim: 64, q_len: 256, kv_len: 256, scale: 0.125, causal: Causal::TopLeft };
/// assert_eq!(applies(&p), magpie_core::backend::cuda::attention_f32::enabled());
/// assert!(!applies(&FlashParams { head_dim: 256, ..p }));
/// ```
pub fn applies(p: &FlashParams) -> bool {
    p.dtype == DType::F32 && p.head_dim >= 1 && p.head_dim <= MAX_TILED_HEAD_DIM && enabled()
}

/// The padded head dim the kernels are instantiated for: 32, 64 or 128.
///
/// ```
/// use magpie_core::backend::cuda::attention_f32::padded_head_dim;
/// assert_eq!(padded_head_dim(16), 32);
/// assert_eq!(padded_head_dim(64), 64);
/// assert_eq!(padded_head_dim(80), 128);
/// ```
pub fn padded_head_dim(head_dim: usize) -> usize {
    match head_dim {
        0..=32 => 32,
        33..=64 => 64,
        _ => 128,
    }
}

/// Dynamic shared memory in bytes of the forward (`"fwd"`), dK/dV (`"kv"`) and dQ (`"q"`)
/// kernels for padded head dim `dp` (the tile layouts of `attention_f32.cu`).
///
/// ```
/// use magpie_core::backend::cuda::attention_f32::smem_bytes;
/// assert!(smem_bytes("kv", 128) <= 227 * 1024);
/// assert_eq!(smem_bytes("fwd", 64), (3 * 64 * 64 + 64 * 68) * 4);
/// ```
pub fn smem_bytes(kernel: &str, dp: usize) -> usize {
    let floats = match kernel {
        // Qt, Kt, Vs [dp x 64] and Pt [64 x 68]
        "fwd" => 3 * 64 * dp + 64 * 68,
        // Kt, Vt [dp x 64], Qt, Qs, dOt, dOs [dp x 32], P and dS [32 x 68], lse and delta [32]
        "kv" => 2 * 64 * dp + 4 * 32 * dp + 2 * 32 * 68 + 64,
        // Qt, dOt [dp x 64], Kt, Vt, Ks [dp x 32], dS [32 x 68]
        _ => 2 * 64 * dp + 3 * 32 * dp + 32 * 68,
    };
    floats * 4
}

/// The kernel parameter block (`F32Params` in attention_f32.cu).
#[repr(C)]
#[derive(Clone, Copy)]
struct KParams {
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
    dout: AttnOperand,
    dq: AttnOperand,
    dk: AttnOperand,
    dv: AttnOperand,
    lse: u64,
    delta: u64,
    scale: f32,
    vec: i32,
}

fn params(p: &FlashParams, ops: [AttnOperand; 8], lse: u64, delta: u64) -> KParams {
    // float4 loads need every operand in use 16-byte aligned and whole groups of 4 dims
    let vec = p.head_dim.is_multiple_of(4) && ops.iter().filter(|o| o.ptr != 0).all(|o| aligned16(o, 4));
    let [q, k, v, o, dout, dq, dk, dv] = ops;
    KParams {
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
        dout,
        dq,
        dk,
        dv,
        lse,
        delta,
        scale: p.scale,
        vec: vec as i32,
    }
}

fn go(dev: &CudaDevice, op: &str, name: &'static str, kp: KParams, grid: (u32, u32, u32), smem: usize) -> Result<()> {
    let f = kfunc(dev, KFile::AttentionF32, DType::F32, name)?;
    set_smem(op, f, smem)?;
    let mut a = Args::new();
    a.push(kp);
    launch(dev, op, f, grid, (256, 1, 1), smem as u32, &mut a)
}

fn kernel_name(kind: &str, dp: usize) -> &'static str {
    match (kind, dp) {
        ("fwd", 32) => "fa32_fwd_d32",
        ("fwd", 64) => "fa32_fwd_d64",
        ("fwd", _) => "fa32_fwd_d128",
        ("kv", 32) => "fa32_bwd_kv_d32",
        ("kv", 64) => "fa32_bwd_kv_d64",
        ("kv", _) => "fa32_bwd_kv_d128",
        (_, 32) => "fa32_bwd_q_d32",
        (_, 64) => "fa32_bwd_q_d64",
        _ => "fa32_bwd_q_d128",
    }
}

/// The forward for params that [`applies`] accepts, already checked by the caller
/// (`flash_forward_lse`): o, and each row's log2-sum-exp into `lse` when it is nonzero.
/// `qkvo` holds q, k, v and o.
pub(super) fn forward(dev: &CudaDevice, op: &str, p: &FlashParams, qkvo: [AttnOperand; 4], lse: u64) -> Result<()> {
    let [q, k, v, o] = qkvo;
    let none = AttnOperand { ptr: 0, sb: 0, sh: 0, ss: 0 };
    let kp = params(p, [q, k, v, o, none, none, none, none], lse, 0);
    let dp = padded_head_dim(p.head_dim);
    go(dev, op, kernel_name("fwd", dp), kp, (p.q_len.div_ceil(64) as u32, p.n_heads as u32, p.batch as u32), smem_bytes("fwd", dp))
}

/// The backward for params that [`applies`] accepts, already checked by the caller
/// (`flash_backward`): delta, then dK/dV, then dQ.
pub(super) fn backward(dev: &CudaDevice, op: &str, p: &FlashParams, b: &FlashBwdBuffers) -> Result<()> {
    let kp = params(p, [b.q, b.k, b.v, b.o, b.dout, b.dq, b.dk, b.dv], b.lse, b.delta);
    let dp = padded_head_dim(p.head_dim);
    let nb = p.batch as u32;
    if p.q_len > 0 {
        let rows = p.batch * p.n_heads * p.q_len;
        go(dev, op, "fa32_bwd_delta", kp, (rows.div_ceil(8) as u32, 1, 1), 0)?;
    }
    if p.kv_len > 0 {
        go(dev, op, kernel_name("kv", dp), kp, (p.kv_len.div_ceil(64) as u32, p.n_kv_heads as u32, nb), smem_bytes("kv", dp))?;
    }
    if p.q_len > 0 {
        go(dev, op, kernel_name("q", dp), kp, (p.q_len.div_ceil(64) as u32, p.n_heads as u32, nb), smem_bytes("q", dp))?;
    }
    Ok(())
}

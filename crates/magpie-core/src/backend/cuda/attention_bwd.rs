//! Flash attention backward on raw device pointers (host side of `kernels/attention_bwd.cu`):
//! dq, dk, dv from q, k, v, the forward output, its gradient and the per-row log2-sum-exp that
//! [`flash_forward_lse`](super::attention::flash_forward_lse) saved. Three launches: the row dots
//! `delta = rowsum(dO * O)`, then dK/dV (a block per key tile of each kv head, walking the query
//! heads of its GQA group, so no reduction over heads follows) and dQ (a block per query tile);
//! the tensor-core kernels run their blocks longest first under a causal mask.
//! Tensor cores for f16/bf16 with head_dim 64 or 128 on 16-byte aligned operands, the tiled
//! float32 kernels of `attention_f32.rs` for float32 with head_dim up to 128, f32 scalar math
//! otherwise. Nothing of size q_len x kv_len is allocated.

use super::attention::{aligned16, check_common, check_ptrs, fits_i32, set_smem, AttnOperand, Causal, FlashParams, LOG2E};
use super::device::CudaDevice;
use super::kern::{kfunc, KFile};
use super::launch::{launch, Args};
use crate::{DType, Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Below this many scores (batch x heads x q_len x kv_len), `scaled_dot_product_attention` with
/// autograd takes the composite instead of the scalar (non-tensor-core) flash kernels: measured on
/// an H100 (`examples/sdpa_train_bench.rs`), the composite's cuBLAS GEMMs run float32
/// forward+backward ~3x faster than the scalar kernels, which win on memory only (O(S) instead of
/// the composite's saved probabilities). 2^26 scores is 256 MiB of f32 probabilities.
static SCALAR_MIN_SCORES: AtomicUsize = AtomicUsize::new(1 << 26);

/// See [`set_scalar_backward_min_scores`].
pub fn scalar_backward_min_scores() -> usize {
    SCALAR_MIN_SCORES.load(Ordering::Relaxed)
}

/// Sets the score count from which `scaled_dot_product_attention` with autograd uses the scalar
/// flash kernels rather than the composite where tensor cores do not apply (0: always); for tests
/// and benchmarks.
#[doc(hidden)]
pub fn set_scalar_backward_min_scores(n: usize) {
    SCALAR_MIN_SCORES.store(n, Ordering::Relaxed);
}

/// The device buffers of one [`flash_backward`] call. The gradients have the layouts of their
/// inputs' operands as given (strides in elements, last dim contiguous); `lse` and `delta` are
/// f32[batch * n_heads * q_len] (row (b, h, i) at `(b * n_heads + h) * q_len + i`); `delta` is
/// workspace the call overwrites.
#[derive(Clone, Copy, Debug)]
pub struct FlashBwdBuffers {
    pub q: AttnOperand,
    pub k: AttnOperand,
    pub v: AttnOperand,
    /// The forward output.
    pub o: AttnOperand,
    /// The gradient of the forward output.
    pub dout: AttnOperand,
    pub dq: AttnOperand,
    pub dk: AttnOperand,
    pub dv: AttnOperand,
    pub lse: u64,
    pub delta: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct KBwdParams {
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
    pad: i32,
}

/// True when [`flash_backward`] takes the tensor-core kernels for these params and buffers.
pub fn bwd_uses_tensor_cores(dev: &CudaDevice, p: &FlashParams, b: &FlashBwdBuffers) -> bool {
    matches!(p.dtype, DType::F16 | DType::BF16) && matches!(p.head_dim, 64 | 128) && dev.arch.0 >= 8 && [b.q, b.k, b.v, b.o, b.dout, b.dq, b.dk, b.dv].iter().all(|o| aligned16(o, 2))
}

/// The gradients of `o = softmax(q kᵀ * scale + causal mask) v` (as [`flash_forward_lse`](super::attention::flash_forward_lse)
/// computes it with the same `p`) with respect to q, k and v, written to `b.dq`, `b.dk`, `b.dv`.
/// Keys are the full `kv_len` of every sequence (no per-sequence lengths). Under GQA the key and
/// value gradients sum over the query heads sharing them. Asynchronous on dev's stream.
pub fn flash_backward(dev: &CudaDevice, p: &FlashParams, b: &FlashBwdBuffers) -> Result<()> {
    let op = "flash_attention_backward";
    check_common(op, p.dtype, p.n_heads, p.n_kv_heads, p.head_dim)?;
    if p.batch == 0 || p.n_heads == 0 || (p.q_len == 0 && p.kv_len == 0) {
        return Ok(());
    }
    if p.batch > 65535 || p.n_heads > 65535 {
        return Err(Error::value(op, format!("batch ({}) and n_heads ({}) must be at most 65535", p.batch, p.n_heads)));
    }
    fits_i32(op, "q_len", p.q_len)?;
    fits_i32(op, "kv_len", p.kv_len)?;
    fits_i32(op, "batch * n_heads * q_len", p.batch * p.n_heads * p.q_len)?;
    if !p.scale.is_finite() {
        return Err(Error::value(op, format!("scale must be finite, got {}", p.scale)));
    }
    if p.q_len > 0 {
        check_ptrs(op, &[("q", &b.q), ("o", &b.o), ("dout", &b.dout), ("dq", &b.dq)])?;
        if b.lse == 0 || b.delta == 0 {
            return Err(Error::value(op, "lse and delta must be device pointers"));
        }
    }
    if p.kv_len > 0 {
        check_ptrs(op, &[("k", &b.k), ("v", &b.v), ("dk", &b.dk), ("dv", &b.dv)])?;
    }
    dev.bind()?;
    if super::attention_f32::applies(p) {
        return super::attention_f32::backward(dev, op, p, b);
    }
    let kp = KBwdParams {
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
        q: b.q,
        k: b.k,
        v: b.v,
        o: b.o,
        dout: b.dout,
        dq: b.dq,
        dk: b.dk,
        dv: b.dv,
        lse: b.lse,
        delta: b.delta,
        scale: p.scale,
        pad: 0,
    };
    let go = |name: &'static str, grid: (u32, u32, u32), threads: u32, smem: usize| -> Result<()> {
        let f = kfunc(dev, KFile::AttentionBwd, p.dtype, name)?;
        set_smem(op, f, smem)?;
        let mut a = Args::new();
        a.push(kp);
        launch(dev, op, f, grid, (threads, 1, 1), smem as u32, &mut a)
    };
    let (bh, bkv) = (p.n_heads as u32, p.n_kv_heads as u32);
    let nb = p.batch as u32;
    let d = p.head_dim;
    let tc = bwd_uses_tensor_cores(dev, p, b);
    if p.q_len > 0 {
        let rows = p.batch * p.n_heads * p.q_len;
        if tc {
            // 16-byte loads, head_dim / 8 threads a row (o and dout are 16-byte aligned here)
            let per_block = 256 / (d / 8);
            go(if d == 64 { "flash_bwd_delta_d64" } else { "flash_bwd_delta_d128" }, (rows.div_ceil(per_block) as u32, 1, 1), 256, 0)?;
        } else {
            go("flash_bwd_delta", (rows.div_ceil(8) as u32, 1, 1), 256, 0)?;
        }
    }
    if tc {
        // tile sizes of attention_bwd.cu: dK/dV blocks of 64 keys with query tiles of 64 (d64) or
        // 32 (d128) rows; dQ blocks of 64 rows with key tiles of 64 (d64) or 32 (d128)
        let (kv_name, q_name, stream) = if d == 64 { ("flash_bwd_kv_tc_d64", "flash_bwd_q_tc_d64", 64) } else { ("flash_bwd_kv_tc_d128", "flash_bwd_q_tc_d128", 32) };
        if p.kv_len > 0 {
            let smem = (2 * 64 * d + 4 * stream * d) * 2 + 4 * stream * 4;
            go(kv_name, (p.kv_len.div_ceil(64) as u32, bkv, nb), 128, smem)?;
        }
        if p.q_len > 0 {
            let smem = (2 * 64 * d + 4 * stream * d) * 2;
            go(q_name, (p.q_len.div_ceil(64) as u32, bh, nb), 128, smem)?;
        }
        return Ok(());
    }
    // scalar kernels: 8 warps, tiles of 32 rows staged as f32 (padded by one)
    let smem = (2 * 32 * (d + 1) + 2 * 8 * d + 64) * 4;
    if p.kv_len > 0 {
        go("flash_bwd_kv_generic", (p.kv_len.div_ceil(8) as u32, bkv, nb), 256, smem)?;
    }
    if p.q_len > 0 {
        go("flash_bwd_q_generic", (p.q_len.div_ceil(8) as u32, bh, nb), 256, smem)?;
    }
    Ok(())
}

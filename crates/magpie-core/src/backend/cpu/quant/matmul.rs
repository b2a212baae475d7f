//! `y[M, N] = x[M, K] · Wᵀ` with W `[N, K]` kept in its quantized blocks.
//!
//! Why f32 and not llama.cpp's integer dot products: each block is decoded to f32 (bit-exact
//! with the format's dequantizer) and multiplied in f32, so the result differs from
//! dequantize-then-matmul only by the order of the f32 sums; quantizing the activations to 8
//! bits (q8_0 / q8_K) would add a second rounding of about 2^-8 relative per block, which the
//! model tests against transformers' logits would have to absorb. The cost is compute: decoding
//! is a few vector ops per 8 weights, where an integer `maddubs` path does 32 at once, so on a
//! CPU this path is bounded by the ALUs rather than by memory (`benchmark/NOTES.md`).
//!
//! Two shapes of work, both parallel over panels of W's rows (output columns) with rayon:
//! - few activation rows (decode): each weight row is decoded into an L1-resident f32 buffer and
//!   dotted with every x row; the weights are read from memory once, in their packed size;
//! - many rows (prefill): a panel of weight rows is decoded to f32 once and multiplied with the
//!   `gemm` crate, so the decoding is amortized over M and the product runs at GEMM speed.

use super::{q4_0, q4_k, q6_k, q8_0, QuantType};
use crate::{Error, Result};
use rayon::prelude::*;

/// Weight rows per parallel task for the decode shape (64 Q4_K rows of 2048 are 72 KiB).
const GEMV_PANEL: usize = 64;
/// From this many activation rows on, panels go through the f32 GEMM: below it, decoding a
/// weight row costs less than the GEMM's packing (measured with `quant-bench`).
const GEMM_MIN_M: usize = 8;

macro_rules! row_decoder {
    ($name:ident, $m:ident) => {
        crate::simd_kernel! {
            /// Decodes whole blocks `w` into `o` (`o.len()` = blocks x elements per block).
            fn $name(w: &[u8], o: &mut [f32]) {
                for (b, o) in w.chunks_exact($m::BYTES).zip(o.chunks_exact_mut($m::ELEMS)) {
                    $m::decode(b, o);
                }
            }
        }
    };
}
row_decoder!(decode_q8_0, q8_0);
row_decoder!(decode_q4_0, q4_0);
row_decoder!(decode_q4_k, q4_k);
row_decoder!(decode_q6_k, q6_k);

/// Decodes consecutive rows (whole blocks) of type `ty` from `w` into `out`.
fn decode(ty: QuantType, w: &[u8], out: &mut [f32]) {
    match ty {
        QuantType::Q8_0 => decode_q8_0(w, out),
        QuantType::Q4_0 => decode_q4_0(w, out),
        QuantType::Q4_K => decode_q4_k(w, out),
        QuantType::Q6_K => decode_q6_k(w, out),
    }
}

crate::simd_kernel! {
    /// Σ a[i] b[i] with 16 lanes of partial sums (two AVX registers, so the adds pipeline).
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0f32; 16];
        let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
        let (ar, br) = (ac.remainder(), bc.remainder());
        for (x, y) in ac.zip(bc) {
            for l in 0..16 {
                acc[l] += x[l] * y[l];
            }
        }
        let mut s = 0f32;
        for (x, y) in ar.iter().zip(br) {
            s += x * y;
        }
        acc.iter().sum::<f32>() + s
    }
}

/// Checks `w` holds exactly an `n x k` matrix of `ty`; returns the bytes of one row.
fn row_bytes(op: &str, ty: QuantType, w: &[u8], n: usize, k: usize) -> Result<usize> {
    let need = ty.matrix_bytes(op, n, k)?;
    if w.len() != need {
        return Err(Error::shape(op, format!("a {n}x{k} {ty} matrix has {need} bytes, got {}", w.len())));
    }
    Ok(need.checked_div(n).unwrap_or(0))
}

/// Dequantizes an `n x k` matrix of `ty` to row-major f32 (in parallel over rows).
pub fn dequantize_rows(ty: QuantType, w: &[u8], n: usize, k: usize) -> Result<Vec<f32>> {
    let rb = row_bytes("dequantize", ty, w, n, k)?;
    let mut out = vec![0f32; n * k];
    if rb > 0 && k > 0 {
        out.par_chunks_mut(k * GEMV_PANEL).zip(w.par_chunks(rb * GEMV_PANEL)).for_each(|(o, w)| decode(ty, w, o));
    }
    Ok(out)
}

/// `y = x Wᵀ`: `x` is `m x k` row-major f32, `w` an `n x k` matrix of `ty` (rows of whole
/// blocks, as GGUF stores a `[n, k]` weight); returns `m x n` row-major f32. Errors (naming
/// `quant_matmul`) when `k` is not a multiple of the block size or a buffer has the wrong size.
pub fn quant_matmul(ty: QuantType, w: &[u8], n: usize, k: usize, x: &[f32], m: usize) -> Result<Vec<f32>> {
    let op = "quant_matmul";
    let rb = row_bytes(op, ty, w, n, k)?;
    if Some(x.len()) != m.checked_mul(k) {
        return Err(Error::shape(op, format!("x has {} values, not {m}x{k}", x.len())));
    }
    let mut y = vec![0f32; m * n];
    if m == 0 || n == 0 || k == 0 {
        return Ok(y);
    }
    let yp = y.as_mut_ptr() as usize;
    let panel = if m < GEMM_MIN_M { GEMV_PANEL } else { n.div_ceil(2 * rayon::current_num_threads()).clamp(8, 256) };
    (0..n.div_ceil(panel)).into_par_iter().for_each(|p| {
        let (n0, n1) = (p * panel, ((p + 1) * panel).min(n));
        let wp = &w[n0 * rb..n1 * rb];
        if m < GEMM_MIN_M {
            let mut row = vec![0f32; k];
            for (j, wr) in (n0..n1).zip(wp.chunks_exact(rb)) {
                decode(ty, wr, &mut row);
                for (i, xr) in x.chunks_exact(k).enumerate() {
                    // SAFETY: i < m and j < n index inside the m x n `y`; each task writes only its
                    // own columns n0..n1, so no two threads write one element.
                    unsafe { *(yp as *mut f32).add(i * n + j) = dot(&row, xr) };
                }
            }
        } else {
            let mut panel_f32 = vec![0f32; (n1 - n0) * k];
            decode(ty, wp, &mut panel_f32);
            // SAFETY: dst is columns n0..n1 of the row-major m x n `y` (column stride 1, row
            // stride n), written only by this task; lhs is x (m x k, row-major); rhs element
            // (kk, j) is panel_f32[j * k + kk] (column stride k, row stride 1); all in bounds.
            unsafe {
                gemm::gemm(
                    m,
                    n1 - n0,
                    k,
                    (yp as *mut f32).add(n0),
                    1,
                    n as isize,
                    false,
                    x.as_ptr(),
                    1,
                    k as isize,
                    panel_f32.as_ptr(),
                    k as isize,
                    1,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                )
            }
        }
    });
    Ok(y)
}

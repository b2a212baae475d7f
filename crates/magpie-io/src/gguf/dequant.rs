//! Dequantization to f32, bit-exact with ggml's `dequantize_row_*` and gguf-py's
//! `gguf.quants.dequantize` (same float operations in the same order, no fused multiply-add).
//! Dispatches by type; the block formats live in `dequant_legacy` (32-element blocks) and
//! `dequant_k` (256-element K-quant super-blocks).

use super::cursor::err;
use super::dequant_k as k;
use super::dequant_legacy as legacy;
use super::types::GgmlType;
use magpie_core::Result;
use rayon::prelude::*;

/// Input bytes per parallel task (a few hundred KB of output).
const PAR_BYTES: usize = 1 << 16;

/// Reads the little-endian f16 at `b[i..i + 2]` as f32 (exact).
#[inline]
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// Dequantizes `n_elements` values of type `ty` stored in `data` (which must hold exactly
/// `n_elements / block_size` blocks).
pub fn dequantize(ty: GgmlType, data: &[u8], n_elements: usize) -> Result<Vec<f32>> {
    let mut out = vec![0f32; check(ty, data, n_elements)?];
    dequantize_into(ty, data, &mut out)?;
    Ok(out)
}

fn check(ty: GgmlType, data: &[u8], n_elements: usize) -> Result<usize> {
    let bs = ty.block_size();
    if !n_elements.is_multiple_of(bs) {
        return Err(err(format!("{n_elements} elements are not a whole number of {ty} blocks of {bs}")));
    }
    let need = (n_elements / bs).checked_mul(ty.block_bytes());
    if need != Some(data.len()) {
        return Err(err(format!(
            "{n_elements} {ty} elements take {} bytes, got {}",
            need.map_or("too many".to_string(), |n| n.to_string()),
            data.len()
        )));
    }
    Ok(n_elements)
}

/// Dequantizes the blocks in `data` into `out` (whose length is the element count).
pub fn dequantize_into(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<()> {
    check(ty, data, out.len())?;
    let f: fn(&[u8], &mut [f32]) = match ty {
        GgmlType::F32 => |b, o| o[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        GgmlType::F16 => |b, o| o[0] = f16_at(b, 0),
        GgmlType::BF16 => |b, o| o[0] = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16),
        GgmlType::Q4_0 => legacy::q4_0,
        GgmlType::Q4_1 => legacy::q4_1,
        GgmlType::Q5_0 => legacy::q5_0,
        GgmlType::Q5_1 => legacy::q5_1,
        GgmlType::Q8_0 => legacy::q8_0,
        GgmlType::Q8_1 => legacy::q8_1,
        GgmlType::IQ4_NL => legacy::iq4_nl,
        GgmlType::Q2_K => k::q2_k,
        GgmlType::Q3_K => k::q3_k,
        GgmlType::Q4_K => k::q4_k,
        GgmlType::Q5_K => k::q5_k,
        GgmlType::Q6_K => k::q6_k,
        GgmlType::Q8_K => k::q8_k,
    };
    // blocks are independent: chunks of them run on the thread pool (an embedding table is a
    // quarter of a billion values), each block with the same float operations as the reference
    let (bb, bs) = (ty.block_bytes(), ty.block_size());
    let blocks = PAR_BYTES / bb + 1;
    data.par_chunks(bb * blocks).zip(out.par_chunks_mut(bs * blocks)).for_each(|(d, o)| {
        for (b, o) in d.chunks_exact(bb).zip(o.chunks_exact_mut(bs)) {
            f(b, o);
        }
    });
    Ok(())
}

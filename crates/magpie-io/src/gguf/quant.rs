//! Encoders from f32 to the types the writer produces: F32, F16, BF16 and the quantized Q8_0,
//! Q4_0, Q4_1, Q5_0 and Q5_1 blocks, rounding exactly as gguf-py's `gguf.quants.quantize` does
//! (its Q8_0 is bit-exact with ggml's reference `quantize_row_q8_0`), and a simple Q4_K
//! quantizer (gguf-py has none to match).

use super::cursor::err;
use super::types::GgmlType;
use magpie_core::Result;

/// f32 to bf16 bits as ggml's `ggml_compute_fp32_to_bf16`: NaN made quiet, otherwise rounded to
/// nearest, ties to even.
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u as u64 + 0x7fff + ((u as u64 >> 16) & 1)) >> 16) as u16
}

/// Q8_0 blocks of `x` (whose length is a multiple of 32): d = max|x| / 127, q = round(x / d)
/// (halves away from zero), d stored as f16.
pub fn quantize_q8_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / 32 * 34);
    for blk in x.chunks_exact(32) {
        let amax = blk.iter().fold(0f32, |m, v| {
            let a = v.abs();
            if a > m || a.is_nan() {
                a
            } else {
                m
            }
        });
        let d = amax / 127.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        out.extend_from_slice(&half::f16::from_f32(d).to_bits().to_le_bytes());
        for &v in blk {
            out.push((v * id).round() as i8 as u8);
        }
    }
    out
}

/// Q4_0 blocks of `x` (length a multiple of 32): the element of largest magnitude (first one on
/// ties) sets d = max / -8; q = trunc(x * (1 / d) + 8.5) computed in f64 and rounded to f32 as
/// gguf-py does, clipped to 0..=15.
pub fn quantize_q4_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / 32 * 18);
    for blk in x.chunks_exact(32) {
        let (d, q) = symmetric_codes(blk, 8.0);
        out.extend_from_slice(&f16_bytes(d));
        nibbles(&q, &mut out);
    }
    out
}

/// The symmetric 4- and 5-bit codes of one block as gguf-py computes them: the element of
/// largest magnitude (first one on ties) sets d = max / -half; q = trunc(x * (1 / d) + half + 0.5)
/// computed in f64 and rounded to f32, clipped to 0..=2 * half - 1. Returns d and the codes.
fn symmetric_codes(blk: &[f32], half: f32) -> (f32, [u8; 32]) {
    let mut imax = 0;
    for (i, v) in blk.iter().enumerate() {
        if v.abs() > blk[imax].abs() {
            imax = i;
        }
    }
    let d = blk[imax] / -half;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    let top = (2.0 * half - 1.0) as u8;
    let mut q = [0u8; 32];
    for (qj, &v) in q.iter_mut().zip(blk) {
        *qj = (((v as f64 * id as f64 + (half as f64 + 0.5)) as f32).trunc() as u8).min(top);
    }
    (d, q)
}

/// The asymmetric codes of one block (gguf-py's Q4_1/Q5_1): d = (max - min) / levels,
/// q = trunc((x - min) * (1 / d) + 0.5) in f32, clipped to 0..=levels. Returns d, min, codes.
fn asymmetric_codes(blk: &[f32], levels: f32) -> (f32, f32, [u8; 32]) {
    let max = blk.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = blk.iter().copied().fold(f32::INFINITY, f32::min);
    let d = (max - min) / levels;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    let mut q = [0u8; 32];
    for (qj, &v) in q.iter_mut().zip(blk) {
        *qj = (((v - min) * id + 0.5).trunc() as u8).min(levels as u8);
    }
    (d, min, q)
}

fn f16_bytes(x: f32) -> [u8; 2] {
    half::f16::from_f32(x).to_bits().to_le_bytes()
}

/// Packs 32 codes as 16 bytes: element j in the low nibble of byte j, element j + 16 in the high.
fn nibbles(q: &[u8; 32], out: &mut Vec<u8>) {
    for j in 0..16 {
        out.push((q[j] & 0x0F) | (q[j + 16] << 4));
    }
}

/// The fifth bits of 32 codes as a little-endian u32 (bit j for element j).
fn high_bits(q: &[u8; 32]) -> [u8; 4] {
    q.iter().enumerate().fold(0u32, |h, (j, &v)| h | (((v >> 4) & 1) as u32) << j).to_le_bytes()
}

/// Q4_1 blocks of `x` (length a multiple of 32), as gguf-py rounds them.
pub fn quantize_q4_1(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / 32 * 20);
    for blk in x.chunks_exact(32) {
        let (d, m, q) = asymmetric_codes(blk, 15.0);
        out.extend_from_slice(&f16_bytes(d));
        out.extend_from_slice(&f16_bytes(m));
        nibbles(&q, &mut out);
    }
    out
}

/// Q5_0 blocks of `x` (length a multiple of 32), as gguf-py rounds them.
pub fn quantize_q5_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / 32 * 22);
    for blk in x.chunks_exact(32) {
        let (d, q) = symmetric_codes(blk, 16.0);
        out.extend_from_slice(&f16_bytes(d));
        out.extend_from_slice(&high_bits(&q));
        nibbles(&q, &mut out);
    }
    out
}

/// Q5_1 blocks of `x` (length a multiple of 32), as gguf-py rounds them.
pub fn quantize_q5_1(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / 32 * 24);
    for blk in x.chunks_exact(32) {
        let (d, m, q) = asymmetric_codes(blk, 31.0);
        out.extend_from_slice(&f16_bytes(d));
        out.extend_from_slice(&f16_bytes(m));
        out.extend_from_slice(&high_bits(&q));
        nibbles(&q, &mut out);
    }
    out
}

/// The 4-bit range of one 32-element sub-block: the lowest value (at most 0) and the step, chosen
/// among the full range [min(0, min x), max x] shrunk by 0..4 sixtieths at either end (values
/// outside clip) as the one with the least squared error.
fn fit_range(sub: &[f32]) -> (f32, f32) {
    let lo0 = sub.iter().copied().fold(0f32, f32::min);
    let hi0 = sub.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let range = hi0 - lo0;
    if range.is_nan() || range <= 0.0 {
        return (lo0, 0.0);
    }
    let mut best = (f32::INFINITY, lo0, range / 15.0);
    for a in 0..4 {
        for b in 0..4 {
            let lo = (lo0 + a as f32 * range / 60.0).min(0.0);
            let step = (hi0 - b as f32 * range / 60.0 - lo) / 15.0;
            let err: f32 = sub
                .iter()
                .map(|&v| {
                    let q = ((v - lo) / step).round().clamp(0.0, 15.0);
                    let e = lo + q * step - v;
                    e * e
                })
                .sum();
            if err < best.0 {
                best = (err, lo, step);
            }
        }
    }
    (best.1, best.2)
}

/// Q4_K super-blocks of `x` (length a multiple of 256) with a simple, deterministic scale
/// choice (not llama.cpp's iterative search, so not the bits `llama-quantize` picks): each
/// 32-element sub-block gets a minimum (at most 0) and a step from [`fit_range`], both stored as
/// 6-bit multiples of the f16 super-block scales d = max step / 63 and dmin = max minimum / 63;
/// codes are round((x - min) / step) in 0..=15. Decodes with [`super::dequantize`] as ggml does.
pub fn quantize_q4_k(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len() / 256 * 144);
    for blk in x.chunks_exact(256) {
        let mut scale = [0f32; 8];
        let mut neg_min = [0f32; 8];
        for (k, sub) in blk.chunks_exact(32).enumerate() {
            let (lo, step) = fit_range(sub);
            scale[k] = step;
            neg_min[k] = -lo;
        }
        let to6 = |v: f32, step: f32| -> u8 {
            if step > 0.0 {
                (v / step).round().clamp(0.0, 63.0) as u8
            } else {
                0
            }
        };
        let d = half::f16::from_f32(scale.iter().copied().fold(0f32, f32::max) / 63.0);
        let dmin = half::f16::from_f32(neg_min.iter().copied().fold(0f32, f32::max) / 63.0);
        let (df, dminf) = (d.to_f32(), dmin.to_f32());
        let sc: Vec<u8> = scale.iter().map(|&v| to6(v, df)).collect();
        let mn: Vec<u8> = neg_min.iter().map(|&v| to6(v, dminf)).collect();
        out.extend_from_slice(&d.to_bits().to_le_bytes());
        out.extend_from_slice(&dmin.to_bits().to_le_bytes());
        for j in 0..4 {
            out.push(sc[j] | ((sc[4 + j] >> 4) << 6));
        }
        for j in 0..4 {
            out.push(mn[j] | ((mn[4 + j] >> 4) << 6));
        }
        for j in 0..4 {
            out.push((sc[4 + j] & 0x0F) | ((mn[4 + j] & 0x0F) << 4));
        }
        let code = |i: usize| -> u8 {
            let k = i / 32;
            let step = df * sc[k] as f32;
            if step > 0.0 {
                ((blk[i] + dminf * mn[k] as f32) / step).round().clamp(0.0, 15.0) as u8
            } else {
                0
            }
        };
        for c in 0..4 {
            for l in 0..32 {
                out.push(code(64 * c + l) | (code(64 * c + 32 + l) << 4));
            }
        }
    }
    out
}

/// Encodes `x` as `ty` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or Q4_K); the length must be a whole number of
/// blocks.
pub fn quantize(ty: GgmlType, x: &[f32]) -> Result<Vec<u8>> {
    if !x.len().is_multiple_of(ty.block_size()) {
        return Err(err(format!("{} values are not a whole number of {ty} blocks of {}", x.len(), ty.block_size())));
    }
    Ok(match ty {
        GgmlType::F32 => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        GgmlType::F16 => x.iter().flat_map(|&v| half::f16::from_f32(v).to_bits().to_le_bytes()).collect(),
        GgmlType::BF16 => x.iter().flat_map(|&v| f32_to_bf16_bits(v).to_le_bytes()).collect(),
        GgmlType::Q8_0 => quantize_q8_0(x),
        GgmlType::Q4_0 => quantize_q4_0(x),
        GgmlType::Q4_1 => quantize_q4_1(x),
        GgmlType::Q5_0 => quantize_q5_0(x),
        GgmlType::Q5_1 => quantize_q5_1(x),
        GgmlType::Q4_K => quantize_q4_k(x),
        other => {
            return Err(err(format!("quantizing to {other} is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K are)")))
        }
    })
}

//! The K-quant super-block formats (256 elements): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K. Each
//! function decodes one block (`b`, exactly the type's block bytes) into 256 values (`o`),
//! following ggml's `block_q*_K` layouts (`ggml-common.h`).

use super::dequant::f16_at;

/// Q2_K: 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit values, f16 d, f16 dmin.
/// Element `128c + 32s + l` is bits `2s..2s+2` of byte `32c + l`; group of 16 `i / 16` has
/// scale `d * (sc & 15)` and minimum `dmin * (sc >> 4)`; x = dl * q - ml.
pub(crate) fn q2_k(b: &[u8], o: &mut [f32]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    for (i, x) in o.iter_mut().enumerate() {
        let (c, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let q = (qs[32 * c + l] >> (2 * s)) & 3;
        let sc = scales[i / 16];
        let dl = d * (sc & 0xF) as f32;
        let ml = dmin * (sc >> 4) as f32;
        *x = dl * q as f32 - ml;
    }
}

/// Q3_K: 32 bytes of high-bit masks, 64 bytes of 2-bit values, 12 bytes of 6-bit scales, f16 d.
/// A set mask bit means no offset, a clear one subtracts 4; x = (d * (scale - 32)) * q.
pub(crate) fn q3_k(b: &[u8], o: &mut [f32]) {
    let (hmask, qs, sc) = (&b[0..32], &b[32..96], &b[96..108]);
    let d = f16_at(b, 108);
    let mut dl = [0f32; 16];
    for (k, v) in dl.iter_mut().enumerate() {
        let low = if k < 8 { sc[k] & 0xF } else { sc[k - 8] >> 4 };
        let high = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
        let s = ((low | (high << 4)) as i8).wrapping_sub(32);
        *v = d * s as f32;
    }
    for (i, x) in o.iter_mut().enumerate() {
        let (c, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let ql = ((qs[32 * c + l] >> (2 * s)) & 3) as i8;
        let hb = (hmask[l] >> (i / 32)) & 1;
        let q = ql - if hb == 0 { 4 } else { 0 };
        *x = dl[i / 16] * q as f32;
    }
}


/// Q4_K: f16 d, f16 dmin, 12 bytes of scales/minimums, 128 bytes of nibbles. Element
/// `64c + 32s + l` is nibble `s` of byte `32c + l`, in sub-block `2c + s`;
/// x = (d * sc) * q - dmin * m.
pub(crate) fn q4_k(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (sc, mn) = magpie_core::backend::cpu::quant::q4_k::scale_min(&b[4..16]);
    let qs = &b[16..144];
    for (i, x) in o.iter_mut().enumerate() {
        let (c, s, l) = (i / 64, (i / 32) % 2, i % 32);
        let q = (qs[32 * c + l] >> (4 * s)) & 0xF;
        let sub = i / 32;
        *x = (d * sc[sub] as f32) * q as f32 - dmin * mn[sub] as f32;
    }
}

/// Q5_K: as Q4_K plus 32 bytes of high bits (bit `sub` of byte `l` for element `32 sub + l`).
pub(crate) fn q5_k(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (sc, mn) = magpie_core::backend::cpu::quant::q4_k::scale_min(&b[4..16]);
    let (qh, qs) = (&b[16..48], &b[48..176]);
    for (i, x) in o.iter_mut().enumerate() {
        let (c, s, l) = (i / 64, (i / 32) % 2, i % 32);
        let sub = i / 32;
        let q = ((qs[32 * c + l] >> (4 * s)) & 0xF) | (((qh[l] >> sub) & 1) << 4);
        *x = (d * sc[sub] as f32) * q as f32 - dmin * mn[sub] as f32;
    }
}

/// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 signed 8-bit scales, f16 d.
/// Element `128c + 32s + l`: low nibble from byte `64c + 32(s % 2) + l` (high nibble when
/// s >= 2), high bits `2s..2s+2` of byte `32c + l`; x = (d * scale) * (q - 32).
pub(crate) fn q6_k(b: &[u8], o: &mut [f32]) {
    let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for (i, x) in o.iter_mut().enumerate() {
        let (c, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let lo = (ql[64 * c + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0xF;
        let hi = (qh[32 * c + l] >> (2 * s)) & 3;
        let q = (lo | (hi << 4)) as i8 - 32;
        *x = (d * (scales[i / 16] as i8) as f32) * q as f32;
    }
}

/// Q8_K: f32 d, 256 signed bytes, 16 i16 block sums (unused here); x = d * q.
pub(crate) fn q8_k(b: &[u8], o: &mut [f32]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (x, &q) in o.iter_mut().zip(&b[4..260]) {
        *x = d * (q as i8) as f32;
    }
}

//! Q6_K super-blocks (ggml `block_q6_K`): 256 weights as 128 bytes of low nibbles, 64 bytes of
//! 2-bit high parts, 16 signed 8-bit scales (one per 16 weights) and an f16 `d`. Element
//! `128c + 32s + l`: low nibble from byte `64c + 32(s % 2) + l` (the high nibble when s >= 2),
//! high bits `2s..2s+2` of byte `32c + l`; x = (d * scale) * (q - 32).

use super::f16_le;

/// Elements per super-block.
pub const ELEMS: usize = 256;
/// Bytes per super-block.
pub const BYTES: usize = 210;

/// Decodes one super-block `b` (exactly [`BYTES`] bytes) into 256 values, bit-exact with ggml's
/// `dequantize_row_q6_K`. Runs of 16 share a scale, so each inner loop is branch-free.
#[inline(always)]
pub fn decode(b: &[u8], o: &mut [f32]) {
    let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_le(b[208], b[209]);
    let o = &mut o[..256];
    for c in 0..2 {
        for s in 0..4 {
            let lo = &ql[64 * c + 32 * (s % 2)..64 * c + 32 * (s % 2) + 32];
            let hi = &qh[32 * c..32 * c + 32];
            let (shift_lo, shift_hi) = (4 * (s / 2) as u32, 2 * s as u32);
            let out = &mut o[128 * c + 32 * s..128 * c + 32 * s + 32];
            for half in 0..2 {
                let dl = d * (scales[8 * c + 2 * s + half] as i8) as f32;
                for l in 16 * half..16 * half + 16 {
                    let q = ((lo[l] >> shift_lo) & 0x0F) | (((hi[l] >> shift_hi) & 3) << 4);
                    out[l] = dl * (q as i32 - 32) as f32;
                }
            }
        }
    }
}

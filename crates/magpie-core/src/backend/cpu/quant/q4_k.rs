//! Q4_K super-blocks (ggml `block_q4_K`): 256 weights as f16 `d`, f16 `dmin`, 12 bytes of 6-bit
//! scales and minimums for 8 sub-blocks of 32, and 128 bytes of nibbles. Element `64c + 32s + l`
//! is nibble `s` of byte `32c + l`, in sub-block `2c + s`; x = (d * sc) * q - dmin * m.

use super::f16_le;

/// Elements per super-block.
pub const ELEMS: usize = 256;
/// Bytes per super-block.
pub const BYTES: usize = 144;

/// Unpacks the 12 bytes of 6-bit scales and minimums (8 of each), as ggml's `get_scale_min_k4`.
#[inline(always)]
pub fn scale_min(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 0x3F;
        mn[j] = s[4 + j] & 0x3F;
        sc[4 + j] = (s[8 + j] & 0x0F) | ((s[j] >> 2) & 0x30);
        mn[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30);
    }
    (sc, mn)
}

/// Decodes one super-block `b` (exactly [`BYTES`] bytes) into 256 values, bit-exact with ggml's
/// `dequantize_row_q4_K`. Written as 8 runs of 32 with hoisted scales so the loops vectorize.
#[inline(always)]
pub fn decode(b: &[u8], o: &mut [f32]) {
    let d = f16_le(b[0], b[1]);
    let dmin = f16_le(b[2], b[3]);
    let (sc, mn) = scale_min(&b[4..16]);
    let qs = &b[16..144];
    let o = &mut o[..256];
    for c in 0..4 {
        let q = &qs[32 * c..32 * c + 32];
        let (d1, m1) = (d * sc[2 * c] as f32, dmin * mn[2 * c] as f32);
        let (d2, m2) = (d * sc[2 * c + 1] as f32, dmin * mn[2 * c + 1] as f32);
        let (lo, hi) = o[64 * c..64 * c + 64].split_at_mut(32);
        for l in 0..32 {
            lo[l] = d1 * (q[l] & 0x0F) as f32 - m1;
            hi[l] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

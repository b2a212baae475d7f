//! Q4_0 blocks (ggml `block_q4_0`): 32 weights as an f16 scale `d` and 16 bytes of nibbles;
//! element `j < 16` is the low nibble of byte `j`, element `j + 16` its high nibble; x = d (q - 8).

use super::f16_le;

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 18;

/// Decodes one block `b` (exactly [`BYTES`] bytes) into 32 values, bit-exact with ggml's
/// `dequantize_row_q4_0`.
#[inline(always)]
pub fn decode(b: &[u8], o: &mut [f32]) {
    let d = f16_le(b[0], b[1]);
    let (qs, o) = (&b[2..18], &mut o[..32]);
    for j in 0..16 {
        o[j] = ((qs[j] & 0x0F) as i32 - 8) as f32 * d;
        o[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

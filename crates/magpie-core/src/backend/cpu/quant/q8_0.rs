//! Q8_0 blocks (ggml `block_q8_0`): 32 weights as an f16 scale `d` and 32 signed bytes; x = q * d.

use super::f16_le;

/// Elements per block.
pub const ELEMS: usize = 32;
/// Bytes per block.
pub const BYTES: usize = 34;

/// Decodes one block `b` (exactly [`BYTES`] bytes) into 32 values; the same float operations as
/// ggml's `dequantize_row_q8_0`, so the values are bit-exact.
#[inline(always)]
pub fn decode(b: &[u8], o: &mut [f32]) {
    let d = f16_le(b[0], b[1]);
    let (qs, o) = (&b[2..34], &mut o[..32]);
    for j in 0..32 {
        o[j] = (qs[j] as i8) as f32 * d;
    }
}

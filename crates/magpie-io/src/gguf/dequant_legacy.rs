//! The 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 and IQ4_NL. Each function
//! decodes one block (`b`, exactly the type's block bytes) into 32 values (`o`). Element `j < 16`
//! is the low nibble of byte `j`, element `j + 16` its high nibble.

use super::dequant::f16_at;

/// IQ4_NL's non-linear 4-bit code book (`kvalues_iq4nl`).
pub const IQ4_NL_VALUES: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// The 4-bit value of element `j` (0..32) from 16 packed bytes.
#[inline]
fn nibble(qs: &[u8], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

/// Q4_0: f16 scale d, 16 bytes of nibbles; x = d * (q - 8).
pub(crate) fn q4_0(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    for (j, x) in o.iter_mut().enumerate() {
        *x = d * (nibble(&b[2..18], j) as i32 - 8) as f32;
    }
}

/// Q4_1: f16 scale d, f16 minimum m, 16 bytes of nibbles; x = d * q + m.
pub(crate) fn q4_1(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    for (j, x) in o.iter_mut().enumerate() {
        *x = d * nibble(&b[4..20], j) as f32 + m;
    }
}

/// The 5-bit value of element `j`: a nibble plus bit `j` of the 32-bit high mask.
#[inline]
fn five_bit(qh: u32, qs: &[u8], j: usize) -> u8 {
    nibble(qs, j) | ((((qh >> j) & 1) as u8) << 4)
}

/// Q5_0: f16 d, 4 bytes of high bits, 16 bytes of nibbles; x = d * (q - 16).
pub(crate) fn q5_0(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for (j, x) in o.iter_mut().enumerate() {
        *x = d * (five_bit(qh, &b[6..22], j) as i32 - 16) as f32;
    }
}

/// Q5_1: f16 d, f16 m, 4 bytes of high bits, 16 bytes of nibbles; x = d * q + m.
pub(crate) fn q5_1(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for (j, x) in o.iter_mut().enumerate() {
        *x = d * five_bit(qh, &b[8..24], j) as f32 + m;
    }
}

/// Q8_0: f16 d, 32 signed bytes; x = q * d.
pub(crate) fn q8_0(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    for (x, &q) in o.iter_mut().zip(&b[2..34]) {
        *x = (q as i8) as f32 * d;
    }
}

/// Q8_1: f16 d, f16 sum (unused here), 32 signed bytes; x = q * d.
pub(crate) fn q8_1(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    for (x, &q) in o.iter_mut().zip(&b[4..36]) {
        *x = (q as i8) as f32 * d;
    }
}

/// IQ4_NL: f16 d, 16 bytes of nibbles indexing [`IQ4_NL_VALUES`]; x = d * value.
pub(crate) fn iq4_nl(b: &[u8], o: &mut [f32]) {
    let d = f16_at(b, 0);
    for (j, x) in o.iter_mut().enumerate() {
        *x = d * IQ4_NL_VALUES[nibble(&b[2..18], j) as usize] as f32;
    }
}

//! Quantized weights on the CPU: block decoders for the GGUF (ggml) formats Q8_0, Q4_0, Q4_K and
//! Q6_K, one file per block family, and `y = x Wᵀ` with W kept in its blocks (`matmul.rs`).
//! The kernels work on raw block bytes, so this layer needs nothing of the file format; the
//! format crate maps its type numbers to [`QuantType`].

pub mod matmul;
pub mod q4_0;
pub mod q4_k;
pub mod q6_k;
pub mod q8_0;

use crate::{Error, Result};
use std::fmt;

pub use matmul::{dequantize_rows, quant_matmul};

/// The little-endian f16 of bytes `a`, `b` as f32 (exact).
#[inline(always)]
fn f16_le(a: u8, b: u8) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([a, b])).to_f32()
}

/// A block format the quantized kernels run on (ggml's names).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantType {
    /// 32 weights: f16 scale + 32 signed bytes (34 bytes, 8.5 bits a weight).
    Q8_0,
    /// 32 weights: f16 scale + 16 bytes of nibbles (18 bytes, 4.5 bits a weight).
    Q4_0,
    /// 256 weights: f16 d/dmin, 6-bit sub-block scales/minimums, nibbles (144 bytes, 4.5 bits).
    Q4_K,
    /// 256 weights: 6-bit values, 8-bit sub-block scales, f16 d (210 bytes, 6.5625 bits).
    Q6_K,
}

impl QuantType {
    /// Every type with kernels.
    pub const ALL: [QuantType; 4] = [QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K];

    /// Weights per block.
    pub fn block_elems(self) -> usize {
        match self {
            QuantType::Q8_0 => q8_0::ELEMS,
            QuantType::Q4_0 => q4_0::ELEMS,
            QuantType::Q4_K => q4_k::ELEMS,
            QuantType::Q6_K => q6_k::ELEMS,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            QuantType::Q8_0 => q8_0::BYTES,
            QuantType::Q4_0 => q4_0::BYTES,
            QuantType::Q4_K => q4_k::BYTES,
            QuantType::Q6_K => q6_k::BYTES,
        }
    }

    /// ggml's name ("Q4_K").
    pub fn name(self) -> &'static str {
        match self {
            QuantType::Q8_0 => "Q8_0",
            QuantType::Q4_0 => "Q4_0",
            QuantType::Q4_K => "Q4_K",
            QuantType::Q6_K => "Q6_K",
        }
    }

    /// The type called `name` (ggml's spelling, any case).
    pub fn from_name(name: &str) -> Option<QuantType> {
        QuantType::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// The bytes of a `rows x cols` matrix of this type; an error naming `op` when `cols` is not
    /// a whole number of blocks (ggml blocks run along a row) or the size overflows.
    pub fn matrix_bytes(self, op: &str, rows: usize, cols: usize) -> Result<usize> {
        let be = self.block_elems();
        if !cols.is_multiple_of(be) {
            return Err(Error::shape(op, format!("{self} rows of {cols} weights are not a whole number of blocks of {be}")));
        }
        rows.checked_mul(cols / be)
            .and_then(|b| b.checked_mul(self.block_bytes()))
            .ok_or_else(|| Error::shape(op, format!("a {rows}x{cols} {self} matrix is too large")))
    }

    /// Decodes one block (`b`: exactly [`block_bytes`](Self::block_bytes) bytes) into
    /// [`block_elems`](Self::block_elems) values.
    #[inline(always)]
    pub fn decode(self, b: &[u8], o: &mut [f32]) {
        match self {
            QuantType::Q8_0 => q8_0::decode(b, o),
            QuantType::Q4_0 => q4_0::decode(b, o),
            QuantType::Q4_K => q4_k::decode(b, o),
            QuantType::Q6_K => q6_k::decode(b, o),
        }
    }
}

impl fmt::Display for QuantType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

//! Dtype names of the safetensors header and the byte encoding of each dtype.

use magpie_core::num_complex::Complex32;
use magpie_core::{float8, half, DType, Element, Error, Result, Tensor};

/// The header's name for a dtype.
pub fn name(d: DType) -> Result<&'static str> {
    Ok(match d {
        DType::Bool => "BOOL",
        DType::U8 => "U8",
        DType::I8 => "I8",
        DType::I16 => "I16",
        DType::I32 => "I32",
        DType::I64 => "I64",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::C64 => "C64",
        DType::F8E4M3 => "F8_E4M3",
        DType::F8E5M2 => "F8_E5M2",
        DType::C128 => return Err(Error::io("safetensors", "complex128 has no safetensors dtype")),
    })
}

/// The dtype of a header name.
pub fn parse(s: &str) -> Result<DType> {
    Ok(match s {
        "BOOL" => DType::Bool,
        "U8" => DType::U8,
        "I8" => DType::I8,
        "I16" => DType::I16,
        "I32" => DType::I32,
        "I64" => DType::I64,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "F32" => DType::F32,
        "F64" => DType::F64,
        "C64" => DType::C64,
        "F8_E4M3" => DType::F8E4M3,
        "F8_E5M2" => DType::F8E5M2,
        other => return Err(Error::io("safetensors", format!("unknown or unsupported dtype '{other}'"))),
    })
}

fn decode_vec<T: Element, const N: usize>(b: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    b.chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect()
}

/// A tensor of `shape` from little-endian bytes (`bytes.len()` already checked).
pub fn decode(d: DType, bytes: &[u8], shape: &[usize]) -> Result<Tensor> {
    match d {
        DType::Bool => {
            if let Some(bad) = bytes.iter().find(|&&b| b > 1) {
                return Err(Error::io("safetensors", format!("invalid bool byte {bad}")));
            }
            Tensor::from_vec(bytes.iter().map(|&b| b != 0).collect::<Vec<bool>>(), shape)
        }
        DType::U8 => Tensor::from_vec(bytes.to_vec(), shape),
        DType::I8 => Tensor::from_vec(bytes.iter().map(|&b| b as i8).collect::<Vec<i8>>(), shape),
        DType::I16 => Tensor::from_vec(decode_vec(bytes, i16::from_le_bytes), shape),
        DType::I32 => Tensor::from_vec(decode_vec(bytes, i32::from_le_bytes), shape),
        DType::I64 => Tensor::from_vec(decode_vec(bytes, i64::from_le_bytes), shape),
        DType::F16 => Tensor::from_vec(decode_vec(bytes, half::f16::from_le_bytes), shape),
        DType::BF16 => Tensor::from_vec(decode_vec(bytes, half::bf16::from_le_bytes), shape),
        DType::F32 => Tensor::from_vec(decode_vec(bytes, f32::from_le_bytes), shape),
        DType::F64 => Tensor::from_vec(decode_vec(bytes, f64::from_le_bytes), shape),
        DType::C64 => Tensor::from_vec(
            decode_vec(bytes, |b: [u8; 8]| {
                Complex32::new(f32::from_le_bytes([b[0], b[1], b[2], b[3]]), f32::from_le_bytes([b[4], b[5], b[6], b[7]]))
            }),
            shape,
        ),
        DType::F8E4M3 => Tensor::from_vec(bytes.iter().map(|&b| float8::F8E4M3(b)).collect::<Vec<_>>(), shape),
        DType::F8E5M2 => Tensor::from_vec(bytes.iter().map(|&b| float8::F8E5M2(b)).collect::<Vec<_>>(), shape),
        DType::C128 => Err(Error::io("safetensors", "complex128 has no safetensors dtype")),
    }
}

/// The little-endian bytes of a tensor's elements (row-major).
pub fn encode(t: &Tensor) -> Result<Vec<u8>> {
    fn enc<T: Element, const N: usize>(t: &Tensor, f: fn(T) -> [u8; N]) -> Result<Vec<u8>> {
        Ok(t.to_vec::<T>()?.into_iter().flat_map(f).collect())
    }
    match t.dtype() {
        DType::Bool => enc(t, |b: bool| [b as u8]),
        DType::U8 => enc(t, |b: u8| [b]),
        DType::I8 => enc(t, |b: i8| [b as u8]),
        DType::I16 => enc(t, i16::to_le_bytes),
        DType::I32 => enc(t, i32::to_le_bytes),
        DType::I64 => enc(t, i64::to_le_bytes),
        DType::F16 => enc(t, half::f16::to_le_bytes),
        DType::BF16 => enc(t, half::bf16::to_le_bytes),
        DType::F32 => enc(t, f32::to_le_bytes),
        DType::F64 => enc(t, f64::to_le_bytes),
        DType::C64 => enc(t, |c: Complex32| {
            let (a, b) = (c.re.to_le_bytes(), c.im.to_le_bytes());
            [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
        }),
        DType::F8E4M3 => enc(t, |v: float8::F8E4M3| [v.0]),
        DType::F8E5M2 => enc(t, |v: float8::F8E5M2| [v.0]),
        DType::C128 => Err(Error::io("safetensors", "complex128 has no safetensors dtype")),
    }
}

//! The two float8 formats (`float8_e4m3fn`, `float8_e5m2`), with PyTorch's rounding
//! (round to nearest even) and overflow rules (e4m3fn overflows to NaN, e5m2 to infinity).

use std::fmt;

/// `torch.float8_e4m3fn`: 4 exponent bits, 3 mantissa bits, no infinities, max 448.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct F8E4M3(pub u8);

/// `torch.float8_e5m2`: 5 exponent bits, 2 mantissa bits, IEEE-style infinities, max 57344.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct F8E5M2(pub u8);

struct Format {
    mbits: i32,
    bias: i32,
    ieee_inf: bool,
    max: f64,
}

const E4M3: Format = Format { mbits: 3, bias: 7, ieee_inf: false, max: 448.0 };
const E5M2: Format = Format { mbits: 2, bias: 15, ieee_inf: true, max: 57344.0 };

fn encode(v: f64, f: &Format) -> u8 {
    let sign: u8 = if v.is_sign_negative() { 0x80 } else { 0 };
    if v.is_nan() {
        return sign | 0x7F;
    }
    let a = v.abs();
    let overflow = if f.ieee_inf { sign | 0x7C } else { sign | 0x7F };
    if a.is_infinite() {
        return overflow;
    }
    if a == 0.0 {
        return sign;
    }
    let raw_exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let e = raw_exp.max(1 - f.bias);
    let scale = 2f64.powi(e - f.mbits);
    let q = (a / scale).round_ties_even();
    let value = q * scale;
    if value > f.max {
        return overflow;
    }
    let implicit = 1u32 << f.mbits;
    let q = q as u32;
    let bits = if q >= 2 * implicit {
        // rounding carried into the next binade
        (((e + 1 + f.bias) as u32) << f.mbits) | ((q / 2) - implicit)
    } else if q >= implicit {
        (((e + f.bias) as u32) << f.mbits) | (q - implicit)
    } else {
        q // subnormal
    };
    sign | bits as u8
}

fn decode(b: u8, f: &Format) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let ebits = 7 - f.mbits;
    let exp = ((b & 0x7F) >> f.mbits) as i32;
    let mant = (b & ((1 << f.mbits) - 1)) as i32;
    let emax = (1 << ebits) - 1;
    if f.ieee_inf && exp == emax {
        return if mant == 0 { sign * f32::INFINITY } else { f32::NAN };
    }
    if !f.ieee_inf && exp == emax && mant == (1 << f.mbits) - 1 {
        return f32::NAN;
    }
    let m = mant as f32 / (1 << f.mbits) as f32;
    if exp == 0 {
        sign * m * 2f32.powi(1 - f.bias)
    } else {
        sign * (1.0 + m) * 2f32.powi(exp - f.bias)
    }
}

macro_rules! fp8 {
    ($t:ident, $fmt:ident) => {
        impl $t {
            /// Rounds an f32 to this format (round to nearest even).
            pub fn from_f32(v: f32) -> Self {
                $t(encode(v as f64, &$fmt))
            }
            /// Rounds an f64 to this format (round to nearest even, once).
            pub fn from_f64(v: f64) -> Self {
                $t(encode(v, &$fmt))
            }
            /// The exact f32 value.
            pub fn to_f32(self) -> f32 {
                decode(self.0, &$fmt)
            }
            /// The exact f64 value.
            pub fn to_f64(self) -> f64 {
                decode(self.0, &$fmt) as f64
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.to_f32())
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.to_f32())
            }
        }
    };
}
fp8!(F8E4M3, E4M3);
fp8!(F8E5M2, E5M2);

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn roundtrip_every_code() {
        for b in 0..=255u8 {
            let v = F8E4M3(b).to_f32();
            if !v.is_nan() {
                assert_eq!(F8E4M3::from_f32(v).0, b, "e4m3 code {b:#x} value {v}");
            }
            let v = F8E5M2(b).to_f32();
            if !v.is_nan() {
                assert_eq!(F8E5M2::from_f32(v).0, b, "e5m2 code {b:#x} value {v}");
            }
        }
    }
    #[test]
    fn overflow_rules() {
        assert!(F8E4M3::from_f32(500.0).to_f32().is_nan());
        assert_eq!(F8E4M3::from_f32(460.0).to_f32(), 448.0);
        assert_eq!(F8E5M2::from_f32(1e6).to_f32(), f32::INFINITY);
        assert_eq!(F8E4M3::from_f32(0.3).to_f32(), 0.3125);
    }
}

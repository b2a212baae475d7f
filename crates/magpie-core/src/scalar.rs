//! A Python-style scalar: what `tensor + 2`, `clamp(min=0.5)` or `fill_(True)` take.

use crate::dtype::DType;
use num_complex::Complex64;
use std::fmt;

/// A scalar argument. Its kind decides type promotion the way a Python number does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Complex(Complex64),
}

impl Scalar {
    /// The dtype this scalar has as a Python number (`bool`, `int64`, `float64`, `complex128`).
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F64,
            Scalar::Complex(_) => DType::C128,
        }
    }
    /// The value as f64 (real part for complex).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
            Scalar::Complex(c) => c.re,
        }
    }
    /// The value as i64 (truncating floats).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
            Scalar::Complex(c) => c.re as i64,
        }
    }
    /// The value as a complex number.
    pub fn to_c128(self) -> Complex64 {
        match self {
            Scalar::Complex(c) => c,
            s => Complex64::new(s.to_f64(), 0.0),
        }
    }
    /// Truthiness, as Python's `bool(x)`.
    pub fn to_bool(self) -> bool {
        match self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
            Scalar::Complex(c) => c.re != 0.0 || c.im != 0.0,
        }
    }
    /// True for integer and bool scalars.
    pub fn is_integral(self) -> bool {
        matches!(self, Scalar::Bool(_) | Scalar::Int(_))
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Complex(c) => write!(f, "({}{:+}j)", c.re, c.im),
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar { fn from(x: $t) -> Self { Scalar::$v(x.into()) } }
    )*};
}
from_scalar!(bool => Bool, i64 => Int, i32 => Int, u8 => Int, f64 => Float, f32 => Float, Complex64 => Complex);
impl From<usize> for Scalar {
    fn from(x: usize) -> Self {
        Scalar::Int(x as i64)
    }
}

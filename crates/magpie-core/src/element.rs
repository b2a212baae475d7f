//! `Element`: the Rust type behind each dtype, and PyTorch's casting rules between them.

use crate::dtype::DType;
use crate::float8::{F8E4M3, F8E5M2};
use crate::storage::CpuStorage;
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

/// A Rust type that stores one dtype's elements. Conversions follow PyTorch's casts:
/// float to int truncates toward zero, int to narrower int wraps, anything to bool is `!= 0`.
pub trait Element: Copy + Send + Sync + 'static + Default + PartialEq + std::fmt::Debug {
    /// The dtype this type stores.
    const DTYPE: DType;
    /// The value as f64 (the real part of a complex value).
    fn to_f64(self) -> f64;
    /// The value as a complex number.
    fn to_c128(self) -> Complex64;
    /// The value as i64 (floats truncate toward zero).
    fn to_i64(self) -> i64;
    /// `self != 0`.
    fn to_bool(self) -> bool;
    /// From f64, rounding once to this type.
    fn from_f64(v: f64) -> Self;
    /// From a complex number (real part for real types).
    fn from_c128(v: Complex64) -> Self;
    /// From i64 (wrapping for narrower ints).
    fn from_i64(v: i64) -> Self;
    /// From bool (0 or 1).
    fn from_bool(v: bool) -> Self;
    /// Borrows the elements if `s` holds this type.
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    /// Mutably borrows the elements if `s` holds this type (copying a mapped storage first).
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]>;
    /// Wraps a vector as storage.
    fn into_storage(v: Vec<Self>) -> CpuStorage;

    /// Casts from another element type with PyTorch's rules.
    #[inline]
    fn cast_from<S: Element>(v: S) -> Self {
        if Self::DTYPE.is_complex() {
            Self::from_c128(v.to_c128())
        } else if S::DTYPE.is_integral() {
            Self::from_i64(v.to_i64())
        } else if Self::DTYPE.is_bool() {
            Self::from_bool(v.to_bool())
        } else {
            Self::from_f64(v.to_f64())
        }
    }
}

/// Float to int the way PyTorch's CPU kernels do it: truncate, NaN to 0 (Rust saturates the rest).
#[inline]
fn f2i(v: f64) -> i64 {
    v as i64
}

macro_rules! int_element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn to_c128(self) -> Complex64 { Complex64::new(self as f64, 0.0) }
            #[inline] fn to_i64(self) -> i64 { self as i64 }
            #[inline] fn to_bool(self) -> bool { self != 0 }
            #[inline] fn from_f64(v: f64) -> Self { f2i(v) as $t }
            #[inline] fn from_c128(v: Complex64) -> Self { f2i(v.re) as $t }
            #[inline] fn from_i64(v: i64) -> Self { v as $t }
            #[inline] fn from_bool(v: bool) -> Self { v as $t }
            fn slice(s: &CpuStorage) -> Option<&[Self]> { match s { CpuStorage::$d(v) => Some(v), CpuStorage::Mapped(m) => m.typed(), CpuStorage::Pinned(p) => p.as_slice(), _ => None } }
            fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]> { s.make_owned(); match s { CpuStorage::$d(v) => Some(v), CpuStorage::Pinned(p) => p.as_mut_slice(), _ => None } }
            fn into_storage(v: Vec<Self>) -> CpuStorage { CpuStorage::$d(v) }
        }
    };
}
int_element!(u8, U8);
int_element!(i8, I8);
int_element!(i16, I16);
int_element!(i32, I32);
int_element!(i64, I64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline] fn to_f64(self) -> f64 { self as u8 as f64 }
    #[inline] fn to_c128(self) -> Complex64 { Complex64::new(self as u8 as f64, 0.0) }
    #[inline] fn to_i64(self) -> i64 { self as i64 }
    #[inline] fn to_bool(self) -> bool { self }
    #[inline] fn from_f64(v: f64) -> Self { v != 0.0 }
    #[inline] fn from_c128(v: Complex64) -> Self { v.re != 0.0 || v.im != 0.0 }
    #[inline] fn from_i64(v: i64) -> Self { v != 0 }
    #[inline] fn from_bool(v: bool) -> Self { v }
    fn slice(s: &CpuStorage) -> Option<&[Self]> { match s { CpuStorage::Bool(v) => Some(v), CpuStorage::Mapped(m) => m.typed(), CpuStorage::Pinned(p) => p.as_slice(), _ => None } }
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]> { s.make_owned(); match s { CpuStorage::Bool(v) => Some(v), CpuStorage::Pinned(p) => p.as_mut_slice(), _ => None } }
    fn into_storage(v: Vec<Self>) -> CpuStorage { CpuStorage::Bool(v) }
}

macro_rules! float_element {
    ($t:ty, $d:ident, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline] fn to_f64(self) -> f64 { ($to)(self) }
            #[inline] fn to_c128(self) -> Complex64 { Complex64::new(($to)(self), 0.0) }
            #[inline] fn to_i64(self) -> i64 { f2i(($to)(self)) }
            #[inline] fn to_bool(self) -> bool { ($to)(self) != 0.0 }
            #[inline] fn from_f64(v: f64) -> Self { ($from)(v) }
            #[inline] fn from_c128(v: Complex64) -> Self { ($from)(v.re) }
            #[inline] fn from_i64(v: i64) -> Self { ($from)(v as f64) }
            #[inline] fn from_bool(v: bool) -> Self { ($from)(v as u8 as f64) }
            fn slice(s: &CpuStorage) -> Option<&[Self]> { match s { CpuStorage::$d(v) => Some(v), CpuStorage::Mapped(m) => m.typed(), CpuStorage::Pinned(p) => p.as_slice(), _ => None } }
            fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]> { s.make_owned(); match s { CpuStorage::$d(v) => Some(v), CpuStorage::Pinned(p) => p.as_mut_slice(), _ => None } }
            fn into_storage(v: Vec<Self>) -> CpuStorage { CpuStorage::$d(v) }
        }
    };
}
float_element!(f32, F32, |x: f32| x as f64, |v: f64| v as f32);
float_element!(f64, F64, |x: f64| x, |v: f64| v);
float_element!(f16, F16, |x: f16| x.to_f64(), f16::from_f64);
float_element!(bf16, BF16, |x: bf16| x.to_f64(), bf16::from_f64);
float_element!(F8E4M3, F8E4M3, |x: F8E4M3| x.to_f64(), F8E4M3::from_f64);
float_element!(F8E5M2, F8E5M2, |x: F8E5M2| x.to_f64(), F8E5M2::from_f64);

macro_rules! complex_element {
    ($t:ty, $d:ident, $r:ty) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            #[inline] fn to_f64(self) -> f64 { self.re as f64 }
            #[inline] fn to_c128(self) -> Complex64 { Complex64::new(self.re as f64, self.im as f64) }
            #[inline] fn to_i64(self) -> i64 { f2i(self.re as f64) }
            #[inline] fn to_bool(self) -> bool { self.re != 0.0 || self.im != 0.0 }
            #[inline] fn from_f64(v: f64) -> Self { <$t>::new(v as $r, 0.0) }
            #[inline] fn from_c128(v: Complex64) -> Self { <$t>::new(v.re as $r, v.im as $r) }
            #[inline] fn from_i64(v: i64) -> Self { <$t>::new(v as $r, 0.0) }
            #[inline] fn from_bool(v: bool) -> Self { <$t>::new(v as u8 as $r, 0.0) }
            fn slice(s: &CpuStorage) -> Option<&[Self]> { match s { CpuStorage::$d(v) => Some(v), CpuStorage::Mapped(m) => m.typed(), CpuStorage::Pinned(p) => p.as_slice(), _ => None } }
            fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]> { s.make_owned(); match s { CpuStorage::$d(v) => Some(v), CpuStorage::Pinned(p) => p.as_mut_slice(), _ => None } }
            fn into_storage(v: Vec<Self>) -> CpuStorage { CpuStorage::$d(v) }
        }
    };
}
complex_element!(Complex32, C64, f32);
complex_element!(Complex64, C128, f64);

/// Runs `$body` with `$T` bound to the element type of `$dtype`: generic code written once for all dtypes.
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident, $body:block) => {{
        use $crate::dtype::DType as __D;
        match $dtype {
            __D::Bool => { type $T = bool; $body }
            __D::U8 => { type $T = u8; $body }
            __D::I8 => { type $T = i8; $body }
            __D::I16 => { type $T = i16; $body }
            __D::I32 => { type $T = i32; $body }
            __D::I64 => { type $T = i64; $body }
            __D::F16 => { type $T = $crate::half::f16; $body }
            __D::BF16 => { type $T = $crate::half::bf16; $body }
            __D::F32 => { type $T = f32; $body }
            __D::F64 => { type $T = f64; $body }
            __D::C64 => { type $T = $crate::num_complex::Complex32; $body }
            __D::C128 => { type $T = $crate::num_complex::Complex64; $body }
            __D::F8E4M3 => { type $T = $crate::float8::F8E4M3; $body }
            __D::F8E5M2 => { type $T = $crate::float8::F8E5M2; $body }
        }
    }};
}

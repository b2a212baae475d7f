//! The 14 element types and PyTorch's type promotion rules (`torch.promote_types`, `result_type`).

use crate::{Error, Result};
use std::fmt;

/// An element type, named as in PyTorch (`torch.float32` is [`DType::F32`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
    C64,
    C128,
    F8E4M3,
    F8E5M2,
}

/// PyTorch's dtype categories, in promotion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    Bool,
    Int,
    Float,
    Complex,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 14] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
        DType::F8E4M3,
        DType::F8E5M2,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 | DType::F8E4M3 | DType::F8E5M2 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// The promotion category.
    pub fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => Category::Int,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::F8E4M3 | DType::F8E5M2 => {
                Category::Float
            }
            DType::C64 | DType::C128 => Category::Complex,
        }
    }

    /// `torch.is_floating_point` (real floating types only).
    pub fn is_float(self) -> bool {
        self.category() == Category::Float
    }
    /// True for complex64 and complex128.
    pub fn is_complex(self) -> bool {
        self.category() == Category::Complex
    }
    /// True for the integer types (not bool).
    pub fn is_int(self) -> bool {
        self.category() == Category::Int
    }
    /// True for bool.
    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }
    /// True for the integer types and bool.
    pub fn is_integral(self) -> bool {
        matches!(self.category(), Category::Int | Category::Bool)
    }
    /// True for the two float8 types.
    pub fn is_float8(self) -> bool {
        matches!(self, DType::F8E4M3 | DType::F8E5M2)
    }
    /// True for signed types (ints other than u8, floats, complex).
    pub fn is_signed(self) -> bool {
        !matches!(self, DType::Bool | DType::U8)
    }

    /// The complex type with this real type's precision (`f32 -> c64`).
    pub fn to_complex(self) -> DType {
        match self {
            DType::F64 | DType::C128 => DType::C128,
            _ => DType::C64,
        }
    }
    /// The real type of a complex type (`c64 -> f32`); other types map to themselves.
    pub fn to_real(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            d => d,
        }
    }

    /// PyTorch's name without the `torch.` prefix (`float32`, `int64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
            DType::F8E4M3 => "float8_e4m3fn",
            DType::F8E5M2 => "float8_e5m2",
        }
    }

    /// Parses PyTorch's names and aliases (`float`, `torch.half`, `long`, `cfloat`, ...).
    pub fn parse(s: &str) -> Result<DType> {
        let s = s.strip_prefix("torch.").unwrap_or(s);
        Ok(match s {
            "bool" => DType::Bool,
            "uint8" | "byte" => DType::U8,
            "int8" | "char" => DType::I8,
            "int16" | "short" => DType::I16,
            "int32" | "int" => DType::I32,
            "int64" | "long" => DType::I64,
            "float16" | "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "float32" | "float" => DType::F32,
            "float64" | "double" => DType::F64,
            "complex64" | "cfloat" => DType::C64,
            "complex128" | "cdouble" => DType::C128,
            "float8_e4m3fn" => DType::F8E4M3,
            "float8_e5m2" => DType::F8E5M2,
            _ => return Err(Error::value("dtype", format!("unknown dtype '{s}'"))),
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.name())
    }
}

/// `torch.promote_types(a, b)`. Float8 types promote only with themselves, as in PyTorch.
pub fn promote_types(a: DType, b: DType) -> Result<DType> {
    use DType::*;
    if a == b {
        return Ok(a);
    }
    if a.is_float8() || b.is_float8() {
        return Err(Error::dtype(
            "promote_types",
            format!("promotion for Float8 types is not supported, attempted to promote {a} and {b}"),
        ));
    }
    let (ca, cb) = (a.category(), b.category());
    Ok(match (ca, cb) {
        (Category::Bool, _) => b,
        (_, Category::Bool) => a,
        (Category::Complex, _) | (_, Category::Complex) => {
            let ra = a.to_real();
            let rb = b.to_real();
            let r = if ra.is_float() && rb.is_float() { promote_types(ra, rb)? } else if ra.is_float() { ra } else { rb };
            if r == F64 { C128 } else { C64 }
        }
        (Category::Float, Category::Float) => match (a, b) {
            (F16, BF16) | (BF16, F16) => F32,
            _ => {
                if float_rank(a) >= float_rank(b) {
                    a
                } else {
                    b
                }
            }
        },
        (Category::Float, _) => a,
        (_, Category::Float) => b,
        (Category::Int, Category::Int) => match (a, b) {
            (U8, I8) | (I8, U8) => I16,
            (U8, x) | (x, U8) => x,
            _ => {
                if a.size() >= b.size() {
                    a
                } else {
                    b
                }
            }
        },
    })
}

fn float_rank(d: DType) -> u8 {
    match d {
        DType::F16 | DType::BF16 => 1,
        DType::F32 => 2,
        DType::F64 => 3,
        _ => 0,
    }
}

/// What an operand of `result_type` is: a tensor with dims, a 0-d tensor, or a Python-style scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// A tensor with at least one dimension.
    Dim(DType),
    /// A 0-d tensor.
    ZeroDim(DType),
    /// A scalar (its dtype: Bool, I64, F64 or C128 from the Rust/Python value).
    Scalar(DType),
}

/// `torch.result_type` over a list of operands: 0-d tensors and scalars only promote across a category.
pub fn result_type(operands: &[Operand]) -> Result<DType> {
    let mut dim: Option<DType> = None;
    let mut zero: Option<DType> = None;
    let mut wrapped: Option<DType> = None;
    fn upd(slot: &mut Option<DType>, d: DType) -> Result<()> {
        *slot = Some(match *slot {
            None => d,
            Some(s) => promote_types(s, d)?,
        });
        Ok(())
    }
    for op in operands {
        match *op {
            Operand::Dim(d) => upd(&mut dim, d)?,
            Operand::ZeroDim(d) => upd(&mut zero, d)?,
            Operand::Scalar(d) => {
                // Python floats/complexes take the default dtype's precision.
                let d = match d.category() {
                    Category::Float => crate::default_dtype(),
                    Category::Complex => crate::default_dtype().to_complex(),
                    _ => d,
                };
                upd(&mut wrapped, d)?
            }
        }
    }
    let inner = combine_categories(zero, wrapped)?;
    combine_categories(dim, inner)?.ok_or_else(|| Error::value("result_type", "no operands"))
}

fn combine_categories(higher: Option<DType>, lower: Option<DType>) -> Result<Option<DType>> {
    let (h, l) = match (higher, lower) {
        (None, l) => return Ok(l),
        (h, None) => return Ok(h),
        (Some(h), Some(l)) => (h, l),
    };
    if h.is_complex() {
        return Ok(Some(h));
    }
    if l.is_complex() {
        return Ok(Some(if h.is_float() { h.to_complex() } else { l }));
    }
    if h.is_float() {
        return Ok(Some(h));
    }
    if h == DType::Bool || l.is_float() {
        return Ok(Some(promote_types(h, l)?));
    }
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn promotion_table() {
        use DType::*;
        assert_eq!(promote_types(U8, I8).unwrap(), I16);
        assert_eq!(promote_types(I32, F16).unwrap(), F16);
        assert_eq!(promote_types(BF16, F16).unwrap(), F32);
        assert_eq!(promote_types(C64, F64).unwrap(), C128);
        assert_eq!(promote_types(Bool, I8).unwrap(), I8);
        assert!(promote_types(F8E4M3, F32).is_err());
    }
    #[test]
    fn result_type_categories() {
        use DType::*;
        use Operand::*;
        assert_eq!(result_type(&[Dim(I32), Scalar(I64)]).unwrap(), I32);
        assert_eq!(result_type(&[Dim(I32), Scalar(F64)]).unwrap(), F32);
        assert_eq!(result_type(&[Dim(F16), ZeroDim(F64)]).unwrap(), F16);
        assert_eq!(result_type(&[Dim(I64), ZeroDim(F64)]).unwrap(), F64);
        assert_eq!(result_type(&[Dim(U8), ZeroDim(I64)]).unwrap(), U8);
        assert_eq!(result_type(&[Dim(Bool), Scalar(I64)]).unwrap(), I64);
        assert_eq!(result_type(&[Dim(F32), Scalar(C128)]).unwrap(), C64);
    }
}

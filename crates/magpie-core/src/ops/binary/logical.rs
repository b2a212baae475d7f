//! Logical and bitwise ops: `logical_and`/`or`/`xor` (any dtype, bool result),
//! `bitwise_and`/`or`/`xor`/`left_shift`/`right_shift` and `gcd`/`lcm` (integers and bool only).

use super::{binary, common_dtype, not_implemented, BinarySpec, Promote};
use crate::ops::Operand;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::Result;

spec!(LOGICAL_AND, "logical_and", "logical_and", Promote::Bool, |a, b| (a != 0.0 && b != 0.0) as u8 as f32, |a, b| (a != 0.0 && b != 0.0) as u8 as f64, None, None, None,
    Some((|a, b| a != 0.0 && b != 0.0, |a, b| a != 0 && b != 0)), None);
spec!(LOGICAL_OR, "logical_or", "logical_or", Promote::Bool, |a, b| (a != 0.0 || b != 0.0) as u8 as f32, |a, b| (a != 0.0 || b != 0.0) as u8 as f64, None, None, None,
    Some((|a, b| a != 0.0 || b != 0.0, |a, b| a != 0 || b != 0)), None);
spec!(LOGICAL_XOR, "logical_xor", "logical_xor", Promote::Bool, |a, b| ((a != 0.0) != (b != 0.0)) as u8 as f32, |a, b| ((a != 0.0) != (b != 0.0)) as u8 as f64, None, None, None,
    Some((|a, b| (a != 0.0) != (b != 0.0), |a, b| (a != 0) != (b != 0))), None);

// Float functions of integer-only ops are never called: `integral_only` rejects float inputs first.
spec!(BITWISE_AND, "bitwise_and", "bitwise_and", Promote::Same, |_, _| f32::NAN, |_, _| f64::NAN, Some(|a: i64, b: i64| a & b), Some(|a, b| a & b), None, None, None);
spec!(BITWISE_OR, "bitwise_or", "bitwise_or", Promote::Same, |_, _| f32::NAN, |_, _| f64::NAN, Some(|a: i64, b: i64| a | b), Some(|a, b| a | b), None, None, None);
spec!(BITWISE_XOR, "bitwise_xor", "bitwise_xor", Promote::Same, |_, _| f32::NAN, |_, _| f64::NAN, Some(|a: i64, b: i64| a ^ b), Some(|a, b| a ^ b), None, None, None);
// Shifts compute in i64 and wrap to the result type: shifting by the type's width or more gives 0
// (left) or the sign fill (right), as PyTorch defines it; negative shifts give 0 / the sign fill too.
spec!(BITWISE_LEFT_SHIFT, "bitwise_left_shift", "lshift", Promote::Same, |_, _| f32::NAN, |_, _| f64::NAN,
    Some(|a: i64, b: i64| if !(0..64).contains(&b) { 0 } else { a.wrapping_shl(b as u32) }), None, None, None, None);
spec!(BITWISE_RIGHT_SHIFT, "bitwise_right_shift", "rshift", Promote::Same, |_, _| f32::NAN, |_, _| f64::NAN,
    Some(|a: i64, b: i64| if !(0..64).contains(&b) { a >> 63 } else { a >> b }), None, None, None, None);

fn gcd(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a.unsigned_abs(), b.unsigned_abs());
    while y != 0 {
        let t = x % y;
        x = y;
        y = t;
    }
    x as i64
}
spec!(GCD, "gcd", "gcd", Promote::Same, |_, _| f32::NAN, |_, _| f64::NAN, Some(gcd), None, None, None, None);
spec!(LCM, "lcm", "lcm", Promote::Same, |_, _| f32::NAN, |_, _| f64::NAN,
    Some(|a: i64, b: i64| {
        let g = gcd(a, b);
        if g == 0 { 0 } else { (a / g).wrapping_mul(b).wrapping_abs() }
    }), None, None, None, None);

/// Runs an integer-only spec (bitwise ops, gcd, lcm), rejecting float and complex inputs like PyTorch.
pub fn integral_only(spec: &'static BinarySpec, a: Operand, b: Operand) -> Result<Tensor> {
    let dt = common_dtype(spec.name, &a, &b)?;
    if !dt.is_integral() {
        return Err(not_implemented(spec.name, dt));
    }
    if dt.is_bool() && spec.boolean.is_none() && matches!(spec.name, "gcd" | "lcm") {
        return Err(not_implemented(spec.name, dt));
    }
    binary(spec, a, b)
}

macro_rules! logical_methods {
    ($($m:ident, $spec:ident);*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", stringify!($m), "(a, b)`: a bool tensor (nonzero is true).")]
            pub fn $m(&self, other: &Tensor) -> Result<Tensor> {
                binary(&$spec, Operand::Tensor(self), Operand::Tensor(other))
            }
        )*}
    };
}
logical_methods!(logical_and, LOGICAL_AND; logical_or, LOGICAL_OR; logical_xor, LOGICAL_XOR);

macro_rules! int_methods {
    ($($m:ident, $ms:ident, $spec:ident);*) => {
        impl Tensor {$(
            #[doc = concat!("`torch.", stringify!($m), "(a, b)` for integer and bool tensors.")]
            pub fn $m(&self, other: &Tensor) -> Result<Tensor> {
                integral_only(&$spec, Operand::Tensor(self), Operand::Tensor(other))
            }
            #[doc = concat!("`torch.", stringify!($m), "(a, s)` with a scalar.")]
            pub fn $ms(&self, s: impl Into<Scalar>) -> Result<Tensor> {
                integral_only(&$spec, Operand::Tensor(self), Operand::Scalar(s.into()))
            }
        )*}
    };
}
int_methods!(
    bitwise_and, bitwise_and_scalar, BITWISE_AND;
    bitwise_or, bitwise_or_scalar, BITWISE_OR;
    bitwise_xor, bitwise_xor_scalar, BITWISE_XOR;
    bitwise_left_shift, bitwise_left_shift_scalar, BITWISE_LEFT_SHIFT;
    bitwise_right_shift, bitwise_right_shift_scalar, BITWISE_RIGHT_SHIFT;
    gcd, gcd_scalar, GCD;
    lcm, lcm_scalar, LCM
);

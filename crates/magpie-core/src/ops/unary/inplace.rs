//! In-place forms of the common unary ops and activations as `Tensor` methods (`x.relu_()`,
//! `x.sigmoid_()`, ...): the out-of-place result written back into `x` through its layout.

use crate::tensor::Tensor;
use crate::Result;

macro_rules! inplace_methods {
    ($($m:ident => $f:ident),* $(,)?) => {
        impl Tensor {$(
            #[doc = concat!("`x.", stringify!($m), "()`: `", stringify!($f), "` in place; errors where the result dtype cannot be stored in `x`.")]
            pub fn $m(&self) -> Result<Tensor> {
                self.update_(stringify!($m), &[], |s| s.$f())
            }
        )*}
    };
}

inplace_methods!(
    abs_ => abs, neg_ => neg, sign_ => sign, ceil_ => ceil, floor_ => floor, round_ => round, trunc_ => trunc,
    frac_ => frac, exp_ => exp, expm1_ => expm1, log_ => log, log1p_ => log1p, sqrt_ => sqrt, rsqrt_ => rsqrt,
    reciprocal_ => reciprocal, square_ => square, sin_ => sin, cos_ => cos, tan_ => tan, tanh_ => tanh,
    sigmoid_ => sigmoid, erf_ => erf, erfinv_ => erfinv, relu_ => relu, relu6_ => relu6, silu_ => silu,
    hardswish_ => hardswish, hardsigmoid_ => hardsigmoid, mish_ => mish, selu_ => selu,
);

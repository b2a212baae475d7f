//! The few elementwise helpers the reduction gradients need (`abs`, `sgn`, `isnan`), kept
//! private to this family so it does not depend on the unary family's table.

use crate::ops::unary::{unary, IntMode, UnarySpec};
use crate::tensor::Tensor;
use crate::Result;

fn sign_f64(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

static R_SGN: UnarySpec = UnarySpec {
    name: "sgn",
    kernel: "sgn",
    f32: |x| sign_f64(x as f64) as f32,
    f64: sign_f64,
    int: IntMode::Same(|x: i64| x.signum()),
    complex: None,
    backward: Some(|_, _, g| g.zeros_like()),
};

static R_ABS: UnarySpec = UnarySpec {
    name: "abs",
    kernel: "abs",
    f32: f32::abs,
    f64: f64::abs,
    int: IntMode::Same(|x: i64| x.wrapping_abs()),
    complex: None,
    backward: Some(|x, _, g| g.mul(&sgn(x)?)),
};

/// `|x|` (real dtypes), differentiable: the gradient is `sgn(x) * g` (0 at 0, as PyTorch).
pub(crate) fn abs(x: &Tensor) -> Result<Tensor> {
    unary(&R_ABS, x)
}

/// `sgn(x)`: -1, 0 or 1 (real dtypes), with a zero gradient.
pub(crate) fn sgn(x: &Tensor) -> Result<Tensor> {
    unary(&R_SGN, x)
}

/// `isnan(x)` as a bool tensor (`x != x`).
pub(crate) fn isnan(x: &Tensor) -> Result<Tensor> {
    x.ne(x)
}

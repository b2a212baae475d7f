//! The elementwise helpers the reduction gradients use, as thin names over the unary family.

use crate::tensor::Tensor;
use crate::Result;

/// `|x|`, differentiable (gradient `sgn(x) * g`, 0 at 0).
pub(crate) fn abs(x: &Tensor) -> Result<Tensor> {
    x.abs()
}

/// `sgn(x)`: -1, 0 or 1 for real dtypes, with a zero gradient.
pub(crate) fn sgn(x: &Tensor) -> Result<Tensor> {
    x.sgn()
}

/// `isnan(x)` as a bool tensor.
pub(crate) fn isnan(x: &Tensor) -> Result<Tensor> {
    x.isnan()
}

//! Matrix functions built from a spectral factorization: `linalg.matrix_sqrth` (from `eigh`) and
//! `linalg.polar` (from the SVD); compositions, so their gradients are those of the factorizations.

use super::decomp::{eigh, svd};
use super::util::check_mats;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.linalg.matrix_sqrth(A)`: the symmetric positive-semidefinite square root of a symmetric
/// matrix, `V diag(sqrt(max(w, 0))) Vᵀ` with `(w, V) = eigh(A)`. Like `eigh`, only the lower
/// triangle of `A` is read; negative eigenvalues are clamped to zero.
///
/// ```
/// # use magpie_core::Tensor;
/// let a = Tensor::from_vec(vec![4.0f32, 0.0, 0.0, 9.0], &[2, 2])?;
/// let r = magpie_core::ops::linalg::matrix_sqrth(&a)?;
/// let v: Vec<f32> = r.to_vec()?;
/// assert!((v[0] - 2.0).abs() < 1e-6 && (v[3] - 3.0).abs() < 1e-6);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn matrix_sqrth(a: &Tensor) -> Result<Tensor> {
    let op = "linalg.matrix_sqrth";
    check_mats(op, a, false)?;
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    if m != n {
        return Err(Error::shape(op, format!("{op}: A must be batches of square matrices, but they are {m} by {n} matrices")));
    }
    let (w, v) = eigh(a, "L")?;
    let s = w.clamp_min(0.0)?.sqrt()?;
    v.mul(&s.unsqueeze(-2)?)?.matmul(&v.mt()?)
}

/// `torch.linalg.polar(A)`: `(U, H)` with `A = U H`, `U` (`m×n`, orthonormal columns) and `H`
/// (`n×n`, symmetric positive-semidefinite), from the thin SVD `A = W S Vh`: `U = W Vh`,
/// `H = Vhᵀ S Vh`. Needs `m >= n`.
///
/// ```
/// # use magpie_core::Tensor;
/// let a = Tensor::from_vec(vec![2.0f32, 0.0, 0.0, -3.0], &[2, 2])?;
/// let (u, h) = magpie_core::ops::linalg::polar(&a)?;
/// let (u, h): (Vec<f32>, Vec<f32>) = (u.to_vec()?, h.to_vec()?);
/// assert!((u[0] - 1.0).abs() < 1e-6 && (u[3] + 1.0).abs() < 1e-6);
/// assert!((h[0] - 2.0).abs() < 1e-6 && (h[3] - 3.0).abs() < 1e-6);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn polar(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let op = "linalg.polar";
    check_mats(op, a, false)?;
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    if m < n {
        return Err(Error::shape(op, format!("{op}: input must have at least as many rows as columns, but got {m} by {n} matrices")));
    }
    let (w, s, vh) = svd(a, false)?;
    let u = w.matmul(&vh)?;
    let h = vh.mt()?.mul(&s.unsqueeze(-2)?)?.matmul(&vh)?;
    Ok((u, h))
}

//! Householder QR in LAPACK's compact form: `geqrf` (reflectors below the diagonal, `R` on and
//! above it, scalars `tau`) and `ormqr` (multiplying by the `Q` those reflectors define).

use super::decomp::householder_product;
use super::dense;
use super::util::{build, check_float, mats};
use crate::ops::shape_ops::cat;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.geqrf(input)`: `(a, tau)`, LAPACK's compact QR. `a` holds `R` on and above the diagonal
/// and the Householder vectors (unit leading entry implied) below it; `tau` (`min(m, n)` per
/// matrix) the reflectors' scalars, so that `Q = householder_product(a, tau)`. Not
/// differentiable, as in PyTorch.
///
/// ```
/// # use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![3.0f32, 1.0, 4.0, 2.0], &[2, 2])?;
/// let (a, tau) = magpie_core::ops::linalg::geqrf(&x)?;
/// let r: Vec<f32> = a.to_vec()?;
/// assert!((r[0] + 5.0).abs() < 1e-5); // R[0, 0] = -|first column|
/// assert_eq!(tau.shape(), &[2]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn geqrf(x: &Tensor) -> Result<(Tensor, Tensor)> {
    let op = "geqrf";
    if x.ndim() < 2 {
        return Err(Error::shape(op, "torch.geqrf: input must have at least 2 dimensions."));
    }
    check_float(op, x)?;
    if x.device().is_cuda() && matches!(x.dtype(), crate::DType::F32 | crate::DType::F64) {
        // cuSOLVER's geqrf: LAPACK's reflectors and scalars
        return super::cuda_path::geqrf(op, x);
    }
    let mt = mats(op, x)?;
    let (m, n) = (mt.m, mt.n);
    let k = m.min(n);
    let (mut av, mut tv) = (Vec::with_capacity(mt.data.len()), Vec::with_capacity(mt.count() * k));
    for i in 0..mt.count() {
        let mut a = mt.get(i).to_vec();
        tv.extend(dense::geqrf(&mut a, m, n));
        av.extend(a);
    }
    let a = build(av, &mt.shape(&[m, n]), x.dtype())?.to_device(x.device())?;
    let tau = build(tv, &mt.shape(&[k]), x.dtype())?.to_device(x.device())?;
    Ok((a, tau))
}

/// `torch.ormqr(input, tau, other, left=True, transpose=False)`: `other` multiplied by the
/// orthogonal `Q = H_0 … H_{k-1}` of the reflectors that `geqrf` left in `input` and `tau`:
/// `Q C` (`left`) or `C Q`, with `Qᵀ` for `transpose`. A composition of
/// `householder_product` and `matmul`, so it is differentiable in all three inputs.
///
/// ```
/// # use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![3.0f32, 1.0, 4.0, 2.0], &[2, 2])?;
/// let (a, tau) = magpie_core::ops::linalg::geqrf(&x)?;
/// let eye = Tensor::eye_on(2, 2, magpie_core::DType::F32, magpie_core::Device::Cpu)?;
/// let q = magpie_core::ops::linalg::ormqr(&a, &tau, &eye, true, false)?;
/// assert_eq!(q.shape(), &[2, 2]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn ormqr(input: &Tensor, tau: &Tensor, other: &Tensor, left: bool, transpose: bool) -> Result<Tensor> {
    let op = "ormqr";
    if input.ndim() < 2 {
        return Err(Error::shape(op, "torch.ormqr: input must have at least 2 dimensions."));
    }
    if other.ndim() < 2 {
        return Err(Error::shape(op, "torch.ormqr: other must have at least 2 dimensions."));
    }
    if tau.ndim() < 1 {
        return Err(Error::shape(op, "torch.ormqr: input.dim() must be greater than tau.dim() by 1"));
    }
    let side = if left { -2 } else { -1 };
    let size = |t: &Tensor, d: i64| t.shape()[(t.ndim() as i64 + d) as usize];
    let k = size(tau, -1);
    let rows = size(input, -2);
    if size(other, side) < k {
        return Err(Error::shape(op, format!("torch.ormqr: other.shape[{side}] must be greater than or equal to tau.shape[-1]")));
    }
    if size(other, side) != rows {
        return Err(Error::shape(op, format!("torch.ormqr: other.shape[{side}] must be equal to input.shape[-2]")));
    }
    if k > size(input, -1) {
        return Err(Error::shape(op, "torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1]"));
    }
    if input.ndim() != tau.ndim() + 1 {
        return Err(Error::shape(op, "torch.ormqr: input.dim() must be greater than tau.dim() by 1"));
    }
    if input.ndim() != other.ndim() {
        return Err(Error::shape(op, "torch.ormqr: input.dim() and other.dim() must be equal"));
    }
    let nb = input.ndim() - 2;
    if input.shape()[..nb] != tau.shape()[..nb] || input.shape()[..nb] != other.shape()[..nb] {
        return Err(Error::shape(op, "torch.ormqr: Expected batch dimensions of input, tau and other to be equal"));
    }
    check_float(op, input)?;
    for (name, t) in [("tau", tau), ("other", other)] {
        if t.dtype() != input.dtype() {
            return Err(Error::dtype(
                op,
                format!("torch.ormqr: Expected input and {name} to have the same dtype, but input has dtype {} and {name} has dtype {}", input.dtype().name(), t.dtype().name()),
            ));
        }
    }
    // the k reflectors, padded with zero columns to a square rows×rows matrix, give the full Q
    let v = input.narrow(-1, 0, k as i64)?;
    let mut pad_shape = input.shape()[..nb].to_vec();
    pad_shape.extend([rows, rows - k]);
    let v = cat(&[v, Tensor::zeros_on(&pad_shape, input.dtype(), input.device())?], -1)?;
    let q = householder_product(&v, tau)?;
    let q = if transpose { q.mt()? } else { q };
    if left {
        q.matmul(other)
    } else {
        other.matmul(&q)
    }
}

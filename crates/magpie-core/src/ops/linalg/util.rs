//! Shared pieces of the linalg ops: batches of matrices as f64, argument checks, and small
//! differentiable helpers (triangle masks, identity, |x|) written with tensor ops.

use crate::autograd;
use crate::backend::cpu;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// A batch of row-major `m×n` f64 matrices read from a `[batch..., m, n]` tensor.
pub(crate) struct Mats {
    pub data: Vec<f64>,
    pub batch: Vec<usize>,
    pub m: usize,
    pub n: usize,
}

impl Mats {
    /// Number of matrices.
    pub fn count(&self) -> usize {
        self.batch.iter().product()
    }
    /// The `i`-th matrix.
    pub fn get(&self, i: usize) -> &[f64] {
        &self.data[i * self.m * self.n..(i + 1) * self.m * self.n]
    }
    /// `batch + extra` as a shape.
    pub fn shape(&self, extra: &[usize]) -> Vec<usize> {
        let mut s = self.batch.clone();
        s.extend_from_slice(extra);
        s
    }
}

/// Fails unless `t` is a real floating tensor (complex is not implemented yet).
pub(crate) fn check_float(op: &str, t: &Tensor) -> Result<()> {
    let d = t.dtype();
    if d.is_complex() {
        return Err(Error::unsupported(op, "complex inputs"));
    }
    if !matches!(d, DType::F32 | DType::F64) {
        return Err(Error::dtype(
            op,
            format!("{op}: Expected a floating point or complex tensor as input. Got {}", d.name()),
        ));
    }
    Ok(())
}

/// Checks that `t` is a batch of floating matrices (at least 2-d), and square when `square`.
pub(crate) fn check_mats(op: &str, t: &Tensor, square: bool) -> Result<()> {
    check_float(op, t)?;
    if t.ndim() < 2 {
        return Err(Error::shape(
            op,
            format!("{op}: The input tensor A must have at least 2 dimensions."),
        ));
    }
    let nd = t.ndim();
    let (m, n) = (t.shape()[nd - 2], t.shape()[nd - 1]);
    if square && m != n {
        return Err(Error::shape(
            op,
            format!("{op}: A must be batches of square matrices, but they are {m} by {n} matrices"),
        ));
    }
    Ok(())
}

/// Reads `t` (at least 2-d, floating) as a batch of f64 matrices.
pub(crate) fn mats(op: &str, t: &Tensor) -> Result<Mats> {
    check_mats(op, t, false)?;
    let nd = t.ndim();
    let data: Vec<f64> = cpu::to_vec(t)?;
    Ok(Mats { data, batch: t.shape()[..nd - 2].to_vec(), m: t.shape()[nd - 2], n: t.shape()[nd - 1] })
}

/// Reads `t` as square matrices.
pub(crate) fn square(op: &str, t: &Tensor) -> Result<Mats> {
    let m = mats(op, t)?;
    if m.m != m.n {
        return Err(Error::shape(
            op,
            format!("{op}: A must be batches of square matrices, but they are {} by {} matrices", m.m, m.n),
        ));
    }
    Ok(m)
}

/// A tensor of `dtype` from f64 values.
pub(crate) fn build(v: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let t = Tensor::from_vec(v, shape)?;
    if dtype == DType::F64 {
        Ok(t)
    } else {
        t.to_dtype(dtype).map(|x| x.detach())
    }
}

/// An `m×n` matrix with ones on the diagonal `i == j`, of `like`'s dtype and device.
pub(crate) fn eye(m: usize, n: usize, like: &Tensor) -> Result<Tensor> {
    Tensor::eye_on(m, n, like.dtype(), like.device())
}

/// A constant 0/1 mask of the lower (`lower`) or upper triangle with diagonal offset `k`,
/// as in `tril(x, k)` / `triu(x, k)`.
fn tri_mask(m: usize, n: usize, k: i64, lower: bool, dtype: DType) -> Result<Tensor> {
    let mut v = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let d = j as i64 - i as i64;
            if (lower && d <= k) || (!lower && d >= k) {
                v[i * n + j] = 1.0;
            }
        }
    }
    build(v, &[m, n], dtype)
}

/// `tril(x, k)` over the last two dims, differentiable (a product with a constant mask).
pub(crate) fn tril(x: &Tensor, k: i64) -> Result<Tensor> {
    let nd = x.ndim();
    x.mul(&tri_mask(x.shape()[nd - 2], x.shape()[nd - 1], k, true, x.dtype())?.to_device(x.device())?)
}

/// `triu(x, k)` over the last two dims, differentiable.
pub(crate) fn triu(x: &Tensor, k: i64) -> Result<Tensor> {
    let nd = x.ndim();
    x.mul(&tri_mask(x.shape()[nd - 2], x.shape()[nd - 1], k, false, x.dtype())?.to_device(x.device())?)
}

/// `diag_embed(v)`: a batch of diagonal matrices from the last dim of `v`.
pub(crate) fn diag_embed(v: &Tensor) -> Result<Tensor> {
    let n = v.shape()[v.ndim() - 1];
    v.unsqueeze(-1)?.mul(&eye(n, n, v)?)
}

/// `x.sgn()` as a constant (no history): -1, 0 or 1.
pub(crate) fn sign_const(x: &Tensor) -> Result<Tensor> {
    if x.device().is_cuda() {
        let _ng = autograd::no_grad();
        return x.detach().sign();
    }
    let v: Vec<f64> = cpu::to_vec(x)?;
    let s: Vec<f64> = v.iter().map(|&a| if a > 0.0 { 1.0 } else if a < 0.0 { -1.0 } else { 0.0 }).collect();
    build(s, x.shape(), x.dtype())
}

/// `|x|`, differentiable with PyTorch's subgradient 0 at 0.
pub(crate) fn abs(x: &Tensor) -> Result<Tensor> {
    let s = {
        let _ng = autograd::no_grad();
        sign_const(x)?
    };
    x.mul(&s)
}

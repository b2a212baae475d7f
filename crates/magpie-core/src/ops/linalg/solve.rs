//! Solves and inverses: `solve`, `solve_triangular`, `inv`, `det`/`slogdet`/`logdet`, and the
//! Cholesky family. Two primitives carry backward rules (general and triangular solve); the rest
//! are compositions, so gradients of gradients work.

use super::util::{build, check_mats, eye, mats, square, tril, triu, Mats};
use super::{cuda_path, dense};
use crate::autograd::{self, Saved};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Broadcasts the batch dims of `a` (`[.., n, n]`) and `b` (`[.., n, r]`) against each other.
fn broadcast_pair(op: &str, a: &Tensor, b: &Tensor) -> Result<(Tensor, Tensor)> {
    let (na, nb) = (a.ndim(), b.ndim());
    let batch = broadcast_shapes(op, &a.shape()[..na - 2], &b.shape()[..nb - 2])?;
    let mut sa = batch.clone();
    sa.extend_from_slice(&a.shape()[na - 2..]);
    let mut sb = batch;
    sb.extend_from_slice(&b.shape()[nb - 2..]);
    Ok((a.broadcast_to(&sa)?, b.broadcast_to(&sb)?))
}

/// PyTorch's error for a singular matrix in `op` (`info`: the 1-based index of the zero pivot).
fn singular(op: &str, info: i32) -> Error {
    if op == "linalg.inv" {
        Error::value(op, format!("linalg.inv: The diagonal element {info} is zero, the inversion could not be completed because the input matrix is singular."))
    } else {
        Error::value(op, format!("torch.{op}: The solver failed because the input matrix is singular."))
    }
}

/// `X = A⁻¹ B` for equal batch shapes; records `gB = A⁻ᵀ g`, `gA = -gB Xᵀ`.
fn solve_prim(op: &str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let x = if a.device().is_cuda() {
        check_mats(op, a, true)?;
        check_mats(op, b, false)?;
        let (x, info) = cuda_path::solve(op, a, b)?;
        // the error check reads the infos back (PyTorch's linalg.solve and inv wait for them too)
        if let Some(&k) = cuda_path::infos_host(&info)?.iter().find(|&&i| i != 0) {
            return Err(singular(op, k));
        }
        x
    } else {
        let ma = square(op, a)?;
        let mb = mats(op, b)?;
        let (n, r) = (ma.n, mb.n);
        let mut out = Vec::with_capacity(mb.data.len());
        for i in 0..ma.count() {
            match dense::solve(ma.get(i), mb.get(i), n, r) {
                Some(x) => out.extend(x),
                None => {
                    let mut lu = ma.get(i).to_vec();
                    return Err(singular(op, dense::lu(&mut lu, n, n).1));
                }
            }
        }
        build(out, b.shape(), a.dtype())?
    };
    let (sa, name) = (Saved::new("linalg_solve", a), op.to_string());
    autograd::record("LinalgSolve", &[a, b], &[x.clone()], move |ctx, g| {
        let a = sa.get()?;
        let gb = solve_prim(&name, &a.mt()?, &g[0])?;
        let ga = if ctx.needs_input_grad(0) { Some(gb.matmul(&ctx.output(0)?.mt()?)?.neg()?) } else { None };
        Ok(vec![ga, Some(gb)])
    });
    Ok(x)
}

/// `torch.linalg.solve(A, B, left=True)`: `B` may be a batch of vectors (`[.., n]`).
pub fn solve(a: &Tensor, b: &Tensor, left: bool) -> Result<Tensor> {
    let op = "linalg.solve";
    super::util::check_float(op, b)?;
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(op, format!("{op}: Expected A and B to have the same dtype, but found A of type {} and B of type {} instead", a.dtype().name(), b.dtype().name())));
    }
    if a.ndim() < 2 {
        return Err(Error::shape(op, format!("{op}: The input tensor A must have at least 2 dimensions.")));
    }
    if !left {
        // X A = B  <=>  Aᵀ Xᵀ = Bᵀ
        return solve(&a.mt()?, &b.mt()?, true)?.mt();
    }
    let n = a.shape()[a.ndim() - 1];
    // B is a vector (batch) when it has one dim less than A and matches A's batch (PyTorch's rule)
    let vector = b.ndim() == 1 || (b.ndim() == a.ndim() - 1 && b.shape() == &a.shape()[..a.ndim() - 1]);
    let bm = if vector { b.unsqueeze(-1)? } else { b.clone() };
    if bm.shape()[bm.ndim() - 2] != n {
        return Err(Error::shape(
            op,
            format!("{op}: Incompatible shapes of A and B for the equation AX = B ({:?} and {:?})", a.shape(), b.shape()),
        ));
    }
    let (ab, bb) = broadcast_pair(op, a, &bm)?;
    let x = solve_prim(op, &ab, &bb)?;
    if vector {
        x.squeeze_dims(&[-1])
    } else {
        Ok(x)
    }
}

/// `torch.linalg.inv(A)`.
pub fn inv(a: &Tensor) -> Result<Tensor> {
    let op = "linalg.inv";
    check_mats(op, a, true)?;
    let n = a.shape()[a.ndim() - 1];
    let id = eye(n, n, a)?.broadcast_to(a.shape())?;
    solve_prim(op, a, &id)
}

/// `triangular solve` primitive: `T X = B` (left) for equal batch shapes, using one triangle of `T`.
fn tri_prim(a: &Tensor, b: &Tensor, upper: bool, unit: bool) -> Result<Tensor> {
    let op = "linalg.solve_triangular";
    let x = if a.device().is_cuda() {
        check_mats(op, a, true)?;
        check_mats(op, b, false)?;
        cuda_path::tri_solve(op, a, b, upper, unit)?
    } else {
        let ma = square(op, a)?;
        let mb = mats(op, b)?;
        let (n, r) = (ma.n, mb.n);
        let mut out = mb.data.clone();
        for i in 0..ma.count() {
            dense::tri_solve(ma.get(i), &mut out[i * n * r..(i + 1) * n * r], n, r, upper, unit);
        }
        build(out, b.shape(), a.dtype())?
    };
    let sa = Saved::new("solve_triangular", a);
    autograd::record("LinalgSolveTriangular", &[a, b], &[x.clone()], move |ctx, g| {
        let a = sa.get()?;
        let gb = tri_prim(&a.mt()?, &g[0], !upper, unit)?;
        let ga = if ctx.needs_input_grad(0) {
            let full = gb.matmul(&ctx.output(0)?.mt()?)?.neg()?;
            let k = if unit { 1 } else { 0 };
            Some(if upper { triu(&full, k)? } else { tril(&full, -k)? })
        } else {
            None
        };
        Ok(vec![ga, Some(gb)])
    });
    Ok(x)
}

/// `torch.linalg.solve_triangular(A, B, upper=, left=True, unitriangular=False)`.
pub fn solve_triangular(a: &Tensor, b: &Tensor, upper: bool, left: bool, unit: bool) -> Result<Tensor> {
    let op = "linalg.solve_triangular";
    super::util::check_float(op, b)?;
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(op, format!("{op}: Expected A and B to have the same dtype, but found {} and {}", a.dtype().name(), b.dtype().name())));
    }
    if a.ndim() < 2 || b.ndim() < 2 {
        return Err(Error::shape(op, format!("{op}: The input tensors must have at least 2 dimensions.")));
    }
    if !left {
        return solve_triangular(&a.mt()?, &b.mt()?, !upper, true, unit)?.mt();
    }
    if b.shape()[b.ndim() - 2] != a.shape()[a.ndim() - 1] {
        return Err(Error::shape(
            op,
            format!("{op}: Incompatible shapes of A and B for the equation AX = B ({:?} and {:?})", a.shape(), b.shape()),
        ));
    }
    let (ab, bb) = broadcast_pair(op, a, b)?;
    tri_prim(&ab, &bb, upper, unit)
}

/// Determinant and `(sign, log|det|)` of each matrix through LU.
fn lu_dets(m: &Mats) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = m.n;
    let (mut det, mut sign, mut logabs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..m.count() {
        let mut a = m.get(i).to_vec();
        let (piv, _) = dense::lu(&mut a, n, n);
        let mut s = 1.0;
        let mut la = 0.0;
        for j in 0..n {
            let d = a[j * n + j];
            if piv[j] as usize != j + 1 {
                s = -s;
            }
            s *= d.signum();
            if d == 0.0 {
                s = 0.0;
            }
            la += d.abs().ln();
        }
        let prod: f64 = (0..n).map(|j| a[j * n + j]).product::<f64>() * if (0..n).filter(|&j| piv[j] as usize != j + 1).count() % 2 == 1 { -1.0 } else { 1.0 };
        det.push(prod);
        sign.push(s);
        logabs.push(la);
    }
    (det, sign, logabs)
}

/// `torch.linalg.det(A)`; gradient `g · det · A⁻ᵀ`.
pub fn det(a: &Tensor) -> Result<Tensor> {
    let op = "linalg.det";
    let out = if a.device().is_cuda() {
        check_mats(op, a, true)?;
        cuda_path::dets(op, a)?.0
    } else {
        let m = square(op, a)?;
        let (d, _, _) = lu_dets(&m);
        build(d, &m.batch, a.dtype())?
    };
    let sa = Saved::new("det", a);
    autograd::record("LinalgDet", &[a], &[out.clone()], move |ctx, g| {
        let a = sa.get()?;
        let d = ctx.output(0)?;
        let scale = g[0].mul(&d)?.unsqueeze(-1)?.unsqueeze(-1)?;
        Ok(vec![Some(inv(&a)?.mt()?.mul(&scale)?)])
    });
    Ok(out)
}

/// `torch.linalg.slogdet(A)`: `(sign, log|det|)`; only `log|det|` has a gradient (`g · A⁻ᵀ`).
pub fn slogdet(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let op = "linalg.slogdet";
    let (sign, logabs) = if a.device().is_cuda() {
        check_mats(op, a, true)?;
        let (_, s, l) = cuda_path::dets(op, a)?;
        (s, l)
    } else {
        let m = square(op, a)?;
        let (_, s, l) = lu_dets(&m);
        (build(s, &m.batch, a.dtype())?, build(l, &m.batch, a.dtype())?)
    };
    let sa = Saved::new("slogdet", a);
    // both outputs belong to the node (the sign's gradient is zero, as in PyTorch)
    autograd::record("LinalgSlogdet", &[a], &[sign.clone(), logabs.clone()], move |_, g| {
        let a = sa.get()?;
        Ok(vec![Some(inv(&a)?.mt()?.mul(&g[1].unsqueeze(-1)?.unsqueeze(-1)?)?)])
    });
    Ok((sign, logabs))
}

/// `torch.logdet(A)`: `log det A` (NaN for a negative determinant, -inf for a singular one).
pub fn logdet(a: &Tensor) -> Result<Tensor> {
    let (sign, logabs) = slogdet(a)?;
    // log|det| where sign > 0, NaN where sign < 0, -inf where 0 (the log of 0)
    let nan = Tensor::full_on(sign.shape(), f64::NAN, sign.dtype(), sign.device())?;
    let neg = sign.lt_scalar(0.0)?;
    crate::ops::binary::where_cond(&neg, &nan, &logabs)
}

/// `torch.linalg.cholesky(A, upper=False)` and its `info` (0, or the failing minor's order).
pub fn cholesky_ex(a: &Tensor, upper: bool) -> Result<(Tensor, Vec<i32>)> {
    let op = "linalg.cholesky";
    let (l, infos) = if a.device().is_cuda() {
        check_mats(op, a, true)?;
        let (l, info) = cuda_path::cholesky(op, a)?;
        (l, cuda_path::infos_host(&info)?)
    } else {
        let m = square(op, a)?;
        let n = m.n;
        let mut out = Vec::with_capacity(m.data.len());
        let mut infos = Vec::with_capacity(m.count());
        for i in 0..m.count() {
            let (l, info) = dense::cholesky(m.get(i), n);
            out.extend(l);
            infos.push(info);
        }
        (build(out, a.shape(), a.dtype())?, infos)
    };
    let sa = Saved::new("cholesky", a);
    let _ = &sa;
    autograd::record("LinalgCholesky", &[a], &[l.clone()], move |ctx, g| {
        // gA = L⁻ᵀ Φ L⁻¹ with Φ = ½ (T + tril(T, -1)ᵀ), T = tril(Lᵀ gL) (PyTorch's cholesky_backward)
        let l = ctx.output(0)?;
        let t = tril(&l.mt()?.matmul(&g[0])?, 0)?;
        let phi = t.add(&tril(&t, -1)?.mt()?)?.mul_scalar(0.5)?;
        let x = solve_triangular(&l.mt()?, &phi, true, true, false)?;
        let ga = solve_triangular(&l, &x, false, false, false)?;
        Ok(vec![Some(ga)])
    });
    let l = if upper { l.mt()? } else { l };
    Ok((l, infos))
}

/// `torch.linalg.cholesky(A, upper=False)`: fails on a matrix that is not positive-definite.
pub fn cholesky(a: &Tensor, upper: bool) -> Result<Tensor> {
    let (l, infos) = cholesky_ex(a, upper)?;
    if let Some(&k) = infos.iter().find(|&&k| k != 0) {
        return Err(Error::value(
            "linalg.cholesky",
            format!("linalg.cholesky: The factorization could not be completed because the input is not positive-definite (the leading minor of order {k} is not positive-definite)."),
        ));
    }
    Ok(l)
}

/// `torch.cholesky_solve(B, L, upper=False)`: `X = (L Lᵀ)⁻¹ B`.
pub fn cholesky_solve(b: &Tensor, l: &Tensor, upper: bool) -> Result<Tensor> {
    let lo = if upper { l.mt()? } else { l.clone() };
    let y = solve_triangular(&lo, b, false, true, false)?;
    solve_triangular(&lo.mt()?, &y, true, true, false)
}

/// `torch.cholesky_inverse(L, upper=False)`: `(L Lᵀ)⁻¹`.
pub fn cholesky_inverse(l: &Tensor, upper: bool) -> Result<Tensor> {
    check_mats("cholesky_inverse", l, true)?;
    let n = l.shape()[l.ndim() - 1];
    let id = eye(n, n, l)?.broadcast_to(l.shape())?;
    cholesky_solve(&id, l, upper)
}

/// `info` of `inv_ex`/`solve_ex`: the first zero pivot of each LU (0 when invertible).
pub(crate) fn lu_infos(a: &Tensor, op: &str) -> Result<(Vec<i32>, Vec<usize>)> {
    if a.device().is_cuda() {
        check_mats(op, a, true)?;
        let f = cuda_path::lu(op, a)?;
        return Ok((cuda_path::infos_host(&f.info)?, a.shape()[..a.ndim() - 2].to_vec()));
    }
    let m = square(op, a)?;
    let mut v = Vec::with_capacity(m.count());
    for i in 0..m.count() {
        let mut x = m.get(i).to_vec();
        v.push(dense::lu(&mut x, m.n, m.n).1);
    }
    Ok((v, m.batch))
}

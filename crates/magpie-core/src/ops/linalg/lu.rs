//! The LU family: `linalg.lu`, `lu_factor(_ex)`, `lu_unpack`, `lu_solve`, with the LU backward
//! rule for square, wide and tall matrices.

use super::solve::solve_triangular;
use super::util::{build, check_mats, eye, mats, tril, triu};
use super::{cuda_path, dense};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `A = P L U`: returns `(P, L, U, pivots, infos)`; `L` and `U` carry the backward rule.
pub fn lu_full(a: &Tensor) -> Result<(Tensor, Tensor, Tensor, Tensor, Vec<i32>)> {
    let op = "linalg.lu";
    if a.device().is_cuda() {
        return lu_full_cuda(op, a);
    }
    let m = mats(op, a)?;
    let (rows, cols) = (m.m, m.n);
    let k = rows.min(cols);
    let (mut pv, mut lv, mut uv, mut piv_all, mut infos) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..m.count() {
        let mut x = m.get(i).to_vec();
        let (piv, info) = dense::lu(&mut x, rows, cols);
        pv.extend(dense::pivots_to_perm(&piv, rows));
        for r in 0..rows {
            for c in 0..k {
                lv.push(if c < r { x[r * cols + c] } else if c == r { 1.0 } else { 0.0 });
            }
        }
        for r in 0..k {
            for c in 0..cols {
                uv.push(if c >= r { x[r * cols + c] } else { 0.0 });
            }
        }
        piv_all.extend(piv);
        infos.push(info);
    }
    let p = build(pv, &m.shape(&[rows, rows]), a.dtype())?;
    let l = build(lv, &m.shape(&[rows, k]), a.dtype())?;
    let u = build(uv, &m.shape(&[k, cols]), a.dtype())?;
    let piv = Tensor::from_vec(piv_all, &m.shape(&[k]))?;
    record_lu(a, p, l, u, piv, infos)
}

/// Records the LU backward rule on `(L, U)` and returns the factors.
fn record_lu(a: &Tensor, p: Tensor, l: Tensor, u: Tensor, piv: Tensor, infos: Vec<i32>) -> Result<(Tensor, Tensor, Tensor, Tensor, Vec<i32>)> {
    let nd = a.ndim();
    let (rows, cols) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let pc = p.clone();
    autograd::record("LinalgLuFactorEx", &[a], &[l.clone(), u.clone()], move |ctx, g| {
        let (l, u) = (ctx.output(0)?, ctx.output(1)?);
        Ok(vec![Some(lu_backward(&pc, &l, &u, &g[0], &g[1], rows, cols)?)])
    });
    Ok((p, l, u, piv, infos))
}

/// [`lu_full`] on CUDA: cuSOLVER's `getrf`, unpacked on the device; the infos are read back.
fn lu_full_cuda(op: &str, a: &Tensor) -> Result<(Tensor, Tensor, Tensor, Tensor, Vec<i32>)> {
    check_mats(op, a, false)?;
    let (l, u, p, piv, info) = {
        let _ng = autograd::no_grad();
        let nd = a.ndim();
        let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
        let k = m.min(n) as i64;
        let f = cuda_path::lu(op, a)?;
        let l = f.lu.narrow(-1, 0, k)?.tril(-1)?.add(&eye(m, k as usize, a)?)?;
        let u = f.lu.narrow(-2, 0, k)?.triu(0)?;
        let p = cuda_path::pivots_to_perm(op, &f.piv, m, a.dtype())?;
        (l, u, p, f.piv.to_dtype(crate::DType::I32)?, f.info)
    };
    record_lu(a, p, l, u, piv, cuda_path::infos_host(&info)?)
}

/// The gradient of `A = P L U` (see the derivation in the comments), written with tensor ops.
fn lu_backward(p: &Tensor, l: &Tensor, u: &Tensor, gl: &Tensor, gu: &Tensor, m: usize, n: usize) -> Result<Tensor> {
    let k = m.min(n) as i64;
    if m <= n {
        // L square: X = L⁻¹ Pᵀ dA, Y = X₁ U₁⁻¹; M = tril(Lᵀ gL − gU₂ U₂ᵀ, −1) + triu(gU₁ U₁ᵀ)
        let (u1, gu1) = (u.narrow(-1, 0, k)?, gu.narrow(-1, 0, k)?);
        let mut inner = l.mt()?.matmul(gl)?;
        if n > m {
            let (u2, gu2) = (u.narrow(-1, k, n as i64 - k)?, gu.narrow(-1, k, n as i64 - k)?);
            inner = inner.sub(&gu2.matmul(&u2.mt()?)?)?;
        }
        let mm = tril(&inner, -1)?.add(&triu(&gu1.matmul(&u1.mt()?)?, 0)?)?;
        // gX₁ = M U₁⁻ᵀ, gX₂ = gU₂; gA = P L⁻ᵀ gX
        let gx1 = solve_triangular(&u1.mt()?, &mm, false, false, false)?; // M U₁⁻ᵀ: solves Z U₁ᵀ = M
        let gx = if n > m {
            let gu2 = gu.narrow(-1, k, n as i64 - k)?;
            // [gX₁ gX₂] = gX₁ Eᵀ + gU₂ F with constant selection matrices (no concatenation op needed)
            let e1 = eye(m, n, &gx1)?;
            let f = shift_eye(n - m, n, m, gx1.dtype())?.to_device(gx1.device())?;
            gx1.matmul(&e1)?.add(&gu2.matmul(&f)?)?
        } else {
            gx1
        };
        let y = solve_triangular(&l.mt()?, &gx, true, true, true)?;
        p.matmul(&y)
    } else {
        // U square: Z = Pᵀ dA U⁻¹, Y = L₁⁻¹ Z₁; M = tril(L₁ᵀ gL₁, −1) + triu(gU Uᵀ) − triu(L₂ᵀ gL₂)
        let (l1, gl1) = (l.narrow(-2, 0, k)?, gl.narrow(-2, 0, k)?);
        let (l2, gl2) = (l.narrow(-2, k, m as i64 - k)?, gl.narrow(-2, k, m as i64 - k)?);
        let mm = tril(&l1.mt()?.matmul(&gl1)?, -1)?.add(&triu(&gu.matmul(&u.mt()?)?, 0)?)?.sub(&triu(&l2.mt()?.matmul(&gl2)?, 0)?)?;
        let gz1 = solve_triangular(&l1.mt()?, &mm, true, true, true)?;
        let e1 = eye(m, n, &gz1)?; // [I; 0]
        let f = shift_eye(m - n, m, n, gz1.dtype())?.to_device(gz1.device())?.mt()?; // places gL₂ in rows n..m
        let gz = e1.matmul(&gz1)?.add(&f.matmul(&gl2)?)?;
        // gA = P gZ U⁻ᵀ
        let y = solve_triangular(&u.mt()?, &gz, false, false, false)?;
        p.matmul(&y)
    }
}

/// A `rows×cols` matrix with ones at `(i, i + shift)`: selects/places a block of columns.
fn shift_eye(rows: usize, cols: usize, shift: usize, dtype: crate::DType) -> Result<Tensor> {
    let mut v = vec![0.0; rows * cols];
    for i in 0..rows {
        if i + shift < cols {
            v[i * cols + i + shift] = 1.0;
        }
    }
    build(v, &[rows, cols], dtype)
}

/// `torch.linalg.lu_factor_ex(A)`: `(LU, pivots, infos)` with `LU` packing `L − I` and `U`.
pub fn lu_factor_ex(a: &Tensor) -> Result<(Tensor, Tensor, Vec<i32>)> {
    let (_, l, u, piv, infos) = lu_full(a)?;
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let k = m.min(n);
    // LU = (L − E_mk) E_kn + E_mk U, with E the rectangular identities (places the blocks)
    let emk = eye(m, k, a)?;
    let ekn = eye(k, n, a)?;
    let lu = l.sub(&emk)?.matmul(&ekn)?.add(&emk.matmul(&u)?)?;
    Ok((lu, piv, infos))
}

/// `torch.lu_unpack(LU, pivots, unpack_data=True, unpack_pivots=True)`: `(P, L, U)`.
pub fn lu_unpack(lu: &Tensor, pivots: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "lu_unpack";
    check_mats(op, lu, false)?;
    let nd = lu.ndim();
    let (m, n) = (lu.shape()[nd - 2], lu.shape()[nd - 1]);
    let k = m.min(n) as i64;
    let l = tril(&lu.narrow(-1, 0, k)?, -1)?.add(&eye(m, k as usize, lu)?)?;
    let u = triu(&lu.narrow(-2, 0, k)?, 0)?;
    if lu.device().is_cuda() {
        let want: Vec<usize> = lu.shape()[..nd - 2].iter().copied().chain([k as usize]).collect();
        if pivots.shape() != want.as_slice() {
            return Err(Error::shape(op, format!("lu_unpack: pivots must have shape {want:?}, got {:?}", pivots.shape())));
        }
        let piv = pivots.to_device(lu.device())?;
        return Ok((cuda_path::pivots_to_perm(op, &piv, m, lu.dtype())?, l, u));
    }
    let mm = mats(op, lu)?;
    let piv: Vec<i32> = pivots.to_vec()?;
    if piv.len() != mm.count() * k as usize {
        return Err(Error::shape(op, format!("lu_unpack: pivots must have shape {:?}, got {:?}", mm.shape(&[k as usize]), pivots.shape())));
    }
    let mut pv = Vec::with_capacity(mm.count() * m * m);
    for i in 0..mm.count() {
        let p = &piv[i * k as usize..(i + 1) * k as usize];
        if p.iter().any(|&x| x < 1 || x as usize > m) {
            return Err(Error::index(op, "lu_unpack: pivots must be in the range [1, m]"));
        }
        pv.extend(dense::pivots_to_perm(p, m));
    }
    let p = build(pv, &mm.shape(&[m, m]), lu.dtype())?;
    Ok((p, l, u))
}

/// `torch.linalg.lu_solve(LU, pivots, B, left=True, adjoint=False)`.
pub fn lu_solve(lu: &Tensor, pivots: &Tensor, b: &Tensor, left: bool, adjoint: bool) -> Result<Tensor> {
    let (p, l, u) = lu_unpack(lu, pivots)?;
    if !left {
        // X A = B  <=>  Aᵀ Xᵀ = Bᵀ (adjoint flips)
        return lu_solve(lu, pivots, &b.mt()?, true, !adjoint)?.mt();
    }
    if adjoint {
        // Aᵀ X = B with A = P L U: Uᵀ Lᵀ Pᵀ X = B
        let y = solve_triangular(&u.mt()?, b, false, true, false)?;
        let z = solve_triangular(&l.mt()?, &y, true, true, true)?;
        p.matmul(&z)
    } else {
        let y = solve_triangular(&l, &p.mt()?.matmul(b)?, false, true, true)?;
        solve_triangular(&u, &y, true, true, false)
    }
}

//! `linalg.ldl_factor(_ex)` and `linalg.ldl_solve`: the Bunch-Kaufman `L D Lᵀ` factorization of a
//! symmetric matrix in LAPACK's compact form (`sytf2` / `sytrs`, lower triangle, 1-based pivots,
//! negative pairs for 2×2 blocks), so the factors and pivots read as PyTorch's do.

use super::util::{build, check_mats, mats};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// First index of the largest `|x|` (BLAS `idamax`), or 0 for an empty slice.
fn idamax(x: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, -1.0);
    for (i, v) in x.enumerate() {
        if v.abs() > best.1 {
            best = (i, v.abs());
        }
    }
    best.0
}

/// Factors the lower triangle of the row-major `n×n` matrix `a` in place (LAPACK `dsytf2`,
/// `uplo = 'L'`); returns the 1-based pivots and `info` (the first zero pivot block, 0 if none).
pub(crate) fn sytf2_lower(a: &mut [f64], n: usize) -> (Vec<i32>, i32) {
    let at = |r: usize, c: usize| r * n + c;
    let alpha = (1.0 + 17f64.sqrt()) / 8.0;
    let mut piv = vec![0i32; n];
    let mut info = 0i32;
    let mut k = 0;
    while k < n {
        let mut kstep = 1;
        let absakk = a[at(k, k)].abs();
        let (imax, colmax) = if k + 1 < n {
            let i = k + 1 + idamax((k + 1..n).map(|r| a[at(r, k)]));
            (i, a[at(i, k)].abs())
        } else {
            (k, 0.0)
        };
        let kp;
        if absakk.max(colmax) == 0.0 || absakk.is_nan() {
            if info == 0 {
                info = k as i32 + 1;
            }
            kp = k;
        } else {
            if absakk >= alpha * colmax {
                kp = k;
            } else {
                // the largest off-diagonal entry in row/column imax of the trailing matrix
                let j = k + idamax((k..imax).map(|c| a[at(imax, c)]));
                let mut rowmax = a[at(imax, j)].abs();
                if imax + 1 < n {
                    let j = imax + 1 + idamax((imax + 1..n).map(|r| a[at(r, imax)]));
                    rowmax = rowmax.max(a[at(j, imax)].abs());
                }
                if absakk >= alpha * colmax * (colmax / rowmax) {
                    kp = k;
                } else if a[at(imax, imax)].abs() >= alpha * rowmax {
                    kp = imax;
                } else {
                    kp = imax;
                    kstep = 2;
                }
            }
            let kk = k + kstep - 1;
            if kp != kk {
                // symmetric interchange of rows and columns kk and kp of the trailing matrix
                for r in kp + 1..n {
                    a.swap(at(r, kk), at(r, kp));
                }
                for j in kk + 1..kp {
                    a.swap(at(j, kk), at(kp, j));
                }
                a.swap(at(kk, kk), at(kp, kp));
                if kstep == 2 {
                    a.swap(at(k + 1, k), at(kp, k));
                }
            }
            if kstep == 1 {
                if k + 1 < n {
                    let d11 = 1.0 / a[at(k, k)];
                    for j in k + 1..n {
                        let xj = a[at(j, k)];
                        for i in j..n {
                            a[at(i, j)] -= d11 * a[at(i, k)] * xj;
                        }
                    }
                    for i in k + 1..n {
                        a[at(i, k)] *= d11;
                    }
                }
            } else if k + 2 < n {
                let d21 = a[at(k + 1, k)];
                let d11 = a[at(k + 1, k + 1)] / d21;
                let d22 = a[at(k, k)] / d21;
                let t = 1.0 / (d11 * d22 - 1.0);
                let d21 = t / d21;
                for j in k + 2..n {
                    let wk = d21 * (d11 * a[at(j, k)] - a[at(j, k + 1)]);
                    let wkp1 = d21 * (d22 * a[at(j, k + 1)] - a[at(j, k)]);
                    for i in j..n {
                        a[at(i, j)] -= a[at(i, k)] * wk + a[at(i, k + 1)] * wkp1;
                    }
                    a[at(j, k)] = wk;
                    a[at(j, k + 1)] = wkp1;
                }
            }
        }
        if kstep == 1 {
            piv[k] = kp as i32 + 1;
        } else {
            piv[k] = -(kp as i32 + 1);
            piv[k + 1] = -(kp as i32 + 1);
        }
        k += kstep;
    }
    (piv, info)
}

/// Solves `A X = B` (`B` row-major `n×r`, in place) from `sytf2_lower`'s factors and pivots
/// (LAPACK `dsytrs`, `uplo = 'L'`). Pivots out of range are an error.
pub(crate) fn sytrs_lower(a: &[f64], piv: &[i64], b: &mut [f64], n: usize, r: usize) -> std::result::Result<(), String> {
    let at = |i: usize, j: usize| i * n + j;
    let swap_rows = |b: &mut [f64], i: usize, j: usize| {
        if i != j {
            for c in 0..r {
                b.swap(i * r + c, j * r + c);
            }
        }
    };
    let target = |p: i64| -> std::result::Result<usize, String> {
        let q = p.unsigned_abs() as usize;
        if q == 0 || q > n {
            return Err(format!("pivot {p} is out of range for matrices of size {n}"));
        }
        Ok(q - 1)
    };
    // L D Y = B
    let mut k = 0;
    while k < n {
        if piv[k] > 0 {
            swap_rows(b, k, target(piv[k])?);
            for i in k + 1..n {
                for c in 0..r {
                    b[i * r + c] -= a[at(i, k)] * b[k * r + c];
                }
            }
            for c in 0..r {
                b[k * r + c] /= a[at(k, k)];
            }
            k += 1;
        } else {
            if k + 1 >= n {
                return Err(format!("a 2x2 pivot block starts at the last row ({k})"));
            }
            swap_rows(b, k + 1, target(piv[k])?);
            for i in k + 2..n {
                for c in 0..r {
                    b[i * r + c] -= a[at(i, k)] * b[k * r + c] + a[at(i, k + 1)] * b[(k + 1) * r + c];
                }
            }
            let akm1k = a[at(k + 1, k)];
            let akm1 = a[at(k, k)] / akm1k;
            let ak = a[at(k + 1, k + 1)] / akm1k;
            let denom = akm1 * ak - 1.0;
            for c in 0..r {
                let bkm1 = b[k * r + c] / akm1k;
                let bk = b[(k + 1) * r + c] / akm1k;
                b[k * r + c] = (ak * bkm1 - bk) / denom;
                b[(k + 1) * r + c] = (akm1 * bk - bkm1) / denom;
            }
            k += 2;
        }
    }
    // Lᵀ X = Y, from the last block up
    let mut k = n;
    while k > 0 {
        let j = k - 1;
        if piv[j] > 0 {
            for c in 0..r {
                let s: f64 = (j + 1..n).map(|i| a[at(i, j)] * b[i * r + c]).sum();
                b[j * r + c] -= s;
            }
            swap_rows(b, j, target(piv[j])?);
            k -= 1;
        } else {
            if j == 0 {
                return Err("a 2x2 pivot block starts at row 0 of the backward pass".into());
            }
            for c in 0..r {
                let s: f64 = (j + 1..n).map(|i| a[at(i, j)] * b[i * r + c]).sum();
                let s1: f64 = (j + 1..n).map(|i| a[at(i, j - 1)] * b[i * r + c]).sum();
                b[j * r + c] -= s;
                b[(j - 1) * r + c] -= s1;
            }
            swap_rows(b, j, target(piv[j])?);
            k -= 2;
        }
    }
    Ok(())
}

/// `torch.linalg.ldl_factor_ex(A, *, hermitian=False)`: `(LD, pivots, info)` with `LD` the
/// compact `L` (unit diagonal implied) and block-diagonal `D` in the lower triangle (zeros
/// above), `pivots` LAPACK's 1-based interchanges (int32) and `info` the first zero pivot (0 if
/// none). Reads only the lower triangle of `A`; not differentiable, as in PyTorch.
///
/// ```
/// # use magpie_core::Tensor;
/// let a = Tensor::from_vec(vec![4.0f32, 2.0, 2.0, 3.0], &[2, 2])?;
/// let (ld, piv, info) = magpie_core::ops::linalg::ldl_factor_ex(&a)?;
/// assert_eq!(ld.to_vec::<f32>()?, vec![4.0, 0.0, 0.5, 2.0]);
/// assert_eq!(piv.to_vec::<i32>()?, vec![1, 2]);
/// assert_eq!(info.to_vec::<i32>()?, vec![0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn ldl_factor_ex(a: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "linalg.ldl_factor_ex";
    check_mats(op, a, true)?;
    let mt = mats(op, a)?;
    let n = mt.n;
    let (mut ld, mut pv, mut infos) = (Vec::with_capacity(mt.data.len()), Vec::new(), Vec::new());
    for i in 0..mt.count() {
        let mut x = mt.get(i).to_vec();
        let (p, info) = sytf2_lower(&mut x, n);
        for r in 0..n {
            for c in r + 1..n {
                x[r * n + c] = 0.0;
            }
        }
        ld.extend(x);
        pv.extend(p);
        infos.push(info);
    }
    let dev = a.device();
    let ld = build(ld, &mt.shape(&[n, n]), a.dtype())?.to_device(dev)?;
    let piv = Tensor::from_vec(pv, &mt.shape(&[n]))?.to_device(dev)?;
    let info = Tensor::from_vec(infos, &mt.batch)?.to_device(dev)?;
    Ok((ld, piv, info))
}

/// `torch.linalg.ldl_factor(A, *, hermitian=False)`: `(LD, pivots)` as `ldl_factor_ex`, failing
/// when a pivot block is exactly singular.
///
/// ```
/// # use magpie_core::Tensor;
/// let a = Tensor::from_vec(vec![0.0f32, 1.0, 1.0, 0.0], &[2, 2])?;
/// let (ld, piv) = magpie_core::ops::linalg::ldl_factor(&a)?; // one 2×2 pivot block
/// assert_eq!(piv.to_vec::<i32>()?, vec![-2, -2]);
/// assert_eq!(ld.to_vec::<f32>()?, vec![0.0, 0.0, 1.0, 0.0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn ldl_factor(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let (ld, piv, info) = ldl_factor_ex(a)?;
    let infos: Vec<i32> = info.to_dtype(DType::I32)?.to_vec()?;
    if let Some(&i) = infos.iter().find(|&&i| i != 0) {
        return Err(Error::value(
            "linalg.ldl_factor",
            format!("torch.linalg.ldl_factor: The factorization could not be completed because the input is singular (D[{}, {}] is exactly zero).", i - 1, i - 1),
        ));
    }
    Ok((ld, piv))
}

/// `torch.linalg.ldl_solve(LD, pivots, B, *, hermitian=False)`: the solution of `A X = B` from
/// `ldl_factor`'s compact factors (`B` is `n×k`, batched like `LD`). Not differentiable, as in
/// PyTorch.
///
/// ```
/// # use magpie_core::Tensor;
/// let a = Tensor::from_vec(vec![4.0f32, 2.0, 2.0, 3.0], &[2, 2])?;
/// let (ld, piv) = magpie_core::ops::linalg::ldl_factor(&a)?;
/// let b = Tensor::from_vec(vec![6.0f32, 5.0], &[2, 1])?;
/// let x: Vec<f32> = magpie_core::ops::linalg::ldl_solve(&ld, &piv, &b)?.to_vec()?;
/// assert!((x[0] - 1.0).abs() < 1e-6 && (x[1] - 1.0).abs() < 1e-6);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn ldl_solve(ld: &Tensor, pivots: &Tensor, b: &Tensor) -> Result<Tensor> {
    let op = "linalg.ldl_solve";
    check_mats(op, ld, true)?;
    if b.ndim() < 2 {
        return Err(Error::shape(op, format!("torch.{op}: The input tensor B must have at least 2 dimensions.")));
    }
    if pivots.dtype().is_float() || pivots.dtype().is_complex() {
        return Err(Error::dtype(op, format!("torch.{op}: Expected LU_pivots to be an integer tensor, but got {}", pivots.dtype().name())));
    }
    if b.dtype() != ld.dtype() {
        return Err(Error::dtype(op, format!("torch.{op}: Expected LD and B to have the same dtype, but got {} and {}", ld.dtype().name(), b.dtype().name())));
    }
    let nd = ld.ndim();
    let n = ld.shape()[nd - 1];
    let (bn, r) = (b.shape()[b.ndim() - 2], b.shape()[b.ndim() - 1]);
    if bn != n {
        return Err(Error::shape(op, format!("Incompatible matrix sizes for torch.{op}: each A matrix is {n} by {n} but each b matrix is {bn} by {r}")));
    }
    if pivots.shape() != &ld.shape()[..nd - 1] {
        return Err(Error::shape(op, format!("torch.{op}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with shape {:?} instead", pivots.shape())));
    }
    // LD and pivots broadcast over B's batch dimensions
    let batch = crate::shape::broadcast_all(op, &[&ld.shape()[..nd - 2], &b.shape()[..b.ndim() - 2]])?;
    let mut shape_a = batch.clone();
    shape_a.extend([n, n]);
    let mut shape_p = batch.clone();
    shape_p.push(n);
    let mut shape_b = batch.clone();
    shape_b.extend([n, r]);
    let a = mats(op, &ld.broadcast_to(&shape_a)?.contiguous()?)?;
    let p: Vec<i64> = pivots.broadcast_to(&shape_p)?.to_dtype(DType::I64)?.contiguous()?.to_vec()?;
    let bm = mats(op, &b.broadcast_to(&shape_b)?.contiguous()?)?;
    let mut out = Vec::with_capacity(bm.data.len());
    for i in 0..a.count() {
        let mut x = bm.get(i).to_vec();
        sytrs_lower(a.get(i), &p[i * n..(i + 1) * n], &mut x, n, r).map_err(|m| Error::value(op, format!("torch.{op}: {m}")))?;
        out.extend(x);
    }
    build(out, &shape_b, ld.dtype())?.to_device(ld.device())
}

//! Orthogonal decompositions: `qr`, `eigh`/`eigvalsh`, `svd`/`svdvals`, `pinv`, `matrix_rank`,
//! `householder_product`, with their backward rules written with tensor ops.

use super::solve::solve_triangular;
use super::util::{build, check_mats, diag_embed, eye, mats, square, tril};
use super::{cuda_path, dense};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.linalg.qr(A, mode)`: `mode` is `"reduced"`, `"complete"` or `"r"` (Q empty).
pub fn qr(a: &Tensor, mode: &str) -> Result<(Tensor, Tensor)> {
    let op = "linalg.qr";
    check_mats(op, a, false)?;
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let k = m.min(n);
    let q_cols = match mode {
        "reduced" | "r" => k,
        "complete" => m,
        _ => return Err(Error::value(op, format!("qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"))),
    };
    let (q, r) = if a.device().is_cuda() {
        cuda_path::qr(op, a, q_cols)?
    } else {
        let mt = mats(op, a)?;
        let (mut qv, mut rv) = (Vec::new(), Vec::new());
        for i in 0..mt.count() {
            let mut x = mt.get(i).to_vec();
            let tau = dense::geqrf(&mut x, m, n);
            qv.extend(dense::orgqr(&x, &tau, m, n, q_cols));
            for r in 0..q_cols {
                for c in 0..n {
                    rv.push(if c >= r && r < m { x[r * n + c] } else { 0.0 });
                }
            }
        }
        (build(qv, &mt.shape(&[m, q_cols]), a.dtype())?, build(rv, &mt.shape(&[q_cols, n]), a.dtype())?)
    };
    if m >= n || mode == "complete" && m == n {
        autograd::record("LinalgQr", &[a], &[q.clone(), r.clone()], move |ctx, g| {
            if m < n || (q_cols != n) {
                return Err(Error::unsupported("linalg.qr", "backward of QR when the reduced R is not square"));
            }
            // gA = (gQ + Q copyltu(M)) R⁻ᵀ with M = R gRᵀ − gQᵀ Q
            let (q, r) = (ctx.output(0)?, ctx.output(1)?);
            let mm = r.matmul(&g[1].mt()?)?.sub(&g[0].mt()?.matmul(&q)?)?;
            let copyltu = tril(&mm, 0)?.add(&tril(&mm, -1)?.mt()?)?;
            let b = g[0].add(&q.matmul(&copyltu)?)?;
            Ok(vec![Some(solve_triangular(&r.mt()?, &b, false, false, false)?)])
        });
    }
    if mode == "r" {
        return Ok((Tensor::zeros_on(&[0], a.dtype(), a.device())?, r));
    }
    Ok((q, r))
}

/// `torch.linalg.eigh(A, UPLO)`: eigenvalues ascending and eigenvectors (columns), reading
/// only the `UPLO` triangle of `A`.
pub fn eigh(a: &Tensor, uplo: &str) -> Result<(Tensor, Tensor)> {
    let op = "linalg.eigh";
    let upper = match uplo {
        "U" | "u" => true,
        "L" | "l" => false,
        _ => return Err(Error::value(op, format!("Expected UPLO argument to be 'L' or 'U', but got {uplo}"))),
    };
    check_mats(op, a, true)?;
    let n = a.shape()[a.ndim() - 1];
    let (w, v) = if a.device().is_cuda() {
        cuda_path::eigh(op, a, upper)?
    } else {
        let mt = square(op, a)?;
        let (mut wv, mut vv) = (Vec::new(), Vec::new());
        for i in 0..mt.count() {
            let x = mt.get(i);
            let mut s = vec![0.0; n * n];
            for r in 0..n {
                for c in 0..n {
                    let (rr, cc) = if (c >= r) == upper { (r, c) } else { (c, r) };
                    s[r * n + c] = x[rr * n + cc];
                }
            }
            let (w, v) = dense::eigh(&s, n);
            wv.extend(w);
            vv.extend(v);
        }
        (build(wv, &mt.shape(&[n]), a.dtype())?, build(vv, &mt.shape(&[n, n]), a.dtype())?)
    };
    autograd::record("LinalgEigh", &[a], &[w.clone(), v.clone()], move |ctx, g| {
        // gA = V (diag(gw) + skew(Vᵀ gV)/2 ∘ F) Vᵀ, F_ij = 1/(w_j − w_i) off the diagonal
        let (w, v) = (ctx.output(0)?, ctx.output(1)?);
        let vtgv = v.mt()?.matmul(&g[1])?;
        let skew = vtgv.sub(&vtgv.mt()?)?.mul_scalar(0.5)?;
        let id = eye(n, n, &w)?;
        let e = w.unsqueeze(-2)?.sub(&w.unsqueeze(-1)?)?.add(&id)?;
        let off = skew.div(&e)?.mul(&id.neg()?.add_scalar(1.0)?)?;
        let inner = off.add(&diag_embed(&g[0])?)?;
        Ok(vec![Some(v.matmul(&inner)?.matmul(&v.mt()?)?)])
    });
    Ok((w, v))
}

/// Thin SVD `A = U diag(S) Vh` with its backward rule (PyTorch's `svd_backward`, real case).
pub fn svd_thin(a: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let op = "linalg.svd";
    check_mats(op, a, false)?;
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let k = m.min(n);
    let (u, s, vh) = if a.device().is_cuda() {
        cuda_path::svd(op, a, false)?
    } else {
        let mt = mats(op, a)?;
        let (mut uv, mut sv, mut vv) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..mt.count() {
            let (u, s, vt) = dense::svd(mt.get(i), m, n);
            uv.extend(u);
            sv.extend(s);
            vv.extend(vt);
        }
        (build(uv, &mt.shape(&[m, k]), a.dtype())?, build(sv, &mt.shape(&[k]), a.dtype())?, build(vv, &mt.shape(&[k, n]), a.dtype())?)
    };
    autograd::record("LinalgSvd", &[a], &[u.clone(), s.clone(), vh.clone()], move |ctx, g| {
        let (u, s, vh) = (ctx.output(0)?, ctx.output(1)?, ctx.output(2)?);
        let (gu, gs, gvh) = (&g[0], &g[1], &g[2]);
        let skew = |x: Tensor| -> Result<Tensor> { x.sub(&x.mt()?) };
        let uhgu = skew(u.mt()?.matmul(gu)?)?;
        let vhgv = skew(vh.matmul(&gvh.mt()?)?)?;
        let s2 = s.mul(&s)?;
        let id = eye(k, k, &s)?;
        let e = s2.unsqueeze(-2)?.sub(&s2.unsqueeze(-1)?)?.add(&id)?;
        let mut ga = uhgu.mul(&s.unsqueeze(-2)?)?.add(&s.unsqueeze(-1)?.mul(&vhgv)?)?.div(&e)?;
        ga = ga.add(&diag_embed(gs)?)?;
        let ga = if m > n {
            let t = u.matmul(&ga)?;
            let gus = gu.div(&s.unsqueeze(-2)?)?;
            t.add(&gus)?.sub(&u.matmul(&u.mt()?.matmul(&gus)?)?)?.matmul(&vh)?
        } else if m < n {
            let t = ga.matmul(&vh)?;
            let sg = gvh.div(&s.unsqueeze(-1)?)?;
            u.matmul(&t.add(&sg)?.sub(&sg.matmul(&vh.mt()?)?.matmul(&vh)?)?)?
        } else {
            u.matmul(&ga)?.matmul(&vh)?
        };
        Ok(vec![Some(ga)])
    });
    Ok((u, s, vh))
}

/// `torch.linalg.svd(A, full_matrices)`. The full factors extend U / Vh with orthonormal
/// complements (no gradient flows through the extension).
pub fn svd(a: &Tensor, full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
    let (u, s, vh) = svd_thin(a)?;
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let k = m.min(n);
    if !full_matrices || m == n {
        return Ok((u, s, vh));
    }
    if a.device().is_cuda() {
        // the square factors come from a second, full factorization (no gradient flows through
        // the extension, as on the CPU)
        let (uf, _, vf) = cuda_path::svd("linalg.svd", a, true)?;
        return Ok((uf, s, vf));
    }
    let batch: Vec<usize> = a.shape()[..nd - 2].to_vec();
    let count: usize = batch.iter().product();
    let ud: Vec<f64> = u.to_vec()?;
    let vd: Vec<f64> = vh.to_vec()?;
    let (mut uf, mut vf) = (Vec::new(), Vec::new());
    for i in 0..count {
        uf.extend(dense::complete_basis(&ud[i * m * k..(i + 1) * m * k], m, k));
        let v = dense::transpose(&vd[i * k * n..(i + 1) * k * n], k, n);
        vf.extend(dense::transpose(&dense::complete_basis(&v, n, k), n, n));
    }
    let mut su = batch.clone();
    su.extend([m, m]);
    let mut sv = batch;
    sv.extend([n, n]);
    Ok((build(uf, &su, a.dtype())?, s, build(vf, &sv, a.dtype())?))
}

/// `torch.linalg.svdvals(A)`: singular values, descending; gradient `U diag(g) Vh`.
pub fn svdvals(a: &Tensor) -> Result<Tensor> {
    Ok(svd_thin(a)?.1)
}

/// The threshold under which singular values (or |eigenvalues|) count as zero.
fn tolerance(smax: f64, atol: Option<f64>, rtol: Option<f64>, m: usize, n: usize, dt: crate::DType) -> f64 {
    let eps = if dt == crate::DType::F64 { f64::EPSILON } else { f32::EPSILON as f64 };
    let rtol = match (atol, rtol) {
        (_, Some(r)) => r,
        (Some(a), None) if a > 0.0 => 0.0,
        _ => eps * m.max(n) as f64,
    };
    atol.unwrap_or(0.0).max(rtol * smax)
}

/// `torch.linalg.pinv(A, atol=, rtol=, hermitian=)`: the pseudo-inverse, with the constant-rank
/// gradient `−A⁺ᵀ G A⁺ᵀ + (I − A A⁺)ᵀ Gᵀ... ` (Golub & Pereyra) written with tensor ops.
pub fn pinv(a: &Tensor, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) -> Result<Tensor> {
    let op = "linalg.pinv";
    if a.device().is_cuda() {
        check_mats(op, a, false)?;
        let p = pinv_cuda(a, atol, rtol, hermitian)?;
        return record_pinv(a, p);
    }
    let mt = mats(op, a)?;
    let (m, n) = (mt.m, mt.n);
    let mut out = Vec::with_capacity(mt.count() * m * n);
    for i in 0..mt.count() {
        let x = mt.get(i);
        if hermitian && m == n {
            let (w, v) = dense::eigh(&sym_from_lower(x, n), n);
            let smax = w.iter().fold(0.0f64, |acc, x| acc.max(x.abs()));
            let tol = tolerance(smax, atol, rtol, m, n, a.dtype());
            let mut p = vec![0.0; n * n];
            for (j, &l) in w.iter().enumerate() {
                if l.abs() > tol {
                    for r in 0..n {
                        for c in 0..n {
                            p[r * n + c] += v[r * n + j] * v[c * n + j] / l;
                        }
                    }
                }
            }
            out.extend(p);
            continue;
        }
        let k = m.min(n);
        let (u, s, vt) = dense::svd(x, m, n);
        let smax = s.first().copied().unwrap_or(0.0);
        let tol = tolerance(smax, atol, rtol, m, n, a.dtype());
        // A⁺ (n×m) = V diag(1/s) Uᵀ
        let mut p = vec![0.0; n * m];
        for j in 0..k {
            if s[j] > tol {
                for r in 0..n {
                    for c in 0..m {
                        p[r * m + c] += vt[j * n + r] * u[c * k + j] / s[j];
                    }
                }
            }
        }
        out.extend(p);
    }
    record_pinv(a, build(out, &mt.shape(&[n, m]), a.dtype())?)
}

/// Records the pseudo-inverse's backward rule on `p = pinv(a)`.
fn record_pinv(a: &Tensor, p: Tensor) -> Result<Tensor> {
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let sa = autograd::Saved::new("pinv", a);
    autograd::record("LinalgPinv", &[a], &[p.clone()], move |ctx, g| {
        let (a, p, g) = (sa.get()?, ctx.output(0)?, &g[0]);
        let pt = p.mt()?;
        let t1 = pt.matmul(g)?.matmul(&pt)?.neg()?;
        let i_m = eye(m, m, &a)?;
        let i_n = eye(n, n, &a)?;
        let t2 = i_m.sub(&a.matmul(&p)?)?.matmul(&g.mt()?)?.matmul(&p)?.matmul(&pt)?;
        let t3 = pt.matmul(&p)?.matmul(&g.mt()?)?.matmul(&i_n.sub(&p.matmul(&a)?)?)?;
        Ok(vec![Some(t1.add(&t2)?.add(&t3)?)])
    });
    Ok(p)
}

/// The relative tolerance `tolerance` uses: `rtol`, else 0 when `atol > 0`, else `eps·max(m, n)`.
fn effective_rtol(atol: Option<f64>, rtol: Option<f64>, m: usize, n: usize, dt: crate::DType) -> f64 {
    tolerance(1.0, None, match (atol, rtol) {
        (_, Some(r)) => Some(r),
        (Some(a), None) if a > 0.0 => Some(0.0),
        _ => None,
    }, m, n, dt)
}

/// Singular values (or |eigenvalues| when `hermitian`) of each matrix, with the factors that
/// rebuild the pseudo-inverse: `A⁺ = R diag(1/vals) L` over the kept values. On the device.
fn spectrum_cuda(a: &Tensor, hermitian: bool) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    if hermitian && m == n {
        // eigenvalues may be negative: keep |w| for the threshold and w for the inverse
        let (w, v) = cuda_path::eigh("linalg.eigh", a, false)?;
        let vt = v.mt()?;
        return Ok((w.abs()?, w, v, vt));
    }
    let (u, s, vh) = cuda_path::svd("linalg.svd", a, false)?;
    Ok((s.clone(), s, vh.mt()?, u.mt()?))
}

/// [`pinv`] on CUDA: the factorization on the device, the thresholded inverse as tensor ops.
fn pinv_cuda(a: &Tensor, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) -> Result<Tensor> {
    let _ng = autograd::no_grad();
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let mut shape = a.shape()[..nd - 2].to_vec();
    shape.extend([n, m]);
    if m.min(n) == 0 {
        return Tensor::zeros_on(&shape, a.dtype(), a.device());
    }
    let (mag, vals, right, left) = spectrum_cuda(a, hermitian)?;
    let tol = mag.amax(&[-1], true)?.mul_scalar(effective_rtol(atol, rtol, m, n, a.dtype()))?.clamp_min(atol.unwrap_or(0.0))?;
    let zero = Tensor::zeros_on(&[], a.dtype(), a.device())?;
    let inv = crate::ops::binary::where_cond(&mag.gt(&tol)?, &vals.reciprocal()?, &zero)?;
    right.mul(&inv.unsqueeze(-2)?)?.matmul(&left)?.contiguous()
}

/// [`matrix_rank`] on CUDA: counts of the values above the tolerance, on the device.
fn matrix_rank_cuda(a: &Tensor, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) -> Result<Tensor> {
    let _ng = autograd::no_grad();
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    if m.min(n) == 0 {
        return Tensor::zeros_on(&a.shape()[..nd - 2], crate::DType::I64, a.device());
    }
    let (mag, _, _, _) = spectrum_cuda(a, hermitian)?;
    let tol = mag.amax(&[-1], true)?.mul_scalar(effective_rtol(atol, rtol, m, n, a.dtype()))?.clamp_min(atol.unwrap_or(0.0))?;
    mag.gt(&tol)?.to_dtype(crate::DType::I64)?.sum_dims(Some(&[-1]), false, None)
}

/// A symmetric matrix from the lower triangle of `x` (LAPACK's default for Hermitian inputs).
fn sym_from_lower(x: &[f64], n: usize) -> Vec<f64> {
    let mut s = vec![0.0; n * n];
    for r in 0..n {
        for c in 0..n {
            s[r * n + c] = if c <= r { x[r * n + c] } else { x[c * n + r] };
        }
    }
    s
}

/// `torch.linalg.matrix_rank(A, atol=, rtol=, hermitian=)`: int64 counts.
pub fn matrix_rank(a: &Tensor, atol: Option<f64>, rtol: Option<f64>, hermitian: bool) -> Result<Tensor> {
    let op = "linalg.matrix_rank";
    if a.device().is_cuda() {
        check_mats(op, a, false)?;
        return matrix_rank_cuda(a, atol, rtol, hermitian);
    }
    let mt = mats(op, a)?;
    let (m, n) = (mt.m, mt.n);
    let mut out = Vec::with_capacity(mt.count());
    for i in 0..mt.count() {
        let vals: Vec<f64> = if hermitian && m == n {
            dense::eigh(&sym_from_lower(mt.get(i), n), n).0.iter().map(|x| x.abs()).collect()
        } else {
            dense::svd(mt.get(i), m, n).1
        };
        let smax = vals.iter().fold(0.0f64, |acc, &x| acc.max(x));
        let tol = tolerance(smax, atol, rtol, m, n, a.dtype());
        out.push(vals.iter().filter(|&&s| s > tol).count() as i64);
    }
    Tensor::from_vec(out, &mt.batch)
}

/// `torch.linalg.householder_product(A, tau)`: `H₀ H₁ … H_{k−1}` (first `n` columns), with
/// `H_i = I − τ_i v_i v_iᵀ` and `v_i` the `i`-th column of `A` below a unit entry. Built from
/// products of tensors, so it is differentiable in `A` and `tau`.
pub fn householder_product(a: &Tensor, tau: &Tensor) -> Result<Tensor> {
    let op = "linalg.householder_product";
    check_mats(op, a, false)?;
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    if n > m {
        return Err(Error::shape(op, format!("{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")));
    }
    let k = *tau.shape().last().unwrap_or(&0);
    if tau.ndim() != a.ndim() - 1 || k > n {
        return Err(Error::shape(op, format!("{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")));
    }
    // products of k reflectors accumulate rounding: build them in f64 and round once
    let (out_dt, dt) = (a.dtype(), crate::DType::F64);
    let (a, tau) = (&a.to_dtype(dt)?, &tau.to_dtype(dt)?);
    let mut q = eye(m, m, a)?;
    for i in 0..k {
        let mut below = vec![0.0; m];
        let mut unit = vec![0.0; m];
        for (r, b) in below.iter_mut().enumerate() {
            *b = if r > i { 1.0 } else { 0.0 };
        }
        unit[i] = 1.0;
        let (below, unit) = (build(below, &[m], dt)?.to_device(a.device())?, build(unit, &[m], dt)?.to_device(a.device())?);
        let v = a.select(-1, i as i64)?.mul(&below)?.add(&unit)?;
        let t = tau.select(-1, i as i64)?.unsqueeze(-1)?.unsqueeze(-1)?;
        let h = eye(m, m, a)?.sub(&v.unsqueeze(-1)?.mul(&v.unsqueeze(-2)?)?.mul(&t)?)?;
        q = q.matmul(&h)?;
    }
    q.matmul(&eye(m, n, a)?)?.to_dtype(out_dt)
}

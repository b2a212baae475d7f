//! Dense f64 kernels on one row-major matrix: LU with partial pivoting, Cholesky, triangular
//! solves, Householder QR (LAPACK's conventions), Jacobi symmetric eigensolver and SVD.
//! Small matrices are the target (decompositions of parameters and test inputs), so these are
//! plain loops; the matrix products around them go through the GEMM path.

/// LU factorization in place with partial pivoting (LAPACK `getrf`): `a` is `m×n`; on return it
/// holds `L` (unit lower, below the diagonal) and `U`. Returns the 1-based pivots (`min(m, n)` of
/// them) and `info` (0, or the 1-based index of the first zero pivot).
pub fn lu(a: &mut [f64], m: usize, n: usize) -> (Vec<i32>, i32) {
    let k = m.min(n);
    let mut piv = Vec::with_capacity(k);
    let mut info = 0;
    for j in 0..k {
        // first row of the largest magnitude in column j (LAPACK's idamax)
        let mut p = j;
        let mut best = a[j * n + j].abs();
        for i in j + 1..m {
            let v = a[i * n + j].abs();
            if v > best || (best.is_nan() && !v.is_nan()) {
                best = v;
                p = i;
            }
        }
        piv.push(p as i32 + 1);
        if p != j {
            for c in 0..n {
                a.swap(j * n + c, p * n + c);
            }
        }
        let d = a[j * n + j];
        if d == 0.0 {
            if info == 0 {
                info = j as i32 + 1;
            }
            continue;
        }
        for i in j + 1..m {
            a[i * n + j] /= d;
            let l = a[i * n + j];
            if l != 0.0 {
                for c in j + 1..n {
                    a[i * n + c] -= l * a[j * n + c];
                }
            }
        }
    }
    (piv, info)
}

/// Applies the row interchanges of 1-based `piv` to the identity: the permutation `P` with
/// `A = P L U`, as an `m×m` row-major matrix.
pub fn pivots_to_perm(piv: &[i32], m: usize) -> Vec<f64> {
    let mut order: Vec<usize> = (0..m).collect();
    for (j, &p) in piv.iter().enumerate() {
        let p = (p - 1).clamp(0, m as i32 - 1) as usize;
        order.swap(j, p);
    }
    // row j of (P^T A) is row order[j] of A, so P[order[j]][j] = 1
    let mut pm = vec![0.0; m * m];
    for (j, &o) in order.iter().enumerate() {
        pm[o * m + j] = 1.0;
    }
    pm
}

/// Solves `A X = B` for square `A` (`n×n`) and `B` (`n×r`), both row-major, through LU.
/// Returns `None` when `A` is singular.
pub fn solve(a: &[f64], b: &[f64], n: usize, r: usize) -> Option<Vec<f64>> {
    let mut lu_ = a.to_vec();
    let (piv, info) = lu(&mut lu_, n, n);
    if info != 0 {
        return None;
    }
    let mut x = b.to_vec();
    for (j, &p) in piv.iter().enumerate() {
        let p = p as usize - 1;
        if p != j {
            for c in 0..r {
                x.swap(j * r + c, p * r + c);
            }
        }
    }
    tri_solve(&lu_, &mut x, n, r, false, true);
    tri_solve(&lu_, &mut x, n, r, true, false);
    Some(x)
}

/// Solves `T X = B` in place (`T` is `n×n`, `B` is `n×r`), using only the upper or lower triangle
/// of `T`, with a unit diagonal when `unit`.
pub fn tri_solve(t: &[f64], b: &mut [f64], n: usize, r: usize, upper: bool, unit: bool) {
    // back substitution (upper: last row first) or forward substitution (lower: first row first)
    for s in 0..n {
        let i = if upper { n - 1 - s } else { s };
        let solved = if upper { i + 1..n } else { 0..i };
        for k in solved {
            let f = t[i * n + k];
            if f != 0.0 {
                for c in 0..r {
                    b[i * r + c] -= f * b[k * r + c];
                }
            }
        }
        if !unit {
            let d = t[i * n + i];
            for c in 0..r {
                b[i * r + c] /= d;
            }
        }
    }
}

/// Cholesky factor `L` (lower, `A = L Lᵀ`) from the lower triangle of `a`. Returns `L` and
/// `info` (0, or the order of the first leading minor that is not positive-definite).
pub fn cholesky(a: &[f64], n: usize) -> (Vec<f64>, i32) {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d <= 0.0 || d.is_nan() {
            return (l, j as i32 + 1);
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    (l, 0)
}

/// Householder QR in place (LAPACK `geqrf`): `a` (`m×n`) gets `R` on and above the diagonal and
/// the reflectors' tails below it; returns the `min(m, n)` scalars `tau`.
pub fn geqrf(a: &mut [f64], m: usize, n: usize) -> Vec<f64> {
    let k = m.min(n);
    let mut tau = vec![0.0; k];
    for j in 0..k {
        let alpha = a[j * n + j];
        let xnorm = (j + 1..m).map(|i| a[i * n + j] * a[i * n + j]).sum::<f64>().sqrt();
        if xnorm == 0.0 {
            continue; // H = I (LAPACK's dlarfg with a zero tail)
        }
        let beta = -alpha.signum() * alpha.hypot(xnorm);
        let beta = if alpha == 0.0 { -alpha.hypot(xnorm) } else { beta };
        tau[j] = (beta - alpha) / beta;
        let scale = 1.0 / (alpha - beta);
        for i in j + 1..m {
            a[i * n + j] *= scale;
        }
        a[j * n + j] = beta;
        // apply H = I - tau v vᵀ (v[j] = 1) to the trailing columns
        for c in j + 1..n {
            let mut s = a[j * n + c];
            for i in j + 1..m {
                s += a[i * n + j] * a[i * n + c];
            }
            s *= tau[j];
            a[j * n + c] -= s;
            for i in j + 1..m {
                a[i * n + c] -= s * a[i * n + j];
            }
        }
    }
    tau
}

/// `H_0 H_1 … H_{k-1}` applied to the first `q` columns of the `m×m` identity (LAPACK `orgqr`),
/// with the reflectors stored below the diagonal of `v` (`m×n`, row-major) and scalars `tau`.
pub fn orgqr(v: &[f64], tau: &[f64], m: usize, n: usize, q: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * q];
    for i in 0..m.min(q) {
        out[i * q + i] = 1.0;
    }
    for j in (0..tau.len()).rev() {
        let t = tau[j];
        if t == 0.0 {
            continue;
        }
        for c in 0..q {
            let mut s = out[j * q + c];
            for i in j + 1..m {
                s += v[i * n + j] * out[i * q + c];
            }
            s *= t;
            out[j * q + c] -= s;
            for i in j + 1..m {
                out[i * q + c] -= s * v[i * n + j];
            }
        }
    }
    out
}

/// Eigen-decomposition of a symmetric `n×n` matrix by cyclic Jacobi rotations: eigenvalues in
/// ascending order and the eigenvectors as the columns of a row-major `n×n` matrix.
pub fn eigh(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut s = a.to_vec();
    let mut v = vec![0.0; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..100 {
        let off: f64 = (0..n).flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j))).map(|(i, j)| s[i * n + j] * s[i * n + j]).sum();
        let total: f64 = s.iter().map(|x| x * x).sum();
        if off <= 1e-30 * total.max(f64::MIN_POSITIVE) {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = s[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let (c, sn) = jacobi_rotation((s[q * n + q] - s[p * n + p]) / (2.0 * apq));
                rotate_cols(&mut s, n, n, p, q, c, sn);
                for k in 0..n {
                    let (spk, sqk) = (s[p * n + k], s[q * n + k]);
                    s[p * n + k] = c * spk - sn * sqk;
                    s[q * n + k] = sn * spk + c * sqk;
                }
                rotate_cols(&mut v, n, n, p, q, c, sn);
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| s[i * n + i].partial_cmp(&s[j * n + j]).unwrap_or(std::cmp::Ordering::Equal));
    let w: Vec<f64> = order.iter().map(|&i| s[i * n + i]).collect();
    let mut vs = vec![0.0; n * n];
    for (c, &o) in order.iter().enumerate() {
        for r in 0..n {
            vs[r * n + c] = v[r * n + o];
        }
    }
    (w, vs)
}

/// The Jacobi rotation `(cos, sin)` for `θ = (a_qq - a_pp) / (2 a_pq)`: `t = tan` is the
/// smaller root of `t² + 2θt - 1 = 0` (1 when `θ = 0`).
fn jacobi_rotation(theta: f64) -> (f64, f64) {
    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
    let t = if theta == 0.0 { 1.0 } else { t };
    let c = 1.0 / (t * t + 1.0).sqrt();
    (c, t * c)
}

/// Rotates columns `p` and `q` of a row-major `rows×n` matrix by `(c, s)`:
/// `(a_p, a_q) <- (c a_p - s a_q, s a_p + c a_q)`.
fn rotate_cols(a: &mut [f64], rows: usize, n: usize, p: usize, q: usize, c: f64, s: f64) {
    for k in 0..rows {
        let (x, y) = (a[k * n + p], a[k * n + q]);
        a[k * n + p] = c * x - s * y;
        a[k * n + q] = s * x + c * y;
    }
}

/// Thin SVD of an `m×n` matrix by one-sided Jacobi: `(U m×k, S k, Vᵀ k×n)` with `k = min(m, n)`,
/// singular values descending.
pub fn svd(a: &[f64], m: usize, n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    if m < n {
        // A = U S Vᵀ  <=>  Aᵀ = V S Uᵀ
        let at = transpose(a, m, n);
        let (u, s, vt) = svd(&at, n, m);
        return (transpose(&vt, m, m), s, transpose(&u, n, m));
    }
    // columns of `w` (m×n) are rotated until orthogonal; `v` (n×n) accumulates the rotations
    let mut w = a.to_vec();
    let mut v = vec![0.0; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..100 {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let (mut al, mut be, mut ga) = (0.0, 0.0, 0.0);
                for i in 0..m {
                    let (x, y) = (w[i * n + p], w[i * n + q]);
                    al += x * x;
                    be += y * y;
                    ga += x * y;
                }
                if ga == 0.0 || ga.abs() <= 1e-15 * (al * be).sqrt() {
                    continue;
                }
                rotated = true;
                let (c, s) = jacobi_rotation((be - al) / (2.0 * ga));
                rotate_cols(&mut w, m, n, p, q, c, s);
                rotate_cols(&mut v, n, n, p, q, c, s);
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<f64> = (0..n).map(|j| (0..m).map(|i| w[i * n + j] * w[i * n + j]).sum::<f64>().sqrt()).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| norms[j].partial_cmp(&norms[i]).unwrap_or(std::cmp::Ordering::Equal));
    let s: Vec<f64> = order.iter().map(|&j| norms[j]).collect();
    let mut u = vec![0.0; m * n];
    let mut vt = vec![0.0; n * n];
    for (c, &j) in order.iter().enumerate() {
        for i in 0..m {
            u[i * n + c] = if norms[j] > 0.0 { w[i * n + j] / norms[j] } else { 0.0 };
        }
        for i in 0..n {
            vt[c * n + i] = v[i * n + j];
        }
    }
    complete_columns(&mut u, m, n, &s);
    (u, s, vt)
}

/// Replaces the columns of `u` (`m×k`) whose singular value is zero by unit vectors orthogonal to
/// the others (Gram-Schmidt against the standard basis), so `U` keeps orthonormal columns.
fn complete_columns(u: &mut [f64], m: usize, k: usize, s: &[f64]) {
    let mut next_basis = 0;
    for c in 0..k {
        if s[c] > 0.0 {
            continue;
        }
        while next_basis < m {
            let mut col = vec![0.0; m];
            col[next_basis] = 1.0;
            next_basis += 1;
            for _ in 0..2 {
                for o in 0..k {
                    if o == c || (s[o] == 0.0 && o > c) {
                        continue;
                    }
                    let d: f64 = (0..m).map(|i| col[i] * u[i * k + o]).sum();
                    for i in 0..m {
                        col[i] -= d * u[i * k + o];
                    }
                }
            }
            let nrm = col.iter().map(|x| x * x).sum::<f64>().sqrt();
            if nrm > 1e-8 {
                for i in 0..m {
                    u[i * k + c] = col[i] / nrm;
                }
                break;
            }
        }
    }
}

/// Extends the orthonormal columns of `u` (`m×k`) to a full `m×m` orthogonal matrix.
pub fn complete_basis(u: &[f64], m: usize, k: usize) -> Vec<f64> {
    let mut full = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..k {
            full[i * m + j] = u[i * k + j];
        }
    }
    let mut s = vec![1.0; k];
    s.extend(vec![0.0; m - k]);
    complete_columns(&mut full, m, m, &s);
    full
}

/// The transpose of an `m×n` row-major matrix.
pub fn transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    let mut t = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            t[j * m + i] = a[i * n + j];
        }
    }
    t
}

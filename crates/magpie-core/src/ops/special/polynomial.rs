//! Classical orthogonal polynomials `P_n(x)` in f64 for `torch.special.*_polynomial_*(x, n)`:
//! Chebyshev T, U, V, W (and shifted), Hermite H and He, Laguerre L, Legendre P.
//! Three-term recurrences, with PyTorch's conventions: 0 for n < 0, closed forms at |x| = 1
//! and trigonometric forms for large n inside (-1, 1).

/// Chebyshev polynomial of the first kind.
pub fn chebyshev_t(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    if x.abs() == 1.0 {
        return if x > 0.0 || n % 2 == 0 { 1.0 } else { -1.0 };
    }
    if n > 6 && x.abs() < 1.0 {
        return (n as f64 * x.acos()).cos();
    }
    recur(n, 1.0, x, |_, p, q| 2.0 * x * q - p)
}

/// Chebyshev polynomial of the second kind.
pub fn chebyshev_u(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    let nf = n as f64;
    if x.abs() == 1.0 {
        return if x > 0.0 || n % 2 == 0 { nf + 1.0 } else { -(nf + 1.0) };
    }
    if n > 8 && x.abs() < 1.0 {
        let t = x.acos();
        return if t.sin() != 0.0 { ((nf + 1.0) * t).sin() / t.sin() } else { (nf + 1.0) * ((nf + 1.0) * t).cos() / x };
    }
    recur(n, 1.0, 2.0 * x, |_, p, q| 2.0 * x * q - p)
}

/// Chebyshev polynomial of the third kind.
pub fn chebyshev_v(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    let nf = n as f64;
    if x.abs() == 1.0 {
        if x > 0.0 {
            return 1.0;
        }
        return if n % 2 == 0 { 2.0 * nf + 1.0 } else { -(2.0 * nf + 1.0) };
    }
    if n > 8 && x.abs() < 1.0 {
        let t = x.acos();
        if (t / 2.0).sin() != 1.0 {
            return ((nf + 0.5) * t).cos() / (t / 2.0).cos();
        }
        return if n % 2 == 0 { 2.0 * nf + 1.0 } else { -(2.0 * nf + 1.0) };
    }
    recur(n, 1.0, 2.0 * x - 1.0, |_, p, q| 2.0 * x * q - p)
}

/// Chebyshev polynomial of the fourth kind.
pub fn chebyshev_w(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    let nf = n as f64;
    if x.abs() == 1.0 {
        if x > 0.0 {
            return 2.0 * nf + 1.0;
        }
        return if n % 2 == 0 { 1.0 } else { -1.0 };
    }
    if n > 8 && x.abs() < 1.0 {
        let t = x.acos();
        if (t / 2.0).cos() != 1.0 {
            return ((nf + 0.5) * t).sin() / (t / 2.0).sin();
        }
        return if x > 0.0 { 2.0 * nf + 1.0 } else if n % 2 == 0 { 1.0 } else { -1.0 };
    }
    recur(n, 1.0, 2.0 * x + 1.0, |_, p, q| 2.0 * x * q - p)
}

/// Physicists' Hermite polynomial: H_(k+1) = 2x H_k - 2k H_(k-1).
pub fn hermite_h(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    recur(n, 1.0, 2.0 * x, |k, p, q| 2.0 * x * q - 2.0 * k as f64 * p)
}

/// Probabilists' Hermite polynomial: He_(k+1) = x He_k - k He_(k-1).
pub fn hermite_he(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    recur(n, 1.0, x, |k, p, q| x * q - k as f64 * p)
}

/// Laguerre polynomial: (k+1) L_(k+1) = (2k + 1 - x) L_k - k L_(k-1).
pub fn laguerre_l(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    if x == 0.0 {
        return 1.0;
    }
    recur(n, 1.0, 1.0 - x, |k, p, q| {
        let kf = k as f64;
        ((2.0 * kf + 1.0 - x) * q - kf * p) / (kf + 1.0)
    })
}

/// Legendre polynomial: (k+1) P_(k+1) = (2k + 1) x P_k - k P_(k-1).
pub fn legendre_p(x: f64, n: i64) -> f64 {
    if n < 0 {
        return 0.0;
    }
    if x.abs() == 1.0 {
        return if x > 0.0 || n % 2 == 0 { 1.0 } else { -1.0 };
    }
    recur(n, 1.0, x, |k, p, q| {
        let kf = k as f64;
        ((2.0 * kf + 1.0) * x * q - kf * p) / (kf + 1.0)
    })
}

/// Runs a three-term recurrence from `p0`, `p1`: `next(k, p_(k-1), p_k) = p_(k+1)`.
fn recur(n: i64, p0: f64, p1: f64, next: impl Fn(i64, f64, f64) -> f64) -> f64 {
    if n == 0 {
        return p0;
    }
    let (mut p, mut q) = (p0, p1);
    for k in 1..n {
        let r = next(k, p, q);
        p = q;
        q = r;
        if !q.is_finite() && !p.is_finite() {
            break;
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn closed_forms() {
        let x: f64 = 0.3;
        assert!((chebyshev_t(x, 3) - (4.0 * x * x * x - 3.0 * x)).abs() < 1e-15);
        assert!((chebyshev_u(x, 2) - (4.0 * x * x - 1.0)).abs() < 1e-15);
        assert!((hermite_h(x, 3) - (8.0 * x * x * x - 12.0 * x)).abs() < 1e-14);
        assert!((hermite_he(x, 3) - (x * x * x - 3.0 * x)).abs() < 1e-15);
        assert!((laguerre_l(x, 2) - (x * x - 4.0 * x + 2.0) / 2.0).abs() < 1e-15);
        assert!((legendre_p(x, 2) - (3.0 * x * x - 1.0) / 2.0).abs() < 1e-15);
        assert!((chebyshev_t(x, 9) - (9.0 * x.acos()).cos()).abs() < 1e-14);
    }
}

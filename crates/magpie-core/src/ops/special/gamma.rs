//! Scalar gamma-family functions in f64: `lgamma`, `digamma`, the Hurwitz zeta function,
//! `polygamma`, `mvlgamma`.

use std::f64::consts::PI;

/// Bernoulli numbers B_2, B_4, ..., B_24 (exact rationals as f64).
const BERNOULLI: [f64; 12] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
    -3617.0 / 510.0,
    43867.0 / 798.0,
    -174611.0 / 330.0,
    854513.0 / 138.0,
    -236364091.0 / 2730.0,
];

/// `log|Gamma(x)|` (PyTorch's `lgamma`): +inf at the poles.
pub fn lgamma(x: f64) -> f64 {
    libm::lgamma(x)
}

/// The digamma function `psi(x) = d/dx ln Gamma(x)`, with PyTorch's conventions:
/// `-inf`/`+inf` at `+0`/`-0`, NaN at the negative integers.
pub fn digamma(x: f64) -> f64 {
    if x == 0.0 {
        return if x.is_sign_negative() { f64::INFINITY } else { f64::NEG_INFINITY };
    }
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x < 0.0 {
        if x == x.trunc() {
            return f64::NAN;
        }
        // reflection; tan of the fractional part is more accurate than tan(pi x)
        let r = x - x.trunc();
        return digamma(1.0 - x) - PI / (PI * r).tan();
    }
    let mut x = x;
    let mut acc = 0.0;
    while x < 10.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    if x == f64::INFINITY {
        return x;
    }
    // asymptotic series: ln x - 1/(2x) - sum B_2k / (2k x^2k)
    let z = 1.0 / (x * x);
    let mut s = 0.0;
    let mut zp = z;
    for (k, b) in BERNOULLI.iter().take(8).enumerate() {
        s += b / (2.0 * (k as f64 + 1.0)) * zp;
        zp *= z;
    }
    acc + x.ln() - 0.5 / x - s
}

/// The Hurwitz zeta function `zeta(s, q) = sum_{k>=0} (q + k)^-s` for `s > 1` (scipy's and
/// PyTorch's `special.zeta`): Euler-Maclaurin summation. For `q <= 0` it is +inf at the
/// integers and NaN unless `s` is an integer.
pub fn zeta(s: f64, q: f64) -> f64 {
    if s.is_nan() || q.is_nan() {
        return f64::NAN;
    }
    if s == 1.0 {
        return f64::INFINITY;
    }
    if s < 1.0 {
        return f64::NAN;
    }
    if q <= 0.0 {
        if q == q.floor() {
            return f64::INFINITY;
        }
        if s != s.floor() {
            return f64::NAN;
        }
    }
    if q == f64::INFINITY {
        return 0.0;
    }
    // direct terms until q + n is large enough for the tail expansion to converge fast
    let start = 12.0 + s.min(60.0);
    let mut sum = 0.0;
    let mut a = q;
    let mut n = 0;
    while a < start && n < 100_000 {
        sum += a.powf(-s);
        a += 1.0;
        n += 1;
    }
    // tail: a^(1-s)/(s-1) + a^-s/2 + sum B_2j/(2j)! s(s+1)...(s+2j-2) a^(-s-2j+1)
    let mut tail = a.powf(1.0 - s) / (s - 1.0) + 0.5 * a.powf(-s);
    let mut fac = s * a.powf(-s - 1.0); // s a^(-s-1) / 1
    let mut fact = 2.0; // (2j)!
    for (j, b) in BERNOULLI.iter().enumerate() {
        let term = b / fact * fac;
        tail += term;
        if term.abs() < 1e-17 * (sum + tail).abs() {
            break;
        }
        let m = 2.0 * j as f64;
        // next rising factor: (s + 2j + 1)(s + 2j + 2) / a^2, next factorial: (2j+3)(2j+4)
        fac *= (s + m + 1.0) * (s + m + 2.0) / (a * a);
        fact *= (m + 3.0) * (m + 4.0);
    }
    sum + tail
}

/// The polygamma function `psi^(n)(x)`: `digamma` for `n == 0`, else
/// `(-1)^(n+1) n! zeta(n + 1, x)`.
pub fn polygamma(n: i64, x: f64) -> f64 {
    if n == 0 {
        return digamma(x);
    }
    let nf = n as f64;
    let sign = if n % 2 == 1 { 1.0 } else { -1.0 };
    sign * libm::lgamma(nf + 1.0).exp() * zeta(nf + 1.0, x)
}

/// The multivariate log-gamma function of dimension `p`:
/// `p(p-1)/4 ln pi + sum_{i<p} lgamma(x - i/2)`.
pub fn mvlgamma(x: f64, p: i64) -> f64 {
    let pf = p as f64;
    let mut s = pf * (pf - 1.0) / 4.0 * PI.ln();
    for i in 0..p {
        s += lgamma(x - i as f64 / 2.0);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }
    #[test]
    fn digamma_known_values() {
        // psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2
        let g = 0.577_215_664_901_532_9;
        assert!(close(digamma(1.0), -g, 1e-15));
        assert!(close(digamma(0.5), -g - 2.0 * 2f64.ln(), 1e-15));
        assert!(close(digamma(-0.5), digamma(1.5) - PI / (-0.5 * PI).tan(), 1e-14));
    }
    #[test]
    fn zeta_known_values() {
        assert!(close(zeta(2.0, 1.0), PI * PI / 6.0, 1e-15));
        assert!(close(zeta(4.0, 1.0), PI.powi(4) / 90.0, 1e-15));
        // trigamma(1/2) = pi^2 / 2
        assert!(close(polygamma(1, 0.5), PI * PI / 2.0, 1e-14));
    }
}

//! Scalar Bessel and Airy functions in f64: modified Bessel functions I0, I1, K0, K1 (plain
//! and exponentially scaled), Bessel J0, J1, Y0, Y1, the spherical j0 and Airy Ai.
//!
//! I_n: power series for |x| <= 20, Hankel's asymptotic expansion beyond. K_nu: the integral
//! `K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt` by the trapezoidal rule (which converges
//! geometrically for this analytic, doubly-exponentially decaying integrand) for x <= 20, the
//! asymptotic expansion beyond.

use std::f64::consts::PI;

/// Power series of `I_nu(x)` for integer `nu` in {0, 1}: `sum (x/2)^(2k+nu) / (k! (k+nu)!)`.
fn i_series(nu: u32, x: f64) -> f64 {
    let q = x * x / 4.0;
    let mut term = if nu == 0 { 1.0 } else { x / 2.0 };
    let mut s = term;
    for k in 1..500 {
        term *= q / (k as f64 * (k + nu) as f64);
        s += term;
        if term.abs() < 1e-17 * s.abs() {
            break;
        }
    }
    s
}

/// `sum_k c_k a_k(nu) / x^k` with Hankel's coefficients
/// `a_k(nu) = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! 8^k)`; `sign` = -1 gives the alternating
/// series of I_nu, +1 the series of K_nu. Stops at the smallest term.
fn hankel_sum(nu: f64, x: f64, sign: f64) -> f64 {
    let mu = 4.0 * nu * nu;
    let mut term = 1.0;
    let mut s = 1.0;
    let mut last = f64::INFINITY;
    for k in 1..200 {
        let j = (2 * k - 1) as f64;
        term *= sign * (mu - j * j) / (k as f64 * 8.0 * x);
        if term.abs() >= last {
            break;
        }
        s += term;
        last = term.abs();
        if term.abs() < 1e-17 * s.abs() {
            break;
        }
    }
    s
}

/// `exp(-|x|) I_nu(|x|)` for nu in {0, 1}, without the sign of x.
fn i_scaled_abs(nu: u32, ax: f64) -> f64 {
    if ax <= 20.0 {
        i_series(nu, ax) * (-ax).exp()
    } else if ax == f64::INFINITY {
        0.0
    } else {
        hankel_sum(nu as f64, ax, -1.0) / (2.0 * PI * ax).sqrt()
    }
}

/// `I_nu(|x|)` for nu in {0, 1}, overflowing only where the value does.
fn i_abs(nu: u32, ax: f64) -> f64 {
    if ax <= 20.0 {
        i_series(nu, ax)
    } else {
        let h = (ax / 2.0).exp();
        i_scaled_abs(nu, ax) * h * h
    }
}

/// The modified Bessel function of the first kind of order 0.
pub fn i0(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    i_abs(0, x.abs())
}

/// `exp(-|x|) I0(x)`.
pub fn i0e(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    i_scaled_abs(0, x.abs())
}

/// The modified Bessel function of the first kind of order 1 (odd).
pub fn i1(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    i_abs(1, x.abs()).copysign(x)
}

/// `exp(-|x|) I1(x)`.
pub fn i1e(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    i_scaled_abs(1, x.abs()).copysign(x)
}

/// `exp(x) K_nu(x)` for x > 0, any real order.
pub fn k_scaled(nu: f64, x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::INFINITY;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x > 20.0 {
        return hankel_sum(nu, x, 1.0) * (PI / (2.0 * x)).sqrt();
    }
    // trapezoid on int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt; cosh t - 1 = 2 sinh^2(t/2)
    let h = 0.05;
    let mut s = 0.5;
    let mut k = 1;
    loop {
        let t = k as f64 * h;
        let sh = (t / 2.0).sinh();
        let e = x * 2.0 * sh * sh;
        let term = (-e).exp() * (nu * t).cosh();
        s += term;
        if e - nu * t > 45.0 || k > 100_000 {
            break;
        }
        k += 1;
    }
    s * h
}

/// The modified Bessel function of the second kind of order 0 (NaN for x < 0, inf at 0).
pub fn k0(x: f64) -> f64 {
    k_scaled(0.0, x) * (-x).exp()
}
/// The modified Bessel function of the second kind of order 1.
pub fn k1(x: f64) -> f64 {
    k_scaled(1.0, x) * (-x).exp()
}
/// `exp(x) K0(x)`.
pub fn k0e(x: f64) -> f64 {
    k_scaled(0.0, x)
}
/// `exp(x) K1(x)`.
pub fn k1e(x: f64) -> f64 {
    k_scaled(1.0, x)
}

/// The Bessel function of the first kind of order 0.
pub fn j0(x: f64) -> f64 {
    libm::j0(x)
}
/// The Bessel function of the first kind of order 1.
pub fn j1(x: f64) -> f64 {
    libm::j1(x)
}
/// The Bessel function of the second kind of order 0 (NaN for x < 0, -inf at 0).
pub fn y0(x: f64) -> f64 {
    if x < 0.0 {
        return f64::NAN;
    }
    libm::y0(x)
}
/// The Bessel function of the second kind of order 1.
pub fn y1(x: f64) -> f64 {
    if x < 0.0 {
        return f64::NAN;
    }
    libm::y1(x)
}

/// The spherical Bessel function of the first kind of order 0: `sin(x) / x`.
pub fn spherical_j0(x: f64) -> f64 {
    if x.is_infinite() {
        return 0.0;
    }
    if x.abs() < 0.5 {
        let z = x * x;
        // 1 - z/3! + z^2/5! - z^3/7! + z^4/9! - z^5/11! + z^6/13!
        let mut s = 0.0;
        for d in [6227020800.0, -39916800.0, 362880.0, -5040.0, 120.0, -6.0] {
            s = (s + 1.0 / d) * z;
        }
        return 1.0 + s;
    }
    x.sin() / x
}

/// The Airy function Ai.
pub fn airy_ai(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x == f64::NEG_INFINITY {
        return 0.0;
    }
    if x > 1.0 {
        // Ai(x) = sqrt(x/3) K_{1/3}(zeta) / pi, zeta = 2/3 x^(3/2)
        let zeta = 2.0 / 3.0 * x * x.sqrt();
        if zeta > 745.0 {
            return 0.0;
        }
        return (x / 3.0).sqrt() / PI * k_scaled(1.0 / 3.0, zeta) * (-zeta).exp();
    }
    if x >= -8.0 {
        // Maclaurin series Ai(x) = c1 f(x) - c2 g(x)
        const C1: f64 = 0.355_028_053_887_817_24;
        const C2: f64 = 0.258_819_403_792_806_8;
        let x3 = x * x * x;
        let (mut f, mut tf) = (1.0, 1.0);
        let (mut g, mut tg) = (x, x);
        for k in 1..200 {
            let k3 = 3.0 * k as f64;
            tf *= x3 / ((k3 - 1.0) * k3);
            tg *= x3 / (k3 * (k3 + 1.0));
            f += tf;
            g += tg;
            if tf.abs() < 1e-18 * f.abs().max(1.0) && tg.abs() < 1e-18 * g.abs().max(1.0) {
                break;
            }
        }
        return C1 * f - C2 * g;
    }
    // x < -8: Ai(-z) ~ z^(-1/4)/sqrt(pi) [sin(zeta + pi/4) P - cos(zeta + pi/4) Q]
    let z = -x;
    let zeta = 2.0 / 3.0 * z * z.sqrt();
    let (mut p, mut q) = (1.0, 0.0);
    let mut u = 1.0;
    let mut last = f64::INFINITY;
    let mut zk = 1.0;
    for k in 1..60 {
        let kf = k as f64;
        u *= (6.0 * kf - 5.0) * (6.0 * kf - 3.0) * (6.0 * kf - 1.0) / ((2.0 * kf - 1.0) * 216.0 * kf);
        zk /= zeta;
        let term = u * zk;
        if term >= last {
            break;
        }
        last = term;
        // P = sum (-1)^k u_2k zeta^-2k, Q = sum (-1)^k u_(2k+1) zeta^-(2k+1)
        match k % 4 {
            1 => q += term,
            2 => p -= term,
            3 => q -= term,
            _ => p += term,
        }
        if term < 1e-17 {
            break;
        }
    }
    let th = zeta + PI / 4.0;
    (th.sin() * p - th.cos() * q) / (PI.sqrt() * z.powf(0.25))
}

#[cfg(test)]
mod tests {
    use super::*;
    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }
    #[test]
    fn known_values() {
        // reference values (Abramowitz & Stegun tables / scipy)
        assert!(rel(i0(1.0), 1.266_065_877_752_008_4) < 1e-15);
        assert!(rel(i1(1.0), 0.565_159_103_992_485_1) < 1e-15);
        assert!(rel(i0(30.0), 781_672_297_823.977_7) < 1e-13);
        assert!(rel(k0(1.0), 0.421_024_438_240_708_3) < 1e-13);
        assert!(rel(k1(1.0), 0.601_907_230_197_234_6) < 1e-13);
        assert!(rel(k0(0.01), 4.721_244_730_161_094) < 1e-13);
        assert!(rel(k1(25.0), 3.532_778_073_199_934e-12) < 1e-13);
        assert!(rel(airy_ai(0.0), 0.355_028_053_887_817_24) < 1e-15);
        assert!(rel(airy_ai(2.0), 0.034_924_130_423_274_38) < 1e-12);
        assert!(rel(airy_ai(-2.0), 0.227_407_428_201_685_6) < 1e-12);
        assert!(rel(airy_ai(-10.0), 0.040_241_238_486_441_955) < 1e-9);
    }
}

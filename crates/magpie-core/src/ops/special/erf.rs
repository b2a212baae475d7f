//! Scalar error-function family in f64: `erf`, `erfc`, `erfinv`, `erfcx`, `ndtr`, `ndtri`,
//! `log_ndtr`.

use std::f64::consts::{PI, SQRT_2};

/// 2 / sqrt(pi).
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// The error function.
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// The complementary error function `1 - erf(x)` (accurate in the tail).
pub fn erfc(x: f64) -> f64 {
    libm::erfc(x)
}

/// A starting guess for the inverse error function from `w = -ln((1 - y)(1 + y))`
/// (M. Giles' single-precision approximation), refined by Newton steps below.
fn erfinv_guess(y: f64, w: f64) -> f64 {
    let p = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [3.432_739_39e-07, -3.523_387_7e-06, -4.391_506_54e-06, 0.000_218_580_87, -0.001_253_725_03, -0.004_177_681_64, 0.246_640_727, 1.501_409_41] {
            p = c + p * w;
        }
        p
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [0.000_100_950_558, 0.001_349_343_22, -0.003_673_428_44, 0.005_739_507_73, -0.007_622_461_3, 0.009_438_870_47, 1.001_674_06, 2.832_976_82] {
            p = c + p * w;
        }
        p
    };
    p * y
}

/// The inverse of `erfc` on (0, 2): the `x` with `erfc(x) == c`.
pub fn erfcinv(c: f64) -> f64 {
    if c.is_nan() || !(0.0..=2.0).contains(&c) {
        return f64::NAN;
    }
    if c == 0.0 {
        return f64::INFINITY;
    }
    if c == 2.0 {
        return f64::NEG_INFINITY;
    }
    if c > 1.0 {
        // 2 - c is exact here
        return -erfcinv(2.0 - c);
    }
    if c > 0.5 {
        // small x: the erf side is accurate (1 - c is exact here)
        return erfinv(1.0 - c);
    }
    // x >= 0; Newton on ln erfc(x) - ln c = ln erfcx(x) - x^2 - ln c: concave and close to
    // quadratic, so it converges fast and monotonically from any start, deep into the tail
    let w = -(c * (2.0 - c)).ln();
    let mut x = erfinv_guess(1.0 - c, w).max(0.0);
    let lc = c.ln();
    for _ in 0..100 {
        let ex = erfcx(x);
        let g = ex.ln() - x * x - lc;
        let step = g / (-TWO_OVER_SQRT_PI / ex);
        x = (x - step).max(0.0);
        if step.abs() <= 1e-15 * x.abs() {
            break;
        }
    }
    x
}

/// The inverse error function on [-1, 1] (±inf at ±1, NaN outside).
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return y * f64::INFINITY;
    }
    if y.abs() > 0.5 {
        // 1 - |y| is exact for |y| >= 0.5
        return y.signum() * erfcinv(1.0 - y.abs());
    }
    if y == 0.0 {
        return y;
    }
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let mut x = erfinv_guess(y, w);
    for _ in 0..4 {
        let f = erf(x) - y;
        x -= f / (TWO_OVER_SQRT_PI * (-x * x).exp());
    }
    x
}

/// The scaled complementary error function `exp(x^2) erfc(x)`.
pub fn erfcx(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 0.0 {
        if x < -26.7 {
            return f64::INFINITY;
        }
        let x2 = x * x;
        let lo = x.mul_add(x, -x2);
        return 2.0 * x2.exp() * (1.0 + lo) - erfcx(-x);
    }
    if x < 26.0 {
        // exp(x^2) with the rounding error of x^2 put back
        let x2 = x * x;
        let lo = x.mul_add(x, -x2);
        return x2.exp() * (1.0 + lo) * erfc(x);
    }
    if x > 1e150 {
        return 1.0 / (x * PI.sqrt());
    }
    // asymptotic series 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k
    let z = 1.0 / (2.0 * x * x);
    let mut term = 1.0;
    let mut s = 1.0;
    for k in 1..12 {
        term *= -((2 * k - 1) as f64) * z;
        s += term;
    }
    s / (x * PI.sqrt())
}

/// The standard normal CDF.
pub fn ndtr(x: f64) -> f64 {
    0.5 * erfc(-x / SQRT_2)
}

/// The inverse of the standard normal CDF (quantile function) on [0, 1].
pub fn ndtri(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    -SQRT_2 * erfcinv(2.0 * p)
}

/// `log(ndtr(x))`, accurate far into the lower tail.
pub fn log_ndtr(x: f64) -> f64 {
    if x < -1.0 {
        (erfcx(-x / SQRT_2) / 2.0).ln() - x * x / 2.0
    } else {
        (-erfc(x / SQRT_2) / 2.0).ln_1p()
    }
}

/// `log_ndtr` in f32 arithmetic around an f64 `erfcx`/`erfc`, following PyTorch's float kernel
/// step by step (its rounding shows up in gradients built from the result).
pub fn log_ndtr_f32(x: f32) -> f32 {
    let t = x * std::f32::consts::FRAC_1_SQRT_2;
    if x < -1.0 {
        ((erfcx(-t as f64) as f32) / 2.0).ln() - t * t
    } else {
        (-(erfc(t as f64) as f32) / 2.0).ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn inverses_round_trip() {
        for &y in &[-0.999999, -0.7, -0.3, 0.0, 1e-8, 0.2, 0.5, 0.51, 0.9, 0.999999999] {
            let x = erfinv(y);
            assert!((erf(x) - y).abs() <= 2e-16 + 1e-15 * y.abs(), "erfinv({y}) = {x}");
        }
        for &c in &[1e-300, 1e-20, 1e-5, 0.3, 1.0, 1.7, 2.0 - 1e-12] {
            let x = erfcinv(c);
            assert!(((erfc(x) - c) / c).abs() < 1e-13, "erfcinv({c}) = {x}");
        }
        assert!((erfcinv(1e-300) / 26.209_469_960_516_124 - 1.0).abs() < 1e-14);
        assert!((ndtri(1e-300) / -37.047_096_299_361_2 - 1.0).abs() < 1e-14);
        assert!((ndtri(0.975) - 1.959_963_984_540_054).abs() < 1e-14);
    }
    #[test]
    fn erfcx_continuity() {
        // both sides of the 26 switch (scipy values)
        assert!((erfcx(25.999_999_999) / 0.021_683_584_851_395_665 - 1.0).abs() < 1e-13);
        assert!((erfcx(26.000_000_001) / 0.021_683_584_849_730_153 - 1.0).abs() < 1e-13);
        assert!((erfcx(1.0) - 0.427_583_576_155_807).abs() < 1e-15);
    }
}

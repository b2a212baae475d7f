//! Branch-free f32 math that the compiler can vectorize when inlined into a loop (libm's
//! `expf` is an opaque call per element). Accuracy is within 2 ulp of the correctly rounded
//! result over the whole range (tested against f64 below).

use super::simd::fmadd;

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in a high part exact in few bits and a low correction (Cody-Waite reduction).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding and subtracting it rounds an f32 of magnitude < 2^22 to the nearest integer.
const ROUND: f32 = 12_582_912.0;

/// `e^x` for f32: range reduction `x = n ln2 + r`, a degree-6 polynomial for `e^r` on
/// `|r| <= ln2/2` (Cephes' coefficients), and `2^n` built from exponent bits in two halves
/// so that subnormal results come out right.
/// The common part of [`expf`] and [`expm1f`]: with `x = n ln2 + r` (x clamped to expf's range),
/// `e^r - 1` as `r + r^2 p(r)`, and `2^n` as two factors (so that subnormal results come out
/// right), and `n`.
/// `F`: multiply-adds fused (see `simd::fmadd`; same formula, fewer roundings).
#[inline(always)]
#[allow(clippy::manual_clamp)] // NaN becomes -104 here (never a panic); callers select NaN after
fn exp_reduce<const F: bool>(x: f32) -> (f32, f32, f32, i32) {
    let xc = x.max(-104.0).min(88.722_84);
    let t = fmadd::<F>(xc, LOG2E, ROUND);
    let n = t - ROUND;
    let r = if F { fmadd::<F>(-n, LN2_LO, fmadd::<F>(-n, LN2_HI, xc)) } else { xc - n * LN2_HI - n * LN2_LO };
    let mut p = 1.987_569_1e-4f32;
    p = fmadd::<F>(p, r, 1.398_2e-3);
    p = fmadd::<F>(p, r, 8.333_452e-3);
    p = fmadd::<F>(p, r, 4.166_579_6e-2);
    p = fmadd::<F>(p, r, 1.666_666_5e-1);
    p = fmadd::<F>(p, r, 0.5); // Cephes' 5.0000001e-1, which is 0.5 in f32
    let q = if F { fmadd::<F>(p, r * r, r) } else { p * r * r + r };
    // n sits in the low mantissa bits of t (t's bits are ROUND's plus n): no float-to-int convert
    let ni = t.to_bits() as i32 - 0x4B40_0000;
    let n1 = ni >> 1;
    let n2 = ni - n1;
    (q, f32::from_bits(((n1 + 127) as u32) << 23), f32::from_bits(((n2 + 127) as u32) << 23), ni)
}

#[inline(always)]
pub fn expf(x: f32) -> f32 {
    expf_f::<false>(x)
}

/// [`expf`] with its multiply-adds fused when `F` (inside a `simd_kernel!` body: `expf_f::<FMA>`);
/// within 2 ulp either way.
#[inline(always)]
pub fn expf_f<const F: bool>(x: f32) -> f32 {
    let (q, s1, s2, _) = exp_reduce::<F>(x);
    let v = (q + 1.0) * s1 * s2;
    if x > 88.722_84 {
        f32::INFINITY
    } else if x.is_nan() {
        x
    } else {
        v
    }
}

/// [`expf`] of 8 lanes at once, written lane-wise with separate selects so that the SLP
/// vectorizer turns it into one AVX2 sequence inside fused loops (a loop calling `expf` and
/// also accumulating stays scalar). Same operations, same results as `expf`.
#[inline(always)]
pub fn expf8<const F: bool>(x: [f32; 8]) -> [f32; 8] {
    let mut out = [0f32; 8];
    for k in 0..8 {
        let xk = x[k];
        let (q, s1, s2, _) = exp_reduce::<F>(xk);
        let v = (q + 1.0) * s1 * s2;
        let v = if xk > 88.722_84 { f32::INFINITY } else { v };
        #[allow(clippy::eq_op)]
        let nan = xk != xk;
        out[k] = if nan { xk } else { v };
    }
    out
}

/// `tanh(x)` for f32 as `sign(x) (1 - 2 / (e^{2|x|} + 1))` (vectorizable; absolute error a
/// few 1e-8, relative error larger only for |x| below ~1e-3, where callers add it to 1).
#[inline(always)]
pub fn tanhf_abs_accurate(x: f32) -> f32 {
    tanhf_abs_accurate_f::<false>(x)
}

/// [`tanhf_abs_accurate`], multiply-adds fused when `F`.
#[inline(always)]
fn tanhf_abs_accurate_f<const F: bool>(x: f32) -> f32 {
    let a = x.abs().min(20.0);
    let e = expf_f::<F>(2.0 * a);
    let t = 1.0 - 2.0 / (e + 1.0);
    t.copysign(x)
}

/// `e^x - 1` for f32, accurate near 0 (where `expf(x) - 1` loses all digits): with `x = n ln2 + r`
/// as in [`expf`] and `q = e^r - 1 = r + r^2 p(r)`, the result is `2^n q + (2^n - 1)`, whose two
/// terms never cancel badly; above `n = 64` (where `2^n` alone may overflow) it is `2^n (1 + q) - 1`.
#[inline(always)]
pub fn expm1f(x: f32) -> f32 {
    let (q, s1, s2, ni) = exp_reduce::<false>(x);
    let s = s1 * s2;
    let small = q * s + (s - 1.0);
    let big = (q + 1.0) * s1 * s2 - 1.0;
    let v = if ni > 64 { big } else { small };
    let v = if x > 88.722_84 { f32::INFINITY } else { v };
    // +-0 keeps its sign (q = p r^2 + r turns -0 into +0)
    let v = if x == 0.0 { x } else { v };
    #[allow(clippy::eq_op)]
    let nan = x != x;
    if nan {
        x
    } else {
        v
    }
}

/// `ln(1 + u)` for `u` in `[0, 1]` (and NaN): `w = 1 + u` rounded, `w = 2^k m` with `m` in
/// `[sqrt(1/2), sqrt 2)`, Cephes' `logf` polynomial for `ln m`, and the rounding error of `w`
/// added back as `(u - (w - 1)) / w` (so tiny `u` gives `u`). About 1 ulp.
#[inline(always)]
pub fn log1pf_unit(u: f32) -> f32 {
    let w = 1.0 + u;
    let c = (u - (w - 1.0)) / w;
    let hi = w > std::f32::consts::SQRT_2;
    let m = if hi { 0.5 * w } else { w };
    let k = if hi { 1.0 } else { 0.0 };
    let f = m - 1.0;
    let z = f * f;
    let mut p = 7.037_683_6e-2f32;
    p = p * f - 1.151_461e-1;
    p = p * f + 1.167_699_9e-1;
    p = p * f - 1.242_014_1e-1;
    p = p * f + 1.424_932_3e-1;
    p = p * f - 1.666_805_8e-1;
    p = p * f + 2.000_071_4e-1;
    p = p * f - 2.499_999_4e-1;
    p = p * f + 3.333_333_1e-1;
    let y = f * z * p + k * LN2_LO - 0.5 * z + c;
    f + y + k * LN2_HI
}

/// `1 / (1 + e^-x)` for f32 from `e = e^{-|x|}` (never overflows): `1 / (1 + e)` for `x >= 0`,
/// `e / (1 + e)` below, so tiny results keep their digits. NaN stays NaN.
#[inline(always)]
pub fn sigmoidf(x: f32) -> f32 {
    let e = expf(-x.abs());
    let num = if x >= 0.0 { 1.0 } else { e };
    num / (1.0 + e)
}

/// `tanh(x)` for f32: Cephes' odd polynomial for `|x| < 0.625`, `1 - 2 / (e^{2|x|} + 1)` with
/// the sign of `x` above (|x| clamped to 10, where the result is 1 in f32). NaN stays NaN,
/// -0.0 stays -0.0.
#[inline(always)]
pub fn tanhf(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let small = ((((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z - 3.333_328_2e-1) * z * x + x;
    let ac = if a > 10.0 { 10.0 } else { a };
    let e = expf(2.0 * ac);
    let big = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    let v = if a < 0.625 { small } else { big };
    // +-0 keeps its sign (the polynomial's `p z x + x` turns -0 into +0)
    let v = if x == 0.0 { x } else { v };
    #[allow(clippy::eq_op)]
    let nan = x != x;
    if nan {
        x
    } else {
        v
    }
}

/// sqrt(2 / pi) and the cubic coefficient of GELU's tanh approximation.
const GELU_K: f32 = 0.797_884_6;
const GELU_C: f32 = 0.044_715;

/// `gelu(x, approximate="tanh")` in f32 (`F`: multiply-adds fused, see `simd::fmadd`).
#[inline(always)]
pub fn gelu_tanh<const F: bool>(x: f32) -> f32 {
    let t = tanhf_abs_accurate_f::<F>(GELU_K * (x + GELU_C * x * x * x));
    0.5 * x * (1.0 + t)
}

/// d/dx of [`gelu_tanh`].
#[inline(always)]
pub fn gelu_tanh_grad<const F: bool>(x: f32) -> f32 {
    let x2 = x * x;
    let t = tanhf_abs_accurate_f::<F>(GELU_K * (x + GELU_C * x2 * x));
    let du = GELU_K * (1.0 + 3.0 * GELU_C * x2);
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
}

/// `erf(x)` for f32 as a rational function of `x` on [-4, 4] (Eigen's `generic_fast_erf_float`;
/// absolute error a few 1e-8, as PyTorch's vectorized erf), clamped outside. No `exp`, one division.
#[inline(always)]
pub fn erff(x: f32) -> f32 {
    erff_f::<false>(x)
}

/// [`erff`], multiply-adds fused when `F`.
#[inline(always)]
pub fn erff_f<const F: bool>(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = fmadd::<F>(p, x2, 2.770_681_4e-8);
    p = fmadd::<F>(p, x2, -2.101_024e-6);
    p = fmadd::<F>(p, x2, -5.692_506_4e-5);
    p = fmadd::<F>(p, x2, -7.349_906_3e-4);
    p = fmadd::<F>(p, x2, -2.954_600_3e-3);
    p = fmadd::<F>(p, x2, -1.609_603_3e-2);
    let p = x * p;
    let mut q = -1.456_607_2e-5f32;
    q = fmadd::<F>(q, x2, -2.133_740_6e-4);
    q = fmadd::<F>(q, x2, -1.682_827e-3);
    q = fmadd::<F>(q, x2, -7.373_329_3e-3);
    q = fmadd::<F>(q, x2, -1.426_474e-2);
    p / q
}

/// The standard normal CDF `Phi(x) = (1 + erf(x / sqrt 2)) / 2` in f32 (PyTorch's formula).
#[inline(always)]
fn phi<const F: bool>(x: f32) -> f32 {
    0.5 * (1.0 + erff_f::<F>(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// `gelu(x)` (exact, erf form) in f32: `x Phi(x)`.
#[inline(always)]
pub fn gelu_erf<const F: bool>(x: f32) -> f32 {
    x * phi::<F>(x)
}

/// d/dx of [`gelu_erf`]: `Phi(x) + x phi(x)` with the normal density `phi`.
#[inline(always)]
pub fn gelu_erf_grad<const F: bool>(x: f32) -> f32 {
    const INV_SQRT_2PI: f32 = 0.398_942_3;
    phi::<F>(x) + x * INV_SQRT_2PI * expf_f::<F>(-0.5 * x * x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> u32 {
        if a == b {
            return 0;
        }
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn gelu_matches_f64() {
        let mut x = -12.0f32;
        while x < 12.0 {
            let xd = x as f64;
            let phi = 0.5 * libm::erfc(-xd / 2f64.sqrt());
            let want = xd * phi;
            let dwant = phi + xd * (-0.5 * xd * xd).exp() / (2.0 * std::f64::consts::PI).sqrt();
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let u = k * (xd + 0.044715 * xd * xd * xd);
            let tw = 0.5 * xd * (1.0 + u.tanh());
            let tdw = 0.5 * (1.0 + u.tanh()) + 0.5 * xd * (1.0 - u.tanh() * u.tanh()) * k * (1.0 + 3.0 * 0.044715 * xd * xd);
            // both forms: separate multiply and add, and fused (the AVX2/AVX-512 kernels')
            let plain = [(gelu_erf::<false>(x), want), (gelu_erf_grad::<false>(x), dwant), (gelu_tanh::<false>(x), tw), (gelu_tanh_grad::<false>(x), tdw)];
            let fused = [(gelu_erf::<true>(x), want), (gelu_erf_grad::<true>(x), dwant), (gelu_tanh::<true>(x), tw), (gelu_tanh_grad::<true>(x), tdw)];
            for (got, want) in plain.into_iter().chain(fused) {
                let got = got as f64;
                assert!((got - want).abs() <= 2e-6 * (1.0 + want.abs()) , "x={x}: {got} vs {want}");
            }
            x += 0.00173;
        }
    }

    #[test]
    fn expf_is_within_two_ulp_everywhere() {
        let mut worst = 0;
        let mut x = -110.0f32;
        while x < 90.0 {
            let want = (x as f64).exp() as f32;
            for got in [expf(x), expf_f::<true>(x), expf8::<true>([x; 8])[3], expf8::<false>([x; 8])[5]] {
                if want.is_finite() && want > 1e-37 {
                    worst = worst.max(ulps(got, want));
                } else if want == 0.0 || want.is_infinite() {
                    assert!(ulps(got, want) <= 1 || (got - want).abs() < 1e-44, "expf({x}) = {got}, want {want}");
                }
            }
            x += 0.000_731;
        }
        assert!(worst <= 2, "worst error {worst} ulp");
        assert!(expf(f32::NAN).is_nan() && expf_f::<true>(f32::NAN).is_nan());
        assert_eq!(expf_f::<true>(f32::INFINITY), f32::INFINITY);
        assert_eq!(expf_f::<true>(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(f32::INFINITY), f32::INFINITY);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(0.0), 1.0);
    }
}

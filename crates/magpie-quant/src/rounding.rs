//! Float -> quantized integer as PyTorch's x86 kernels (fbgemm) compute it: `x * (1 / scale)` in
//! f32, rounded to nearest with ties to even, the zero point added *after* rounding, then clamped.
//!
//! PyTorch reaches the rounding through two code paths that agree on finite values and differ on
//! NaN and overflow, so both are reproduced: the vector path of per-tensor quint8/qint8 (an f32
//! -> i32 conversion that maps NaN to the clip value and overflow to `i32::MIN`, then an i32 add
//! that wraps) and the scalar path of per-channel quantization and of qint32 (the zero point added
//! in f32, clamped in f64, NaN converted to `i32::MIN` and truncated to the stored width).

/// The largest i32 that f32 represents exactly (fbgemm clips at it before converting).
const I32_FLOAT_MAX: f32 = 2_147_483_520.0;

/// x86's `cvtps2dq`: round to nearest even; NaN and out-of-range values give `i32::MIN`.
#[inline(always)]
fn cvt_f32_i32(t: f32) -> i32 {
    let r = t.round_ties_even();
    // NaN is in no range
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&r) {
        i32::MIN
    } else {
        r as i32
    }
}

/// The per-tensor 8-bit (vector) path: `clamp(cvt(min(x * inv_scale, I32_FLOAT_MAX)) + zp)`.
#[inline(always)]
pub fn quantize_vec8(x: f32, inv_scale: f32, zero_point: i32, qmin: i32, qmax: i32) -> i32 {
    let t = x * inv_scale;
    // `minps` returns its second operand when the first is NaN
    let t = if t.is_nan() || t > I32_FLOAT_MAX { I32_FLOAT_MAX } else { t };
    cvt_f32_i32(t).wrapping_add(zero_point).clamp(qmin, qmax)
}

/// The scalar path (per-channel quantization, qint32): `clamp(zp + nearbyint(x * inv_scale))`.
#[inline(always)]
pub fn quantize_scalar(x: f32, inv_scale: f32, zero_point: i32, qmin: i32, qmax: i32) -> i32 {
    let v = zero_point as f32 + (x * inv_scale).round_ties_even();
    if v.is_nan() {
        // a NaN survives the clamp and converts to i32::MIN, whose low bits are stored
        return match (qmin, qmax) {
            (0, 255) => 0,
            (-128, 127) => 0,
            _ => i32::MIN,
        };
    }
    (v as f64).clamp(qmin as f64, qmax as f64) as i32
}

/// `1.0f / float(scale)`: the reciprocal every path multiplies by.
#[inline(always)]
pub fn inv_scale(scale: f64) -> f32 {
    1.0f32 / scale as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_round_to_even_before_the_zero_point_is_added() {
        let q: Vec<i32> = [0.5f32, 1.5, 2.5, -0.5, -1.5].iter().map(|&x| quantize_vec8(x, 1.0, 1, 0, 255)).collect();
        assert_eq!(q, vec![1, 3, 3, 1, 0]);
        let q: Vec<i32> = [0.5f32, 1.5, 2.5, -0.5, -1.5].iter().map(|&x| quantize_scalar(x, 1.0, 1, 0, 255)).collect();
        assert_eq!(q, vec![1, 3, 3, 1, 0]);
    }

    #[test]
    fn nan_and_overflow_follow_each_path() {
        assert_eq!(quantize_vec8(f32::NAN, 10.0, 3, -128, 127), 127);
        assert_eq!(quantize_vec8(f32::NEG_INFINITY, 10.0, -5, -128, 127), 127); // i32::MIN - 5 wraps
        assert_eq!(quantize_scalar(f32::NAN, 10.0, 3, -128, 127), 0);
        assert_eq!(quantize_scalar(f32::NEG_INFINITY, 10.0, -5, -128, 127), -128);
        assert_eq!(quantize_scalar(f32::NAN, 10.0, 3, i32::MIN, i32::MAX), i32::MIN);
        assert_eq!(quantize_scalar(1e10, 10.0, 3, i32::MIN, i32::MAX), i32::MAX);
    }
}

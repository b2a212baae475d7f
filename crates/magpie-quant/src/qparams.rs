//! `ChooseQuantizationParams`: the scale and zero point PyTorch's x86 kernels pick for a tensor
//! from its min and max at run time (dynamic quantization's input), computed as fbgemm does.

use magpie_core::{Error, Result};

/// Below this scale fbgemm widens the range (`SMALL_SCALE_THRESHOLD`).
const SMALL_SCALE_THRESHOLD: f32 = 6.1e-5;

/// A scale and zero point for one tensor (fbgemm's `TensorQuantizationParams`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorQuantizationParams {
    /// The scale, in single precision (what the kernels multiply by).
    pub scale: f32,
    /// The zero point, in `[qmin, qmax]`.
    pub zero_point: i32,
}

/// PyTorch's `quant_utils::ChooseQuantizationParams(min, max, qmin, qmax, preserve_sparsity,
/// force_scale_power_of_two, reduce_range)`: the range is widened to contain 0, the scale
/// computed in f64 and stored as f32 (0.1 when it would be 0 or its reciprocal infinite; at least
/// 6.1e-5), the zero point taken from the end with the smaller rounding error and rounded to the
/// nearest integer. `reduce_range` halves `qmin`/`qmax` (x86's 7-bit activations).
///
/// ```
/// use magpie_quant::choose_quantization_params;
/// let p = choose_quantization_params(-1.0, 3.0, 0, 255, false, false, true)?;
/// assert_eq!((p.scale, p.zero_point), ((4.0f64 / 127.0) as f32, 32));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn choose_quantization_params(
    min: f32,
    max: f32,
    qmin: i32,
    qmax: i32,
    preserve_sparsity: bool,
    force_scale_power_of_two: bool,
    reduce_range: bool,
) -> Result<TensorQuantizationParams> {
    const OP: &str = "ChooseQuantizationParams";
    // a NaN fails PyTorch's `min <= max` check too
    if min.is_nan() || max.is_nan() || min > max {
        return Err(Error::value(OP, "In ChooseQuantizationParams, min should be less than or equal to max"));
    }
    let (mut qmin, mut qmax) = (qmin, qmax);
    if reduce_range {
        qmin /= 2;
        qmax /= 2;
    }
    let (mut min, mut max) = (min, max);
    if min < 0.0 && max > 0.0 && preserve_sparsity {
        let symmetric_qmin = -((qmax - qmin) / 2 + 1);
        let symmetric_qmax = (qmax - qmin) / 2;
        let max_scale = (min / symmetric_qmin as f32).abs().max((max / symmetric_qmax as f32).abs()) as f64;
        min = (max_scale * symmetric_qmin as f64) as f32;
        max = (max_scale * symmetric_qmax as f64) as f32;
    }
    min = min.min(0.0);
    max = max.max(0.0);
    if qmin >= qmax {
        return Err(Error::value(OP, "In ChooseQuantizationParams, qmin should be less than qmax"));
    }
    let mut scale = (max as f64 - min as f64) / (qmax - qmin) as f64;
    if scale as f32 == 0.0 || (1.0f32 / scale as f32).is_infinite() {
        scale = 0.1;
    }
    if scale.is_nan() || scale <= 0.0 {
        return Err(Error::value(OP, "quantization scale should be > 0"));
    }
    if force_scale_power_of_two {
        scale = if scale < 1.0 { 1.0 / (1u64 << (1.0 / scale).log2().floor() as u32) as f64 } else { (1u64 << scale.log2().ceil() as u32) as f64 };
    }
    if scale < SMALL_SCALE_THRESHOLD as f64 {
        let org_scale = scale as f32;
        scale = SMALL_SCALE_THRESHOLD as f64;
        if min == 0.0 {
            max = SMALL_SCALE_THRESHOLD * (qmax - qmin) as f32;
        } else if max == 0.0 {
            min = -SMALL_SCALE_THRESHOLD * (qmax - qmin) as f32;
        } else {
            let amplifier = SMALL_SCALE_THRESHOLD / org_scale;
            min *= amplifier;
            max *= amplifier;
        }
    }
    let zp_from_min = qmin as f64 - min as f64 / scale;
    let zp_from_max = qmax as f64 - max as f64 / scale;
    let zp_from_min_error = (qmin as f64).abs() - (min as f64 / scale).abs();
    let zp_from_max_error = (qmax as f64).abs() - (max as f64 / scale).abs();
    let mut initial = if zp_from_min_error < zp_from_max_error { zp_from_min } else { zp_from_max };
    if min < 0.0 && max > 0.0 && preserve_sparsity {
        initial = (qmin + qmax) as f64 / 2.0;
    }
    let zero_point = if initial < qmin as f64 {
        qmin
    } else if initial > qmax as f64 {
        qmax
    } else {
        initial.round_ties_even() as i32
    };
    Ok(TensorQuantizationParams { scale: scale as f32, zero_point })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degenerate_ranges_get_pytorchs_fallbacks() -> Result<()> {
        // all zeros: scale 0 becomes 0.1
        assert_eq!(choose_quantization_params(0.0, 0.0, 0, 255, false, false, true)?, TensorQuantizationParams { scale: 0.1, zero_point: 0 });
        // a tiny positive range: the scale is raised to 6.1e-5, zero point at qmin
        let p = choose_quantization_params(0.0, 1e-4, 0, 255, false, false, true)?;
        assert_eq!((p.scale, p.zero_point), (6.1e-5, 0));
        // all negative: the zero point sits at qmax
        let p = choose_quantization_params(-2.0, -1.0, 0, 255, false, false, false)?;
        assert_eq!((p.scale, p.zero_point), ((2.0f64 / 255.0) as f32, 255));
        assert!(choose_quantization_params(1.0, 0.0, 0, 255, false, false, false).is_err());
        assert!(choose_quantization_params(f32::NAN, 0.0, 0, 255, false, false, false).is_err());
        Ok(())
    }
}

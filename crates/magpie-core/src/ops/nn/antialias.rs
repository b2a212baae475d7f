//! Antialiased resampling (`_upsample_bilinear2d_aa`, `_upsample_bicubic2d_aa`,
//! `interpolate(..., antialias=True)`): when downsampling, the bilinear (triangle) or bicubic
//! filter is stretched over `1/scale` input pixels and each output's weights renormalized, as
//! PIL does. Each spatial dim is one sparse linear map (`resample::Taps`), so the op is
//! differentiable to any order and runs wherever `apply_taps` does.

use super::resample::{apply_separable, Taps};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// PyTorch's `area_pixel_compute_scale`: input pixels per output pixel.
fn pixel_scale(n_in: usize, n_out: usize, align: bool, scale: Option<f64>) -> f64 {
    if align {
        if n_out > 1 {
            (n_in as f64 - 1.0) / (n_out as f64 - 1.0)
        } else {
            0.0
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => 1.0 / s,
            _ => n_in as f64 / n_out as f64,
        }
    }
}

/// The triangle filter (bilinear) or Keys' cubic with `a = -0.5` (bicubic).
fn filter(x: f64, cubic: bool) -> f64 {
    let x = x.abs();
    if !cubic {
        return if x < 1.0 { 1.0 - x } else { 0.0 };
    }
    let a = -0.5;
    if x < 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * a
    } else {
        0.0
    }
}

/// The antialiased map from `n_in` to `n_out` positions along one dim.
pub(crate) fn aa_taps(n_in: usize, n_out: usize, align: bool, scale: Option<f64>, cubic: bool) -> Taps {
    let scale = pixel_scale(n_in, n_out, align, scale);
    let interp_size = if cubic { 4.0 } else { 2.0 };
    let (support, invscale) = if scale >= 1.0 { (interp_size * 0.5 * scale, 1.0 / scale) } else { (interp_size * 0.5, 1.0) };
    let mut t = Taps::new(n_in);
    for i in 0..n_out {
        let center = scale * (i as f64 + 0.5);
        // truncation toward zero, as the C++ casts do
        let lo = ((center - support + 0.5) as i64).max(0) as usize;
        let hi = ((center + support + 0.5) as i64).clamp(0, n_in as i64) as usize;
        let ws: Vec<(usize, f64)> = (lo..hi.max(lo)).map(|j| (j, filter((j as f64 - center + 0.5) * invscale, cubic))).collect();
        let total: f64 = ws.iter().map(|w| w.1).sum();
        t.row(ws.into_iter().map(|(j, w)| (j, if total != 0.0 { w / total } else { 0.0 })));
    }
    t
}

/// `torch.ops.aten._upsample_bilinear2d_aa(input, output_size, align_corners, scale_factors)` and
/// its bicubic twin (`cubic`): a 4-D `(N, C, H, W)` input resized to `output_size`, or to
/// `floor(size * scale)` with the scale factors also setting the filter's stretch.
///
/// ```
/// # use magpie_core::Tensor;
/// let x = Tensor::from_vec((0..8).map(|v| v as f32).collect(), &[1, 1, 1, 8])?;
/// let y = magpie_core::ops::nn::upsample_aa(&x, Some(&[1, 2]), false, None, false)?;
/// // a triangle filter stretched to the 4:1 scale (8 taps); PyTorch gives [1.8929, 5.1071]
/// let v = y.to_vec::<f32>()?;
/// assert!((v[0] - 1.892857).abs() < 1e-5 && (v[1] - 5.107143).abs() < 1e-5);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn upsample_aa(x: &Tensor, output_size: Option<&[i64]>, align_corners: bool, scale_factors: Option<&[f64]>, cubic: bool) -> Result<Tensor> {
    let op = if cubic { "_upsample_bicubic2d_aa" } else { "_upsample_bilinear2d_aa" };
    if x.ndim() != 4 {
        return Err(Error::shape(op, format!("Expected a 4D input tensor (N, C, H, W), but got {}D", x.ndim())));
    }
    super::util::check_float(op, x)?;
    let ins = [x.shape()[2], x.shape()[3]];
    let (outs, scales): ([usize; 2], [Option<f64>; 2]) = match (output_size, scale_factors) {
        (Some(o), None) => {
            if o.len() != 2 || o.iter().any(|&v| v < 0) {
                return Err(Error::value(op, format!("It is expected output_size equals to 2, but got size {}", o.len())));
            }
            ([o[0] as usize, o[1] as usize], [None, None])
        }
        (None, Some(s)) => {
            if s.len() != 2 || s.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(Error::value(op, format!("It is expected scale_factors to be 2 positive numbers, but got {s:?}")));
            }
            ([(ins[0] as f64 * s[0]).floor() as usize, (ins[1] as f64 * s[1]).floor() as usize], [Some(s[0]), Some(s[1])])
        }
        _ => return Err(Error::value(op, "Must specify exactly one of output_size and scale_factors")),
    };
    if ins.iter().chain(&outs).any(|&v| v == 0) {
        return Err(Error::value(op, format!("Input and output sizes should be greater than 0, but got input (H: {}, W: {}) output (H: {}, W: {})", ins[0], ins[1], outs[0], outs[1])));
    }
    let maps = (0..2).map(|i| aa_taps(ins[i], outs[i], align_corners, scales[i], cubic)).collect();
    apply_separable(x, maps)
}

//! `interpolate` / `upsample`: every mode is a product of 1-d maps over the spatial dims
//! (nearest, nearest-exact, linear, bicubic with clamped borders, area = adaptive average).

use super::resample::{adaptive_taps, apply_separable, cubic_taps, linear_taps, nearest_taps, Taps};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)`.
pub fn interpolate(
    x: &Tensor,
    size: Option<&[i64]>,
    scale_factor: Option<&[f64]>,
    mode: &str,
    align_corners: Option<bool>,
    recompute_scale_factor: Option<bool>,
    antialias: bool,
) -> Result<Tensor> {
    let op = "interpolate";
    let linear_modes = ["linear", "bilinear", "bicubic", "trilinear"];
    if !["nearest", "nearest-exact", "area", "linear", "bilinear", "bicubic", "trilinear"].contains(&mode) {
        return Err(Error::value(op, format!("Input Error: Only 3D, 4D and 5D input Tensors supported (got {}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got {mode})", x.ndim())));
    }
    if align_corners.is_some() && !linear_modes.contains(&mode) {
        return Err(Error::value(op, "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear"));
    }
    if antialias && !(matches!(mode, "bilinear" | "bicubic") && x.ndim() == 4) {
        return Err(Error::value(op, "Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor as input"));
    }
    if x.ndim() < 3 || x.ndim() > 5 {
        return Err(Error::unsupported(op, format!("Input Error: Only 3D, 4D and 5D input Tensors supported (got {}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got {mode})", x.ndim())));
    }
    let nd = x.ndim() - 2;
    let need = match mode {
        "linear" => Some(1),
        "bilinear" | "bicubic" => Some(2),
        "trilinear" => Some(3),
        _ => None,
    };
    if let Some(n) = need {
        if n != nd {
            return Err(Error::value(op, format!("Got {}D input, but {mode} mode needs {}D input", x.ndim(), n + 2)));
        }
    }
    let ins: Vec<usize> = x.shape()[2..].to_vec();
    let (outs, scales): (Vec<usize>, Vec<Option<f64>>) = match (size, scale_factor) {
        (Some(_), Some(_)) => return Err(Error::value(op, "only one of size or scale_factor should be defined")),
        (None, None) => return Err(Error::value(op, "either size or scale_factor should be defined")),
        (Some(sz), None) => {
            let sz = if sz.len() == 1 { vec![sz[0]; nd] } else { sz.to_vec() };
            if sz.len() != nd {
                return Err(Error::value(op, format!("Input and output must have the same number of spatial dimensions, but got input with spatial dimensions of {ins:?} and output size of {sz:?}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")));
            }
            if sz.iter().any(|&v| v < 0) {
                return Err(Error::value(op, format!("output size {sz:?} must be non-negative")));
            }
            (sz.iter().map(|&v| v as usize).collect(), vec![None; nd])
        }
        (None, Some(sf)) => {
            let sf = if sf.len() == 1 { vec![sf[0]; nd] } else { sf.to_vec() };
            if sf.len() != nd {
                return Err(Error::value(op, format!("Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of {ins:?} and scale_factor of {sf:?}.")));
            }
            if sf.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(Error::value(op, format!("scale_factor {sf:?} must be positive and finite")));
            }
            let outs: Vec<usize> = ins.iter().zip(&sf).map(|(&n, &s)| (n as f64 * s).floor() as usize).collect();
            let keep = !recompute_scale_factor.unwrap_or(false);
            (outs, sf.iter().map(|&s| if keep { Some(s) } else { None }).collect())
        }
    };
    if x.shape()[1..].iter().any(|&v| v == 0) || outs.iter().any(|&v| v == 0) {
        return Err(Error::value(op, format!("Input and output sizes should be greater than 0, but got input (D: {ins:?}) output ({outs:?})")));
    }
    super::util::check_float(op, x)?;
    let ac = align_corners.unwrap_or(false);
    let maps: Vec<Taps> = (0..nd)
        .map(|i| match mode {
            _ if antialias => super::antialias::aa_taps(ins[i], outs[i], ac, scales[i], mode == "bicubic"),
            "nearest" => nearest_taps(ins[i], outs[i], scales[i], false),
            "nearest-exact" => nearest_taps(ins[i], outs[i], scales[i], true),
            "area" => adaptive_taps(ins[i], outs[i]),
            "bicubic" => cubic_taps(ins[i], outs[i], ac, scales[i]),
            _ => linear_taps(ins[i], outs[i], ac, scales[i]),
        })
        .collect();
    apply_separable(x, maps)
}

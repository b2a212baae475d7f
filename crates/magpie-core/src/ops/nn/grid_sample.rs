//! `grid_sample` (2-d, bilinear, zeros / border padding) as a composite: the four corner values
//! are gathered with fixed indices and blended with weights computed by tensor ops from the grid,
//! so gradients flow to both the input and the grid.

use super::gather::{take_rows, RowIdx};
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

/// Grid coordinates in [-1, 1] to pixel (or voxel) coordinates, clipped to the border when asked.
pub(super) fn unnormalize(g: &Tensor, size: usize, align: bool, border: bool) -> Result<Tensor> {
    let s = size as f64;
    let p = if align { g.add_scalar(1.0)?.mul_scalar((s - 1.0) / 2.0)? } else { g.add_scalar(1.0)?.mul_scalar(s / 2.0)?.sub_scalar(0.5)? };
    if border {
        p.nn_clamp_min(0.0)?.nn_clamp_max(s - 1.0)
    } else {
        Ok(p)
    }
}

/// `grid_sample(input, grid, mode, padding_mode, align_corners)` for 4-d inputs.
pub fn grid_sample(x: &Tensor, grid: &Tensor, mode: &str, padding_mode: &str, align_corners: bool) -> Result<Tensor> {
    let _prof = crate::profiler::op("grid_sampler", &[x, grid]);
    if let Some(c) = crate::amp::tensors("grid_sampler", &[x, grid])? {
        return grid_sample(&c.args[0], &c.args[1], mode, padding_mode, align_corners);
    }
    let op = "grid_sample";
    if x.ndim() == 5 && mode == "bilinear" {
        return super::grid_sample_3d::grid_sample_3d(x, grid, padding_mode, align_corners);
    }
    if x.ndim() != 4 || grid.ndim() != 4 || grid.shape()[3] != 2 || grid.shape()[0] != x.shape()[0] {
        return Err(Error::unsupported(op, format!("input {:?} with grid {:?} (only 4-d input with an [N, H, W, 2] grid)", x.shape(), grid.shape())));
    }
    if mode != "bilinear" {
        return Err(Error::unsupported(op, format!("mode '{mode}'")));
    }
    let border = match padding_mode {
        "zeros" => false,
        "border" => true,
        m => return Err(Error::unsupported(op, format!("padding_mode '{m}'"))),
    };
    if x.dtype() != grid.dtype() {
        return Err(Error::dtype(op, format!("grid_sampler(): expected input and grid to have same dtype, but input has {} and grid has {}", x.dtype(), grid.dtype())));
    }
    let (n, c, h, w) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (ho, wo) = (grid.shape()[1], grid.shape()[2]);
    let ix = unnormalize(&grid.select(3, 0)?, w, align_corners, border)?; // [n, ho, wo]
    let iy = unnormalize(&grid.select(3, 1)?, h, align_corners, border)?;
    let (xv, yv): (Vec<f64>, Vec<f64>) = (ix.to_vec()?, iy.to_vec()?);
    let x0: Vec<f64> = xv.iter().map(|v| v.floor()).collect();
    let y0: Vec<f64> = yv.iter().map(|v| v.floor()).collect();
    let (x0t, y0t) = {
        let _ng = autograd::no_grad();
        (Tensor::from_vec(x0.clone(), ix.shape())?.to_device(x.device())?.to_dtype(x.dtype())?, Tensor::from_vec(y0.clone(), iy.shape())?.to_device(x.device())?.to_dtype(x.dtype())?)
    };
    let wx1 = ix.sub(&x0t)?;
    let wy1 = iy.sub(&y0t)?;
    let wx0 = wx1.neg()?.add_scalar(1.0)?;
    let wy0 = wy1.neg()?.add_scalar(1.0)?;
    let per = ho * wo;
    let xr = x.reshape(&[(n * c) as i64, (h * w) as i64])?;
    let mut out: Option<Tensor> = None;
    for (dy, dx, wy, wx) in [(0, 0, &wy0, &wx0), (0, 1, &wy0, &wx1), (1, 0, &wy1, &wx0), (1, 1, &wy1, &wx1)] {
        let mut idx = Vec::with_capacity(n * c * per);
        let mut valid = Vec::with_capacity(n * per);
        for b in 0..n {
            let mut row = Vec::with_capacity(per);
            for k in 0..per {
                let (xx, yy) = (x0[b * per + k] as i64 + dx, y0[b * per + k] as i64 + dy);
                let ok = xx >= 0 && yy >= 0 && (xx as usize) < w && (yy as usize) < h;
                valid.push(if ok { 1.0 } else { 0.0 });
                row.push(if ok { yy as usize * w + xx as usize } else { 0 });
            }
            for _ in 0..c {
                idx.extend_from_slice(&row);
            }
        }
        let v = take_rows(&xr, Arc::new(RowIdx { rows: n * c, per_row: per, n_src: h * w, idx }), &[n, c, ho, wo])?;
        let mask = Tensor::from_vec(valid, &[n, ho, wo])?.to_device(x.device())?.to_dtype(x.dtype())?;
        let wk = wy.mul(wx)?.mul(&mask)?.unsqueeze(1)?;
        let term = v.mul(&wk)?;
        out = Some(match out {
            None => term,
            Some(o) => o.add(&term)?,
        });
    }
    out.ok_or_else(|| Error::value(op, "empty"))
}

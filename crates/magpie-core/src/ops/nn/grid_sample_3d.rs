//! `grid_sample` on 5-d inputs (`grid_sampler_3d`: trilinear, zeros / border padding), the 3-d
//! twin of `grid_sample`'s composite: the eight corner values are gathered with fixed indices and
//! blended with weights computed by tensor ops from the grid, so gradients flow to the input and
//! the grid.

use super::gather::{take_rows, RowIdx};
use super::grid_sample::unnormalize;
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

/// `grid_sample(input, grid, mode="bilinear", padding_mode, align_corners)` for a 5-d input
/// `[N, C, D, H, W]` and grid `[N, Do, Ho, Wo, 3]` (x, y, z order, as in PyTorch): the
/// result is `[N, C, Do, Ho, Wo]`.
///
/// ```
/// # use magpie_core::Tensor;
/// let x = Tensor::from_vec((0..8).map(|v| v as f32).collect(), &[1, 1, 2, 2, 2])?;
/// let g = Tensor::from_vec(vec![0.0f32; 3], &[1, 1, 1, 1, 3])?; // the centre
/// let y = magpie_core::ops::nn::grid_sample_3d(&x, &g, "zeros", true)?;
/// assert!((y.to_vec::<f32>()?[0] - 3.5).abs() < 1e-6);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn grid_sample_3d(x: &Tensor, grid: &Tensor, padding_mode: &str, align_corners: bool) -> Result<Tensor> {
    let op = "grid_sampler_3d";
    if x.ndim() != 5 || grid.ndim() != 5 || grid.shape()[4] != 3 {
        return Err(Error::shape(op, format!("grid_sampler(): expected 5D input and grid with last dim 3, but got input with sizes {:?} and grid with sizes {:?}", x.shape(), grid.shape())));
    }
    if grid.shape()[0] != x.shape()[0] {
        return Err(Error::shape(op, format!("grid_sampler(): expected grid and input to have same batch size, but got input with sizes {:?} and grid with sizes {:?}", x.shape(), grid.shape())));
    }
    let border = match padding_mode {
        "zeros" => false,
        "border" => true,
        m => return Err(Error::unsupported(op, format!("padding_mode '{m}'"))),
    };
    if x.dtype() != grid.dtype() {
        return Err(Error::dtype(op, format!("grid_sampler(): expected input and grid to have same dtype, but input has {} and grid has {}", x.dtype(), grid.dtype())));
    }
    super::util::check_float(op, x)?;
    let (n, c, d, h, w) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], x.shape()[4]);
    let (dout, hout, wout) = (grid.shape()[1], grid.shape()[2], grid.shape()[3]);
    let ix = unnormalize(&grid.select(4, 0)?, w, align_corners, border)?; // [n, do, ho, wo]
    let iy = unnormalize(&grid.select(4, 1)?, h, align_corners, border)?;
    let iz = unnormalize(&grid.select(4, 2)?, d, align_corners, border)?;
    let floors = |t: &Tensor| -> Result<(Vec<f64>, Tensor)> {
        let v: Vec<f64> = t.to_vec::<f64>()?.iter().map(|v| v.floor()).collect();
        let _ng = autograd::no_grad();
        let ft = Tensor::from_vec(v.clone(), t.shape())?.to_device(x.device())?.to_dtype(x.dtype())?;
        Ok((v, ft))
    };
    let ((x0, x0t), (y0, y0t), (z0, z0t)) = (floors(&ix)?, floors(&iy)?, floors(&iz)?);
    let wx1 = ix.sub(&x0t)?;
    let wy1 = iy.sub(&y0t)?;
    let wz1 = iz.sub(&z0t)?;
    let (wx0, wy0, wz0) = (wx1.neg()?.add_scalar(1.0)?, wy1.neg()?.add_scalar(1.0)?, wz1.neg()?.add_scalar(1.0)?);
    let per = dout * hout * wout;
    let vol = d * h * w;
    let xr = x.reshape(&[(n * c) as i64, vol as i64])?;
    let mut out: Option<Tensor> = None;
    for corner in 0..8usize {
        let (dz, dy, dx) = ((corner >> 2) as i64 & 1, (corner >> 1) as i64 & 1, corner as i64 & 1);
        let wz = if dz == 0 { &wz0 } else { &wz1 };
        let wy = if dy == 0 { &wy0 } else { &wy1 };
        let wx = if dx == 0 { &wx0 } else { &wx1 };
        let mut idx = Vec::with_capacity(n * c * per);
        let mut valid = Vec::with_capacity(n * per);
        for b in 0..n {
            let mut row = Vec::with_capacity(per);
            for k in 0..per {
                let i = b * per + k;
                let (xx, yy, zz) = (x0[i] as i64 + dx, y0[i] as i64 + dy, z0[i] as i64 + dz);
                let ok = xx >= 0 && yy >= 0 && zz >= 0 && (xx as usize) < w && (yy as usize) < h && (zz as usize) < d;
                valid.push(if ok { 1.0 } else { 0.0 });
                row.push(if ok { (zz as usize * h + yy as usize) * w + xx as usize } else { 0 });
            }
            for _ in 0..c {
                idx.extend_from_slice(&row);
            }
        }
        let v = take_rows(&xr, Arc::new(RowIdx { rows: n * c, per_row: per, n_src: vol, idx }), &[n, c, dout, hout, wout])?;
        let mask = Tensor::from_vec(valid, &[n, dout, hout, wout])?.to_device(x.device())?.to_dtype(x.dtype())?;
        let wk = wz.mul(wy)?.mul(wx)?.mul(&mask)?.unsqueeze(1)?;
        let term = v.mul(&wk)?;
        out = Some(match out {
            None => term,
            Some(o) => o.add(&term)?,
        });
    }
    out.ok_or_else(|| Error::value(op, "empty"))
}

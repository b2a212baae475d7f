//! `unfold` (im2col) and `fold` (col2im) as convolutions with one-hot kernels and one group per
//! channel, so they share the conv kernels and are each other's gradient.

use super::conv::{conv_slot, ConvGeom, Slot};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

fn two(op: &str, name: &str, v: &[i64]) -> Result<[i64; 2]> {
    match v.len() {
        1 => Ok([v[0], v[0]]),
        2 => Ok([v[0], v[1]]),
        _ => Err(Error::value(op, format!("{name} must be an int or a pair of ints, got {v:?}"))),
    }
}

/// The identity kernels `[c * kh * kw, 1, kh, kw]` (one per channel and offset).
fn eye_weight(c: usize, kh: usize, kw: usize, like: &Tensor) -> Result<Tensor> {
    let k = kh * kw;
    let mut v = vec![0f64; c * k * k];
    for ch in 0..c {
        for r in 0..k {
            v[(ch * k + r) * k + r] = 1.0;
        }
    }
    let _ng = crate::autograd::no_grad();
    Tensor::from_vec(v, &[c * k, 1, kh, kw])?.to_device(like.device())?.to_dtype(like.dtype())
}

#[allow(clippy::too_many_arguments)]
fn geom(n: usize, c: usize, ins: [i64; 2], k: [i64; 2], d: [i64; 2], p: [i64; 2], s: [i64; 2], op: &str) -> Result<ConvGeom> {
    if k.iter().any(|&v| v <= 0) || d.iter().any(|&v| v <= 0) || s.iter().any(|&v| v <= 0) || p.iter().any(|&v| v < 0) {
        return Err(Error::value(op, format!("kernel_size {k:?}, dilation {d:?} and stride {s:?} must be positive, padding {p:?} non-negative")));
    }
    let outs: Vec<i64> = (0..2).map(|i| (ins[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1).div_euclid(s[i]) + 1).collect();
    if outs.iter().any(|&o| o < 1) {
        return Err(Error::value(op, format!("Given input with spatial size {ins:?}, kernel_size={k:?}, dilation={d:?}, padding={p:?}, calculated shape of the array of sliding blocks as {outs:?}, but its components must be at least one.")));
    }
    let kk = (k[0] * k[1]) as usize;
    let u = |v: &[i64]| [1usize, v[0] as usize, v[1] as usize];
    Ok(ConvGeom {
        n,
        groups: c,
        cin: c,
        cout: c * kk,
        ins: u(&ins),
        outs: u(&outs),
        k: u(&k),
        s: u(&s),
        p: [0, p[0] as usize, p[1] as usize],
        d: u(&d),
        x_shape: vec![n, c, ins[0] as usize, ins[1] as usize],
        w_shape: vec![c * kk, 1, k[0] as usize, k[1] as usize],
        y_shape: vec![n, c * kk, outs[0] as usize, outs[1] as usize],
    })
}

/// `F.unfold(input, kernel_size, dilation, padding, stride)`: `[N, C*kh*kw, L]` sliding blocks.
pub fn unfold(x: &Tensor, kernel_size: &[i64], dilation: &[i64], padding: &[i64], stride: &[i64]) -> Result<Tensor> {
    let op = "unfold";
    let (xb, was) = match x.ndim() {
        4 => (x.clone(), true),
        3 => (x.unsqueeze(0)?, false),
        _ => return Err(Error::shape(op, format!("Input Error: Only 3D or 4D input Tensors are supported (got {}D)", x.ndim()))),
    };
    if xb.shape()[1..].iter().any(|&v| v == 0) {
        return Err(Error::shape(op, format!("Expected non-empty 3D or 4D input tensor, but got input of size {:?}", x.shape())));
    }
    let (k, d, p, s) = (two(op, "kernel_size", kernel_size)?, two(op, "dilation", dilation)?, two(op, "padding", padding)?, two(op, "stride", stride)?);
    let (n, c) = (xb.shape()[0], xb.shape()[1]);
    let g = geom(n, c, [xb.shape()[2] as i64, xb.shape()[3] as i64], k, d, p, s, op)?;
    let (kk, l) = (g.cout, g.outs[1] * g.outs[2]);
    let w = eye_weight(c, k[0] as usize, k[1] as usize, x)?;
    let y = conv_slot(Arc::new(g), Slot::Y, &xb, &w)?.reshape(&[n as i64, kk as i64, l as i64])?;
    if was { Ok(y) } else { y.squeeze_dims(&[0]) }
}

/// `F.fold(input, output_size, kernel_size, dilation, padding, stride)`: sums blocks back into `[N, C, H, W]`.
pub fn fold(x: &Tensor, output_size: &[i64], kernel_size: &[i64], dilation: &[i64], padding: &[i64], stride: &[i64]) -> Result<Tensor> {
    let op = "fold";
    let (xb, was) = match x.ndim() {
        3 => (x.clone(), true),
        2 => (x.unsqueeze(0)?, false),
        _ => return Err(Error::shape(op, format!("Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got {}D)", x.ndim()))),
    };
    let (o, k, d, p, s) = (two(op, "output_size", output_size)?, two(op, "kernel_size", kernel_size)?, two(op, "dilation", dilation)?, two(op, "padding", padding)?, two(op, "stride", stride)?);
    let kk = (k[0] * k[1]).max(1) as usize;
    let (n, ck, l) = (xb.shape()[0], xb.shape()[1], xb.shape()[2]);
    if ck % kk != 0 {
        return Err(Error::shape(op, format!("Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={ck} and kernel_size={k:?}")));
    }
    let c = ck / kk;
    let g = geom(n, c, o, k, d, p, s, op)?;
    if g.outs[1] * g.outs[2] != l {
        return Err(Error::shape(op, format!("Given output_size={o:?}, kernel_size={k:?}, dilation={d:?}, padding={p:?}, stride={s:?}, expected size of input's dimension 2 to match the calculated number of sliding blocks {}, but got input.size(2)={l}.", g.outs[1] * g.outs[2])));
    }
    let y4 = xb.reshape(&[n as i64, ck as i64, g.outs[1] as i64, g.outs[2] as i64])?;
    let w = eye_weight(c, k[0] as usize, k[1] as usize, x)?;
    let out = conv_slot(Arc::new(g), Slot::X, &w, &y4)?;
    if was { Ok(out) } else { out.squeeze_dims(&[0]) }
}

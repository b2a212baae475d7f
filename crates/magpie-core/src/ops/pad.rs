//! `pad` in all modes (constant, reflect, replicate, circular; negative pads crop),
//! `constant_pad_nd`, and the pixel / channel shuffles of `nn.functional`.

use crate::autograd;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `F.pad` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    Constant,
    Reflect,
    Replicate,
    Circular,
}

impl PadMode {
    /// Parses `"constant"`, `"reflect"`, `"replicate"`, `"circular"`.
    pub fn parse(s: &str) -> Result<PadMode> {
        Ok(match s {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            "replicate" => PadMode::Replicate,
            "circular" => PadMode::Circular,
            _ => return Err(Error::value("pad", format!("Unrecognised padding mode {s}"))),
        })
    }
}

fn shape_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&x| x as i64).collect()
}

fn check_pad(op: &str, x: &Tensor, pad: &[i64]) -> Result<()> {
    if pad.len() % 2 != 0 {
        return Err(Error::value(op, format!("Length of pad must be even but instead it equals {}", pad.len())));
    }
    if pad.len() / 2 > x.ndim() {
        return Err(Error::value(
            op,
            format!("Length of pad should be no more than twice the number of dimensions of the input. Pad length is {} while the input has {} dimensions.", pad.len(), x.ndim()),
        ));
    }
    for k in 0..pad.len() / 2 {
        let d = x.ndim() - 1 - k;
        let size = x.shape()[d] as i64;
        let (l, r) = (pad[2 * k], pad[2 * k + 1]);
        if size + l + r < 0 {
            return Err(Error::value(
                op,
                format!("The input size {size}, plus negative padding {l} and {r} resulted in a negative output size, which is invalid. Check dimension {d} of your input."),
            ));
        }
    }
    Ok(())
}

impl Tensor {
    /// `torch.constant_pad_nd(x, pad, value)`: `pad` lists `(left, right)` pairs from the last dim
    /// backwards; negative amounts crop.
    pub fn constant_pad_nd(&self, pad: &[i64], value: Scalar) -> Result<Tensor> {
        let op = "constant_pad_nd";
        check_pad(op, self, pad)?;
        let nd = self.ndim();
        // crop first (views, so the gradient flows back through them)
        let mut x = self.clone();
        let mut pos: Vec<(usize, i64, i64)> = Vec::new();
        for k in 0..pad.len() / 2 {
            let d = nd - 1 - k;
            let (l, r) = (pad[2 * k], pad[2 * k + 1]);
            let size = x.shape()[d] as i64;
            let (cl, cr) = ((-l).max(0), (-r).max(0));
            if cl + cr > 0 {
                x = x.narrow(d as i64, cl.min(size), (size - cl - cr).max(0))?;
            }
            pos.push((d, l.max(0), r.max(0)));
        }
        let mut shape = x.shape().to_vec();
        for &(d, l, r) in &pos {
            shape[d] += (l + r) as usize;
        }
        let out = {
            let _ng = autograd::no_grad();
            let out = Tensor::full_on(&shape, value, self.dtype(), self.device())?;
            let mut v = out.clone();
            for &(d, l, _) in &pos {
                v = v.narrow(d as i64, l, x.shape()[d] as i64)?;
            }
            v.copy_(&x)?;
            out
        };
        let inner = shape_i64(x.shape());
        autograd::record("ConstantPadNd", &[&x], &[out.clone()], move |_, g| {
            let mut v = g[0].clone();
            for &(d, l, _) in &pos {
                v = v.narrow(d as i64, l, inner[d])?;
            }
            Ok(vec![Some(v)])
        });
        Ok(out)
    }

    /// `F.pad(x, pad, mode, value)`. Reflect, replicate and circular pad the last 1–3 dims of a
    /// (batched) input by gathering along each dim, so their gradient is `index_add`.
    pub fn pad(&self, pad: &[i64], mode: PadMode, value: Option<f64>) -> Result<Tensor> {
        let op = "pad";
        if mode == PadMode::Constant {
            let v = value.map_or(Scalar::Int(0), Scalar::Float);
            return self.constant_pad_nd(pad, v);
        }
        if value.is_some_and(|v| v != 0.0) {
            return Err(Error::value(op, format!("Padding mode \"{mode:?}\" doesn't take in value argument")));
        }
        check_pad(op, self, pad)?;
        let k = pad.len() / 2;
        if k == 0 || k > 3 || !(self.ndim() == k + 1 || self.ndim() == k + 2) {
            return Err(Error::unsupported(
                op,
                format!("Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now (pad length {} on a {}-d input)", pad.len(), self.ndim()),
            ));
        }
        let mut x = self.clone();
        for j in 0..k {
            let d = self.ndim() - 1 - j;
            let n = x.shape()[d] as i64;
            let (l, r) = (pad[2 * j], pad[2 * j + 1]);
            if l == 0 && r == 0 {
                continue;
            }
            if n == 0 {
                return Err(Error::value(op, format!("{mode:?} padding of an empty dimension {d} (input shape {:?})", self.shape())));
            }
            match mode {
                PadMode::Reflect if l >= n || r >= n => {
                    return Err(Error::value(
                        op,
                        format!("Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({l}, {r}) at dimension {d} of input {:?}", self.shape()),
                    ))
                }
                PadMode::Circular if l > n || r > n => {
                    return Err(Error::value(op, "Padding value causes wrapping around more than once."));
                }
                _ => {}
            }
            let total = n + l + r;
            let idx: Vec<i64> = (0..total)
                .map(|i| {
                    let j = i - l;
                    match mode {
                        PadMode::Replicate => j.clamp(0, n - 1),
                        PadMode::Reflect => {
                            let j = j.abs();
                            if j >= n { 2 * (n - 1) - j } else { j }
                        }
                        _ => j.rem_euclid(n),
                    }
                })
                .collect();
            let it = Tensor::from_vec(idx, &[total as usize])?.to_device(x.device())?;
            x = x.index_select(d as i64, &it)?;
        }
        if x.is_same(self) { self.copy() } else { Ok(x) }
    }

    /// `F.pixel_shuffle(x, r)`: `[*, C*r*r, H, W]` to `[*, C, H*r, W*r]`.
    pub fn pixel_shuffle(&self, r: i64) -> Result<Tensor> {
        let op = "pixel_shuffle";
        let nd = self.ndim();
        if nd < 3 {
            return Err(Error::shape(op, format!("pixel_shuffle expects input to have at least 3 dimensions, but got input with {nd} dimension(s)")));
        }
        if r <= 0 {
            return Err(Error::value(op, format!("pixel_shuffle expects a positive upscale_factor, but got {r}")));
        }
        let s = shape_i64(self.shape());
        let (c, h, w) = (s[nd - 3], s[nd - 2], s[nd - 1]);
        if c % (r * r) != 0 {
            return Err(Error::value(
                op,
                format!("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)={c} is not divisible by {}", r * r),
            ));
        }
        let b = &s[..nd - 3];
        let nb = b.len() as i64;
        let mut v = b.to_vec();
        v.extend([c / (r * r), r, r, h, w]);
        let mut perm: Vec<i64> = (0..nb).collect();
        perm.extend([nb, nb + 3, nb + 1, nb + 4, nb + 2]);
        let mut o = b.to_vec();
        o.extend([c / (r * r), h * r, w * r]);
        self.reshape(&v)?.permute(&perm)?.reshape(&o)
    }
    /// `F.pixel_unshuffle(x, r)`: `[*, C, H*r, W*r]` to `[*, C*r*r, H, W]`.
    pub fn pixel_unshuffle(&self, r: i64) -> Result<Tensor> {
        let op = "pixel_unshuffle";
        let nd = self.ndim();
        if nd < 3 {
            return Err(Error::shape(op, format!("pixel_unshuffle expects input to have at least 3 dimensions, but got input with {nd} dimension(s)")));
        }
        if r <= 0 {
            return Err(Error::value(op, format!("pixel_unshuffle expects a positive downscale_factor, but got {r}")));
        }
        let s = shape_i64(self.shape());
        let (c, h, w) = (s[nd - 3], s[nd - 2], s[nd - 1]);
        if h % r != 0 || w % r != 0 {
            return Err(Error::value(op, format!("pixel_unshuffle expects height and width to be divisible by downscale_factor, but got {h} x {w} and {r}")));
        }
        let b = &s[..nd - 3];
        let nb = b.len() as i64;
        let mut v = b.to_vec();
        v.extend([c, h / r, r, w / r, r]);
        let mut perm: Vec<i64> = (0..nb).collect();
        perm.extend([nb, nb + 2, nb + 4, nb + 1, nb + 3]);
        let mut o = b.to_vec();
        o.extend([c * r * r, h / r, w / r]);
        self.reshape(&v)?.permute(&perm)?.reshape(&o)
    }
    /// `F.channel_shuffle(x, groups)`: `[N, C, *]` with channels regrouped as `[g, C/g] -> [C/g, g]`.
    pub fn channel_shuffle(&self, groups: i64) -> Result<Tensor> {
        let op = "channel_shuffle";
        if self.ndim() < 3 {
            return Err(Error::shape(op, format!("channel_shuffle expects input to have at least 3 dimensions, but got input with {} dimension(s)", self.ndim())));
        }
        if groups <= 0 {
            return Err(Error::value(op, format!("Number of groups to divide channels in must be positive. Value of groups:{groups}")));
        }
        let s = shape_i64(self.shape());
        if s[1] % groups != 0 {
            return Err(Error::value(op, format!("Number of channels must be divisible by groups. Got {} channels and {groups} groups.", s[1])));
        }
        let mut v = vec![s[0], groups, s[1] / groups];
        v.extend_from_slice(&s[2..]);
        self.reshape(&v)?.transpose(1, 2)?.reshape(&s)
    }
}

//! The FFT primitives every `torch.fft` function is built from (PyTorch's `_fft_c2c`,
//! `_fft_r2c`, `_fft_c2r`) and the zero-pad/trim of signal dims. Each is one autograd node whose
//! backward is another primitive (derivatives.yaml's `fft_*_backward`), so gradients of any order
//! run on every device.
//!
//! Two flags extend PyTorch's set so that no complex elementwise op is needed in a backward:
//! `forward == false` on r2c means `conj(r2c(x))` (what `ihfft` is) and on c2r means
//! `c2r(conj(x))` (what `hfft` is); `double` on r2c multiplies the interior of the half spectrum
//! by 2 (the c2r backward) and `halve` on c2r divides it by 2 first (the r2c backward).

use crate::autograd;
use crate::backend::cpu;
use crate::backend::cpu::fft::{self as kern, FftFloat};
use crate::dtype::DType;
use crate::element::Element;
use crate::tensor::Tensor;
use crate::{Error, Result};
use num_complex::Complex;

/// PyTorch's `fft_norm_mode`: the factor a transform applies, whatever its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
    /// no scaling
    None,
    /// `1 / sqrt(n)`
    ByRootN,
    /// `1 / n`
    ByN,
}

impl Norm {
    /// The mode of `norm=` ("backward" when None, "ortho", "forward") for a transform in the
    /// `forward` direction.
    pub fn resolve(op: &str, norm: Option<&str>, forward: bool) -> Result<Norm> {
        Ok(match norm {
            None | Some("backward") => {
                if forward {
                    Norm::None
                } else {
                    Norm::ByN
                }
            }
            Some("forward") => {
                if forward {
                    Norm::ByN
                } else {
                    Norm::None
                }
            }
            Some("ortho") => Norm::ByRootN,
            Some(o) => return Err(Error::value(op, format!("Invalid normalization mode: \"{o}\""))),
        })
    }
    /// The factor for a signal of `n` points (the product of the transformed sizes).
    pub fn factor(self, n: usize) -> f64 {
        match self {
            Norm::None => 1.0,
            Norm::ByRootN => 1.0 / (n as f64).sqrt(),
            Norm::ByN => 1.0 / n as f64,
        }
    }
}

fn signal_numel(shape: &[usize], dims: &[usize]) -> usize {
    dims.iter().map(|&d| shape[d]).product()
}

/// How many interior entries of a half spectrum of a length-`n` signal the real transforms'
/// gradients weight by 2 (PyTorch's `double_length`).
fn interior(n: usize) -> usize {
    n - (n / 2 + 1)
}

/// Complex-to-complex transform over `dims` (unique, in range) of a complex tensor.
pub fn c2c(x: &Tensor, dims: &[usize], norm: Norm, forward: bool) -> Result<Tensor> {
    let op = "_fft_c2c";
    let f = norm.factor(signal_numel(x.shape(), dims));
    let out = match x.dtype() {
        DType::C64 | DType::C128 if x.device().is_cuda() => super::cuda_path::c2c(x, dims, f, forward)?,
        DType::C64 => cpu_c2c::<f32>(x, dims, f, forward)?,
        DType::C128 => cpu_c2c::<f64>(x, dims, f, forward)?,
        d => return Err(Error::dtype(op, format!("expected a complex tensor, got {d}"))),
    };
    let dims = dims.to_vec();
    autograd::record("fft_c2c", &[x], std::slice::from_ref(&out), move |_, g| Ok(vec![Some(c2c(&g[0], &dims, norm, !forward)?)]));
    Ok(out)
}

fn cpu_c2c<T: FftFloat>(x: &Tensor, dims: &[usize], f: f64, forward: bool) -> Result<Tensor>
where
    Complex<T>: Element,
{
    let mut v: Vec<Complex<T>> = cpu::to_vec(x)?;
    for &d in dims {
        kern::c2c_dim(&mut v, x.shape(), d, !forward);
    }
    kern::scale_conj(&mut v, cast::<T>(f), false);
    Tensor::from_vec(v, x.shape())
}

fn cast<T: FftFloat>(v: f64) -> T {
    <T as num_traits::NumCast>::from(v).unwrap_or_else(T::nan)
}

/// Real-to-complex transform over `dims` (the last one one-sided: `n` real points give
/// `n / 2 + 1`) of a float tensor. See the module doc for `forward` and `double`.
pub fn r2c(x: &Tensor, dims: &[usize], norm: Norm, forward: bool, double: bool) -> Result<Tensor> {
    let op = "_fft_r2c";
    let last = *dims.last().ok_or_else(|| Error::value(op, "no dims to transform"))?;
    let n = x.shape()[last];
    let f = norm.factor(signal_numel(x.shape(), dims));
    let w = if double { interior(n) } else { 0 };
    let out = match x.dtype() {
        DType::F32 | DType::F64 if x.device().is_cuda() => super::cuda_path::r2c(x, dims, f, !forward, w)?,
        DType::F32 => cpu_r2c::<f32>(x, dims, f, !forward, w)?,
        DType::F64 => cpu_r2c::<f64>(x, dims, f, !forward, w)?,
        d => return Err(Error::dtype(op, format!("expected a float32 or float64 tensor, got {d}"))),
    };
    let dims = dims.to_vec();
    autograd::record("fft_r2c", &[x], std::slice::from_ref(&out), move |_, g| Ok(vec![Some(c2r(&g[0], &dims, norm, n, !forward, !double)?)]));
    Ok(out)
}

fn cpu_r2c<T: FftFloat + Element>(x: &Tensor, dims: &[usize], f: f64, conj: bool, weighted: usize) -> Result<Tensor>
where
    Complex<T>: Element,
{
    let v: Vec<T> = cpu::to_vec(x)?;
    let (last, rest) = dims.split_last().ok_or_else(|| Error::value("_fft_r2c", "no dims to transform"))?;
    let (mut c, shape) = kern::r2c_dim(&v, x.shape(), *last);
    for &d in rest {
        kern::c2c_dim(&mut c, &shape, d, false);
    }
    kern::scale_conj(&mut c, cast::<T>(f), conj);
    if weighted > 0 {
        kern::weight_interior(&mut c, &shape, *last, weighted, cast::<T>(2.0));
    }
    Tensor::from_vec(c, &shape)
}

/// Complex-to-real transform over `dims`: the last dim holds `n / 2 + 1` points of a half
/// spectrum and becomes `n` real points. See the module doc for `forward` and `halve`.
pub fn c2r(x: &Tensor, dims: &[usize], norm: Norm, n: usize, forward: bool, halve: bool) -> Result<Tensor> {
    let op = "_fft_c2r";
    let last = *dims.last().ok_or_else(|| Error::value(op, "no dims to transform"))?;
    if x.shape()[last] != n / 2 + 1 {
        return Err(Error::shape(op, format!("expected {} points along dim {last} for an output of {n}, got {}", n / 2 + 1, x.shape()[last])));
    }
    let mut oshape = x.shape().to_vec();
    oshape[last] = n;
    let f = norm.factor(signal_numel(&oshape, dims));
    let w = if halve { interior(n) } else { 0 };
    let out = match x.dtype() {
        DType::C64 | DType::C128 if x.device().is_cuda() => super::cuda_path::c2r(x, dims, f, n, forward, w)?,
        DType::C64 => cpu_c2r::<f32>(x, dims, f, n, forward, w)?,
        DType::C128 => cpu_c2r::<f64>(x, dims, f, n, forward, w)?,
        d => return Err(Error::dtype(op, format!("expected a complex tensor, got {d}"))),
    };
    let dims = dims.to_vec();
    autograd::record("fft_c2r", &[x], std::slice::from_ref(&out), move |_, g| Ok(vec![Some(r2c(&g[0], &dims, norm, !forward, !halve)?)]));
    Ok(out)
}

fn cpu_c2r<T: FftFloat + Element>(x: &Tensor, dims: &[usize], f: f64, n: usize, conj: bool, halved: usize) -> Result<Tensor>
where
    Complex<T>: Element,
{
    let mut v: Vec<Complex<T>> = cpu::to_vec(x)?;
    let (last, rest) = dims.split_last().ok_or_else(|| Error::value("_fft_c2r", "no dims to transform"))?;
    if halved > 0 {
        kern::weight_interior(&mut v, x.shape(), *last, halved, cast::<T>(0.5));
    }
    kern::scale_conj(&mut v, T::one(), conj);
    for &d in rest {
        kern::c2c_dim(&mut v, x.shape(), d, true);
    }
    let (mut y, shape) = kern::c2r_dim(&v, x.shape(), *last, n);
    let s = cast::<T>(f);
    if s != T::one() {
        y.iter_mut().for_each(|e| *e = *e * s);
    }
    Tensor::from_vec(y, &shape)
}

/// Zero-pads (at the end) or trims each of `dims` to `sizes`: PyTorch's `resize_fft_input`, as
/// one node whose backward is the resize back.
pub fn resize(x: &Tensor, dims: &[usize], sizes: &[usize]) -> Result<Tensor> {
    let mut shape = x.shape().to_vec();
    for (&d, &s) in dims.iter().zip(sizes) {
        shape[d] = s;
    }
    if shape == x.shape() {
        return Ok(x.clone());
    }
    let old: Vec<usize> = dims.iter().map(|&d| x.shape()[d]).collect();
    let out = {
        let _ng = autograd::no_grad();
        // the overlap of old and new shapes, copied into zeros of the new shape
        let mut src = x.clone();
        for (&d, &s) in dims.iter().zip(sizes) {
            if s < src.shape()[d] {
                src = src.narrow(d as i64, 0, s as i64)?;
            }
        }
        let out = Tensor::zeros_on(&shape, x.dtype(), x.device())?;
        let mut dst = out.clone();
        for (d, &s) in src.shape().iter().enumerate() {
            if s < dst.shape()[d] {
                dst = dst.narrow(d as i64, 0, s as i64)?;
            }
        }
        dst.copy_(&src)?;
        out
    };
    let dims = dims.to_vec();
    autograd::record("fft_resize", &[x], std::slice::from_ref(&out), move |_, g| Ok(vec![Some(resize(&g[0], &dims, &old)?)]));
    Ok(out)
}

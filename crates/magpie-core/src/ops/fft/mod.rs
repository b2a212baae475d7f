//! `torch.fft`: discrete Fourier transforms as tensor methods with ATen's names (`fft_fft`,
//! `fft_rfft2`, `fft_irfftn`, ...), PyTorch's argument rules (`n`/`s` pad with zeros or trim,
//! `dim`, `norm` = "backward" | "ortho" | "forward"), dtype promotion (integers to the default
//! float, real to complex where the transform needs it) and error messages. Every function is
//! a resize plus one primitive of [`primitive`], so autograd and both devices come from there.
//!
//! ```
//! use magpie_core::Tensor;
//! let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[4])?;
//! let spec = x.fft_rfft(None, -1, None)?;            // 3 complex points
//! assert_eq!(spec.shape(), &[3]);
//! let back = spec.fft_irfft(Some(4), -1, None)?;     // the signal again
//! let v = back.to_vec::<f32>()?;
//! assert!(v.iter().zip([1f32, 2., 3., 4.]).all(|(a, b)| (a - b).abs() < 1e-5));
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod cuda_path;
pub mod primitive;
mod shift;
mod stft;

pub use primitive::Norm;
pub use stft::{stft, StftOpts};

use crate::dtype::DType;
use crate::shape::wrap_dim;
use crate::tensor::Tensor;
use crate::{default_dtype, Error, Result};

/// Which primitive a `torch.fft` function ends in, and its direction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// fft / ifft (`forward`)
    C2C(bool),
    /// rfft (forward) / ihfft (inverse)
    R2C(bool),
    /// hfft (forward) / irfft (inverse)
    C2R(bool),
}

impl Kind {
    fn forward(self) -> bool {
        match self {
            Kind::C2C(f) | Kind::R2C(f) | Kind::C2R(f) => f,
        }
    }
}

/// A dim of an FFT: wrapped, but a 0-d tensor has none (PyTorch's `wrap_scalar=false`).
fn fft_dim(op: &str, dim: i64, ndim: usize) -> Result<usize> {
    if ndim == 0 {
        return Err(Error::index(op, format!("Dimension specified as {dim} but tensor has no dimensions")));
    }
    wrap_dim(op, dim, ndim)
}

/// PyTorch's `promote_type_fft`: integers and bool become the default float, float32/float64
/// stay, complex stays; half precision is not supported on these backends.
fn promote(op: &str, x: &Tensor, require_complex: bool) -> Result<Tensor> {
    let d = x.dtype();
    let real = match d {
        DType::F32 | DType::F64 | DType::C64 | DType::C128 => d,
        d if d.is_integral() => default_dtype(),
        DType::F16 => return Err(Error::dtype(op, "Unsupported dtype Half")),
        DType::BF16 => return Err(Error::dtype(op, "Unsupported dtype BFloat16")),
        d => return Err(Error::dtype(op, format!("Unsupported dtype {}", d.name()))),
    };
    x.to_dtype(if require_complex { real.to_complex() } else { real })
}

/// PyTorch's `canonicalize_fft_shape_and_dim_args`: the transformed dims and, per dim, the
/// requested size (None where `s` gave -1 or no `s` was given).
fn canonical(op: &str, x: &Tensor, s: Option<&[i64]>, dim: Option<&[i64]>) -> Result<(Vec<usize>, Vec<Option<usize>>)> {
    let nd = x.ndim();
    let mut dims = Vec::new();
    if let Some(dim) = dim {
        for &d in dim {
            let w = fft_dim(op, d, nd)?;
            if dims.contains(&w) {
                return Err(Error::value(op, "FFT dims must be unique"));
            }
            dims.push(w);
        }
    }
    let sizes = match s {
        Some(s) => {
            if dim.is_some() {
                if s.len() != dims.len() {
                    return Err(Error::value(op, "When given, dim and shape arguments must have the same length"));
                }
            } else {
                if s.len() > nd {
                    return Err(Error::value(op, format!("Got shape with {} values but input tensor only has {nd} dimensions.", s.len())));
                }
                dims = (nd - s.len()..nd).collect();
            }
            let mut out = Vec::with_capacity(s.len());
            for &v in s {
                if v == -1 {
                    out.push(None);
                } else if v < 1 {
                    return Err(Error::value(op, format!("Invalid number of data points ({v}) specified")));
                } else {
                    out.push(Some(v as usize));
                }
            }
            out
        }
        None => {
            if dim.is_none() {
                dims = (0..nd).collect();
            }
            vec![None; dims.len()]
        }
    };
    Ok((dims, sizes))
}

/// One `torch.fft` call after argument parsing.
fn transform(op: &str, x: &Tensor, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>, kind: Kind) -> Result<Tensor> {
    let (dims, req) = canonical(op, x, s, dim)?;
    let norm = Norm::resolve(op, norm, kind.forward())?;
    match kind {
        Kind::C2C(forward) => {
            let x = promote(op, x, true)?;
            let sizes: Vec<usize> = dims.iter().zip(&req).map(|(&d, r)| r.unwrap_or(x.shape()[d])).collect();
            let x = primitive::resize(&x, &dims, &sizes)?;
            if dims.is_empty() {
                return x.copy();
            }
            primitive::c2c(&x, &dims, norm, forward)
        }
        Kind::R2C(forward) => {
            if x.dtype().is_complex() {
                return Err(Error::dtype(op, format!("{op} expects a real input tensor, but found {}", scalar_type(x.dtype()))));
            }
            if dims.is_empty() {
                return Err(Error::value(op, format!("{op} must transform at least one axis")));
            }
            let x = promote(op, x, false)?;
            let sizes: Vec<usize> = dims.iter().zip(&req).map(|(&d, r)| r.unwrap_or(x.shape()[d])).collect();
            let x = primitive::resize(&x, &dims, &sizes)?;
            primitive::r2c(&x, &dims, norm, forward, false)
        }
        Kind::C2R(forward) => {
            if dims.is_empty() {
                return Err(Error::value(op, format!("{op} must transform at least one axis")));
            }
            let last = dims.len() - 1;
            let n = match req[last] {
                Some(n) => n,
                None => {
                    let n = 2 * (x.shape()[dims[last]] as i64 - 1);
                    if n < 1 {
                        return Err(Error::value(op, format!("Invalid number of data points ({n}) specified")));
                    }
                    n as usize
                }
            };
            let x = promote(op, x, true)?;
            let mut sizes: Vec<usize> = dims.iter().zip(&req).map(|(&d, r)| r.unwrap_or(x.shape()[d])).collect();
            sizes[last] = n / 2 + 1;
            let x = primitive::resize(&x, &dims, &sizes)?;
            primitive::c2r(&x, &dims, norm, n, forward, false)
        }
    }
}

/// PyTorch's C++ name of a dtype, as its error messages print it (`ComplexFloat`).
fn scalar_type(d: DType) -> &'static str {
    match d {
        DType::C64 => "ComplexFloat",
        DType::C128 => "ComplexDouble",
        DType::F32 => "Float",
        DType::F64 => "Double",
        _ => d.name(),
    }
}

/// A 1-d transform: `n` must be positive when given.
fn one(op: &str, x: &Tensor, n: Option<i64>, dim: i64, norm: Option<&str>, kind: Kind) -> Result<Tensor> {
    if let Some(n) = n {
        if n < 1 {
            return Err(Error::value(op, format!("Invalid number of data points ({n}) specified")));
        }
    }
    let d = fft_dim(op, dim, x.ndim())? as i64;
    let s = n.map(|n| vec![n]);
    transform(op, x, s.as_deref(), Some(&[d][..]), norm, kind)
}

const LAST2: [i64; 2] = [-2, -1];

impl Tensor {
    /// `torch.fft.fft(input, n=None, dim=-1, norm=None)`: the 1-d discrete Fourier transform.
    pub fn fft_fft(&self, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
        one("fft_fft", self, n, dim, norm, Kind::C2C(true))
    }
    /// `torch.fft.ifft`: the 1-d inverse transform.
    pub fn fft_ifft(&self, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
        one("fft_ifft", self, n, dim, norm, Kind::C2C(false))
    }
    /// `torch.fft.rfft`: the one-sided transform of a real signal (`n / 2 + 1` points).
    pub fn fft_rfft(&self, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
        one("fft_rfft", self, n, dim, norm, Kind::R2C(true))
    }
    /// `torch.fft.irfft`: the real signal of `n` points (default `2 * (m - 1)`) from a half spectrum.
    pub fn fft_irfft(&self, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
        one("fft_irfft", self, n, dim, norm, Kind::C2R(false))
    }
    /// `torch.fft.hfft`: the real spectrum of a Hermitian-symmetric signal given by its first half.
    pub fn fft_hfft(&self, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
        one("fft_hfft", self, n, dim, norm, Kind::C2R(true))
    }
    /// `torch.fft.ihfft`: the inverse of `hfft` (a real signal to the first half of its inverse transform).
    pub fn fft_ihfft(&self, n: Option<i64>, dim: i64, norm: Option<&str>) -> Result<Tensor> {
        one("fft_ihfft", self, n, dim, norm, Kind::R2C(false))
    }
    /// `torch.fft.fft2(input, s=None, dim=(-2, -1), norm=None)`.
    pub fn fft_fft2(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_fft2", self, s, Some(dim.unwrap_or(&LAST2)), norm, Kind::C2C(true))
    }
    /// `torch.fft.ifft2`.
    pub fn fft_ifft2(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_ifft2", self, s, Some(dim.unwrap_or(&LAST2)), norm, Kind::C2C(false))
    }
    /// `torch.fft.rfft2`.
    pub fn fft_rfft2(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_rfft2", self, s, Some(dim.unwrap_or(&LAST2)), norm, Kind::R2C(true))
    }
    /// `torch.fft.irfft2`.
    pub fn fft_irfft2(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_irfft2", self, s, Some(dim.unwrap_or(&LAST2)), norm, Kind::C2R(false))
    }
    /// `torch.fft.hfft2`.
    pub fn fft_hfft2(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_hfft2", self, s, Some(dim.unwrap_or(&LAST2)), norm, Kind::C2R(true))
    }
    /// `torch.fft.ihfft2`.
    pub fn fft_ihfft2(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_ihfft2", self, s, Some(dim.unwrap_or(&LAST2)), norm, Kind::R2C(false))
    }
    /// `torch.fft.fftn(input, s=None, dim=None, norm=None)`: all dims (or the last `len(s)`) by default.
    pub fn fft_fftn(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_fftn", self, s, dim, norm, Kind::C2C(true))
    }
    /// `torch.fft.ifftn`.
    pub fn fft_ifftn(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_ifftn", self, s, dim, norm, Kind::C2C(false))
    }
    /// `torch.fft.rfftn`.
    pub fn fft_rfftn(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_rfftn", self, s, dim, norm, Kind::R2C(true))
    }
    /// `torch.fft.irfftn`.
    pub fn fft_irfftn(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_irfftn", self, s, dim, norm, Kind::C2R(false))
    }
    /// `torch.fft.hfftn`.
    pub fn fft_hfftn(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_hfftn", self, s, dim, norm, Kind::C2R(true))
    }
    /// `torch.fft.ihfftn`.
    pub fn fft_ihfftn(&self, s: Option<&[i64]>, dim: Option<&[i64]>, norm: Option<&str>) -> Result<Tensor> {
        transform("fft_ihfftn", self, s, dim, norm, Kind::R2C(false))
    }
}

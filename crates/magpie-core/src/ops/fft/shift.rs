//! `torch.fft` helpers: `fftshift` / `ifftshift` (rolls, so differentiable on every device) and
//! the sample frequencies `fftfreq` / `rfftfreq`.

use crate::device::Device;
use crate::dtype::DType;
use crate::shape::wrap_dims;
use crate::tensor::Tensor;
use crate::{default_dtype, Error, Result};

fn shifted(op: &str, x: &Tensor, dim: Option<&[i64]>, inverse: bool) -> Result<Tensor> {
    let dims: Vec<usize> = match dim {
        Some(d) => wrap_dims(op, d, x.ndim())?,
        None => (0..x.ndim()).collect(),
    };
    if dims.is_empty() || x.ndim() == 0 {
        return x.copy();
    }
    let shifts: Vec<i64> = dims.iter().map(|&d| {
        let n = x.shape()[d] as i64;
        if inverse { (n + 1) / 2 } else { n / 2 }
    }).collect();
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    x.roll(&shifts, &dims)
}

/// Sample frequencies: `n` values `k / (d * n)` for `k` in `ks`, in `dtype` on `device`.
fn freqs(op: &str, n: i64, d: f64, ks: Vec<f64>, dtype: Option<DType>, device: Device) -> Result<Tensor> {
    let dtype = dtype.unwrap_or_else(default_dtype);
    if !(dtype.is_float() || dtype.is_complex()) {
        return Err(Error::dtype(op, format!("{op} requires a floating point or complex dtype, got {}", dtype.name())));
    }
    let scale = 1.0 / (n as f64 * d);
    let v: Vec<f64> = ks.into_iter().map(|k| k * scale).collect();
    let len = v.len();
    Tensor::from_vec(v, &[len])?.to_dtype(dtype)?.to_device(device)
}

impl Tensor {
    /// `torch.fft.fftshift(input, dim=None)`: the zero frequency moved to the centre (all dims by default).
    pub fn fft_fftshift(&self, dim: Option<&[i64]>) -> Result<Tensor> {
        shifted("fft_fftshift", self, dim, false)
    }
    /// `torch.fft.ifftshift(input, dim=None)`: the inverse of `fftshift`.
    pub fn fft_ifftshift(&self, dim: Option<&[i64]>) -> Result<Tensor> {
        shifted("fft_ifftshift", self, dim, true)
    }
    /// `torch.fft.fftfreq(n, d=1.0, dtype=None, device=None)`: `[0, 1, ..., -2, -1] / (d * n)`.
    ///
    /// ```
    /// use magpie_core::{Device, Tensor};
    /// let f = Tensor::fft_fftfreq(4, 1.0, None, Device::Cpu)?;
    /// assert_eq!(f.to_vec::<f32>()?, vec![0., 0.25, -0.5, -0.25]);
    /// # Ok::<(), magpie_core::Error>(())
    /// ```
    pub fn fft_fftfreq(n: i64, d: f64, dtype: Option<DType>, device: Device) -> Result<Tensor> {
        if n < 0 {
            return Err(Error::value("fft_fftfreq", format!("n must be non-negative, got {n}")));
        }
        let ks = (0..n).map(|k| if k < (n + 1) / 2 { k as f64 } else { (k - n) as f64 }).collect();
        freqs("fft_fftfreq", n, d, ks, dtype, device)
    }
    /// `torch.fft.rfftfreq(n, d=1.0, dtype=None, device=None)`: `[0, 1, ..., n / 2] / (d * n)`.
    pub fn fft_rfftfreq(n: i64, d: f64, dtype: Option<DType>, device: Device) -> Result<Tensor> {
        if n < 0 {
            return Err(Error::value("fft_rfftfreq", format!("n must be non-negative, got {n}")));
        }
        let ks = (0..n / 2 + 1).map(|k| k as f64).collect();
        freqs("fft_rfftfreq", n, d, ks, dtype, device)
    }
}

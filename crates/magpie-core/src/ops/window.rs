//! Window functions: `torch.signal.windows` (`hann`, `kaiser`, ... with `sym=`) and the top-level
//! `hann_window`, `hamming_window`, `blackman_window`, `bartlett_window`, `kaiser_window` (with
//! `periodic=`). Values are computed in f64 and rounded once to the requested dtype.
//!
//! ```
//! use magpie_core::ops::window::{self, WindowOpts};
//! let w = window::hann(4, true, &WindowOpts::default())?;
//! let v = w.to_vec::<f32>()?;
//! assert!((v[1] - 0.75).abs() < 1e-6 && v[0] == 0.0);
//! # Ok::<(), magpie_core::Error>(())
//! ```

use crate::device::Device;
use crate::dtype::DType;
use crate::ops::special::bessel::i0;
use crate::tensor::Tensor;
use crate::{default_dtype, Error, Result};
use std::f64::consts::PI;

/// The factory keywords of a window: `dtype` (default: the default float dtype), `device`.
#[derive(Clone, Debug, Default)]
pub struct WindowOpts {
    /// float32 or float64 (None: the default dtype)
    pub dtype: Option<DType>,
    /// where the result lives
    pub device: Device,
}

/// `torch.signal.windows`'s `_window_function_checks`, then the dtype to use.
fn checks(name: &str, m: i64, o: &WindowOpts) -> Result<DType> {
    if m < 0 {
        return Err(Error::value(name, format!("{name} requires non-negative window length, got M={m}")));
    }
    let dt = o.dtype.unwrap_or_else(default_dtype);
    if !matches!(dt, DType::F32 | DType::F64) {
        return Err(Error::dtype(name, format!("{name} expects float32 or float64 dtypes, got: torch.{}", dt.name())));
    }
    Ok(dt)
}

fn finish(v: Vec<f64>, dt: DType, o: &WindowOpts) -> Result<Tensor> {
    let n = v.len();
    Tensor::from_vec(v, &[n])?.to_dtype(dt)?.to_device(o.device)
}

/// `torch.linspace(start, end, m)` in f64 (PyTorch's two-sided formula).
fn linspace(start: f64, end: f64, m: usize) -> Vec<f64> {
    if m == 1 {
        return vec![start];
    }
    let step = (end - start) / (m - 1) as f64;
    (0..m).map(|i| if i < m / 2 { start + step * i as f64 } else { end - step * (m - 1 - i) as f64 }).collect()
}

/// The denominator of the windows' spacing: `M - 1` when symmetric, `M` when periodic.
fn span(m: usize, sym: bool) -> f64 {
    if sym { (m - 1) as f64 } else { m as f64 }
}

/// `torch.signal.windows.general_cosine(M, a, sym=True)`: `sum_i (-1)^i a_i cos(2 pi i n / span)`.
pub fn general_cosine(m: i64, a: &[f64], sym: bool, o: &WindowOpts) -> Result<Tensor> {
    let name = "general_cosine";
    let dt = checks(name, m, o)?;
    if a.is_empty() {
        return Err(Error::value(name, "Coefficients cannot be empty"));
    }
    let m = m as usize;
    if m <= 1 {
        return finish(vec![1.0; m], dt, o);
    }
    let c = 2.0 * PI / span(m, sym);
    let k = linspace(0.0, (m - 1) as f64 * c, m);
    let v = k.iter().map(|&k| a.iter().enumerate().map(|(i, &w)| (if i % 2 == 0 { w } else { -w }) * (i as f64 * k).cos()).sum::<f64>()).collect();
    finish(v, dt, o)
}

/// `torch.signal.windows.general_hamming(M, alpha=0.54, sym=True)`.
pub fn general_hamming(m: i64, alpha: f64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    checks("general_hamming", m, o)?;
    general_cosine(m, &[alpha, 1.0 - alpha], sym, o)
}

/// `torch.signal.windows.hamming(M, sym=True)`.
pub fn hamming(m: i64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    checks("hamming", m, o)?;
    general_cosine(m, &[0.54, 0.46], sym, o)
}

/// `torch.signal.windows.hann(M, sym=True)`.
pub fn hann(m: i64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    checks("hann", m, o)?;
    general_cosine(m, &[0.5, 0.5], sym, o)
}

/// `torch.signal.windows.blackman(M, sym=True)`.
pub fn blackman(m: i64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    checks("blackman", m, o)?;
    general_cosine(m, &[0.42, 0.5, 0.08], sym, o)
}

/// `torch.signal.windows.nuttall(M, sym=True)`.
pub fn nuttall(m: i64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    checks("nuttall", m, o)?;
    general_cosine(m, &[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym, o)
}

/// `torch.signal.windows.bartlett(M, sym=True)`: a triangle.
pub fn bartlett(m: i64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    let dt = checks("bartlett", m, o)?;
    let m = m as usize;
    if m <= 1 {
        return finish(vec![1.0; m], dt, o);
    }
    let c = 2.0 / span(m, sym);
    let v = linspace(-1.0, -1.0 + (m - 1) as f64 * c, m).into_iter().map(|k| 1.0 - k.abs()).collect();
    finish(v, dt, o)
}

/// `torch.signal.windows.cosine(M, sym=True)`: `sin(pi (n + 0.5) / M)` (M + 1 when periodic).
pub fn cosine(m: i64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    let dt = checks("cosine", m, o)?;
    let m = m as usize;
    if m == 0 {
        return finish(vec![], dt, o);
    }
    let c = PI / if !sym && m > 1 { (m + 1) as f64 } else { m as f64 };
    let v = linspace(0.5 * c, (0.5 + (m - 1) as f64) * c, m).into_iter().map(f64::sin).collect();
    finish(v, dt, o)
}

/// `torch.signal.windows.exponential(M, center=None, tau=1.0, sym=True)`: `exp(-|n - center| / tau)`.
pub fn exponential(m: i64, center: Option<f64>, tau: f64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    let name = "exponential";
    let dt = checks(name, m, o)?;
    if tau <= 0.0 {
        return Err(Error::value(name, format!("Tau must be positive, got: {tau} instead.")));
    }
    if sym && center.is_some() {
        return Err(Error::value(name, "Center must be None for symmetric windows"));
    }
    let m = m as usize;
    if m == 0 {
        return finish(vec![], dt, o);
    }
    let center = center.unwrap_or((if !sym && m > 1 { m as f64 } else { (m - 1) as f64 }) / 2.0);
    if m == 1 {
        return finish(vec![1.0], dt, o);
    }
    let start = -center / tau;
    let v = linspace(start, start + (m - 1) as f64 / tau, m).into_iter().map(|k| (-k.abs()).exp()).collect();
    finish(v, dt, o)
}

/// `torch.signal.windows.gaussian(M, std=1.0, sym=True)`: `exp(-(n - c)^2 / (2 std^2))`.
pub fn gaussian(m: i64, std: f64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    let name = "gaussian";
    let dt = checks(name, m, o)?;
    if std <= 0.0 {
        return Err(Error::value(name, format!("Standard deviation must be positive, got: {std} instead.")));
    }
    let m = m as usize;
    if m == 0 {
        return finish(vec![], dt, o);
    }
    let start = -(if !sym && m > 1 { m as f64 } else { (m - 1) as f64 }) / 2.0;
    let c = 1.0 / (std * 2f64.sqrt());
    let v = linspace(start * c, (start + (m - 1) as f64) * c, m).into_iter().map(|k| (-k * k).exp()).collect();
    finish(v, dt, o)
}

/// `torch.signal.windows.kaiser(M, beta=12.0, sym=True)`: `I0(beta sqrt(1 - x^2)) / I0(beta)`.
pub fn kaiser(m: i64, beta: f64, sym: bool, o: &WindowOpts) -> Result<Tensor> {
    let name = "kaiser";
    let dt = checks(name, m, o)?;
    if beta < 0.0 {
        return Err(Error::value(name, format!("beta must be non-negative, got: {beta} instead.")));
    }
    let m = m as usize;
    if m <= 1 {
        return finish(vec![1.0; m], dt, o);
    }
    let c = 2.0 * beta / span(m, sym);
    let end = beta.min(-beta + (m - 1) as f64 * c);
    let d = i0(beta);
    let v = linspace(-beta, end, m).into_iter().map(|k| i0((beta * beta - k * k).max(0.0).sqrt()) / d).collect();
    finish(v, dt, o)
}

/// The checks of the top-level `*_window` functions (`window_length`, a floating dtype).
fn top_checks(name: &str, n: i64, o: &WindowOpts) -> Result<DType> {
    if n < 0 {
        return Err(Error::value(name, format!("{name} requires non-negative window_length, got window_length={n}")));
    }
    let dt = o.dtype.unwrap_or_else(default_dtype);
    if !dt.is_float() {
        return Err(Error::dtype(name, format!("{name} expects floating point dtypes, got: {}", dt.name())));
    }
    Ok(dt)
}

/// A top-level window from its symmetric formula `f(n, N)`: `periodic` computes `N + 1` points
/// and drops the last (PyTorch's rule); lengths 0 and 1 give `[]` and `[1]`.
fn top(name: &str, n: i64, periodic: bool, o: &WindowOpts, f: impl Fn(f64, f64) -> f64) -> Result<Tensor> {
    let dt = top_checks(name, n, o)?;
    let n = n as usize;
    if n <= 1 {
        return finish(vec![1.0; n], dt, o);
    }
    let len = if periodic { n + 1 } else { n };
    let v = (0..n).map(|i| f(i as f64, len as f64)).collect();
    finish(v, dt, o)
}

/// `torch.hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46)`.
pub fn hamming_window(n: i64, periodic: bool, alpha: f64, beta: f64, o: &WindowOpts) -> Result<Tensor> {
    top("hamming_window", n, periodic, o, |i, len| alpha - beta * (2.0 * PI * i / (len - 1.0)).cos())
}

/// `torch.hann_window(window_length, periodic=True)`.
pub fn hann_window(n: i64, periodic: bool, o: &WindowOpts) -> Result<Tensor> {
    top("hann_window", n, periodic, o, |i, len| 0.5 - 0.5 * (2.0 * PI * i / (len - 1.0)).cos())
}

/// `torch.blackman_window(window_length, periodic=True)`.
pub fn blackman_window(n: i64, periodic: bool, o: &WindowOpts) -> Result<Tensor> {
    top("blackman_window", n, periodic, o, |i, len| {
        let x = 2.0 * PI * i / (len - 1.0);
        0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos()
    })
}

/// `torch.bartlett_window(window_length, periodic=True)`.
pub fn bartlett_window(n: i64, periodic: bool, o: &WindowOpts) -> Result<Tensor> {
    top("bartlett_window", n, periodic, o, |i, len| 1.0 - (2.0 * i / (len - 1.0) - 1.0).abs())
}

/// `torch.kaiser_window(window_length, periodic=True, beta=12.0)`.
pub fn kaiser_window(n: i64, periodic: bool, beta: f64, o: &WindowOpts) -> Result<Tensor> {
    let d = i0(beta);
    top("kaiser_window", n, periodic, o, |i, len| {
        let a = (len - 1.0) / 2.0;
        let r = (i - a) / a;
        i0(beta * (1.0 - r * r).max(0.0).sqrt()) / d
    })
}

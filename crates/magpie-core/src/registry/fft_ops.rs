//! Registry entries for `torch.fft` (`fft.fft`, ..., `fft.fftshift`, `fft.fftfreq`), the windows
//! of `torch.signal.windows` (`signal.windows.hann`, ...) and the top-level `*_window` factories.

use super::creation_ops::{flags, with_rg, Flags};
use super::{Args, Registry, Value};
use crate::ops::window::{self, WindowOpts};
use crate::tensor::Tensor;
use crate::{Error, Result};

type OneD = fn(&Tensor, Option<i64>, i64, Option<&str>) -> Result<Tensor>;
type ManyD = fn(&Tensor, Option<&[i64]>, Option<&[i64]>, Option<&str>) -> Result<Tensor>;

fn one_d(a: &mut Args, f: OneD) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let n = a.opt_int(1, "n")?;
    let dim = a.int_or(2, "dim", -1)?;
    let norm = a.opt_str(3, "norm")?;
    Ok(Value::Tensor(f(&x, n, dim, norm.as_deref())?))
}

fn many_d(a: &mut Args, f: ManyD) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let s = a.opt_ints(1, "s")?;
    let dim = a.opt_ints(2, "dim")?;
    let norm = a.opt_str(3, "norm")?;
    Ok(Value::Tensor(f(&x, s.as_deref(), dim.as_deref(), norm.as_deref())?))
}

/// `dtype`, `device`, `requires_grad`, `pin_memory` (and an ignored `layout`) of factories.
fn opts(a: &mut Args) -> Result<(WindowOpts, Flags)> {
    let dtype = a.opt_dtype(usize::MAX, "dtype")?;
    let device = a.opt_device(usize::MAX, "device")?.unwrap_or_default();
    let rg = flags(a)?;
    a.ignore(&["layout"]);
    Ok((WindowOpts { dtype, device }, rg))
}

/// `general_cosine`'s `a`: a list of numbers.
fn coefficients(a: &mut Args) -> Result<Vec<f64>> {
    match a.get_some(usize::MAX, "a") {
        Some(Value::List(l)) => l
            .iter()
            .map(|v| v.as_scalar().map(|s| s.to_f64()).ok_or_else(|| Error::value("general_cosine", "Coefficients must be a list/tuple of numbers")))
            .collect(),
        Some(_) => Err(Error::value("general_cosine", "Coefficients must be a list/tuple")),
        None => Err(Error::value("general_cosine", "missing required argument 'a'")),
    }
}

/// An optional bool argument (`None` when absent or None).
fn opt_bool(a: &mut Args, i: usize, name: &str) -> Result<Option<bool>> {
    match a.get_some(i, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(v) => Err(Error::value(a.op(), format!("argument '{name}' must be bool, not {}", v.kind()))),
    }
}

fn register_fft(r: &mut Registry) {
    r.add("stft", |a| {
        let x = a.tensor(0, "input")?;
        let n_fft = a.int(1, "n_fft")?;
        let o = crate::ops::fft::StftOpts {
            hop_length: a.opt_int(2, "hop_length")?,
            win_length: a.opt_int(3, "win_length")?,
            window: a.opt_tensor(4, "window")?,
            center: a.bool_or(5, "center", true)?,
            pad_mode: a.opt_str(6, "pad_mode")?.unwrap_or_else(|| "reflect".into()),
            normalized: a.bool_or(7, "normalized", false)?,
            onesided: opt_bool(a, 8, "onesided")?,
            return_complex: opt_bool(a, 9, "return_complex")?,
        };
        Ok(Value::Tensor(x.stft(n_fft, &o)?))
    });
    r.add("fft.fft", |a| one_d(a, Tensor::fft_fft));
    r.add("fft.ifft", |a| one_d(a, Tensor::fft_ifft));
    r.add("fft.rfft", |a| one_d(a, Tensor::fft_rfft));
    r.add("fft.irfft", |a| one_d(a, Tensor::fft_irfft));
    r.add("fft.hfft", |a| one_d(a, Tensor::fft_hfft));
    r.add("fft.ihfft", |a| one_d(a, Tensor::fft_ihfft));
    r.add("fft.fft2", |a| many_d(a, Tensor::fft_fft2));
    r.add("fft.ifft2", |a| many_d(a, Tensor::fft_ifft2));
    r.add("fft.rfft2", |a| many_d(a, Tensor::fft_rfft2));
    r.add("fft.irfft2", |a| many_d(a, Tensor::fft_irfft2));
    r.add("fft.hfft2", |a| many_d(a, Tensor::fft_hfft2));
    r.add("fft.ihfft2", |a| many_d(a, Tensor::fft_ihfft2));
    r.add("fft.fftn", |a| many_d(a, Tensor::fft_fftn));
    r.add("fft.ifftn", |a| many_d(a, Tensor::fft_ifftn));
    r.add("fft.rfftn", |a| many_d(a, Tensor::fft_rfftn));
    r.add("fft.irfftn", |a| many_d(a, Tensor::fft_irfftn));
    r.add("fft.hfftn", |a| many_d(a, Tensor::fft_hfftn));
    r.add("fft.ihfftn", |a| many_d(a, Tensor::fft_ihfftn));
    r.add("fft.fftshift", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.opt_ints(1, "dim")?;
        Ok(Value::Tensor(x.fft_fftshift(d.as_deref())?))
    });
    r.add("fft.ifftshift", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.opt_ints(1, "dim")?;
        Ok(Value::Tensor(x.fft_ifftshift(d.as_deref())?))
    });
    r.add("fft.fftfreq", |a| {
        let n = a.int(0, "n")?;
        let d = a.float_or(1, "d", 1.0)?;
        let (o, rg) = opts(a)?;
        with_rg(Tensor::fft_fftfreq(n, d, o.dtype, o.device)?, rg)
    });
    r.add("fft.rfftfreq", |a| {
        let n = a.int(0, "n")?;
        let d = a.float_or(1, "d", 1.0)?;
        let (o, rg) = opts(a)?;
        with_rg(Tensor::fft_rfftfreq(n, d, o.dtype, o.device)?, rg)
    });
}

type Sym = fn(i64, bool, &WindowOpts) -> Result<Tensor>;

fn sym_window(a: &mut Args, f: Sym) -> Result<Value> {
    let m = a.int(0, "M")?;
    let sym = a.bool_or(usize::MAX, "sym", true)?;
    let (o, rg) = opts(a)?;
    with_rg(f(m, sym, &o)?, rg)
}

fn register_signal(r: &mut Registry) {
    r.add("signal.windows.bartlett", |a| sym_window(a, window::bartlett));
    r.add("signal.windows.blackman", |a| sym_window(a, window::blackman));
    r.add("signal.windows.cosine", |a| sym_window(a, window::cosine));
    r.add("signal.windows.hamming", |a| sym_window(a, window::hamming));
    r.add("signal.windows.hann", |a| sym_window(a, window::hann));
    r.add("signal.windows.nuttall", |a| sym_window(a, window::nuttall));
    r.add("signal.windows.exponential", |a| {
        let m = a.int(0, "M")?;
        let center = a.opt_float(usize::MAX, "center")?;
        let tau = a.float_or(usize::MAX, "tau", 1.0)?;
        let sym = a.bool_or(usize::MAX, "sym", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::exponential(m, center, tau, sym, &o)?, rg)
    });
    r.add("signal.windows.gaussian", |a| {
        let m = a.int(0, "M")?;
        let std = a.float_or(usize::MAX, "std", 1.0)?;
        let sym = a.bool_or(usize::MAX, "sym", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::gaussian(m, std, sym, &o)?, rg)
    });
    r.add("signal.windows.kaiser", |a| {
        let m = a.int(0, "M")?;
        let beta = a.float_or(usize::MAX, "beta", 12.0)?;
        let sym = a.bool_or(usize::MAX, "sym", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::kaiser(m, beta, sym, &o)?, rg)
    });
    r.add("signal.windows.general_hamming", |a| {
        let m = a.int(0, "M")?;
        let alpha = a.float_or(usize::MAX, "alpha", 0.54)?;
        let sym = a.bool_or(usize::MAX, "sym", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::general_hamming(m, alpha, sym, &o)?, rg)
    });
    r.add("signal.windows.general_cosine", |a| {
        let m = a.int(0, "M")?;
        let sym = a.bool_or(usize::MAX, "sym", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::general_cosine(m, &coefficients(a)?, sym, &o)?, rg)
    });
}

fn register_top(r: &mut Registry) {
    r.add("hann_window", |a| {
        let n = a.int(0, "window_length")?;
        let p = a.bool_or(1, "periodic", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::hann_window(n, p, &o)?, rg)
    });
    r.add("hamming_window", |a| {
        let n = a.int(0, "window_length")?;
        let p = a.bool_or(1, "periodic", true)?;
        let alpha = a.float_or(2, "alpha", 0.54)?;
        let beta = a.float_or(3, "beta", 0.46)?;
        let (o, rg) = opts(a)?;
        with_rg(window::hamming_window(n, p, alpha, beta, &o)?, rg)
    });
    r.add("blackman_window", |a| {
        let n = a.int(0, "window_length")?;
        let p = a.bool_or(1, "periodic", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::blackman_window(n, p, &o)?, rg)
    });
    r.add("bartlett_window", |a| {
        let n = a.int(0, "window_length")?;
        let p = a.bool_or(1, "periodic", true)?;
        let (o, rg) = opts(a)?;
        with_rg(window::bartlett_window(n, p, &o)?, rg)
    });
    r.add("kaiser_window", |a| {
        let n = a.int(0, "window_length")?;
        let p = a.bool_or(1, "periodic", true)?;
        let beta = a.float_or(2, "beta", 12.0)?;
        let (o, rg) = opts(a)?;
        with_rg(window::kaiser_window(n, p, beta, &o)?, rg)
    });
}

pub(crate) fn register(r: &mut Registry) {
    register_fft(r);
    register_signal(r);
    register_top(r);
}

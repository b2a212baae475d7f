//! The CUDA side of the FFT primitives: a contiguous device copy, cuFFT along each dim (moved
//! last by a copy when cuFFT cannot walk it as one strided batch), then the normalization and
//! weighting helpers. The same transforms in the same order as the CPU kernels.

#[cfg(feature = "cuda")]
mod imp {
    use crate::autograd;
    use crate::backend::cuda::elementwise::storage_of;
    use crate::backend::cuda::fft::{self as cf, Kind, Lines};
    use crate::backend::cuda::ops as cops;
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Device, Error, Result};

    fn ordinal(op: &str, t: &Tensor) -> Result<usize> {
        match t.device() {
            Device::Cuda(n) => Ok(n),
            Device::Cpu => Err(Error::device(op, "expected a CUDA tensor")),
        }
    }

    /// The device address of element 0 of `t`'s view.
    fn base(op: &str, t: &Tensor) -> Result<u64> {
        let (p, _) = storage_of(op, t)?;
        Ok(p + (t.storage_offset() * t.dtype().size()) as u64)
    }

    fn split(shape: &[usize], d: usize) -> (usize, usize, usize) {
        (shape[..d].iter().product(), shape[d], shape[d + 1..].iter().product())
    }

    /// `t` (contiguous, owned by the caller) with dim `d` moved last, as a contiguous copy.
    fn move_last(t: &Tensor, d: usize) -> Result<Tensor> {
        cops::contiguous(&t.movedim(&[d as i64], &[-1])?)
    }

    fn move_back(t: &Tensor, d: usize) -> Result<Tensor> {
        cops::contiguous(&t.movedim(&[-1], &[d as i64])?)
    }

    /// In-place c2c along dim `d` of the contiguous complex `t`; returns the result (a new
    /// tensor when the dim had to be moved).
    fn c2c_dim(t: Tensor, d: usize, inverse: bool) -> Result<Tensor> {
        let op = "_fft_c2c";
        let (outer, n, inner) = split(t.shape(), d);
        if n <= 1 || t.numel() == 0 {
            return Ok(t);
        }
        let f64 = t.dtype() == DType::C128;
        let ord = ordinal(op, &t)?;
        if inner == 1 || outer == 1 {
            let lines = if inner == 1 { Lines { n, batch: outer, stride: 1, idist: n, odist: n } } else { Lines { n, batch: inner, stride: inner, idist: 1, odist: 1 } };
            let p = base(op, &t)?;
            cf::exec(op, ord, Kind::C2C, f64, lines, p, p, inverse)?;
            return Ok(t);
        }
        let m = move_last(&t, d)?;
        let p = base(op, &m)?;
        cf::exec(op, ord, Kind::C2C, f64, Lines { n, batch: outer * inner, stride: 1, idist: n, odist: n }, p, p, inverse)?;
        move_back(&m, d)
    }

    pub fn c2c(x: &Tensor, dims: &[usize], f: f64, forward: bool) -> Result<Tensor> {
        let _ng = autograd::no_grad();
        let mut t = cops::contiguous(x)?;
        for &d in dims {
            t = c2c_dim(t, d, !forward)?;
        }
        let ord = ordinal("_fft_c2c", &t)?;
        cf::scale_conj("_fft_c2c", ord, t.dtype() == DType::C128, base("_fft_c2c", &t)?, t.numel(), f, false)?;
        Ok(t)
    }

    pub fn r2c(x: &Tensor, dims: &[usize], f: f64, conj: bool, weighted: usize) -> Result<Tensor> {
        let op = "_fft_r2c";
        let _ng = autograd::no_grad();
        let ord = ordinal(op, x)?;
        let (last, rest) = dims.split_last().ok_or_else(|| Error::value(op, "no dims to transform"))?;
        let moved = *last + 1 != x.ndim();
        let src = if moved { move_last(x, *last)? } else { cops::contiguous(x)? };
        let n = x.shape()[*last];
        let m = n / 2 + 1;
        let rows = src.numel().checked_div(n).unwrap_or(0);
        let mut oshape = src.shape().to_vec();
        let nd = oshape.len();
        oshape[nd - 1] = m;
        let f64 = x.dtype() == DType::F64;
        let out = cops::empty(op, ord, x.dtype().to_complex(), &oshape)?;
        cf::exec(op, ord, Kind::R2C, f64, Lines { n, batch: rows, stride: 1, idist: n, odist: m }, base(op, &src)?, base(op, &out)?, false)?;
        let mut t = if moved { move_back(&out, *last)? } else { out };
        for &d in rest {
            t = c2c_dim(t, d, false)?;
        }
        let p = base(op, &t)?;
        cf::scale_conj(op, ord, f64, p, t.numel(), f, conj)?;
        let (_, _, inner) = split(t.shape(), *last);
        cf::weight(op, ord, f64, p, t.numel(), m, inner, weighted, 2.0)?;
        Ok(t)
    }

    pub fn c2r(x: &Tensor, dims: &[usize], f: f64, n: usize, forward: bool, halved: usize) -> Result<Tensor> {
        let op = "_fft_c2r";
        let _ng = autograd::no_grad();
        let ord = ordinal(op, x)?;
        let (last, rest) = dims.split_last().ok_or_else(|| Error::value(op, "no dims to transform"))?;
        let f64 = x.dtype() == DType::C128;
        let m = x.shape()[*last];
        let mut t = cops::contiguous(x)?;
        let p = base(op, &t)?;
        let (_, _, inner) = split(t.shape(), *last);
        cf::weight(op, ord, f64, p, t.numel(), m, inner, halved, 0.5)?;
        cf::scale_conj(op, ord, f64, p, t.numel(), 1.0, forward)?;
        for &d in rest {
            t = c2c_dim(t, d, true)?;
        }
        let moved = *last + 1 != x.ndim();
        // cuFFT's C2R overwrites its input: `t` is always this function's own copy
        let src = if moved { move_last(&t, *last)? } else { t };
        let rows = src.numel().checked_div(m).unwrap_or(0);
        let mut oshape = src.shape().to_vec();
        let nd = oshape.len();
        oshape[nd - 1] = n;
        let out = cops::empty(op, ord, x.dtype().to_real(), &oshape)?;
        cf::exec(op, ord, Kind::C2R, f64, Lines { n, batch: rows, stride: 1, idist: m, odist: n }, base(op, &src)?, base(op, &out)?, true)?;
        let out = if moved { move_back(&out, *last)? } else { out };
        if f != 1.0 {
            return out.mul_scalar(f);
        }
        Ok(out)
    }
}

#[cfg(feature = "cuda")]
pub use imp::{c2c, c2r, r2c};

#[cfg(not(feature = "cuda"))]
mod imp {
    use crate::tensor::Tensor;
    use crate::{Error, Result};

    fn off(op: &str) -> Error {
        Error::device(op, "torch-magpie was built without the `cuda` feature")
    }
    pub fn c2c(_x: &Tensor, _dims: &[usize], _f: f64, _forward: bool) -> Result<Tensor> {
        Err(off("_fft_c2c"))
    }
    pub fn r2c(_x: &Tensor, _dims: &[usize], _f: f64, _conj: bool, _weighted: usize) -> Result<Tensor> {
        Err(off("_fft_r2c"))
    }
    pub fn c2r(_x: &Tensor, _dims: &[usize], _f: f64, _n: usize, _forward: bool, _halved: usize) -> Result<Tensor> {
        Err(off("_fft_c2r"))
    }
}

#[cfg(not(feature = "cuda"))]
pub use imp::{c2c, c2r, r2c};

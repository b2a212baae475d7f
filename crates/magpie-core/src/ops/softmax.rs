//! `softmax`, `log_softmax` and their relatives over one dim (`softmin`, `_safe_softmax`,
//! `_softmax_backward_data`). The forward is one pass per line (contiguous lines are read in
//! place, lines run in parallel); the backward rules are tensor ops.

use crate::autograd;
use crate::backend::cpu::{self, rows};
use crate::device::Device;
use crate::dtype::DType;
use crate::element::Element;
use crate::ops::reduce::{map_lines, one_dim};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Which member of the family a kernel computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Softmax,
    LogSoftmax,
    /// softmax, but lines that are all -inf give zeros instead of NaN.
    Safe,
}

macro_rules! line_kernel {
    ($F:ty, $l:expr, $o:expr, $kind:expr, $T:ty) => {{
        let (l, o, kind) = ($l, $o, $kind);
        let mut m = <$F>::NEG_INFINITY;
        for &v in l.iter() {
            if v > m || v.is_nan() {
                m = v;
                if v.is_nan() {
                    break;
                }
            }
        }
        if kind == Kind::Safe && m == <$F>::NEG_INFINITY {
            o.iter_mut().for_each(|x: &mut $T| *x = <$T>::from_f64(0.0));
        } else {
            let mut s: $F = 0.0;
            for &v in l.iter() {
                s += (v - m).exp();
            }
            if kind == Kind::LogSoftmax {
                let ls = s.ln();
                for (x, &v) in o.iter_mut().zip(l.iter()) {
                    *x = <$T>::from_f64((v - m - ls) as f64);
                }
            } else {
                let inv = 1.0 / s;
                for (x, &v) in o.iter_mut().zip(l.iter()) {
                    *x = <$T>::from_f64(((v - m).exp() * inv) as f64);
                }
            }
        }
    }};
}

macro_rules! native_line {
    ($name:ident, $F:ty) => {
        /// One line in its own precision: `exp` is evaluated once per element (stored, then scaled).
        fn $name(l: &[$F], o: &mut [$F], kind: Kind) {
            let mut m = <$F>::NEG_INFINITY;
            for &v in l {
                if v > m || v.is_nan() {
                    m = v;
                    if v.is_nan() {
                        break;
                    }
                }
            }
            if kind == Kind::Safe && m == <$F>::NEG_INFINITY {
                o.fill(0.0);
                return;
            }
            let mut s: $F = 0.0;
            if kind == Kind::LogSoftmax {
                for &v in l {
                    s += (v - m).exp();
                }
                let shift = m + s.ln();
                for (x, &v) in o.iter_mut().zip(l) {
                    *x = v - shift;
                }
            } else {
                for (x, &v) in o.iter_mut().zip(l) {
                    let e = (v - m).exp();
                    *x = e;
                    s += e;
                }
                let inv = 1.0 / s;
                o.iter_mut().for_each(|x| *x *= inv);
            }
        }
    };
}
native_line!(line_f32, f32);
native_line!(line_f64, f64);

/// The CUDA kernels run over the last dim: other dims are moved there and back.
fn cuda_forward(x: &Tensor, dim: usize, kind: Kind) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() && x.ndim() > 0 {
        let mode = match kind {
            Kind::Softmax => 0,
            Kind::LogSoftmax => 1,
            Kind::Safe => 2,
        };
        let last = x.ndim() - 1;
        if dim == last {
            return crate::backend::cuda::softmax::forward(x, mode);
        }
        let _ng = autograd::no_grad();
        let moved = x.movedim(&[dim as i64], &[last as i64])?;
        return match crate::backend::cuda::softmax::forward(&moved, mode)? {
            Some(y) => Ok(Some(y.movedim(&[last as i64], &[dim as i64])?.contiguous()?)),
            None => Ok(None),
        };
    }
    let _ = (x, dim, kind);
    Ok(None)
}

/// The softmax / log_softmax input gradient by the CUDA kernel (last dim, no double backward).
fn cuda_grad(g: &Tensor, y: &Tensor, dim: usize, log: bool) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if y.device().is_cuda() && y.ndim() > 0 && dim == y.ndim() - 1 && !autograd::is_grad_enabled() {
        return crate::backend::cuda::softmax::backward(g, y, log);
    }
    let _ = (g, y, dim, log);
    Ok(None)
}

fn forward(x: &Tensor, dim: usize, kind: Kind) -> Result<Tensor> {
    if let Some(y) = cuda_forward(x, dim, kind)? {
        return Ok(y);
    }
    let n = crate::ops::reduce::dim_size(x, dim);
    match x.dtype() {
        DType::F64 => map_lines::<f64, f64>(x, dim, n, |l, o| line_f64(l, o, kind)),
        DType::F32 if kind != Kind::Safe => {
            let log = kind == Kind::LogSoftmax;
            if x.ndim() > 0 && dim + 1 == x.ndim() && x.device() == Device::Cpu && n > 0 {
                // rows of the last dim: blocks of rows through the SIMD kernel, in parallel
                let mut out = vec![0f32; x.numel()];
                // (a large zeroed block is a fresh mapping not yet touched: huge pages still apply)
                crate::storage::advise_huge_pages(&mut out);
                cpu::read(x, |xs: &[f32]| rows::par_rows(&mut out, n, n, |r0, o| rows::softmax_rows(&xs[r0 * n..r0 * n + o.len()], o, n, log)))?;
                return Tensor::from_vec(out, x.shape());
            }
            map_lines::<f32, f32>(x, dim, n, |l, o| rows::softmax_rows(l, o, l.len().max(1), log))
        }
        DType::F32 => map_lines::<f32, f32>(x, dim, n, |l, o| line_f32(l, o, kind)),
        d if d.is_float() => crate::with_dtype!(d, T, { map_lines::<f32, T>(x, dim, n, |l, o| line_kernel!(f32, l, o, kind, T)) }),
        d => Err(Error::dtype("softmax", format!("\"softmax_lastdim_kernel_impl\" not implemented for '{}'", d.name()))),
    }
}

/// The fused f32 CPU backward (`log`: of log_softmax) over the last dim, when no graph of the
/// gradient is being built (the composites below are its reference and its double backward).
fn fused_grad(g: &Tensor, y: &Tensor, dim: usize, log: bool) -> Result<Option<Tensor>> {
    let graph = autograd::is_grad_enabled() && (g.requires_grad() || y.requires_grad());
    if graph
        || g.dtype() != DType::F32
        || y.dtype() != DType::F32
        || g.device() != Device::Cpu
        || y.device() != Device::Cpu
        || y.ndim() == 0
        || dim + 1 != y.ndim()
        || g.shape() != y.shape()
    {
        return Ok(None);
    }
    let n = y.shape()[dim];
    if n == 0 {
        return Ok(None);
    }
    let mut out = vec![0f32; y.numel()];
    crate::storage::advise_huge_pages(&mut out);
    cpu::read(g, |gv: &[f32]| {
        cpu::read(y, |yv: &[f32]| {
            rows::par_rows(&mut out, n, n, |r0, o| {
                let s = r0 * n..r0 * n + o.len();
                rows::softmax_backward_rows(&gv[s.clone()], &yv[s], o, n, log)
            })
        })
    })??;
    Ok(Some(Tensor::from_vec(out, y.shape())?))
}

/// `grad_input` of softmax from its output `y`: `y * (g - sum(g * y, dim))`.
fn softmax_grad(g: &Tensor, y: &Tensor, dim: usize) -> Result<Tensor> {
    if let Some(dx) = cuda_grad(g, y, dim, false)? {
        return Ok(dx);
    }
    // half tensors (where the CUDA kernel, which computes in float32, does not apply): in
    // float32, rounded once (PyTorch's acc_type)
    if let Some(h) = crate::ops::acc::half_acc(&[g, y]) {
        use crate::ops::acc::{down, up};
        return down(softmax_grad(&up(g)?, &up(y)?, dim)?, h);
    }
    if let Some(r) = fused_grad(g, y, dim, false)? {
        return Ok(r);
    }
    let gy = g.mul(y)?;
    let s = if y.ndim() == 0 { gy } else { gy.sum_dims(Some(&[dim as i64]), true, None)? };
    y.mul(&g.sub(&s)?)
}

/// `grad_input` of log_softmax from its output `y`: `g - exp(y) * sum(g, dim)`.
fn log_softmax_grad(g: &Tensor, y: &Tensor, dim: usize) -> Result<Tensor> {
    if let Some(dx) = cuda_grad(g, y, dim, true)? {
        return Ok(dx);
    }
    // half tensors (where the CUDA kernel, which computes in float32, does not apply): in
    // float32, rounded once (PyTorch's acc_type)
    if let Some(h) = crate::ops::acc::half_acc(&[g, y]) {
        use crate::ops::acc::{down, up};
        return down(log_softmax_grad(&up(g)?, &up(y)?, dim)?, h);
    }
    if let Some(r) = fused_grad(g, y, dim, true)? {
        return Ok(r);
    }
    let s = if y.ndim() == 0 { g.clone() } else { g.sum_dims(Some(&[dim as i64]), true, None)? };
    g.sub(&y.exp()?.mul(&s)?)
}

fn run(op: &str, x: &Tensor, dim: i64, dtype: Option<DType>, kind: Kind) -> Result<Tensor> {
    let d = one_dim(op, x, dim)?;
    let x = match dtype {
        Some(dt) => x.to_dtype(dt)?,
        None => x.clone(),
    };
    let out = forward(&x, d, kind)?;
    autograd::record(
        match kind {
            Kind::LogSoftmax => "LogSoftmax",
            Kind::Softmax => "Softmax",
            Kind::Safe => "SafeSoftmax",
        },
        &[&x],
        &[out.clone()],
        move |ctx, g| {
            let y = ctx.output(0)?;
            Ok(vec![Some(if kind == Kind::LogSoftmax { log_softmax_grad(&g[0], &y, d)? } else { softmax_grad(&g[0], &y, d)? })])
        },
    );
    Ok(out)
}

/// Softmax over the last dim of `x` (`[.., l, s]`) where row i of each `[l, s]` matrix sees
/// columns `0..=i` only (top-left causal; the rest come out 0), on CUDA tensors (None
/// elsewhere): the attention composite's causal softmax without a masked copy of the scores. Its
/// gradient is softmax's (zero at the hidden entries, where the output is 0).
pub(crate) fn causal_softmax_cuda(x: &Tensor) -> Result<Option<Tensor>> {
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() && x.ndim() >= 2 && x.shape()[x.ndim() - 2] > 0 && crate::backend::cuda::softmax::supported(x.dtype()) {
        let (l, d) = (x.shape()[x.ndim() - 2], x.ndim() - 1);
        let y = {
            let _ng = autograd::no_grad();
            match crate::backend::cuda::softmax::forward_causal(x, 0, l)? {
                Some(y) => y,
                None => return Ok(None),
            }
        };
        autograd::record("Softmax", &[x], &[y.clone()], move |ctx, g| {
            let y = ctx.output(0)?;
            Ok(vec![Some(softmax_grad(&g[0], &y, d)?)])
        });
        return Ok(Some(y));
    }
    let _ = x;
    Ok(None)
}

impl Tensor {
    /// `torch.softmax(x, dim, dtype=)`: `exp(x - max) / sum(exp(x - max))` along `dim`
    /// (`dtype` converts the input first, as PyTorch).
    pub fn softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let _prof = crate::profiler::op("softmax", &[self]);
        if let Some(c) = crate::amp::opt_dtype("softmax", self, dtype)? {
            return c.args.0.softmax(dim, c.args.1);
        }
        run("softmax", self, dim, dtype, Kind::Softmax)
    }
    /// `torch.log_softmax(x, dim, dtype=)`: `x - max - log(sum(exp(x - max)))`.
    pub fn log_softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let _prof = crate::profiler::op("log_softmax", &[self]);
        if let Some(c) = crate::amp::opt_dtype("log_softmax", self, dtype)? {
            return c.args.0.log_softmax(dim, c.args.1);
        }
        run("log_softmax", self, dim, dtype, Kind::LogSoftmax)
    }
    /// `nn.functional.softmin(x, dim, dtype=)`: `softmax(-x)`.
    pub fn softmin(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let x = match dtype {
            Some(dt) => self.to_dtype(dt)?,
            None => self.clone(),
        };
        x.neg()?.softmax(dim, None)
    }
    /// `aten._safe_softmax(x, dim, dtype=)`: softmax whose fully masked (all -inf) lines are 0.
    pub fn safe_softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        run("_safe_softmax", self, dim, dtype, Kind::Safe)
    }
}

/// `torch._softmax_backward_data(grad_output, output, dim, input_dtype)`: the softmax
/// gradient from the forward's output, cast to `input_dtype`.
pub fn softmax_backward_data(grad: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Result<Tensor> {
    let d = one_dim("_softmax_backward_data", output, dim)?;
    softmax_grad(grad, output, d)?.to_dtype(input_dtype)
}

/// `torch._log_softmax_backward_data(grad_output, output, dim, input_dtype)`.
pub fn log_softmax_backward_data(grad: &Tensor, output: &Tensor, dim: i64, input_dtype: DType) -> Result<Tensor> {
    let d = one_dim("_log_softmax_backward_data", output, dim)?;
    log_softmax_grad(grad, output, d)?.to_dtype(input_dtype)
}

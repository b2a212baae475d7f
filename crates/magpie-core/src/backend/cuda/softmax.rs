//! Host side of kernels/softmax.cu: softmax / log_softmax / safe softmax over the last dim of a
//! contiguous CUDA tensor (a block per row), and their backward from the output.

use super::kern::{elem_ptr, kfunc, KFile};
use super::launch::{launch, Args};
use super::ops::{contiguous, empty};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Device, Result};

/// Vectors (16-byte loads) each thread keeps in registers (`MAXV` in softmax.cu and norm.cu).
pub(crate) const MAXV: usize = 4;

/// True for the dtypes these kernels are built for.
pub fn supported(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

/// How a row kernel is launched: the kernel variant (16-byte register path, scalar register
/// path or loop) and its threads per block.
pub(crate) fn row_launch(ptr: u64, n: usize, dt: DType) -> (&'static str, u32) {
    let vsz = 16 / dt.size();
    let vec = ptr % 16 == 0 && n % vsz == 0;
    let nv = if vec { n / vsz } else { n };
    let threads = (nv.div_ceil(MAXV).div_ceil(32) * 32).clamp(32, 1024);
    if nv <= threads * MAXV {
        (if vec { "vec" } else { "reg" }, threads as u32)
    } else {
        ("loop", 1024)
    }
}

/// Which member of the family: 0 softmax, 1 log_softmax, 2 softmax with all -inf rows as 0.
pub fn forward(x: &Tensor, mode: i32) -> Result<Option<Tensor>> {
    forward_causal(x, mode, 0)
}

/// [`forward`] where, with `causal` > 0, the last two dims are `[causal, n]` matrices and row i of
/// each sees columns `0..=i` only (the rest count as -inf: they come out 0, or -inf for
/// log_softmax): attention's top-left causal softmax without the masked copy of the scores.
pub fn forward_causal(x: &Tensor, mode: i32, causal: usize) -> Result<Option<Tensor>> {
    let op = "softmax";
    let dt = x.dtype();
    let Device::Cuda(ord) = x.device() else { return Ok(None) };
    if !supported(dt) || x.ndim() == 0 {
        return Ok(None);
    }
    let x = if x.is_contiguous() { x.clone() } else { contiguous(x)? };
    let out = empty(op, ord, dt, x.shape())?;
    let n = x.shape()[x.ndim() - 1];
    let rows = if n == 0 { 0 } else { x.numel() / n };
    if rows == 0 {
        return Ok(Some(out));
    }
    let (ptr, dev) = elem_ptr(op, &x)?;
    let optr = elem_ptr(op, &out)?.0;
    let (variant, threads) = row_launch(ptr, n, dt);
    let kname = match variant {
        "vec" => "softmax_fwd_vec",
        "reg" => "softmax_fwd_reg",
        _ => "softmax_fwd_loop",
    };
    let f = kfunc(&dev, KFile::Softmax, dt, kname)?;
    let mut a = Args::new();
    a.push(ptr).push(optr).push(n as i64).push(mode).push(causal as i64);
    launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    Ok(Some(out))
}

/// The input gradient of softmax (`log` false) or log_softmax from the output `y` and the
/// output gradient `g` (same shape), over the last dim.
pub fn backward(g: &Tensor, y: &Tensor, log: bool) -> Result<Option<Tensor>> {
    let op = "softmax_backward";
    let dt = y.dtype();
    let Device::Cuda(ord) = y.device() else { return Ok(None) };
    if !supported(dt) || g.dtype() != dt || g.shape() != y.shape() || y.ndim() == 0 || !g.device().is_cuda() {
        return Ok(None);
    }
    let g = if g.is_contiguous() { g.clone() } else { contiguous(g)? };
    let y = if y.is_contiguous() { y.clone() } else { contiguous(y)? };
    let out = empty(op, ord, dt, y.shape())?;
    let n = y.shape()[y.ndim() - 1];
    let rows = if n == 0 { 0 } else { y.numel() / n };
    if rows == 0 {
        return Ok(Some(out));
    }
    let (gp, dev) = elem_ptr(op, &g)?;
    let (yp, op_) = (elem_ptr(op, &y)?.0, elem_ptr(op, &out)?.0);
    let threads = (n.div_ceil(4).div_ceil(32) * 32).clamp(32, 1024) as u32;
    let f = kfunc(&dev, KFile::Softmax, dt, "softmax_bwd")?;
    let mut a = Args::new();
    a.push(gp).push(yp).push(op_).push(n as i64).push(log as i32);
    launch(&dev, op, f, (rows as u32, 1, 1), (threads, 1, 1), 0, &mut a)?;
    Ok(Some(out))
}

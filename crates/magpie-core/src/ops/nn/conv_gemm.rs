//! The three convolution slots (see `conv.rs`) as device tensor ops, for CUDA tensors: the
//! im2col matrix is a `gather` of the input through the kernel-offset/output-position index map,
//! the products are batched GEMMs (cuBLAS on CUDA), and col2im is a `scatter_add` through the same
//! map. Padding reads and writes one extra zero element per channel. Runs on any device; the CPU
//! uses its own kernels unless [`set_conv_via_gemm`] asks for this path (to test it there).

use super::conv::ConvGeom;
use super::conv::Slot;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Result;
use std::sync::atomic::{AtomicBool, Ordering};

static ON_CPU: AtomicBool = AtomicBool::new(false);

/// Makes CPU convolutions (conv, conv_transpose, fold/unfold and their gradients) use the
/// gather + GEMM + scatter_add path that CUDA tensors take, so that the path can be tested
/// against the CPU kernels without a GPU. Off by default.
///
/// ```
/// magpie_core::ops::nn::set_conv_via_gemm(true);
/// magpie_core::ops::nn::set_conv_via_gemm(false);
/// ```
pub fn set_conv_via_gemm(on: bool) {
    ON_CPU.store(on, Ordering::Relaxed);
}

/// True when the slot of a convolution of dtype `dt` on `dev` takes this path.
pub(crate) fn applies(dev: crate::Device, dt: DType) -> bool {
    if dev.is_cuda() {
        // integers through the device's integer products (ops/matmul.rs), wrapping as the CPU loops
        dt.is_float() || (dt.is_integral() && !dt.is_bool())
    } else {
        dt.is_float() && ON_CPU.load(Ordering::Relaxed)
    }
}

/// `positions(g)` on `dev` as i64: the input position of each (kernel offset, output position),
/// `il` (the zero slot) in the padding.
fn index_map(g: &ConvGeom, pos: &[Option<usize>], dev: crate::Device) -> Result<Tensor> {
    let il = g.i_len() as i64;
    let v: Vec<i64> = pos.iter().map(|p| p.map_or(il, |i| i as i64)).collect();
    Tensor::from_vec(v, &[pos.len()])?.to_device(dev)
}

/// `[n, groups, cig * K, O]`: the im2col matrices of `x` (`[n, cin, ...]`).
fn cols(g: &ConvGeom, x: &Tensor, idx: &Tensor) -> Result<Tensor> {
    let (n, cin, il, kk, ol) = (g.n as i64, g.cin as i64, g.i_len() as i64, g.kk() as i64, g.o_len() as i64);
    let xf = x.reshape(&[n, cin, il])?;
    let z = Tensor::zeros_on(&[g.n, g.cin, 1], x.dtype(), x.device())?;
    let xz = crate::ops::shape_ops::cat(&[xf, z], 2)?;
    let ix = idx.reshape(&[1, 1, kk * ol])?.expand(&[n, cin, kk * ol])?.contiguous()?;
    xz.gather(2, &ix)?.reshape(&[n, g.groups as i64, (g.cig() as i64) * kk, ol])
}

/// Computes `slot` from `(a, b)` (`Y: (x, w)`, `X: (w, y)`, `W: (x, y)`) with no history;
/// half inputs compute in float32 and are rounded once.
pub(crate) fn slot(g: &ConvGeom, slot: Slot, pos: &[Option<usize>], a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let _ng = crate::autograd::no_grad();
    let dt = a.dtype();
    let (a, b) = if matches!(dt, DType::F16 | DType::BF16) { (a.to_dtype(DType::F32)?, b.to_dtype(DType::F32)?) } else { (a.detach(), b.detach()) };
    let idx = index_map(g, pos, a.device())?;
    let (n, grp, cog, ck, ol) = (g.n as i64, g.groups as i64, g.cog() as i64, (g.cig() * g.kk()) as i64, g.o_len() as i64);
    let shape = |s: &[usize]| s.iter().map(|&v| v as i64).collect::<Vec<_>>();
    let out = match slot {
        Slot::Y => {
            let w = b.reshape(&[1, grp, cog, ck])?;
            w.matmul(&cols(g, &a, &idx)?)?.reshape(&shape(&g.y_shape))?
        }
        Slot::W => {
            let y = b.reshape(&[n, grp, cog, ol])?;
            let c = cols(g, &a, &idx)?;
            y.matmul(&c.transpose(-1, -2)?)?.sum_dims(Some(&[0]), false, None)?.reshape(&shape(&g.w_shape))?
        }
        Slot::X => {
            let w = a.reshape(&[grp, cog, ck])?.transpose(-1, -2)?;
            let c = w.matmul(&b.reshape(&[n, grp, cog, ol])?)?;
            let (cin, il, kk) = (g.cin as i64, g.i_len() as i64, g.kk() as i64);
            let c = c.reshape(&[n, cin, kk * ol])?;
            let ix = idx.reshape(&[1, 1, kk * ol])?.expand(&[n, cin, kk * ol])?.contiguous()?;
            let xz = Tensor::zeros_on(&[g.n, g.cin, g.i_len() + 1], c.dtype(), c.device())?.scatter_add(2, &ix, &c)?;
            xz.narrow(2, 0, il)?.reshape(&shape(&g.x_shape))?
        }
    };
    if out.dtype() == dt {
        Ok(out)
    } else {
        out.to_dtype(dt)
    }
}

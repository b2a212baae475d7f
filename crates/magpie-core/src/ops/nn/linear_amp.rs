//! `linear` under CUDA autocast with float32 gradients straight from the kernels. The composite
//! (linear on autocast's 16-bit casts) makes 16-bit gradients for the weight, the bias and a
//! float32 input, and casts each back to float32 in a kernel of its own; here the weight's and a
//! float32 input's gradients are the 16-bit products stored as float32 by cuBLAS, the bias's a
//! column sum of the 16-bit output gradient stored as float32, and the q/k/v projections of one
//! float32 input share its 16-bit cast. The forward runs the composite's kernels (same bits);
//! the gradients differ from the composite's only by the rounding to 16 bits they skip.

use crate::amp::{self, DeviceKind, Policy};
use crate::autograd::{self, Saved};
use crate::backend::cuda::{blas, reduce};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `linear(x, w, b)` under CUDA autocast as one node over `(x, w, b)` for float32 parameters
/// (and a float32 or 16-bit input); None where this path does not apply (the caller runs the
/// autocast hook and the composite as before).
pub(crate) fn linear(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Option<Tensor>> {
    let dev = x.device();
    if !dev.is_cuda() || !amp::is_autocast_enabled(dev) || amp::policy("linear", DeviceKind::Cuda) != Some(Policy::LowerPrecision) {
        return Ok(None);
    }
    let dt = amp::get_autocast_dtype(dev);
    if !matches!(dt, DType::BF16 | DType::F16) || !matches!(x.dtype(), DType::F32) && x.dtype() != dt {
        return Ok(None);
    }
    if w.dtype() != DType::F32 || w.ndim() != 2 || w.device() != dev || x.ndim() == 0 {
        return Ok(None);
    }
    let (outf, inf) = (w.shape()[0], w.shape()[1]);
    let rows: usize = x.shape()[..x.ndim() - 1].iter().product();
    if x.shape()[x.ndim() - 1] != inf || rows == 0 || outf == 0 || inf == 0 {
        return Ok(None);
    }
    if let Some(b) = b {
        if b.dtype() != DType::F32 || b.shape() != [outf] || b.device() != dev {
            return Ok(None);
        }
    }
    // only worth it when a parameter's gradient will be taken
    if !autograd::is_grad_enabled() || !(w.requires_grad() || b.is_some_and(|b| b.requires_grad())) {
        return Ok(None);
    }
    // autocast's casts (the weights' cached for the region). Their ToCopy nodes are not inputs
    // of this node: only a gradient that is differentiated again goes through them.
    let w16 = amp::cuda_cached_cast(dt, w)?;
    let b16 = match b {
        Some(b) => Some(amp::cuda_cached_cast(dt, b)?),
        None => None,
    };
    let x_wide = x.dtype() == DType::F32;
    let x16 = if x_wide { act_cast(x, dt)? } else { x.clone() };
    let mut shape: Vec<i64> = x.shape()[..x.ndim() - 1].iter().map(|&v| v as i64).collect();
    shape.push(outf as i64);
    let y = {
        // the composite's kernels in its order (one 2-D product, then the bias), with autocast
        // and autograd off inside as autocast's op wrappers run them
        let _off = amp::suspend_all();
        let _ng = autograd::no_grad();
        let y = x16.reshape(&[rows as i64, inf as i64])?.matmul(&w16.t()?)?.reshape(&shape)?;
        match &b16 {
            Some(b16) => y.add(b16)?,
            None => y,
        }
    };
    let (sx, sw) = (Saved::new("linear", &x16), Saved::new("linear", &w16));
    let xshape: Vec<i64> = x.shape().iter().map(|&v| v as i64).collect();
    let has_bias = b.is_some();
    let mut inputs = vec![x, w];
    inputs.extend(b);
    autograd::record("Linear", &inputs, std::slice::from_ref(&y), move |ctx, g| {
        let op = "linear";
        let (x16, w16) = (sx.get()?, sw.get()?);
        let g2 = g[0].reshape(&[rows as i64, outf as i64])?;
        let x2 = x16.reshape(&[rows as i64, inf as i64])?;
        let no_product = || Error::dtype(op, format!("no CUDA product of {}", g2.dtype()));
        // differentiated again (create_graph): plain tensor ops on the saved casts, which keep
        // their history to x and w, cast up after the 16-bit products
        let graph = autograd::is_grad_enabled();
        let wide = |t: Tensor| if graph { t.to_dtype(DType::F32) } else { Ok(t) };
        let gx = match (ctx.needs_input_grad(0), x_wide && !graph) {
            (false, _) => None,
            (true, true) => Some(blas::batched_matmul_to(&g2, &w16, DType::F32)?.ok_or_else(no_product)?.reshape(&xshape)?),
            (true, false) => Some(if x_wide { wide(g2.mm(&w16)?)? } else { g2.mm(&w16)? }.reshape(&xshape)?),
        };
        let gw = match (ctx.needs_input_grad(1), graph) {
            (false, _) => None,
            (true, true) => Some(g2.t()?.mm(&x2)?.to_dtype(DType::F32)?),
            (true, false) => Some(blas::batched_matmul_to(&g2.t()?, &x2, DType::F32)?.ok_or_else(no_product)?),
        };
        let mut out = vec![gx, gw];
        if has_bias {
            out.push(match (ctx.needs_input_grad(2), graph) {
                (false, _) => None,
                (true, true) => Some(g2.sum_dims(Some(&[0]), false, None)?.to_dtype(DType::F32)?),
                (true, false) => Some(
                    reduce::reduce_acc(&g2, &[0], reduce::RedOp::Sum, &[outf])?.ok_or_else(|| Error::dtype(op, format!("no CUDA column sum of {}", g2.dtype())))?,
                ),
            });
        }
        Ok(out)
    });
    Ok(Some(y))
}

/// The 16-bit cast of a float32 activation for the products, shared by consecutive projections
/// of the same input at the same version (the query, key and value of one hidden state). Its
/// ToCopy node is reached only by a gradient that is differentiated again (the linear node's
/// input is the float32 tensor itself).
fn act_cast(x: &Tensor, dt: DType) -> Result<Tensor> {
    if let Some(c) = amp::act_cast_get(x.id(), x.version(), dt) {
        return Ok(c);
    }
    let c = x.to_dtype(dt)?;
    if amp::is_autocast_cache_enabled() {
        amp::act_cast_put(x.id(), x.version(), dt, &c);
    }
    Ok(c)
}

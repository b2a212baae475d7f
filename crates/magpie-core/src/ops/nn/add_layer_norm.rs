//! `add_layer_norm`: `layer_norm(x + bias + residual)`, the residual block ending of a
//! post-LayerNorm transformer (BERT's `BertOutput`: a projection without its bias, the bias, the
//! residual and the norm) as one op. PyTorch has no public name for this fusion. On CUDA it is one
//! kernel forward and two backward (`backend/cuda/add_norm.rs`); elsewhere, and when a graph of
//! the gradient is built, it is the composite [`add_layer_norm_composite`], the reference the
//! kernels are tested against.

use crate::tensor::Tensor;
use crate::{Error, Result};

/// `layer_norm(x + bias + residual, normalized_shape, weight, ln_bias, eps)`, with the dtypes,
/// autocast behaviour and gradients of that composite (`x + bias` and `+ residual` follow
/// PyTorch's type promotion; under autocast the norm runs in float32). `residual` must have
/// `x`'s shape; `bias` (the preceding projection's) has `normalized_shape`.
///
/// ```
/// use magpie_core::ops::nn::add_layer_norm::add_layer_norm;
/// use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap();
/// let r = Tensor::from_vec(vec![0f32, 1., 0., 1.], &[2, 2]).unwrap();
/// let b = Tensor::from_vec(vec![0.5f32, -0.5], &[2]).unwrap();
/// let y = add_layer_norm(&x, &r, Some(&b), &[2], None, None, 1e-5).unwrap();
/// assert_eq!(y.shape(), &[2, 2]);
/// ```
pub fn add_layer_norm(x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, normalized_shape: &[i64], weight: Option<&Tensor>, ln_bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
    Ok(add_ln("add_layer_norm", x, residual, bias, normalized_shape, weight, ln_bias, eps, false)?.0)
}

/// `(layer_norm(h, ...), h)` with `h = x + bias + residual`: [`add_layer_norm`] that also
/// returns the sum, for a pre-LayerNorm transformer whose residual stream goes on past the norm
/// (GPT-2: the attention's or the MLP's projection without its bias, the bias, the residual
/// stream, and the next sublayer's LayerNorm). Dtypes, autocast behaviour and gradients are
/// those of the composite [`add_layer_norm_residual_composite`]; `h` has the dtype of
/// `(x + bias) + residual`.
///
/// ```
/// use magpie_core::ops::nn::add_layer_norm::add_layer_norm_residual;
/// use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap();
/// let r = Tensor::from_vec(vec![0f32, 1., 0., 1.], &[2, 2]).unwrap();
/// let b = Tensor::from_vec(vec![0.5f32, -0.5], &[2]).unwrap();
/// let (y, h) = add_layer_norm_residual(&x, &r, Some(&b), &[2], None, None, 1e-5).unwrap();
/// assert_eq!(h.to_vec::<f32>().unwrap(), vec![1.5, 2.5, 3.5, 4.5]);
/// assert_eq!(y.shape(), &[2, 2]);
/// ```
pub fn add_layer_norm_residual(x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, normalized_shape: &[i64], weight: Option<&Tensor>, ln_bias: Option<&Tensor>, eps: f64) -> Result<(Tensor, Tensor)> {
    let (y, h) = add_ln("add_layer_norm_residual", x, residual, bias, normalized_shape, weight, ln_bias, eps, true)?;
    let h = h.ok_or_else(|| Error::value("add_layer_norm_residual", "the sum was not kept"))?;
    Ok((y, h))
}

/// The composite of [`add_layer_norm_residual`]: `h = (x + bias) + residual` and
/// `native_layer_norm(h, ...)` with tensor ops.
pub fn add_layer_norm_residual_composite(x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, normalized_shape: &[i64], weight: Option<&Tensor>, ln_bias: Option<&Tensor>, eps: f64) -> Result<(Tensor, Tensor)> {
    let h = match bias {
        Some(b) => x.add(b)?,
        None => x.clone(),
    }
    .add(residual)?;
    Ok((super::norm::native_layer_norm(&h, normalized_shape, weight, ln_bias, eps)?.0, h))
}

/// Both ops: the checks, the CUDA path, else the composite; `keep_h` returns the sum too.
#[allow(clippy::too_many_arguments)]
fn add_ln(op: &'static str, x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, normalized_shape: &[i64], weight: Option<&Tensor>, ln_bias: Option<&Tensor>, eps: f64, keep_h: bool) -> Result<(Tensor, Option<Tensor>)> {
    let _prof = crate::profiler::op_opt(op, &[Some(x), Some(residual), bias, weight, ln_bias]);
    if residual.shape() != x.shape() {
        return Err(Error::shape(op, format!("residual of shape {:?} must have the input's shape {:?}", residual.shape(), x.shape())));
    }
    let k = normalized_shape.len();
    let ns: Vec<usize> = normalized_shape.iter().map(|&v| v.max(0) as usize).collect();
    if k == 0 || x.ndim() < k || x.shape()[x.ndim() - k..] != ns[..] {
        return Err(Error::shape(op, format!("Given normalized_shape={normalized_shape:?}, expected input with shape [*, {}], but got input of size{:?}", normalized_shape.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "), x.shape())));
    }
    if let Some(b) = bias {
        if b.shape() != &ns[..] {
            return Err(Error::shape(op, format!("Expected bias to be of same shape as normalized_shape, but got bias of shape {:?} and normalized_shape = {normalized_shape:?}", b.shape())));
        }
    }
    for t in [Some(x), Some(residual), bias].into_iter().flatten() {
        super::util::check_float(op, t)?;
    }
    #[cfg(feature = "cuda")]
    if let Some(out) = cuda_path::add_layer_norm_cuda(x, residual, bias, k, weight, ln_bias, eps, keep_h)? {
        return Ok(out);
    }
    if keep_h {
        let (y, h) = add_layer_norm_residual_composite(x, residual, bias, normalized_shape, weight, ln_bias, eps)?;
        return Ok((y, Some(h)));
    }
    Ok((add_layer_norm_composite(x, residual, bias, normalized_shape, weight, ln_bias, eps)?, None))
}

/// The composite: `native_layer_norm((x + bias) + residual, ...)` with tensor ops (autograd and
/// every device come from them). The reference of the fused kernels.
pub fn add_layer_norm_composite(x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, normalized_shape: &[i64], weight: Option<&Tensor>, ln_bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
    let h = match bias {
        Some(b) => x.add(b)?,
        None => x.clone(),
    };
    Ok(super::norm::native_layer_norm(&h.add(residual)?, normalized_shape, weight, ln_bias, eps)?.0)
}

#[cfg(feature = "cuda")]
mod cuda_path {
    use crate::amp::{self, DeviceKind, Policy};
    use crate::autograd::{self, Saved};
    use crate::backend::cuda::add_norm::{self, AddNormNeeds, AddNormTypes};
    use crate::dtype::{promote_types, DType};
    use crate::tensor::Tensor;
    use crate::Result;

    fn half(dt: DType) -> bool {
        matches!(dt, DType::BF16 | DType::F16)
    }

    /// The fused path: None where it does not apply (mixed parameter dtypes, other devices, a
    /// kept sum whose dtype is not the norm's).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_layer_norm_cuda(x: &Tensor, residual: &Tensor, bias: Option<&Tensor>, k: usize, w: Option<&Tensor>, lnb: Option<&Tensor>, eps: f64, keep_h: bool) -> Result<Option<(Tensor, Option<Tensor>)>> {
        let dev = x.device();
        if !dev.is_cuda() || [Some(residual), bias, w, lnb].into_iter().flatten().any(|t| t.device() != dev) {
            return Ok(None);
        }
        let xb = match bias {
            Some(b) => promote_types(x.dtype(), b.dtype())?,
            None => x.dtype(),
        };
        let hd = promote_types(xb, residual.dtype())?;
        // autocast runs layer_norm in float32 (its parameters cast too); the kernel takes
        // parameters of the normalized dtype only
        let autocast_f32 = amp::is_autocast_enabled(dev) && amp::policy("layer_norm", DeviceKind::Cuda) == Some(Policy::Fp32);
        let out = if autocast_f32 && half(hd) { DType::F32 } else { hd };
        if [w, lnb].into_iter().flatten().any(|p| p.dtype() != out) || keep_h && hd != out {
            return Ok(None);
        }
        let n: usize = x.shape()[x.ndim() - k..].iter().product();
        let ty = AddNormTypes { xb, h: hd, out };
        let Some(o) = add_norm::forward(x, residual, bias, w, lnb, n, eps, ty)? else { return Ok(None) };
        let mut inputs = vec![x, residual];
        inputs.extend(bias);
        inputs.extend(w);
        inputs.extend(lnb);
        if !inputs.iter().any(|t| t.requires_grad()) || !autograd::is_grad_enabled() {
            return Ok(Some((o.y, keep_h.then_some(o.h))));
        }
        let (sx, sr) = (Saved::new("add_layer_norm", x), Saved::new("add_layer_norm", residual));
        let sb = bias.map(|b| Saved::new("add_layer_norm", b));
        let sw = w.map(|w| Saved::new("add_layer_norm", w));
        // a kept h is an output of the node: saved detached (no cycle through its grad_fn), with
        // its version checked as any saved tensor's
        let h_out = keep_h.then(|| o.h.clone());
        let sh = Saved::new("add_layer_norm", &o.h.detach());
        let (mean, rstd) = (o.mean, o.rstd);
        let outputs: Vec<Tensor> = std::iter::once(o.y.clone()).chain(h_out.clone()).collect();
        let (has_b, has_w, has_lnb) = (bias.is_some(), w.is_some(), lnb.is_some());
        let (xdt, rdt, bdt) = (x.dtype(), residual.dtype(), bias.map(|b| b.dtype()));
        let name = if keep_h { "AddLayerNormResidual" } else { "AddLayerNorm" };
        autograd::record(name, &inputs, &outputs, move |ctx, gr| {
            let h = sh.get()?;
            let gh = if keep_h { gr.get(1) } else { None };
            let ib = 2;
            let iw = ib + has_b as usize;
            let il = iw + has_w as usize;
            let need_x = ctx.needs_input_grad(0);
            let need_r = ctx.needs_input_grad(1);
            let need_b = has_b && ctx.needs_input_grad(ib);
            let need_w = has_w && ctx.needs_input_grad(iw);
            let need_l = has_lnb && ctx.needs_input_grad(il);
            let w = sw.as_ref().map(|s| s.get()).transpose()?;
            let mut grads: Option<add_norm::AddNormGrads> = None;
            if !autograd::is_grad_enabled() {
                let need = AddNormNeeds { x: need_x.then_some(xdt), residual: need_r.then_some(rdt), bias: if need_b { bdt } else { None }, w: need_w, lnb: need_l };
                grads = add_norm::backward(&gr[0], gh, &h, &mean, &rstd, w.as_ref(), n, need)?;
            }
            let g = match grads {
                Some(g) => g,
                None => {
                    // tensor ops from the saved inputs (differentiable again)
                    let (x, r) = (sx.get()?, sr.get()?);
                    let b = sb.as_ref().map(|s| s.get()).transpose()?;
                    let hx = match &b {
                        Some(b) => x.add(b)?,
                        None => x.clone(),
                    };
                    let hh = hx.add(&r)?.to_dtype(out)?;
                    let (dh, dw, dl) = super::super::layer_norm::composite_backward(&gr[0], &hh, w.as_ref(), k, eps, true, need_w || need_l)?;
                    let dh = dh.ok_or_else(|| crate::Error::value("add_layer_norm", "no gradient of the normalized input"))?;
                    let dh = match gh {
                        Some(gh) => dh.add(gh)?,
                        None => dh,
                    };
                    let lead: Vec<i64> = (0..x.ndim() - k).map(|d| d as i64).collect();
                    let db = match (need_b, &b) {
                        (true, Some(b)) => Some(if lead.is_empty() { dh.clone() } else { dh.sum_dims(Some(&lead), false, None)? }.to_dtype(b.dtype())?),
                        _ => None,
                    };
                    add_norm::AddNormGrads {
                        x: if need_x { Some(dh.to_dtype(xdt)?) } else { None },
                        residual: if need_r { Some(dh.to_dtype(rdt)?) } else { None },
                        bias: db,
                        w: if need_w { dw } else { None },
                        lnb: if need_l { dl } else { None },
                    }
                }
            };
            let shape_of = |t: Option<Tensor>, like: &[usize]| -> Result<Option<Tensor>> {
                t.map(|t| t.reshape(&like.iter().map(|&v| v as i64).collect::<Vec<_>>())).transpose()
            };
            let wshape: Vec<usize> = h.shape()[h.ndim() - k..].to_vec();
            let mut res = vec![g.x, g.residual];
            if has_b {
                res.push(shape_of(g.bias, &wshape)?);
            }
            if has_w {
                res.push(shape_of(g.w, &wshape)?);
            }
            if has_lnb {
                res.push(shape_of(g.lnb, &wshape)?);
            }
            Ok(res)
        });
        Ok(Some((o.y, h_out)))
    }
}

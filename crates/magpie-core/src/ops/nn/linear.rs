//! `linear` on the CPU as one GEMM with the bias fused in (`addmm`), for f32/f64 inputs and a
//! 2-d weight. The backward rule is matrix products and a column sum (tensor ops), so it is
//! differentiable again. Other cases (integers, a 1-d weight, mixed dtypes) take the
//! convolution path in `conv.rs`, which stays the reference this one is tested against.

use crate::autograd::{self, Saved};
use crate::backend::cpu::gemm::{addmm_bias, addmm_bias_on};
use crate::device::Device;
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Result;

/// `x @ w.T + bias` when the fast path applies (shapes already validated by the caller), else None.
pub(crate) fn linear_gemm(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Option<Tensor>> {
    let dt = x.dtype();
    if !matches!(dt, DType::F32 | DType::F64) || w.ndim() != 2 || w.dtype() != dt || x.ndim() == 0 {
        return Ok(None);
    }
    if x.device() != Device::Cpu || w.device() != Device::Cpu {
        return Ok(None);
    }
    let (outf, inf) = (w.shape()[0], w.shape()[1]);
    if let Some(b) = bias {
        if b.dtype() != dt || b.shape() != [outf] || b.device() != Device::Cpu {
            return Ok(None);
        }
    }
    let rows: usize = x.shape()[..x.ndim() - 1].iter().product();
    let mut shape = x.shape()[..x.ndim() - 1].to_vec();
    shape.push(outf);
    let y = {
        let _ng = autograd::no_grad();
        let x2 = x.reshape(&[rows as i64, inf as i64])?;
        addmm_bias(&x2, &w.t()?, bias, &shape)?
    };
    let (sx, sw) = (Saved::new("linear", x), Saved::new("linear", w));
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    let has_bias = bias.is_some();
    autograd::record("Linear", &inputs, &[y.clone()], move |ctx, g| {
        let g2 = g[0].reshape(&[rows as i64, outf as i64])?;
        let x = sx.get()?;
        let x2 = x.reshape(&[rows as i64, inf as i64])?;
        // products straight into tensors of the gradients' shapes (no views, so a leaf's
        // `.grad` takes them without a copy); with tensor ops when the gradient is differentiated
        let graph = autograd::is_grad_enabled();
        if !graph && ctx.needs_input_grad(0) && ctx.needs_input_grad(1) && rayon::current_num_threads() > 1 {
            // the two products side by side, one thread each (plus the bias column sum)
            let w = sw.get()?;
            let need_b = has_bias && ctx.needs_input_grad(2);
            let (gx, (gw, gb)) = rayon::join(
                || addmm_bias_on(&g2, &w, None, x.shape(), false),
                || {
                    rayon::join(
                        || addmm_bias_on(&g2.t()?, &x2, None, &[outf, inf], false),
                        || if need_b { g2.sum_dims(Some(&[0]), false, None).map(Some) } else { Ok(None) },
                    )
                },
            );
            let mut out = vec![Some(gx?), Some(gw?)];
            if has_bias {
                out.push(gb?);
            }
            return Ok(out);
        }
        let gx = match (ctx.needs_input_grad(0), graph) {
            (false, _) => None,
            (true, false) => Some(addmm_bias(&g2, &sw.get()?, None, x.shape())?),
            (true, true) => Some(g2.mm(&sw.get()?)?.reshape(&x.shape().iter().map(|&v| v as i64).collect::<Vec<_>>())?),
        };
        let gw = match (ctx.needs_input_grad(1), graph) {
            (false, _) => None,
            (true, false) => Some(addmm_bias(&g2.t()?, &x2, None, &[outf, inf])?),
            (true, true) => Some(g2.t()?.mm(&x2)?),
        };
        let mut out = vec![gx, gw];
        if has_bias {
            out.push(if ctx.needs_input_grad(2) { Some(g2.sum_dims(Some(&[0]), false, None)?) } else { None });
        }
        Ok(out)
    });
    Ok(Some(y))
}

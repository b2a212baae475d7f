//! `bias_gelu`: `gelu(x + bias)` with the bias cast to `x`'s dtype first, the activation after
//! a projection whose bias is left out of the product (BERT's `intermediate`, its MLM head's
//! transform). PyTorch has no public name for this fusion. On CUDA it is one elementwise kernel
//! each way (the bias read as a repeated row, in its own dtype); the bias gradient is one column
//! sum, kept in float32 for a float32 bias. Elsewhere, and when a graph of the gradient is built,
//! it is the composite [`bias_gelu_composite`], the reference the kernels are tested against.

use crate::tensor::Tensor;
use crate::{Error, Result};

/// `gelu(x + bias.to(x.dtype), approximate)` (`"none"` or `"tanh"`), `bias` of `x`'s last dim.
/// The cast matches what autocast's `linear` does with its bias, so a 16-bit projection under
/// autocast keeps a 16-bit activation.
///
/// ```
/// use magpie_core::ops::nn::bias_gelu::bias_gelu;
/// use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![-1f32, 0., 1., 2.], &[2, 2]).unwrap();
/// let b = Tensor::from_vec(vec![0.5f32, -0.5], &[2]).unwrap();
/// let y = bias_gelu(&x, &b, "none").unwrap();
/// assert_eq!(y.shape(), &[2, 2]);
/// ```
pub fn bias_gelu(x: &Tensor, bias: &Tensor, approximate: &str) -> Result<Tensor> {
    let op = "bias_gelu";
    let _prof = crate::profiler::op_opt(op, &[Some(x), Some(bias)]);
    if !matches!(approximate, "none" | "tanh") {
        return Err(Error::value(op, format!("approximate argument must be either none or tanh, got {approximate}")));
    }
    if x.ndim() == 0 || bias.shape() != [x.shape()[x.ndim() - 1]] {
        return Err(Error::shape(op, format!("bias of shape {:?} must be a vector of the input's last dim (input {:?})", bias.shape(), x.shape())));
    }
    super::util::check_float(op, x)?;
    super::util::check_float(op, bias)?;
    #[cfg(feature = "cuda")]
    if let Some(y) = cuda_path::bias_gelu_cuda(x, bias, approximate == "tanh")? {
        return Ok(y);
    }
    bias_gelu_composite(x, bias, approximate)
}

/// The composite: `(x + bias.to(x.dtype)).gelu(approximate)` with tensor ops.
pub fn bias_gelu_composite(x: &Tensor, bias: &Tensor, approximate: &str) -> Result<Tensor> {
    x.add(&bias.to_dtype(x.dtype())?)?.gelu(approximate)
}

#[cfg(feature = "cuda")]
mod cuda_path {
    use crate::autograd::{self, Saved};
    use crate::backend::cuda::elementwise::{map, Opnd};
    use crate::backend::cuda::{ops, reduce};
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Error, Result};

    // `x + bias` as the composite holds it: the bias rounded to x's dtype, the sum rounded to it
    // (x and y load as float; T_ below stands for this sum)
    macro_rules! exprs {
        ($t:literal) => {
            [
                concat!($t, " * (C)0.5 * ((C)1 + m_erf(", $t, " * (C)0.7071067811865476))"),
                concat!("(C)0.5 * ", $t, " * ((C)1 + m_tanh((C)0.7978845608028654 * (", $t, " + (C)0.044715 * ", $t, " * ", $t, " * ", $t, ")))"),
                concat!("z * ((C)0.5 * ((C)1 + m_erf(", $t, " * (C)0.7071067811865476)) + ", $t, " * (C)0.3989422804014327 * m_exp((C)-0.5 * ", $t, " * ", $t, "))"),
                concat!(
                    "z * ((C)0.5 * ((C)1 + m_tanh((C)0.7978845608028654 * (", $t, " + (C)0.044715 * ", $t, " * ", $t, " * ", $t, "))) + (C)0.5 * ", $t,
                    " * ((C)1 - m_tanh((C)0.7978845608028654 * (", $t, " + (C)0.044715 * ", $t, " * ", $t, " * ", $t, ")) * m_tanh((C)0.7978845608028654 * (", $t,
                    " + (C)0.044715 * ", $t, " * ", $t, " * ", $t, "))) * ((C)0.7978845608028654 * ((C)1 + (C)3 * (C)0.044715 * ", $t, " * ", $t, ")))"
                ),
            ]
        };
    }
    const F32: [&str; 4] = exprs!("(x + y)");
    const BF16: [&str; 4] = exprs!("b2f(f2b(x + b2f(f2b(y))))");
    const F16: [&str; 4] = exprs!("h2f(f2h(x + h2f(f2h(y))))");

    /// The kernel name and expression: forward or backward (`z` the output gradient), erf or tanh.
    fn expr(dt: DType, tanh: bool, bwd: bool) -> Option<(&'static str, &'static str)> {
        const NAMES: [[&str; 4]; 3] = [
            ["bias_gelu_f32_erf", "bias_gelu_f32_tanh", "bias_gelu_f32_erf_bwd", "bias_gelu_f32_tanh_bwd"],
            ["bias_gelu_bf16_erf", "bias_gelu_bf16_tanh", "bias_gelu_bf16_erf_bwd", "bias_gelu_bf16_tanh_bwd"],
            ["bias_gelu_f16_erf", "bias_gelu_f16_tanh", "bias_gelu_f16_erf_bwd", "bias_gelu_f16_tanh_bwd"],
        ];
        let (row, set) = match dt {
            DType::F32 => (0, &F32),
            DType::BF16 => (1, &BF16),
            DType::F16 => (2, &F16),
            _ => return None,
        };
        let i = tanh as usize + 2 * bwd as usize;
        Some((NAMES[row][i], set[i]))
    }

    /// `gelu(x + bias)` (forward) or its derivative times `g` (backward) in x's dtype.
    fn kernel(x: &Tensor, bias: &Tensor, g: Option<&Tensor>, tanh: bool) -> Result<Option<Tensor>> {
        let Some((name, e)) = expr(x.dtype(), tanh, g.is_some()) else { return Ok(None) };
        let crate::Device::Cuda(ord) = x.device() else { return Ok(None) };
        let out = ops::empty("bias_gelu", ord, x.dtype(), x.shape())?;
        let mut ins = vec![Opnd { t: x, load_as: DType::F32 }, Opnd { t: bias, load_as: DType::F32 }];
        if let Some(g) = g {
            ins.push(Opnd { t: g, load_as: DType::F32 });
        }
        map("bias_gelu", name, e, DType::F32, &out, &ins)?;
        Ok(Some(out))
    }

    /// The fused path: None where it does not apply (other dtypes, devices, layouts).
    pub(super) fn bias_gelu_cuda(x: &Tensor, bias: &Tensor, tanh: bool) -> Result<Option<Tensor>> {
        let dev = x.device();
        if !dev.is_cuda() || bias.device() != dev || !matches!(bias.dtype(), DType::F32 | DType::BF16 | DType::F16) || !x.is_contiguous() || !bias.is_contiguous() {
            return Ok(None);
        }
        let Some(y) = kernel(x, bias, None, tanh)? else { return Ok(None) };
        if !(x.requires_grad() || bias.requires_grad()) || !autograd::is_grad_enabled() {
            return Ok(Some(y));
        }
        let (sx, sb) = (Saved::new("bias_gelu", x), Saved::new("bias_gelu", bias));
        let n = bias.numel();
        autograd::record("BiasGelu", &[x, bias], std::slice::from_ref(&y), move |ctx, gr| {
            let (x, b) = (sx.get()?, sb.get()?);
            let g = &gr[0];
            if autograd::is_grad_enabled() {
                // differentiated again: the composite's rule through tensor ops
                let t = x.add(&b.to_dtype(x.dtype())?)?;
                let d = crate::ops::activation::gelu_grad_composite(&t, g, tanh)?;
                let db = if ctx.needs_input_grad(1) { Some(d.reshape(&[-1, n as i64])?.sum_dims(Some(&[0]), false, None)?.to_dtype(b.dtype())?) } else { None };
                return Ok(vec![ctx.needs_input_grad(0).then_some(d), db]);
            }
            let g = if g.dtype() == x.dtype() && g.is_contiguous() { g.clone() } else { g.to_dtype(x.dtype())?.contiguous()? };
            let d = kernel(&x, &b, Some(&g), tanh)?.ok_or_else(|| Error::dtype("bias_gelu", format!("no CUDA kernel for {}", x.dtype())))?;
            let db = if !ctx.needs_input_grad(1) {
                None
            } else {
                let rows = (x.numel() / n.max(1)) as i64;
                let d2 = d.reshape(&[rows, n as i64])?;
                // a float32 bias of a 16-bit activation: the column sum's float32 accumulator
                // written out as it is (one launch), as autocast's linear does for its bias
                let acc = if b.dtype() == DType::F32 && matches!(d.dtype(), DType::BF16 | DType::F16) { reduce::reduce_acc(&d2, &[0], reduce::RedOp::Sum, &[n])? } else { None };
                Some(match acc {
                    Some(s) => s,
                    None => d2.sum_dims(Some(&[0]), false, None)?.to_dtype(b.dtype())?,
                })
            };
            Ok(vec![ctx.needs_input_grad(0).then_some(d), db])
        });
        Ok(Some(y))
    }
}

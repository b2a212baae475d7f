//! `max_pool2d_with_indices_backward`: the gradient of 2-d max pooling as an op of its own,
//! scattering each output gradient to the input position its index names. Differentiable in
//! `grad_output` (a gather at the same indices); its derivative in `self` is zero, as in PyTorch.

use super::pool::pool_out;
use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// A pooling parameter of one value or one per spatial dim, as two values.
fn pair(op: &str, name: &str, v: &[i64], default: i64) -> Result<[i64; 2]> {
    match v {
        [] => Ok([default; 2]),
        [a] => Ok([*a, *a]),
        [a, b] => Ok([*a, *b]),
        _ => Err(Error::value(op, format!("{op}: {name} must either be a single int, or a tuple of two ints"))),
    }
}

/// `torch.ops.aten.max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride,
/// padding, dilation, ceil_mode, indices)`: zeros of `self`'s shape with `grad_output[..., o]`
/// added at the flat spatial position `indices[..., o]` of its plane. An empty `stride` means
/// `kernel_size`; the pooling parameters are checked against `grad_output`'s shape.
///
/// ```
/// # use magpie_core::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 2.0], &[1, 1, 2, 2])?;
/// let (out, idx) = magpie_core::ops::nn::max_pool(&x, 2, &[2], &[], &[0], &[1], false)?;
/// let g = out.ones_like()?;
/// let gi = magpie_core::ops::nn::max_pool2d_with_indices_backward(&g, &x, &[2], &[], &[0], &[1], false, &idx)?;
/// assert_eq!(gi.to_vec::<f32>()?, vec![0.0, 1.0, 0.0, 0.0]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn max_pool2d_with_indices_backward(
    grad_output: &Tensor,
    input: &Tensor,
    kernel_size: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
    indices: &Tensor,
) -> Result<Tensor> {
    let op = "max_pool2d_with_indices_backward";
    let nd = input.ndim();
    if nd != 3 && nd != 4 {
        return Err(Error::shape(op, format!("{op}: Expected 3D or 4D tensor for input, but got {:?}", input.shape())));
    }
    if !input.dtype().is_float() || grad_output.dtype() != input.dtype() {
        return Err(Error::dtype(op, format!("{op}: expected floating grad_output and input of one dtype, got {} and {}", grad_output.dtype(), input.dtype())));
    }
    if indices.dtype() != crate::DType::I64 {
        return Err(Error::dtype(op, format!("{op}: indices must be int64, got {}", indices.dtype())));
    }
    let k = pair(op, "kernel_size", kernel_size, 0)?;
    let s = if stride.is_empty() { k } else { pair(op, "stride", stride, 1)? };
    let p = pair(op, "padding", padding, 0)?;
    let d = pair(op, "dilation", dilation, 1)?;
    if k.iter().chain(&s).chain(&d).any(|&v| v <= 0) {
        return Err(Error::value(op, format!("{op}: kernel_size, stride and dilation must be greater than zero, got {k:?}, {s:?}, {d:?}")));
    }
    let (h, w) = (input.shape()[nd - 2] as i64, input.shape()[nd - 1] as i64);
    let mut expect = input.shape()[..nd - 2].to_vec();
    expect.extend([pool_out(h, k[0], s[0], p[0], d[0], ceil_mode).max(0) as usize, pool_out(w, k[1], s[1], p[1], d[1], ceil_mode).max(0) as usize]);
    if grad_output.shape() != expect.as_slice() || indices.shape() != expect.as_slice() {
        return Err(Error::shape(
            op,
            format!("{op}: expected grad_output and indices of shape {expect:?}, got {:?} and {:?}", grad_output.shape(), indices.shape()),
        ));
    }
    let plane = (h * w) as usize;
    let planes: usize = input.shape()[..nd - 2].iter().product();
    let l = expect[nd - 2] * expect[nd - 1];
    let idx = indices.reshape_to(&[planes, l])?;
    if idx.numel() > 0 {
        let v: Vec<i64> = idx.to_vec()?;
        if let Some(bad) = v.iter().find(|&&i| i < 0 || i as usize >= plane) {
            return Err(Error::index(op, format!("{op}: index {bad} is out of bounds for a plane of {plane} elements")));
        }
    }
    let out = {
        let _g = autograd::no_grad();
        let z = Tensor::zeros_on(&[planes, plane], input.dtype(), input.device())?;
        z.scatter_add(1, &idx, &grad_output.reshape_to(&[planes, l])?)?.reshape_to(input.shape())?
    };
    let go_shape = grad_output.shape().to_vec();
    autograd::record("MaxPool2DWithIndicesBackward", &[grad_output, input], std::slice::from_ref(&out), move |_, g| {
        let gg = g[0].reshape_to(&[planes, plane])?.gather(1, &idx)?.reshape_to(&go_shape)?;
        Ok(vec![Some(gg), None])
    });
    Ok(out)
}

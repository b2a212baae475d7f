//! `torch._chunk_cat`: split each tensor into `num_chunks` zero-padded chunks along a dim and
//! concatenate the chunks of all tensors chunk by chunk (the layout FSDP's all-gather uses).

use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch._chunk_cat(tensors, dim, num_chunks)`: each tensor is padded with zeros along `dim`
/// to a multiple of `num_chunks`, viewed as `[lead..., num_chunks, rest]`, and the views are
/// concatenated along the last dim.
///
/// ```
/// use magpie_core::{ops::chunk_cat::chunk_cat, Tensor};
/// let a = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?;
/// let b = Tensor::from_vec(vec![4f32, 5.], &[2])?;
/// let c = chunk_cat(&[a, b], 0, 2)?;
/// assert_eq!(c.shape(), &[2, 3]);
/// assert_eq!(c.to_vec::<f32>()?, vec![1., 2., 4., 3., 0., 5.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn chunk_cat(tensors: &[Tensor], dim: i64, num_chunks: i64) -> Result<Tensor> {
    const OP: &str = "_chunk_cat";
    if tensors.is_empty() {
        return Err(Error::value(OP, "_chunk_cat expects a non-empty input tensor list"));
    }
    if num_chunks < 1 {
        return Err(Error::value(OP, "_chunk_cat expects positive num_chunks"));
    }
    let nd0 = tensors[0].ndim();
    let same_nd = tensors.iter().all(|t| t.ndim() == nd0);
    if dim < 0 && !same_nd {
        return Err(Error::value(OP, "_chunk_cat expects non-negative dim when input tensors have different ndims"));
    }
    let d = if dim < 0 { dim + nd0 as i64 } else { dim };
    if d < 0 || tensors.iter().any(|t| d as usize >= t.ndim()) {
        return Err(Error::index(OP, "_chunk_cat expects dim < ndim for all input tensors"));
    }
    let d = d as usize;
    let lead = &tensors[0].shape()[..d];
    let dt = tensors[0].dtype();
    for t in tensors {
        if &t.shape()[..d] != lead {
            return Err(Error::shape(OP, "_chunk_cat expects same sizes of 0,...,dim-1 dimensions for all tensors"));
        }
        if t.dtype() != dt {
            return Err(Error::dtype(OP, "_chunk_cat expects all input tensors with the same dtype"));
        }
    }
    let k = num_chunks as usize;
    let mut parts = Vec::with_capacity(tensors.len());
    for t in tensors {
        let size = t.shape()[d];
        let chunk = size.div_ceil(k);
        let padded = chunk * k;
        let t = if padded > size {
            // zeros after the data along `dim`: pad takes (left, right) pairs from the last dim
            let mut pad = vec![0i64; 2 * (t.ndim() - d)];
            let at = 2 * (t.ndim() - 1 - d);
            pad[at + 1] = (padded - size) as i64;
            t.constant_pad_nd(&pad, crate::Scalar::Int(0))?
        } else {
            t.clone()
        };
        let mut shape: Vec<i64> = lead.iter().map(|&s| s as i64).collect();
        shape.push(num_chunks);
        let trailing: usize = t.shape()[d + 1..].iter().product();
        shape.push((chunk * trailing) as i64);
        parts.push(t.reshape(&shape)?);
    }
    crate::ops::shape_ops::cat(&parts, d as i64 + 1)
}

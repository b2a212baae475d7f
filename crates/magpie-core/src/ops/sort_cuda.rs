//! The CUDA path of the sort family (sort, argsort, msort, topk, kthvalue, median, nanmedian,
//! mode): the lines are moved to the last dim, sorted by `backend::cuda::sort`, and moved back;
//! the values record the gradient of a gather by the returned indices, as the CPU path's do.

use crate::tensor::Tensor;
use crate::Result;

/// What is kept of each sorted line.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) enum Pick {
    /// The first `k` (ascending, or descending when asked).
    Prefix(usize),
    /// The k-th smallest, 0-based, at the first position holding its value.
    Kth(usize),
    /// The lower median (`true`: of the non-NaN values).
    Median(bool),
    /// The most frequent value.
    Mode,
}

/// `(values, indices)` of `pick` over the lines of `x` along `dim`, computed on the GPU, with
/// `dim` of size `k` (prefix) or 1 (kept); None where `x` is not a CUDA tensor of a dtype the
/// kernels handle (the caller's CPU path then runs or falls back).
pub(crate) fn sorted_lines(op: &str, x: &Tensor, dim: usize, descending: bool, pick: Pick) -> Result<Option<(Tensor, Tensor)>> {
    #[cfg(feature = "cuda")]
    {
        imp::sorted_lines(op, x, dim, descending, pick)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (op, x, dim, descending, pick);
        Ok(None)
    }
}

/// Records the gradient of `vals = x.gather(dim, idx)` (for a 0-d `x`, the sum of the one or
/// no picked elements' gradients).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn record_gather(x: &Tensor, dim: usize, vals: &Tensor, idx: &Tensor) {
    if x.ndim() == 0 {
        crate::autograd::record("Gather", &[x], std::slice::from_ref(vals), |_, g| Ok(vec![Some(g[0].sum()?.reshape(&[])?)]));
        return;
    }
    let (shape, idx) = (x.shape().to_vec(), idx.clone());
    crate::autograd::record("Gather", &[x], std::slice::from_ref(vals), move |_, g| {
        Ok(vec![Some(crate::ops::reduce::select::scatter_add_dim(&shape, dim, &idx, &g[0])?)])
    });
}

#[cfg(feature = "cuda")]
mod imp {
    use super::{record_gather, Pick};
    use crate::backend::cuda::ops::empty;
    use crate::backend::cuda::sort::{sort_rows, supported, Select};
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Device, Result};

    pub(super) fn sorted_lines(op: &str, x: &Tensor, dim: usize, descending: bool, pick: Pick) -> Result<Option<(Tensor, Tensor)>> {
        let Device::Cuda(ord) = x.device() else { return Ok(None) };
        if !supported(x.dtype()) {
            return Ok(None);
        }
        let sel = match pick {
            Pick::Prefix(k) => Select::Prefix(k),
            Pick::Kth(k) => Select::Kth(k),
            Pick::Median(ignore_nan) => Select::Median { ignore_nan },
            Pick::Mode => Select::Mode,
        };
        let (vals, idx) = {
            let _ng = crate::autograd::no_grad();
            let x1 = if x.ndim() == 0 { x.detach().reshape(&[1])? } else { x.detach() };
            let nd = x1.ndim();
            let last = nd as i64 - 1;
            let n = x1.shape()[dim];
            let xm = x1.movedim(&[dim as i64], &[last])?.contiguous()?;
            let rows: usize = xm.shape()[..nd - 1].iter().product();
            let mut shape = xm.shape().to_vec();
            shape[nd - 1] = sel.width();
            let v = empty(op, ord, x.dtype(), &shape)?;
            let i = empty(op, ord, DType::I64, &shape)?;
            {
                let (xs, vs, is) = (xm.storage().read(), v.storage().write(), i.storage().write());
                sort_rows(op, (&xs, xm.layout(), xm.dtype()), (&vs, v.layout(), v.dtype()), (&is, i.layout(), DType::I64), rows, n, descending, sel)?;
            }
            let v = v.movedim(&[last], &[dim as i64])?.contiguous()?;
            let i = i.movedim(&[last], &[dim as i64])?.contiguous()?;
            // a 0-d input keeps its 0 dims, unless topk picked no element (shape [0], as the CPU)
            if x.ndim() == 0 && sel.width() == 1 { (v.reshape(&[])?, i.reshape(&[])?) } else { (v, i) }
        };
        record_gather(x, dim, &vals, &idx);
        Ok(Some((vals, idx)))
    }
}

//! Writing a tensor into a view of a copy: `select_scatter`, `slice_scatter`, `diagonal_scatter`,
//! `as_strided_scatter`, and the shared `view_scatter` they (and `diag_embed`, `index_put_`) use.

use crate::autograd;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

/// A view applied again to another tensor of the same shape (for backward rules).
pub(crate) type ViewFn = Arc<dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync>;

/// A copy of `x` with the view `f` of it replaced by `src`. Gradients: `x` gets the gradient with
/// the view zeroed, `src` gets the view of the gradient; both are tensor ops, so twice differentiable.
pub(crate) fn view_scatter(op: &str, x: &Tensor, src: &Tensor, f: ViewFn) -> Result<Tensor> {
    let out = {
        let _ng = autograd::no_grad();
        let out = x.copy()?;
        let v = f(&out)?;
        if v.shape() != src.shape() {
            return Err(Error::shape(
                op,
                format!("expected src to have a size equal to the slice of self. src size = {:?}, slice size = {:?}", src.shape(), v.shape()),
            ));
        }
        v.copy_(src)?;
        out
    };
    let name = op.to_string();
    let src_shape = src.shape().to_vec();
    autograd::record(op, &[x, src], &[out.clone()], move |ctx, g| {
        let gx = if ctx.needs_input_grad(0) {
            let z = Tensor::zeros_on(&src_shape, g[0].dtype(), g[0].device())?;
            Some(view_scatter(&name, &g[0], &z, f.clone())?)
        } else {
            None
        };
        let gs = if ctx.needs_input_grad(1) { Some(f(&g[0])?) } else { None };
        Ok(vec![gx, gs])
    });
    Ok(out)
}

impl Tensor {
    /// `torch.select_scatter(x, src, dim, index)`.
    pub fn select_scatter(&self, src: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
        self.select(dim, index)?;
        view_scatter("select_scatter", self, &src.to_dtype(self.dtype())?, Arc::new(move |t: &Tensor| t.select(dim, index)))
    }
    /// `torch.slice_scatter(x, src, dim, start, end, step)`.
    pub fn slice_scatter(&self, src: &Tensor, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor> {
        self.slice(dim, start, end, step)?;
        view_scatter("slice_scatter", self, &src.to_dtype(self.dtype())?, Arc::new(move |t: &Tensor| t.slice(dim, start, end, step)))
    }
    /// `torch.diagonal_scatter(x, src, offset, dim1, dim2)`.
    pub fn diagonal_scatter(&self, src: &Tensor, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        self.diagonal(offset, dim1, dim2)?;
        view_scatter("diagonal_scatter", self, &src.to_dtype(self.dtype())?, Arc::new(move |t: &Tensor| t.diagonal(offset, dim1, dim2)))
    }
    /// `torch.as_strided_scatter(x, src, size, stride, storage_offset)`: the strided view is taken
    /// of a contiguous copy of `x`, as PyTorch does.
    pub fn as_strided_scatter(&self, src: &Tensor, size: &[i64], stride: &[i64], storage_offset: Option<i64>) -> Result<Tensor> {
        let (sz, st) = (size.to_vec(), stride.to_vec());
        let off = storage_offset.unwrap_or(0);
        let f: ViewFn = Arc::new(move |t: &Tensor| {
            let c = t.contiguous()?;
            let base = c.storage_offset() as i64;
            let n = c.numel();
            // the view may only reach this tensor's own elements
            let l = crate::layout::Layout {
                shape: sz.iter().map(|&v| v.max(0) as usize).collect(),
                strides: st.iter().map(|&v| v.max(0) as usize).collect(),
                offset: off.max(0) as usize,
            };
            let (_, hi) = l.storage_span();
            if hi > n {
                return Err(Error::value(
                    "as_strided_scatter",
                    format!("setStorage: sizes {sz:?}, strides {st:?}, storage offset {off} requiring a storage size of {hi} are out of bounds for storage of size {n}"),
                ));
            }
            c.as_strided(&sz, &st, Some(off + base))
        });
        view_scatter("as_strided_scatter", self, &src.to_dtype(self.dtype())?, f)
    }
}

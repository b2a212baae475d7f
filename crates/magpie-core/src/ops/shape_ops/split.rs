//! Splitting a tensor into views: `split`, `split_with_sizes`, `chunk`, `tensor_split`,
//! `hsplit`/`vsplit`/`dsplit`, `unbind`. `split`, `split_with_sizes`, `chunk` and `unbind` are
//! PyTorch's multi-output view functions: one node (`SplitBackward0`, ...) joins the pieces'
//! gradients, and the pieces may not be written in place while autograd records. The others
//! return ordinary `narrow` / `slice` views.

use super::{cat, stack};
use crate::autograd;
use crate::shape::wrap_dim;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `indices_or_sections` of `tensor_split` / `hsplit`: a number of sections or split indices.
#[derive(Clone, Debug)]
pub enum Sections {
    Count(i64),
    Indices(Vec<i64>),
}

impl Tensor {
    fn dim_size(&self, op: &str, dim: i64) -> Result<(usize, usize)> {
        if self.ndim() == 0 {
            return Err(Error::shape(op, format!("{op} expects at least a 1-dimensional tensor")));
        }
        let d = wrap_dim(op, dim, self.ndim())?;
        Ok((d, self.shape()[d]))
    }
    /// `torch.split(x, split_size, dim)`: pieces of `split_size` (the last may be smaller).
    pub fn split(&self, split_size: i64, dim: i64) -> Result<Vec<Tensor>> {
        self.split_views(split_size, dim, true)
    }
    /// `torch.unsafe_split`: [`Tensor::split`] whose pieces may be written in place (PyTorch
    /// returns them as tensors that autograd does not treat as views).
    pub fn unsafe_split(&self, split_size: i64, dim: i64) -> Result<Vec<Tensor>> {
        self.split_views(split_size, dim, false)
    }
    fn split_views(&self, split_size: i64, dim: i64, safe: bool) -> Result<Vec<Tensor>> {
        let op = "split";
        let (d, n) = self.dim_size(op, dim)?;
        if split_size < 0 {
            return Err(Error::value(op, format!("split expects split_size be non-negative, but got split_size={split_size}")));
        }
        let s = split_size as usize;
        if s == 0 && n != 0 {
            return Err(Error::value(op, format!("split_size can only be 0 if dimension size is 0, but got dimension size of {n}")));
        }
        let count = if s == 0 { 1 } else { n.div_ceil(s).max(1) };
        let lens: Vec<usize> = (0..count).map(|i| s.min(n - (i * s).min(n))).collect();
        self.multi_output_views("Split", d, &lens, false, safe)
    }
    /// `torch.split_with_sizes(x, sizes, dim)`: pieces of the given sizes, which must sum to the dim's size.
    pub fn split_with_sizes(&self, sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
        self.split_with_sizes_views(sizes, dim, true)
    }
    /// `torch.unsafe_split_with_sizes`: [`Tensor::split_with_sizes`] whose pieces may be written in place.
    pub fn unsafe_split_with_sizes(&self, sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
        self.split_with_sizes_views(sizes, dim, false)
    }
    fn split_with_sizes_views(&self, sizes: &[i64], dim: i64, safe: bool) -> Result<Vec<Tensor>> {
        let op = "split_with_sizes";
        let (d, n) = self.dim_size(op, dim)?;
        if sizes.iter().any(|&s| s < 0) || sizes.iter().sum::<i64>() != n as i64 {
            return Err(Error::value(
                op,
                format!("split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension {d}), but got split_sizes={sizes:?}"),
            ));
        }
        let lens: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
        self.multi_output_views("SplitWithSizes", d, &lens, false, safe)
    }
    /// The views of a multi-output view function: along dim `d`, consecutive pieces of `lens`
    /// (each of length 1 with the dim dropped when `drop_dim`, for `unbind`). One node `name`
    /// takes all their gradients back, joined along `d` (a missing one counts as zeros), which
    /// is differentiable again. With `safe`, the pieces are marked so that writing one in place
    /// while autograd records is refused, as PyTorch does for these functions.
    fn multi_output_views(&self, name: &str, d: usize, lens: &[usize], drop_dim: bool, safe: bool) -> Result<Vec<Tensor>> {
        let pieces = {
            let _ng = autograd::no_grad();
            let mut off = 0;
            let mut out = Vec::with_capacity(lens.len());
            for &len in lens {
                let mut l = self.layout().narrow(name, d, off, len)?;
                if drop_dim {
                    l.shape.remove(d);
                    l.strides.remove(d);
                }
                out.push(self.with_layout(l));
                off += len;
            }
            out
        };
        autograd::record(name, &[self], &pieces, move |_, g| {
            if !drop_dim && !autograd::is_grad_enabled() {
                if let Some(t) = joined_view(g, d) {
                    return Ok(vec![Some(t)]);
                }
            }
            Ok(vec![Some(if drop_dim { stack(g, d as i64)? } else { cat(g, d as i64)? })])
        });
        if safe {
            autograd::view::mark_multi_output(&pieces);
        }
        Ok(pieces)
    }
    /// `torch.chunk(x, chunks, dim)`: at most `chunks` pieces of equal size (the last may be smaller).
    pub fn chunk(&self, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
        self.chunk_views(chunks, dim, true)
    }
    /// `torch.unsafe_chunk`: [`Tensor::chunk`] whose pieces may be written in place.
    pub fn unsafe_chunk(&self, chunks: i64, dim: i64) -> Result<Vec<Tensor>> {
        self.chunk_views(chunks, dim, false)
    }
    fn chunk_views(&self, chunks: i64, dim: i64, safe: bool) -> Result<Vec<Tensor>> {
        let op = "chunk";
        let (_, n) = self.dim_size(op, dim)?;
        if chunks <= 0 {
            return Err(Error::value(op, format!("chunk expects `chunks` to be greater than 0, got: {chunks}")));
        }
        let size = n.div_ceil(chunks as usize);
        if size == 0 && n == 0 {
            return self.split_with_sizes_views(&vec![0; chunks as usize], dim, safe);
        }
        self.split_views(size as i64, dim, safe)
    }
    /// `torch.tensor_split(x, sections_or_indices, dim)`: NumPy's `array_split`.
    pub fn tensor_split(&self, sections: &Sections, dim: i64) -> Result<Vec<Tensor>> {
        let op = "tensor_split";
        let (d, n) = self.dim_size(op, dim)?;
        match sections {
            Sections::Count(s) => {
                if *s <= 0 {
                    return Err(Error::value(op, format!("number of sections must be larger than 0, got {s}")));
                }
                let s = *s as usize;
                let (base, extra) = (n / s, n % s);
                let mut off = 0usize;
                (0..s)
                    .map(|i| {
                        let len = base + usize::from(i < extra);
                        off += len;
                        self.narrow(d as i64, (off - len) as i64, len as i64)
                    })
                    .collect()
            }
            Sections::Indices(idx) => {
                let mut out = Vec::with_capacity(idx.len() + 1);
                let mut start = 0i64;
                for &i in idx {
                    out.push(self.slice(d as i64, Some(start), Some(i), 1)?);
                    start = i;
                }
                out.push(self.slice(d as i64, Some(start), None, 1)?);
                Ok(out)
            }
        }
    }
    fn hvd_split(&self, op: &str, min_dims: usize, dim: usize, sections: &Sections) -> Result<Vec<Tensor>> {
        if self.ndim() < min_dims {
            return Err(Error::shape(
                op,
                format!("torch.{op} requires a tensor with at least {min_dims} dimension, but got a tensor with {} dimensions!", self.ndim()),
            ));
        }
        if let Sections::Count(s) = sections {
            let n = self.shape()[dim] as i64;
            if *s == 0 || n % s != 0 {
                return Err(Error::value(
                    op,
                    format!("torch.{op} attempted to split along dimension {dim}, but the size of the dimension {n} is not divisible by the split_size {s}!"),
                ));
            }
        }
        self.tensor_split(sections, dim as i64)
    }
    /// `torch.hsplit(x, sections)`: split along dim 1 (dim 0 for 1-d tensors).
    pub fn hsplit(&self, sections: &Sections) -> Result<Vec<Tensor>> {
        let dim = if self.ndim() == 1 { 0 } else { 1 };
        self.hvd_split("hsplit", 1, dim, sections)
    }
    /// `torch.vsplit(x, sections)`: split along dim 0.
    pub fn vsplit(&self, sections: &Sections) -> Result<Vec<Tensor>> {
        self.hvd_split("vsplit", 2, 0, sections)
    }
    /// `torch.dsplit(x, sections)`: split along dim 2.
    pub fn dsplit(&self, sections: &Sections) -> Result<Vec<Tensor>> {
        self.hvd_split("dsplit", 3, 2, sections)
    }
    /// `torch.unbind(x, dim)`: the slices along `dim`, each without that dim.
    pub fn unbind(&self, dim: i64) -> Result<Vec<Tensor>> {
        if self.ndim() == 0 {
            return Err(Error::index("unbind", "Dimension specified as 0 but tensor has no dimensions"));
        }
        let d = wrap_dim("unbind", dim, self.ndim())?;
        self.multi_output_views("Unbind", d, &vec![1; self.shape()[d]], true, true)
    }
}

/// `cat(g, d)` as a view, when the pieces already sit side by side along `d` in one storage with
/// equal strides and the joined layout is dense (no element twice): a backward kernel that wrote
/// the pieces' gradients into one buffer in the layout of the split tensor (the flash attention
/// backward does for a fused q/k/v projection) then costs no copy. None otherwise; only for
/// gradients that are not differentiated again (the view records nothing).
fn joined_view(g: &[Tensor], d: usize) -> Option<Tensor> {
    let first = g.first()?;
    let (nd, st) = (first.ndim(), first.strides());
    if d >= nd || g.len() < 2 {
        return None;
    }
    let mut shape = first.shape().to_vec();
    shape[d] = 0;
    let mut next = first.storage_offset();
    for t in g {
        let same_dims = t.ndim() == nd && t.shape().iter().enumerate().all(|(i, &n)| i == d || n == first.shape()[i]);
        if !t.shares_storage(first) || t.dtype() != first.dtype() || t.strides() != st || !same_dims || t.requires_grad() || t.storage_offset() != next {
            return None;
        }
        shape[d] += t.shape()[d];
        next += t.shape()[d] * st[d];
    }
    let l = crate::layout::Layout { shape, strides: st.to_vec(), offset: first.storage_offset() };
    l.is_dense().then(|| first.with_layout(l))
}

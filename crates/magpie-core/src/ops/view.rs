//! View ops: new layouts over the same storage (`view`, `transpose`, `narrow`, `expand`, ...),
//! and their gradients.

use crate::autograd;
use crate::layout::Layout;
use crate::shape::{infer_size, wrap_dim, wrap_dims};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

type ViewFn = Arc<dyn Fn(&Tensor) -> Result<Tensor> + Send + Sync>;

impl Tensor {
    /// Makes a view with `layout` and records its gradient: the gradient is scattered (added)
    /// into a zero tensor of this shape at the view's positions. `f` re-applies the view, so the
    /// backward is itself differentiable.
    fn make_view(&self, name: &str, layout: Layout, f: ViewFn) -> Tensor {
        let out = self.with_layout(layout);
        let shape = self.shape().to_vec();
        autograd::record(name, &[self], &[out.clone()], move |_, g| Ok(vec![Some(unview(&g[0], &shape, f.clone())?)]));
        out
    }

    /// `tensor.view(shape)`: fails if the strides do not allow it (use `reshape`).
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        let _prof = crate::profiler::op("view", &[self]);
        let new = infer_size("view", shape, self.numel())?;
        let l = self.layout().view(&new).ok_or_else(|| {
            Error::shape(
                "view",
                "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
            )
        })?;
        let out = self.with_layout(l);
        let old: Vec<i64> = self.shape().iter().map(|&s| s as i64).collect();
        autograd::record("View", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].reshape(&old)?)]));
        Ok(out)
    }
    /// `tensor.reshape(shape)`: a view when possible, else a copy.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let _prof = crate::profiler::op("reshape", &[self]);
        let new = infer_size("reshape", shape, self.numel())?;
        if self.layout().view(&new).is_some() {
            self.view(shape)
        } else {
            self.contiguous()?.view(shape)
        }
    }
    /// `tensor.reshape(shape)` with `usize` sizes.
    pub fn reshape_to(&self, shape: &[usize]) -> Result<Tensor> {
        let s: Vec<i64> = shape.iter().map(|&x| x as i64).collect();
        self.reshape(&s)
    }
    /// `tensor.transpose(d0, d1)`.
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Tensor> {
        let _prof = crate::profiler::op("transpose", &[self]);
        let n = self.ndim();
        let (a, b) = (wrap_dim("transpose", d0, n)?, wrap_dim("transpose", d1, n)?);
        if n == 0 {
            return Ok(self.alias());
        }
        let out = self.with_layout(self.layout().transpose(a, b));
        autograd::record("Transpose", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].transpose(d0, d1)?)]));
        Ok(out)
    }
    /// A view of the same data with the same layout (records an identity for autograd).
    pub fn alias(&self) -> Tensor {
        let out = self.with_layout(self.layout().clone());
        autograd::record("Alias", &[self], &[out.clone()], |_, g| Ok(vec![Some(g[0].clone())]));
        out
    }
    /// `tensor.t()`: transpose of a tensor with at most 2 dims.
    pub fn t(&self) -> Result<Tensor> {
        if self.ndim() > 2 {
            return Err(Error::shape("t", format!("t() expects a tensor with <= 2 dimensions, but self is {}D", self.ndim())));
        }
        if self.ndim() < 2 {
            return Ok(self.alias());
        }
        self.transpose(0, 1)
    }
    /// `tensor.mT`: transpose of the last two dims.
    pub fn mt(&self) -> Result<Tensor> {
        if self.ndim() < 2 {
            return Err(Error::shape("mT", format!("tensor.mT is only supported on matrices or batches of matrices. Got {}-D tensor.", self.ndim())));
        }
        self.transpose(-2, -1)
    }
    /// `tensor.permute(dims)`.
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        let _prof = crate::profiler::op("permute", &[self]);
        let l = self.layout().permute("permute", dims)?;
        let d = wrap_dims("permute", dims, self.ndim())?;
        let mut inv = vec![0i64; d.len()];
        for (i, &x) in d.iter().enumerate() {
            inv[x] = i as i64;
        }
        let out = self.with_layout(l);
        autograd::record("Permute", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].permute(&inv)?)]));
        Ok(out)
    }
    /// `tensor.narrow(dim, start, length)`.
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(Error::index("narrow", "narrow() cannot be applied to a 0-dim tensor."));
        }
        let d = wrap_dim("narrow", dim, self.ndim())?;
        let size = self.shape()[d] as i64;
        let s = if start < 0 { start + size } else { start };
        if s < 0 || s > size {
            return Err(Error::index("narrow", format!("start ({start}) is out of bounds for dimension of size {size}")));
        }
        if length < 0 {
            return Err(Error::value("narrow", "narrow(): length must be non-negative."));
        }
        let l = self.layout().narrow("narrow", d, s as usize, length as usize)?;
        Ok(self.make_view("Narrow", l, Arc::new(move |t: &Tensor| t.narrow(dim, start, length))))
    }
    /// `tensor.select(dim, index)`.
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(Error::index("select", "select() cannot be applied to a 0-dim tensor."));
        }
        let d = wrap_dim("select", dim, self.ndim())?;
        let size = self.shape()[d] as i64;
        if index < -size || index >= size {
            return Err(Error::index(
                "select",
                format!("index {index} out of range for tensor of size {:?} at dimension {d}", self.shape()),
            ));
        }
        let i = if index < 0 { index + size } else { index } as usize;
        let l = self.layout().select(d, i);
        Ok(self.make_view("Select", l, Arc::new(move |t: &Tensor| t.select(dim, index))))
    }
    /// `tensor[start:end:step]` along `dim` (Python slice semantics: clamped bounds, negative indices).
    pub fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(Error::index("slice", "slice() cannot be applied to a 0-dim tensor."));
        }
        if step <= 0 {
            return Err(Error::value("slice", "slice step must be positive"));
        }
        let d = wrap_dim("slice", dim, self.ndim())?;
        let size = self.shape()[d] as i64;
        let clamp = |v: i64| -> usize { (if v < 0 { v + size } else { v }).clamp(0, size) as usize };
        let s = start.map_or(0, clamp);
        let e = end.map_or(size as usize, clamp).max(s);
        let l = self.layout().slice(d, s, e, step as usize);
        Ok(self.make_view("Slice", l, Arc::new(move |t: &Tensor| t.slice(dim, start, end, step))))
    }
    /// `tensor.expand(shape)` / `torch.broadcast_to`: `-1` keeps a size.
    pub fn expand(&self, shape: &[i64]) -> Result<Tensor> {
        if shape.len() < self.ndim() {
            return Err(Error::shape(
                "expand",
                format!("the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})", shape.len(), self.ndim()),
            ));
        }
        let lead = shape.len() - self.ndim();
        let mut target = Vec::with_capacity(shape.len());
        for (i, &s) in shape.iter().enumerate() {
            if s == -1 {
                if i < lead {
                    return Err(Error::shape("expand", "the expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension"));
                }
                target.push(self.shape()[i - lead]);
            } else if s < 0 {
                return Err(Error::shape("expand", format!("invalid size {s}")));
            } else {
                target.push(s as usize);
            }
        }
        self.broadcast_to(&target)
    }
    /// `torch.broadcast_to(tensor, shape)`.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let l = self.layout().broadcast_to("expand", shape)?;
        let out = self.with_layout(l);
        let orig = self.shape().to_vec();
        autograd::record("Expand", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].sum_to_size(&orig)?)]));
        Ok(out)
    }
    /// `tensor.expand_as(other)`.
    pub fn expand_as(&self, other: &Tensor) -> Result<Tensor> {
        self.broadcast_to(other.shape())
    }
    /// `tensor.unsqueeze(dim)`.
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim("unsqueeze", dim, self.ndim() + 1)?;
        let l = self.layout().unsqueeze(d);
        let out = self.with_layout(l);
        autograd::record("Unsqueeze", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].squeeze_dims(&[d as i64])?)]));
        Ok(out)
    }
    /// `tensor.squeeze()`: removes every size-1 dim.
    pub fn squeeze(&self) -> Result<Tensor> {
        let dims: Vec<i64> = (0..self.ndim() as i64).collect();
        self.squeeze_dims(&dims)
    }
    /// `tensor.squeeze(dims)`: removes the listed dims that have size 1.
    pub fn squeeze_dims(&self, dims: &[i64]) -> Result<Tensor> {
        let d = wrap_dims("squeeze", dims, self.ndim())?;
        let l = self.layout().squeeze_dims(&d);
        let out = self.with_layout(l);
        let orig: Vec<i64> = self.shape().iter().map(|&s| s as i64).collect();
        autograd::record("Squeeze", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].reshape(&orig)?)]));
        Ok(out)
    }
    /// `tensor.flatten(start_dim, end_dim)`.
    pub fn flatten(&self, start_dim: i64, end_dim: i64) -> Result<Tensor> {
        if self.ndim() == 0 {
            return self.reshape(&[1]);
        }
        let s = wrap_dim("flatten", start_dim, self.ndim())?;
        let e = wrap_dim("flatten", end_dim, self.ndim())?;
        if s > e {
            return Err(Error::value("flatten", "flatten() has invalid args: start_dim cannot come after end_dim"));
        }
        let mut shape: Vec<i64> = self.shape()[..s].iter().map(|&x| x as i64).collect();
        shape.push(self.shape()[s..=e].iter().product::<usize>() as i64);
        shape.extend(self.shape()[e + 1..].iter().map(|&x| x as i64));
        self.reshape(&shape)
    }
    /// `tensor.unflatten(dim, sizes)`.
    pub fn unflatten(&self, dim: i64, sizes: &[i64]) -> Result<Tensor> {
        let d = wrap_dim("unflatten", dim, self.ndim())?;
        if sizes.is_empty() {
            return Err(Error::value("unflatten", "unflatten: sizes must be non-empty"));
        }
        let inner = infer_size("unflatten", sizes, *self.shape().get(d).unwrap_or(&1))?;
        let mut shape: Vec<i64> = self.shape()[..d].iter().map(|&x| x as i64).collect();
        shape.extend(inner.iter().map(|&x| x as i64));
        shape.extend(self.shape()[d + 1..].iter().map(|&x| x as i64));
        self.reshape(&shape)
    }
    /// `tensor.unfold(dim, size, step)`: sliding windows as a new last dim.
    pub fn unfold(&self, dim: i64, size: i64, step: i64) -> Result<Tensor> {
        let d = wrap_dim("unfold", dim, self.ndim())?;
        if size < 0 || step <= 0 {
            return Err(Error::value("unfold", format!("size ({size}) must be non-negative and step ({step}) positive")));
        }
        let l = self.layout().unfold("unfold", d, size as usize, step as usize)?;
        Ok(self.make_view("Unfold", l, Arc::new(move |t: &Tensor| t.unfold(dim, size, step))))
    }
    /// `tensor.diagonal(offset, dim1, dim2)`.
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        if self.ndim() < 2 {
            return Err(Error::shape("diagonal", format!("diagonal dimensions requires ndim larger than 1, got {}", self.ndim())));
        }
        let a = wrap_dim("diagonal", dim1, self.ndim())?;
        let b = wrap_dim("diagonal", dim2, self.ndim())?;
        if a == b {
            return Err(Error::value("diagonal", format!("diagonal dimensions cannot be identical {dim1}, {dim2}")));
        }
        let l = self.layout().diagonal(offset, a, b);
        Ok(self.make_view("Diagonal", l, Arc::new(move |t: &Tensor| t.diagonal(offset, dim1, dim2))))
    }
    /// `torch.as_strided(tensor, size, stride, storage_offset)`: any layout within the storage.
    pub fn as_strided(&self, size: &[i64], stride: &[i64], storage_offset: Option<i64>) -> Result<Tensor> {
        if size.len() != stride.len() {
            return Err(Error::shape("as_strided", format!("mismatch in length of strides and shape ({} vs {})", stride.len(), size.len())));
        }
        if size.iter().chain(stride).any(|&v| v < 0) {
            return Err(Error::value("as_strided", "as_strided: negative sizes and strides are not supported"));
        }
        let offset = storage_offset.unwrap_or(self.storage_offset() as i64);
        if offset < 0 {
            return Err(Error::value("as_strided", format!("Tensor: invalid storage offset {offset}")));
        }
        let l = Layout {
            shape: size.iter().map(|&v| v as usize).collect(),
            strides: stride.iter().map(|&v| v as usize).collect(),
            offset: offset as usize,
        };
        let (_, hi) = l.storage_span();
        if hi > self.storage().read().len() {
            return Err(Error::value(
                "as_strided",
                format!("setStorage: sizes {size:?}, strides {stride:?}, storage offset {offset} require {hi} elements but the storage has {}", self.storage().read().len()),
            ));
        }
        // The gradient goes back through the storage: scattered through the output's layout,
        // read through this tensor's (exact for any input that does not repeat a storage position).
        let overlapping = self.layout().shape.iter().zip(&self.layout().strides).any(|(&n, &st)| st == 0 && n > 1);
        if overlapping && self.requires_grad() && autograd::is_grad_enabled() {
            return Err(Error::unsupported("as_strided", "gradient of as_strided on an input whose elements share memory"));
        }
        let out = self.with_layout(l.clone());
        let from = self.layout().clone();
        autograd::record("AsStrided", &[self], &[out.clone()], move |_, g| Ok(vec![Some(autograd::view::restride(&g[0], &l, &from)?)]));
        Ok(out)
    }
    /// `tensor.movedim(source, destination)`.
    pub fn movedim(&self, src: &[i64], dst: &[i64]) -> Result<Tensor> {
        if src.len() != dst.len() {
            return Err(Error::value("movedim", format!("movedim: Invalid source or destination dims: source ({src:?} dims) should contain the same number of dims as destination ({dst:?} dims)")));
        }
        let n = self.ndim();
        let s = wrap_dims("movedim", src, n)?;
        let d = wrap_dims("movedim", dst, n)?;
        let mut order: Vec<Option<usize>> = vec![None; n];
        for (&a, &b) in s.iter().zip(&d) {
            order[b] = Some(a);
        }
        let mut rest = (0..n).filter(|i| !s.contains(i));
        let perm: Vec<i64> = order.into_iter().map(|o| o.or_else(|| rest.next()).unwrap_or(0) as i64).collect();
        self.permute(&perm)
    }
}

/// The adjoint of a view: a zero tensor of `shape` with `g` added at the positions the view `f`
/// selects. Its own gradient is the view again, so views stay twice differentiable.
fn unview(g: &Tensor, shape: &[usize], f: ViewFn) -> Result<Tensor> {
    let z = {
        let _ng = autograd::no_grad();
        let z = Tensor::zeros_on(shape, g.dtype(), g.device())?;
        let v = f(&z)?;
        crate::ops::binary::add_into_view(&v, g)?;
        z
    };
    autograd::record("Unview", &[g], &[z.clone()], move |_, gg| Ok(vec![Some(f(&gg[0])?)]));
    Ok(z)
}

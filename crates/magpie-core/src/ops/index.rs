//! Index ops: `gather`, `scatter` (+ reductions), `index_select`, `index_add`/`copy`/`fill`/`reduce`,
//! `take`, `put`, `take_along_dim`, `masked_select`, `masked_scatter`, `nonzero`, `argwhere`.
//! All are written on top of advanced indexing (`ops::indexing`), so they share its validation
//! and its gradients (gather <-> scatter_add, index_select <-> index_add).

use crate::autograd;
use crate::backend::cpu;
use crate::dtype::DType;
use crate::ops::indexing::{front, index, index_put, scatter_reduce_raw, Reduce};
use crate::scalar::Scalar;
use crate::shape::wrap_dim;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// A scalar or a 0-d tensor (`index_fill`'s and `fill`'s `value`).
#[derive(Clone, Debug)]
pub enum FillValue {
    Scalar(Scalar),
    Tensor(Tensor),
}

impl FillValue {
    /// The value as a 0-d tensor of `dtype` (differentiable for tensors).
    pub fn to_tensor(&self, op: &str, dtype: DType) -> Result<Tensor> {
        match self {
            FillValue::Scalar(s) => Tensor::scalar_tensor(*s, dtype, crate::Device::Cpu),
            FillValue::Tensor(t) => {
                if t.ndim() != 0 {
                    return Err(Error::value(
                        op,
                        format!("{op} only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).", t.ndim()),
                    ));
                }
                t.to_dtype(dtype)
            }
        }
    }
}

fn check_long(op: &str, idx: &Tensor) -> Result<()> {
    if !matches!(idx.dtype(), DType::I64 | DType::I32) {
        return Err(Error::dtype(op, format!("{op}(): Expected dtype int32/int64 for index, got {}", idx.dtype().name())));
    }
    Ok(())
}

fn check_int_index(op: &str, idx: &Tensor) -> Result<()> {
    if !matches!(idx.dtype(), DType::I64 | DType::I32) {
        return Err(Error::dtype(op, format!("{op}(): Expected dtype int32/int64 for index, got {}", idx.dtype().name())));
    }
    Ok(())
}

/// `index` wraps negative positions the Python way; `index_select` does not (PyTorch raises).
fn reject_negative(op: &str, idx: &Tensor) -> Result<()> {
    if idx.numel() > 0 && matches!(idx.min()?.item()?, Scalar::Int(v) if v < 0) {
        return Err(Error::index(op, "index out of range in self"));
    }
    Ok(())
}

fn check_same_dtype(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(op, format!("{op}(): Expected self.dtype to be equal to src.dtype, got {} and {}", a.dtype().name(), b.dtype().name())));
    }
    Ok(())
}

/// The index list that makes `x[list]` equal `gather(x, dim, idx)`: `idx` at `dim`, aranges elsewhere.
fn along_dim_indices(idx: &Tensor, dim: usize) -> Result<Vec<Option<Tensor>>> {
    let nd = idx.ndim();
    let mut out = Vec::with_capacity(nd);
    for d in 0..nd {
        if d == dim {
            out.push(Some(idx.clone()));
        } else {
            let n = idx.shape()[d];
            let mut shape = vec![1i64; nd];
            shape[d] = n as i64;
            out.push(Some(Tensor::arange(0i64, n as i64, 1i64)?.to_device(idx.device())?.reshape(&shape)?));
        }
    }
    Ok(out)
}

/// 0-d tensors act as 1-element 1-d tensors in the dim-wise index ops.
fn as_1d(t: &Tensor) -> Result<Tensor> {
    if t.ndim() == 0 {
        t.reshape(&[1])
    } else {
        Ok(t.clone())
    }
}

fn shape_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&x| x as i64).collect()
}

/// Checks `gather`/`scatter` shapes: same ndim, and index no larger than self (except at `dim`) and src.
fn check_scatter_shapes(op: &str, x: &Tensor, dim: usize, idx: &Tensor, src: Option<&Tensor>) -> Result<()> {
    let xn = x.ndim().max(1);
    let inn = idx.ndim().max(1);
    if idx.numel() == 0 {
        return Ok(());
    }
    if xn != inn {
        return Err(Error::shape(op, "Index tensor must have the same number of dimensions as self tensor"));
    }
    if let Some(s) = src {
        if s.ndim().max(1) != inn {
            return Err(Error::shape(op, "Index tensor must have the same number of dimensions as src tensor"));
        }
    }
    for d in 0..inn {
        let i = *idx.shape().get(d).unwrap_or(&1);
        let xs = *x.shape().get(d).unwrap_or(&1);
        if d != dim && i > xs {
            return Err(Error::shape(
                op,
                format!("Size does not match at dimension {d} expected index {:?} to be no larger than self {:?} apart from dimension {dim}", idx.shape(), x.shape()),
            ));
        }
        if let Some(s) = src {
            let ss = *s.shape().get(d).unwrap_or(&1);
            if i > ss {
                return Err(Error::shape(op, format!("Expected index {:?} to be no larger than src {:?}", idx.shape(), s.shape())));
            }
        }
    }
    Ok(())
}

impl Tensor {
    /// `torch.nonzero(x)`: the coordinates of nonzero elements, `[n, ndim]` int64.
    pub fn nonzero(&self) -> Result<Tensor> {
        #[cfg(feature = "cuda")]
        if self.device().is_cuda() {
            if let Some(out) = crate::backend::cuda::adv_index::nonzero(self)? {
                return Ok(out);
            }
        }
        let v: Vec<bool> = cpu::to_vec(self)?;
        let nd = self.ndim();
        let shape = self.shape().to_vec();
        let n = v.iter().filter(|&&b| b).count();
        let mut out = Vec::with_capacity(n * nd);
        let mut coord = vec![0usize; nd];
        for &b in &v {
            if b {
                out.extend(coord.iter().map(|&c| c as i64));
            }
            for d in (0..nd).rev() {
                coord[d] += 1;
                if coord[d] < shape[d] {
                    break;
                }
                coord[d] = 0;
            }
        }
        Tensor::from_vec(out, &[n, nd])
    }
    /// `torch.nonzero(x, as_tuple=True)`: one 1-d index tensor per dim (a 0-d input counts as 1-d).
    pub fn nonzero_tuple(&self) -> Result<Vec<Tensor>> {
        let x = as_1d(self)?;
        let nz = x.nonzero()?;
        (0..x.ndim()).map(|d| nz.select(1, d as i64)?.contiguous()).collect()
    }
    /// `torch.nonzero_static(x, size, fill_value)`: `nonzero` cut or padded to `size` rows.
    pub fn nonzero_static(&self, size: i64, fill_value: i64) -> Result<Tensor> {
        if size < 0 {
            return Err(Error::value("nonzero_static", format!("nonzero_static: 'size' must be an non-negative integer, got {size}")));
        }
        let nz = self.nonzero()?;
        let nd = self.ndim();
        if nz.device().is_cuda() {
            // cut or padded on the device (the count was read back by nonzero)
            let (n, s) = (nz.shape()[0], size as usize);
            if n >= s {
                return nz.narrow(0, 0, size)?.contiguous();
            }
            let pad = Tensor::full_on(&[s - n, nd], fill_value, DType::I64, nz.device())?;
            return crate::ops::shape_ops::cat(&[nz, pad], 0);
        }
        let mut v: Vec<i64> = cpu::to_vec(&nz)?;
        v.resize(size as usize * nd, fill_value);
        Tensor::from_vec(v, &[size as usize, nd])
    }
    /// `torch.argwhere(x)` (= `nonzero`).
    pub fn argwhere(&self) -> Result<Tensor> {
        self.nonzero()
    }

    /// `torch.index_select(x, dim, index)`: the slices at `index` (1-d or 0-d) along `dim`.
    pub fn index_select(&self, dim: i64, idx: &Tensor) -> Result<Tensor> {
        let op = "index_select";
        check_int_index(op, idx)?;
        if idx.ndim() > 1 {
            return Err(Error::index(op, "index_select(): Index is supposed to be a vector"));
        }
        let d = wrap_dim(op, dim, self.ndim())?;
        if self.ndim() == 0 {
            reject_negative(op, idx)?;
            let r = index(&self.reshape(&[1])?, &[Some(as_1d(idx)?)])?;
            return if idx.numel() == 1 { r.reshape(&[]) } else { Ok(r) };
        }
        #[cfg(feature = "cuda")]
        if self.device().is_cuda() && idx.device().is_cuda() {
            if let Some(out) = crate::backend::cuda::index::index_select(self, d, idx)? {
                let (shape, idx_c) = (self.shape().to_vec(), idx.clone());
                autograd::record("IndexSelect", &[self], &[out.clone()], move |_, g| {
                    let z = Tensor::zeros_on(&shape, g[0].dtype(), g[0].device())?;
                    Ok(vec![Some(z.index_add(d as i64, &idx_c, &g[0], Scalar::Int(1))?)])
                });
                return Ok(out);
            }
        }
        reject_negative(op, idx)?;
        let mut list: Vec<Option<Tensor>> = vec![None; d];
        list.push(Some(as_1d(idx)?));
        index(self, &list)
    }

    /// `index_put` along one dim with a 1-d index: the shared body of `index_add` / `index_copy` / `index_fill`.
    fn index_dim_put(&self, op: &str, dim: i64, idx: &Tensor, src: &Tensor, accumulate: bool, check_src: bool) -> Result<Tensor> {
        check_int_index(op, idx)?;
        if idx.ndim() > 1 {
            return Err(Error::index(op, format!("{op}(): Index is supposed to be a vector")));
        }
        let d = wrap_dim(op, dim, self.ndim())?;
        let zero_d = self.ndim() == 0;
        let x = as_1d(self)?;
        let i = as_1d(idx)?;
        let s = if check_src {
            let s = if zero_d || src.ndim() == 0 { src.reshape(&shape_i64(&[src.numel()]))? } else { src.clone() };
            let mut want = x.shape().to_vec();
            want[d] = i.numel();
            let ok = s.ndim() == x.ndim() && s.shape().iter().enumerate().all(|(k, &v)| k == d || v == x.shape()[k]);
            if !ok {
                return Err(Error::shape(
                    op,
                    format!("source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {:?} source.shape = {:?}", self.shape(), src.shape()),
                ));
            }
            if s.shape()[d] != i.numel() {
                return Err(Error::index(op, format!("{op}(): Number of indices ({}) should be equal to source.size(dim) ({})", i.numel(), s.shape()[d])));
            }
            s
        } else {
            src.clone()
        };
        #[cfg(feature = "cuda")]
        if accumulate && !zero_d && x.device().is_cuda() && i.device().is_cuda() && s.device().is_cuda() {
            if let Some(out) = crate::backend::cuda::index::index_add(&x, d, &i, &s, 1.0)? {
                let i_c = i.clone();
                autograd::record("IndexAdd", &[&x, &s], &[out.clone()], move |ctx, g| {
                    let gs = if ctx.needs_input_grad(1) { Some(g[0].index_select(d as i64, &i_c)?) } else { None };
                    Ok(vec![Some(g[0].clone()), gs])
                });
                return Ok(out);
            }
        }
        let mut list: Vec<Option<Tensor>> = vec![None; d];
        list.push(Some(i));
        let out = index_put(&x, &list, &s, accumulate)?;
        if zero_d {
            out.reshape(&[])
        } else {
            Ok(out)
        }
    }

    /// `torch.index_add(x, dim, index, source, alpha)`.
    pub fn index_add(&self, dim: i64, idx: &Tensor, src: &Tensor, alpha: Scalar) -> Result<Tensor> {
        check_same_dtype("index_add", self, src)?;
        let s = if alpha == Scalar::Int(1) { src.clone() } else { src.mul_scalar(alpha)?.to_dtype(self.dtype())? };
        self.index_dim_put("index_add", dim, idx, &s, true, true)
    }
    /// `torch.index_copy(x, dim, index, source)`.
    pub fn index_copy(&self, dim: i64, idx: &Tensor, src: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("index_copy", &[self, idx, src]);
        if let Some(c) = crate::amp::tensors("index_copy", &[self, idx, src])? {
            return c.args[0].index_copy(dim, &c.args[1], &c.args[2]);
        }
        check_same_dtype("index_copy", self, src)?;
        self.index_dim_put("index_copy", dim, idx, src, false, true)
    }
    /// `torch.index_fill(x, dim, index, value)`.
    pub fn index_fill(&self, dim: i64, idx: &Tensor, value: &FillValue) -> Result<Tensor> {
        let v = value.to_tensor("index_fill", self.dtype())?;
        self.index_dim_put("index_fill", dim, idx, &v, false, false)
    }
    /// `torch.index_reduce(x, dim, index, source, reduce, include_self)`.
    pub fn index_reduce(&self, dim: i64, idx: &Tensor, src: &Tensor, reduce: &str, include_self: bool) -> Result<Tensor> {
        let op = "index_reduce";
        let mode = Reduce::parse(op, reduce)?;
        if mode == Reduce::Sum {
            return Err(Error::value(op, "index_reduce(): Expected reduce to be one of prod, mean, amax or amin"));
        }
        check_same_dtype(op, self, src)?;
        check_int_index(op, idx)?;
        if idx.ndim() > 1 {
            return Err(Error::index(op, "index_reduce_(): Index is supposed to be a vector"));
        }
        let d = wrap_dim(op, dim, self.ndim())?;
        let zero_d = self.ndim() == 0;
        let x = as_1d(self)?;
        let i = as_1d(idx)?;
        let s = if zero_d || src.ndim() == 0 { src.reshape(&[src.numel() as i64])? } else { src.clone() };
        let ok = s.ndim() == x.ndim() && s.shape().iter().enumerate().all(|(k, &v)| if k == d { v == i.numel() } else { v == x.shape()[k] });
        if !ok {
            return Err(Error::shape(op, format!("source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {:?} source.shape = {:?}", self.shape(), src.shape())));
        }
        let mut list: Vec<Option<Tensor>> = vec![None; d];
        list.push(Some(i));
        let sf = s.movedim(&[d as i64], &[0])?;
        let out = reduce_scatter(op, &x, list, &sf, mode, include_self)?;
        if zero_d {
            out.reshape(&[])
        } else {
            Ok(out)
        }
    }

    /// `torch.gather(x, dim, index)`: `out[i][j] = x[i][index[i][j]]` (for dim 1).
    pub fn gather(&self, dim: i64, idx: &Tensor) -> Result<Tensor> {
        let op = "gather";
        check_long(op, idx)?;
        let d = wrap_dim(op, dim, self.ndim())?;
        check_scatter_shapes(op, self, d, idx, None)?;
        if idx.numel() == 0 {
            return Tensor::zeros_on(idx.shape(), self.dtype(), self.device());
        }
        if self.ndim() == 0 || idx.ndim() == 0 {
            let out = as_1d(self)?.gather(0, &as_1d(idx)?)?;
            return out.reshape(&shape_i64(idx.shape()));
        }
        #[cfg(feature = "cuda")]
        if self.device().is_cuda() && idx.device().is_cuda() {
            if let Some(out) = crate::backend::cuda::index::gather(self, d, idx)? {
                let (shape, idx_c) = (self.shape().to_vec(), idx.clone());
                autograd::record("Gather", &[self], &[out.clone()], move |_, g| {
                    let z = Tensor::zeros_on(&shape, g[0].dtype(), g[0].device())?;
                    Ok(vec![Some(z.scatter_add(d as i64, &idx_c, &g[0])?)])
                });
                return Ok(out);
            }
        }
        let list = along_dim_indices(idx, d)?;
        front::get(self, &list)
    }

    fn scatter_prep(&self, op: &str, dim: i64, idx: &Tensor, src: Option<&Tensor>) -> Result<(usize, Vec<Option<Tensor>>)> {
        check_long(op, idx)?;
        if let Some(s) = src {
            check_same_dtype(op, self, s)?;
        }
        let d = wrap_dim(op, dim, self.ndim())?;
        check_scatter_shapes(op, self, d, idx, src)?;
        Ok((d, along_dim_indices(idx, d)?))
    }

    /// `src` narrowed to `idx`'s shape (scatter only reads that corner of `src`).
    fn src_corner(src: &Tensor, idx: &Tensor) -> Result<Tensor> {
        let mut s = src.clone();
        for (d, &n) in idx.shape().iter().enumerate() {
            if s.shape()[d] != n {
                s = s.narrow(d as i64, 0, n as i64)?;
            }
        }
        Ok(s)
    }

    /// `torch.scatter(x, dim, index, src)`: `out[i][index[i][j]] = src[i][j]` (for dim 1).
    pub fn scatter(&self, dim: i64, idx: &Tensor, src: &Tensor) -> Result<Tensor> {
        if self.ndim() == 0 || idx.ndim() == 0 {
            let s1 = as_1d(src)?;
            return as_1d(self)?.scatter(0, &as_1d(idx)?, &s1)?.reshape(&shape_i64(self.shape()));
        }
        let (_, list) = self.scatter_prep("scatter", dim, idx, Some(src))?;
        if idx.numel() == 0 {
            return self.copy();
        }
        front::put(self, &list, &Self::src_corner(src, idx)?, false)
    }
    /// `torch.scatter(x, dim, index, value)` with a scalar value.
    pub fn scatter_value(&self, dim: i64, idx: &Tensor, value: Scalar) -> Result<Tensor> {
        let v = Tensor::scalar_tensor(value, self.dtype(), self.device())?;
        let src = v.broadcast_to(idx.shape())?;
        self.scatter(dim, idx, &src)
    }
    /// `torch.scatter(x, dim, index, src, reduce="add"|"multiply")` (the legacy reduce form).
    pub fn scatter_with_reduce(&self, dim: i64, idx: &Tensor, src: &Tensor, reduce: &str) -> Result<Tensor> {
        let mode = match reduce {
            "add" => Reduce::Sum,
            "multiply" => Reduce::Prod,
            _ => return Err(Error::value("scatter", format!("reduce argument must be either add or multiply, got {reduce}"))),
        };
        if self.ndim() == 0 || idx.ndim() == 0 {
            let s1 = as_1d(src)?;
            return as_1d(self)?.scatter_with_reduce(0, &as_1d(idx)?, &s1, reduce)?.reshape(&shape_i64(self.shape()));
        }
        let (_, list) = self.scatter_prep("scatter", dim, idx, Some(src))?;
        if idx.numel() == 0 {
            return self.copy();
        }
        reduce_scatter("scatter", self, list, &Self::src_corner(src, idx)?, mode, true)
    }
    /// `torch.scatter_add(x, dim, index, src)`; its gradient for `src` is `gather`.
    pub fn scatter_add(&self, dim: i64, idx: &Tensor, src: &Tensor) -> Result<Tensor> {
        let _prof = crate::profiler::op("scatter_add", &[self, idx, src]);
        if let Some(c) = crate::amp::tensors("scatter_add", &[self, idx, src])? {
            return c.args[0].scatter_add(dim, &c.args[1], &c.args[2]);
        }
        if self.ndim() == 0 || idx.ndim() == 0 {
            let s1 = as_1d(src)?;
            return as_1d(self)?.scatter_add(0, &as_1d(idx)?, &s1)?.reshape(&shape_i64(self.shape()));
        }
        let (d, list) = self.scatter_prep("scatter_add", dim, idx, Some(src))?;
        if idx.numel() == 0 {
            return self.copy();
        }
        let corner = Self::src_corner(src, idx)?;
        #[cfg(feature = "cuda")]
        if self.device().is_cuda() && idx.device().is_cuda() && corner.device().is_cuda() {
            if let Some(out) = crate::backend::cuda::index::scatter_add(self, d, idx, &corner)? {
                let idx_c = idx.clone();
                autograd::record("ScatterAdd", &[self, &corner], &[out.clone()], move |ctx, g| {
                    let gs = if ctx.needs_input_grad(1) { Some(g[0].gather(d as i64, &idx_c)?) } else { None };
                    Ok(vec![Some(g[0].clone()), gs])
                });
                return Ok(out);
            }
        }
        let _ = d;
        front::put(self, &list, &corner, true)
    }
    /// `torch.scatter_reduce(x, dim, index, src, reduce, include_self)` with
    /// `reduce` one of `sum`, `prod`, `mean`, `amax`, `amin`.
    pub fn scatter_reduce(&self, dim: i64, idx: &Tensor, src: &Tensor, reduce: &str, include_self: bool) -> Result<Tensor> {
        let mode = Reduce::parse("scatter_reduce", reduce)?;
        if self.ndim() == 0 || idx.ndim() == 0 {
            let s1 = as_1d(src)?;
            return as_1d(self)?.scatter_reduce(0, &as_1d(idx)?, &s1, reduce, include_self)?.reshape(&shape_i64(self.shape()));
        }
        let (_, list) = self.scatter_prep("scatter_reduce", dim, idx, Some(src))?;
        if idx.numel() == 0 {
            return self.copy();
        }
        reduce_scatter("scatter_reduce", self, list, &Self::src_corner(src, idx)?, mode, include_self)
    }

    /// `torch.take(x, index)`: indexes `x` as if it were 1-d.
    pub fn take(&self, idx: &Tensor) -> Result<Tensor> {
        check_long("take", idx)?;
        let flat = self.reshape(&[-1])?;
        index(&flat, &[Some(idx.clone())])
    }
    /// `torch.put(x, index, source, accumulate)`: writes `source` at the flat positions `index`.
    pub fn put(&self, idx: &Tensor, src: &Tensor, accumulate: bool) -> Result<Tensor> {
        check_long("put", idx)?;
        check_same_dtype("put", self, src)?;
        if idx.numel() != src.numel() {
            return Err(Error::shape("put", format!("put_(): Expected source and index to have the same number of elements, but got source.numel() = {}, index.numel() = {}", src.numel(), idx.numel())));
        }
        if idx.numel() == 0 {
            return self.copy();
        }
        let flat = self.reshape(&[-1])?;
        let out = index_put(&flat, &[Some(idx.reshape(&[-1])?)], &src.reshape(&[-1])?, accumulate)?;
        out.reshape(&shape_i64(self.shape()))
    }
    /// `torch.take_along_dim(x, indices, dim)`: `gather` with broadcasting; `dim` None works on the flattened input.
    pub fn take_along_dim(&self, idx: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        let op = "take_along_dim";
        check_long(op, idx)?;
        let Some(dim) = dim else {
            return self.reshape(&[-1])?.take(&idx.reshape(&[-1])?);
        };
        if self.ndim() != idx.ndim() {
            return Err(Error::shape(op, format!("torch.take_along_dim(): input and indices should have the same number of dimensions, but got {} dimensions for input, and {} dimensions for indices", self.ndim(), idx.ndim())));
        }
        let d = wrap_dim(op, dim, self.ndim())?;
        let mut a = self.shape().to_vec();
        let mut b = idx.shape().to_vec();
        if !a.is_empty() {
            a[d] = 1;
            b[d] = 1;
        }
        let mut bs = crate::shape::broadcast_shapes(op, &a, &b)?;
        let xs = {
            if !bs.is_empty() {
                bs[d] = self.shape()[d];
            }
            self.broadcast_to(&bs)?
        };
        if !bs.is_empty() {
            bs[d] = idx.shape()[d];
        }
        let is = idx.broadcast_to(&bs)?;
        xs.gather(d as i64, &is)
    }

    /// `torch.masked_select(x, mask)`: the elements where the (broadcast) mask is true, as 1-d.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::dtype("masked_select", format!("masked_select: expected BoolTensor for mask, got {}", mask.dtype().name())));
        }
        let shape = crate::shape::broadcast_shapes("masked_select", self.shape(), mask.shape())?;
        let xb = self.broadcast_to(&shape)?;
        let mb = mask.broadcast_to(&shape)?;
        if shape.is_empty() {
            return index(&xb.reshape(&[1])?, &[Some(mb.reshape(&[1])?)]);
        }
        index(&xb, &[Some(mb)])
    }
    /// `torch.masked_scatter(x, mask, source)`: the true positions of the mask take `source`'s
    /// elements in order.
    pub fn masked_scatter(&self, mask: &Tensor, src: &Tensor) -> Result<Tensor> {
        let op = "masked_scatter";
        if mask.dtype() != DType::Bool {
            return Err(Error::dtype(op, format!("masked_scatter_ only supports boolean masks, but got mask with dtype {}", mask.dtype().name())));
        }
        check_same_dtype(op, self, src)?;
        let shape = crate::shape::broadcast_shapes(op, self.shape(), mask.shape())?;
        let xb = self.broadcast_to(&shape)?;
        let mb = mask.broadcast_to(&shape)?;
        let (x1, m1) = if shape.is_empty() { (xb.reshape(&[1])?, mb.reshape(&[1])?) } else { (xb, mb) };
        let n: usize = if m1.device().is_cuda() {
            m1.to_dtype(DType::I64)?.sum()?.item()?.to_i64().max(0) as usize
        } else {
            cpu::to_vec::<bool>(&m1)?.iter().filter(|&&b| b).count()
        };
        if src.numel() < n {
            return Err(Error::value(op, format!("masked_scatter: expected source to have at least {n} elements (the number of ones in mask), got {}", src.numel())));
        }
        let vals = src.reshape(&[-1])?.narrow(0, 0, n as i64)?;
        let out = index_put(&x1, &[Some(m1)], &vals, false)?;
        out.reshape(&shape_i64(&shape))
    }
}

/// Scatter with a reduction (`scatter_reduce`, `index_reduce`, legacy `scatter(reduce=)`):
/// `src` is in front form for `list`. Gradients (with tensor ops): sum and mean spread the
/// gradient, prod uses `out / x`, amax/amin share it evenly among the elements equal to the result.
fn reduce_scatter(op: &'static str, x: &Tensor, list: Vec<Option<Tensor>>, src: &Tensor, mode: Reduce, include_self: bool) -> Result<Tensor> {
    if mode == Reduce::Mean && x.dtype().is_bool() {
        return Err(Error::dtype(op, "mean is not supported for bool tensors"));
    }
    let out = scatter_reduce_raw(x, &list, &src.to_dtype(x.dtype())?, mode, include_self)?;
    if !(x.dtype().is_float() || x.dtype().is_complex()) {
        return Ok(out);
    }
    let (sx, ss) = (autograd::Saved::new(op, x), autograd::Saved::new(op, src));
    autograd::record(op, &[x, src], &[out.clone()], move |ctx, g| {
        let g = &g[0];
        let x = sx.get()?;
        let s = ss.get()?;
        let out = ctx.output(0)?;
        let (gx, gs) = reduce_scatter_backward(op, &x, &s, &out, g, &list, mode, include_self)?;
        Ok(vec![if ctx.needs_input_grad(0) { Some(gx) } else { None }, if ctx.needs_input_grad(1) { Some(gs) } else { None }])
    });
    Ok(out)
}

fn reduce_scatter_backward(
    op: &'static str,
    x: &Tensor,
    s: &Tensor,
    out: &Tensor,
    g: &Tensor,
    list: &[Option<Tensor>],
    mode: Reduce,
    include_self: bool,
) -> Result<(Tensor, Tensor)> {
    let dt = g.dtype();
    // how many values landed on each position of x (no autograd: a constant)
    let (touched, count_src) = {
        let _ng = autograd::no_grad();
        let ones = Tensor::ones_on(s.shape(), dt, g.device())?;
        let c = scatter_reduce_raw(&Tensor::zeros_on(x.shape(), dt, g.device())?, list, &ones, Reduce::Sum, true)?;
        (c.gt_scalar(0)?, c)
    };
    let zero = Tensor::zeros_on(&[], dt, g.device())?;
    let one = Tensor::ones_on(&[], dt, g.device())?;
    Ok(match mode {
        Reduce::Sum | Reduce::Assign => {
            let gx = if include_self { g.clone() } else { touched.where_(&zero, g)? };
            (gx, front::get(g, list)?)
        }
        Reduce::Mean => {
            let n = if include_self { count_src.add(&touched.to_dtype(dt)?)? } else { count_src.clone() };
            let n = n.eq_scalar(0)?.where_(&one, &n)?;
            let gn = g.div(&n)?;
            let gx = if include_self { touched.where_(&gn, g)? } else { touched.where_(&zero, g)? };
            (gx, front::get(&gn, list)?)
        }
        Reduce::Prod => {
            // PyTorch's scatter_reduce_backward / index_reduce_backward, with tensor ops so that
            // the gradients are differentiable again (they use the undetached output).
            // d out / d x = product of the values scattered there (no division: zeros in x are fine)
            let ones_x = Tensor::ones_on(x.shape(), dt, g.device())?;
            let prod_src = reduce_scatter(op, &ones_x, list.to_vec(), s, Reduce::Prod, true)?;
            let gx = if include_self { touched.where_(&g.mul(&prod_src)?, g)? } else { touched.where_(&zero, g)? };
            // d out / d src_k = out / src_k; where src_k is the only zero scattered to its position,
            // the product of the others (src_k replaced by 1); where more zeros meet, 0
            let s_zero = s.eq_scalar(0)?;
            let n_zero = {
                let _ng = autograd::no_grad();
                let c = scatter_reduce_raw(&Tensor::zeros_on(x.shape(), dt, g.device())?, list, &s_zero.to_dtype(dt)?, Reduce::Sum, true)?;
                front::get(&c, list)?
            };
            let single = s_zero.logical_and(&n_zero.eq_scalar(1)?)?;
            let base = if include_self { x.clone() } else { ones_x };
            let masked_res = reduce_scatter(op, &base, list.to_vec(), &single.where_(&one, s)?, Reduce::Prod, true)?;
            let normal = front::get(&g.mul(out)?, list)?.div(&s_zero.where_(&one, s)?)?;
            let gs = single.where_(&front::get(&g.mul(&masked_res)?, list)?, &normal)?;
            // the second derivative between two zeros of one position is not computed (as in
            // PyTorch): differentiating this gradient again fails
            let several = autograd::is_grad_enabled() && n_zero.gt_scalar(1)?.any_dims(None, false)?.item()?.to_i64() != 0;
            (gx, if several { delayed_error(op, &gs)? } else { gs })
        }
        Reduce::Amax | Reduce::Amin => {
            // the masks only compare with the output: no gradient flows through it
            let out = &out.detach();
            let mask_self = if include_self { x.eq(out)?.to_dtype(dt)? } else { Tensor::zeros_on(x.shape(), dt, g.device())? };
            let picked = front::get(out, list)?;
            let mask_src = s.eq(&picked)?.to_dtype(dt)?;
            let count = {
                let _ng = autograd::no_grad();
                scatter_reduce_raw(&mask_self, list, &mask_src, Reduce::Sum, true)?
            };
            let count = count.eq_scalar(0)?.where_(&one, &count)?;
            let gc = g.div(&count)?;
            let gx = touched.where_(&gc.mul(&mask_self)?, g)?;
            (gx, front::get(&gc, list)?.mul(&mask_src)?)
        }
    })
}

/// `g` with a node that fails when differentiated (PyTorch's `DelayedError` in
/// scatter_reduce_backward / index_reduce_backward for several zeros at one position).
fn delayed_error(op: &'static str, g: &Tensor) -> Result<Tensor> {
    let out = g.detach();
    let src = if op == "index_reduce" { "source" } else { "src" };
    autograd::record("DelayedError", &[g], &[out.clone()], move |_, _| {
        Err(Error::autograd(op, format!("{op}(): Double backward is unsupported for {src} when >1 zeros in {src} are scattered to the same position in self")))
    });
    Ok(out)
}

//! Python-style indexing (`tensor[...]`): ints, slices, None, ellipsis, bool masks, integer tensors;
//! PyTorch's `aten::index` / `index_put` (advanced indexing with a list of optional index tensors),
//! and the one gather / scatter kernel (with reductions) that every index op is built on.

use crate::autograd;
use crate::backend::cpu;
use crate::dtype::DType;
use crate::element::Element;
use crate::layout::{indices as layout_indices, Layout};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// One entry of an index expression, as in `x[1, 2:5, None, ..., mask]`.
#[derive(Clone, Debug)]
pub enum TensorIndex {
    /// An integer: selects and removes the dim.
    Int(i64),
    /// A slice `start:stop:step` (Python semantics, step > 0).
    Slice(Option<i64>, Option<i64>, Option<i64>),
    /// `None`: inserts a size-1 dim.
    None,
    /// `...`: as many full slices as needed.
    Ellipsis,
    /// A Python bool: inserts a dim of size 1 (True) or 0 (False).
    Bool(bool),
    /// An integer tensor (advanced index) or a bool/uint8 mask.
    Tensor(Tensor),
}

/// How scattered values combine with what is already at the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// Overwrite (`index_put`, `scatter`).
    Assign,
    /// Add (`index_put(accumulate=True)`, `scatter_add`, `index_add`).
    Sum,
    /// Multiply.
    Prod,
    /// Mean of the values (and the original when `include_self`).
    Mean,
    /// Maximum (NaN propagates).
    Amax,
    /// Minimum (NaN propagates).
    Amin,
}

impl Reduce {
    /// Parses `"sum"`, `"prod"`, `"mean"`, `"amax"`, `"amin"` (and the legacy `scatter` names `"add"`, `"multiply"`).
    pub fn parse(op: &str, s: &str) -> Result<Reduce> {
        Ok(match s {
            "sum" | "add" => Reduce::Sum,
            "prod" | "multiply" => Reduce::Prod,
            "mean" => Reduce::Mean,
            "amax" => Reduce::Amax,
            "amin" => Reduce::Amin,
            _ => return Err(Error::value(op, format!("reduce argument must be either sum, prod, mean, amax or amin, got {s}"))),
        })
    }
}

/// The validated form of an advanced index over a tensor: the storage offset of every indexed
/// position (broadcast index shape, row-major) and the offsets of the non-indexed dims.
struct Plan {
    /// Broadcast shape of the index tensors.
    bshape: Vec<usize>,
    /// Shape of the dims that are not indexed, in order.
    rest_shape: Vec<usize>,
    /// Storage offset of each indexed position (without the tensor's own offset added twice).
    base: Vec<usize>,
    /// Storage offsets of the rest dims relative to a base.
    rest: Vec<usize>,
    /// True when the indexed dims are adjacent (the result keeps the index dims in place).
    adjacent: bool,
    /// Position of the first indexed dim.
    first: usize,
    /// For CUDA tensors: `base` and `rest` as int64 device tensors (`base` is then left empty:
    /// the index values stay on the device).
    #[cfg(feature = "cuda")]
    dev: Option<(Tensor, Tensor)>,
}

/// Expands bool / uint8 masks into integer index tensors (one per mask dim) and checks dtypes.
fn expand_masks(op: &str, x: &Tensor, idx: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
    let mut out = Vec::with_capacity(idx.len());
    for t in idx {
        match t {
            None => out.push(None),
            Some(t) if matches!(t.dtype(), DType::Bool | DType::U8) => {
                let d0 = out.len();
                for (k, &s) in t.shape().iter().enumerate() {
                    let have = x.shape().get(d0 + k).copied();
                    if have != Some(s) {
                        return Err(Error::index(
                            op,
                            format!(
                                "The shape of the mask {:?} at index {k} does not match the shape of the indexed tensor {:?} at index {}",
                                t.shape(),
                                x.shape(),
                                d0 + k
                            ),
                        ));
                    }
                }
                let nz = t.nonzero()?;
                if t.ndim() == 0 {
                    // a 0-d mask indexes nothing here (handled by callers as a new dim)
                    return Err(Error::index(op, "a 0-d mask cannot index a dim"));
                }
                for k in 0..t.ndim() {
                    out.push(Some(nz.select(1, k as i64)?));
                }
            }
            Some(t) if matches!(t.dtype(), DType::I64 | DType::I32 | DType::I16 | DType::I8) => out.push(Some(t.clone())),
            Some(t) => {
                return Err(Error::index(
                    op,
                    format!("tensors used as indices must be long, int, byte or bool tensors, got {}", t.dtype().name()),
                ))
            }
        }
    }
    if out.len() > x.ndim() {
        return Err(Error::index(op, format!("too many indices for tensor of dimension {} (got {})", x.ndim(), out.len())));
    }
    Ok(out)
}

fn plan(op: &str, x: &Tensor, idx: &[Option<Tensor>]) -> Result<Plan> {
    let dims: Vec<usize> = (0..idx.len()).filter(|&d| idx[d].is_some()).collect();
    if dims.is_empty() {
        return Err(Error::index(op, "at least one index tensor is required"));
    }
    let shapes: Vec<&[usize]> = dims.iter().filter_map(|&d| idx[d].as_ref().map(|t| t.shape())).collect();
    let bshape = crate::shape::broadcast_all(op, &shapes)
        .map_err(|_| Error::index(op, format!("shape mismatch: indexing tensors could not be broadcast together with shapes {shapes:?}")))?;
    let n: usize = bshape.iter().product();
    let l = x.layout();
    #[cfg(feature = "cuda")]
    if let crate::Device::Cuda(ord) = x.device() {
        use crate::backend::cuda::adv_index as adv;
        if adv::supported(x.dtype()) {
            let mut ds = Vec::with_capacity(dims.len());
            for &d in &dims {
                let t = idx[d].as_ref().ok_or_else(|| Error::index(op, "missing index"))?;
                let tb = {
                    let _ng = autograd::no_grad();
                    t.to_device(x.device())?.broadcast_to(&bshape)?.to_dtype(DType::I64)?.contiguous()?
                };
                ds.push(adv::IndexDim { dim: d, idx: tb, size: l.shape[d], stride: l.strides[d] });
            }
            let base = adv::base_offsets(op, ord, l.offset, n, &ds)?;
            let (rest_shape, rest, adjacent) = rest_part(x, &dims);
            let rest_t = adv::rest_offsets(ord, &rest)?;
            return Ok(Plan { bshape, rest_shape, base: Vec::new(), rest, adjacent, first: dims[0], dev: Some((base, rest_t)) });
        }
    }
    let mut base = vec![l.offset; n];
    for &d in &dims {
        let t = idx[d].as_ref().ok_or_else(|| Error::index(op, "missing index"))?;
        let size = l.shape[d] as i64;
        let stride = l.strides[d];
        let tb = {
            let _ng = autograd::no_grad();
            t.broadcast_to(&bshape)?
        };
        let v: Vec<i64> = cpu::to_vec(&tb)?;
        for (b, &i) in base.iter_mut().zip(&v) {
            if i < -size || i >= size {
                return Err(Error::index(op, format!("index {i} is out of bounds for dimension {d} with size {size}")));
            }
            let w = if i < 0 { i + size } else { i } as usize;
            *b += w * stride;
        }
    }
    let (rest_shape, rest, adjacent) = rest_part(x, &dims);
    Ok(Plan {
        bshape,
        rest_shape,
        base,
        rest,
        adjacent,
        first: dims[0],
        #[cfg(feature = "cuda")]
        dev: None,
    })
}

/// The shape and storage offsets of the dims of `x` that are not indexed, and whether the
/// indexed `dims` are adjacent.
fn rest_part(x: &Tensor, dims: &[usize]) -> (Vec<usize>, Vec<usize>, bool) {
    let l = x.layout();
    let rest_dims: Vec<usize> = (0..x.ndim()).filter(|d| !dims.contains(d)).collect();
    let rest_layout = Layout {
        shape: rest_dims.iter().map(|&d| l.shape[d]).collect(),
        strides: rest_dims.iter().map(|&d| l.strides[d]).collect(),
        offset: 0,
    };
    let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
    (rest_layout.shape.clone(), layout_indices(&rest_layout), adjacent)
}

/// The public result shape of `x[idx]` given a plan (index dims in place if adjacent, else first).
fn public_shape(p: &Plan) -> Vec<usize> {
    let at = if p.adjacent { p.first } else { 0 };
    let mut s = p.rest_shape[..at].to_vec();
    s.extend_from_slice(&p.bshape);
    s.extend_from_slice(&p.rest_shape[at..]);
    s
}

/// Moves the broadcast index dims between the front form (`[B..., rest...]`) and the public form.
fn front_to_public(t: &Tensor, p: &Plan) -> Result<Tensor> {
    let at = if p.adjacent { p.first } else { 0 };
    if at == 0 || p.bshape.is_empty() {
        return Ok(t.clone());
    }
    let nb = p.bshape.len();
    let src: Vec<i64> = (0..nb as i64).collect();
    let dst: Vec<i64> = (at as i64..(at + nb) as i64).collect();
    t.movedim(&src, &dst)
}

fn public_to_front(t: &Tensor, p: &Plan) -> Result<Tensor> {
    let at = if p.adjacent { p.first } else { 0 };
    if at == 0 || p.bshape.is_empty() {
        return Ok(t.clone());
    }
    let nb = p.bshape.len();
    let dst: Vec<i64> = (0..nb as i64).collect();
    let src: Vec<i64> = (at as i64..(at + nb) as i64).collect();
    t.movedim(&src, &dst)
}

/// Gathers `x[idx]` in front form `[B..., rest...]` (no autograd).
fn gather_front(x: &Tensor, p: &Plan) -> Result<Tensor> {
    let mut shape = p.bshape.clone();
    shape.extend_from_slice(&p.rest_shape);
    let rn = p.rest.len();
    #[cfg(feature = "cuda")]
    if let Some((base, rest)) = &p.dev {
        return crate::backend::cuda::adv_index::gather("index", x, base, rest, &shape);
    }
    crate::with_dtype!(x.dtype(), T, {
        let v: Vec<T> = crate::ops::convert::with_cpu(x, |c| -> Result<Vec<T>> {
            let src = T::slice(c).ok_or_else(|| Error::dtype("index", "storage dtype mismatch"))?;
            let n = p.base.len() * rn;
            if n >= 1 << 15 && rn > 0 {
                use rayon::prelude::*;
                let mut out = vec![T::default(); n];
                out.par_chunks_mut(rn).zip(p.base.par_iter()).for_each(|(o, &b)| {
                    for (o, &r) in o.iter_mut().zip(&p.rest) {
                        *o = src[b + r];
                    }
                });
                return Ok(out);
            }
            let mut out = Vec::with_capacity(n);
            for &b in &p.base {
                for &r in &p.rest {
                    out.push(src[b + r]);
                }
            }
            Ok(out)
        })??;
        Tensor::from_vec(v, &shape)
    })
}

#[inline]
fn combine<T: Element>(mode: Reduce, a: T, b: T) -> T {
    let d = T::DTYPE;
    if d.is_complex() {
        let (x, y) = (a.to_c128(), b.to_c128());
        return T::from_c128(match mode {
            Reduce::Assign => y,
            Reduce::Sum | Reduce::Mean => x + y,
            Reduce::Prod => x * y,
            Reduce::Amax | Reduce::Amin => y,
        });
    }
    if d.is_integral() {
        let (x, y) = (a.to_i64(), b.to_i64());
        return T::from_i64(match mode {
            Reduce::Assign => y,
            Reduce::Sum | Reduce::Mean => x.wrapping_add(y),
            Reduce::Prod => x.wrapping_mul(y),
            Reduce::Amax => x.max(y),
            Reduce::Amin => x.min(y),
        });
    }
    let (x, y) = (a.to_f64(), b.to_f64());
    T::from_f64(match mode {
        Reduce::Assign => y,
        Reduce::Sum | Reduce::Mean => x + y,
        Reduce::Prod => x * y,
        Reduce::Amax => if x.is_nan() || y.is_nan() { f64::NAN } else { x.max(y) },
        Reduce::Amin => if x.is_nan() || y.is_nan() { f64::NAN } else { x.min(y) },
    })
}

#[inline]
fn divide<T: Element>(a: T, n: usize) -> T {
    let d = T::DTYPE;
    if d.is_complex() {
        T::from_c128(a.to_c128() / n as f64)
    } else if d.is_integral() {
        T::from_i64(a.to_i64().div_euclid(n as i64))
    } else {
        T::from_f64(a.to_f64() / n as f64)
    }
}

/// Writes `values` (front form, row-major, already `dst`'s dtype) into `dst` at the plan's positions,
/// combining with `mode`. With `include_self` false, the original value of a written position is
/// left out of the reduction. Not recorded by autograd.
fn scatter_front(dst: &Tensor, p: &Plan, values: &Tensor, mode: Reduce, include_self: bool) -> Result<()> {
    let rn = p.rest.len();
    #[cfg(feature = "cuda")]
    if let Some((base, rest)) = &p.dev {
        use crate::backend::cuda::adv_index::{scatter, Combine};
        let m = match mode {
            Reduce::Assign => Combine::Assign,
            Reduce::Sum => Combine::Sum,
            Reduce::Prod => Combine::Prod,
            Reduce::Mean => Combine::Mean,
            Reduce::Amax => Combine::Amax,
            Reduce::Amin => Combine::Amin,
        };
        let v = values.to_device(dst.device())?;
        return scatter("index_put", dst, base, rest, &v, m, include_self);
    }
    if values.numel() != p.base.len() * rn {
        return Err(Error::shape("index_put", format!("{} values for {} indexed positions", values.numel(), p.base.len() * rn)));
    }
    crate::with_dtype!(dst.dtype(), T, {
        let vals: Vec<T> = cpu::to_vec(values)?;
        let mut guard = dst.storage().write();
        let Storage::Cpu(s) = &mut *guard else { return Err(crate::backend::cuda::cpu_only("index_put")) };
        let out = T::slice_mut(s).ok_or_else(|| Error::dtype("index_put", "storage dtype mismatch"))?;
        let needs_count = mode == Reduce::Mean || (!include_self && mode != Reduce::Assign);
        if !needs_count {
            let mut k = 0;
            for &b in &p.base {
                for &r in &p.rest {
                    let i = b + r;
                    out[i] = combine(mode, out[i], vals[k]);
                    k += 1;
                }
            }
        } else {
            let mut count: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
            let mut k = 0;
            for &b in &p.base {
                for &r in &p.rest {
                    let i = b + r;
                    let c = count.entry(i).or_insert(if include_self { 1 } else { 0 });
                    out[i] = if *c == 0 { vals[k] } else { combine(mode, out[i], vals[k]) };
                    *c += 1;
                    k += 1;
                }
            }
            if mode == Reduce::Mean {
                for (i, c) in count {
                    if c > 1 {
                        out[i] = divide(out[i], c);
                    }
                }
            }
        }
    });
    Ok(())
}

/// `aten::index(x, indices)`: advanced indexing with one optional index tensor per leading dim
/// (None = the whole dim). Masks are expanded to their nonzero positions.
pub fn index(x: &Tensor, indices: &[Option<Tensor>]) -> Result<Tensor> {
    let idx = expand_masks("index", x, indices)?;
    let p = plan("index", x, &idx)?;
    let out = gather_front(x, &p)?;
    let (sx, si) = (x.shape().to_vec(), idx.clone());
    autograd::record("Index", &[x], &[out.clone()], move |_, g| {
        let z = Tensor::zeros_on(&sx, g[0].dtype(), g[0].device())?;
        Ok(vec![Some(index_put_front(&z, &si, &g[0], true)?)])
    });
    front_to_public(&out, &p)
}

/// `index` in front form for backward rules: the result keeps the index dims first.
fn index_front(x: &Tensor, idx: &[Option<Tensor>]) -> Result<Tensor> {
    let p = plan("index", x, idx)?;
    let out = gather_front(x, &p)?;
    let (sx, si) = (x.shape().to_vec(), idx.to_vec());
    autograd::record("Index", &[x], &[out.clone()], move |_, g| {
        let z = Tensor::zeros_on(&sx, g[0].dtype(), g[0].device())?;
        Ok(vec![Some(index_put_front(&z, &si, &g[0], true)?)])
    });
    Ok(out)
}

/// `index_put` with values already in front form (shape `[B..., rest...]` or broadcastable to it).
fn index_put_front(x: &Tensor, idx: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
    let p = plan("index_put", x, idx)?;
    let mut fshape = p.bshape.clone();
    fshape.extend_from_slice(&p.rest_shape);
    let vb = values.broadcast_to(&fshape)?;
    let out = {
        let _ng = autograd::no_grad();
        let out = x.copy()?;
        let p2 = plan("index_put", &out, idx)?;
        scatter_front(&out, &p2, &vb.to_dtype(x.dtype())?, if accumulate { Reduce::Sum } else { Reduce::Assign }, true)?;
        out
    };
    let si = idx.to_vec();
    let vshape = values.shape().to_vec();
    autograd::record("IndexPut", &[x, values], &[out.clone()], move |ctx, g| {
        let gx = if !ctx.needs_input_grad(0) {
            None
        } else if accumulate {
            Some(g[0].clone())
        } else {
            let z = Tensor::zeros_on(&[], g[0].dtype(), g[0].device())?;
            Some(index_put_front(&g[0], &si, &z, false)?)
        };
        let gv = if ctx.needs_input_grad(1) { Some(index_front(&g[0], &si)?.sum_to_size(&vshape)?) } else { None };
        Ok(vec![gx, gv])
    });
    Ok(out)
}

/// `torch.index_put(x, indices, values, accumulate)`: a copy of `x` with `values` written
/// (or added, with `accumulate`) at the advanced-indexed positions.
pub fn index_put(x: &Tensor, indices: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> Result<Tensor> {
    let _prof = crate::profiler::op("index_put", &[x, values]);
    if crate::amp::any_active() {
        let mut all: Vec<Option<&Tensor>> = vec![Some(x)];
        all.extend(indices.iter().map(|i| i.as_ref()));
        all.push(Some(values));
        if let Some(c) = crate::amp::optional("index_put", &all)? {
            let n = indices.len();
            return index_put(c.req(0)?, &c.args[1..=n], c.req(n + 1)?, accumulate);
        }
    }
    if values.dtype() != x.dtype() {
        return Err(Error::dtype(
            "index_put",
            format!("Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.", x.dtype().name(), values.dtype().name()),
        ));
    }
    let idx = expand_masks("index_put", x, indices)?;
    let p = plan("index_put", x, &idx)?;
    let pub_shape = public_shape(&p);
    let vb = values.broadcast_to(&pub_shape).map_err(|_| {
        Error::shape("index_put", format!("shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {pub_shape:?}", values.shape()))
    })?;
    let vf = public_to_front(&vb, &p)?;
    index_put_front(x, &idx, &vf, accumulate)
}

/// Scatters `src` (front form, `x`'s dtype) into a copy of `x` with a reduction; no autograd
/// (callers record their own rules). Used by `scatter_reduce` and `index_reduce`.
pub(crate) fn scatter_reduce_raw(x: &Tensor, idx: &[Option<Tensor>], src: &Tensor, mode: Reduce, include_self: bool) -> Result<Tensor> {
    let _ng = autograd::no_grad();
    let out = x.copy()?;
    let p = plan("scatter_reduce", &out, idx)?;
    scatter_front(&out, &p, src, mode, include_self)?;
    Ok(out)
}

/// Indexing helpers used by the index-op family.
pub(crate) mod front {
    use super::*;
    /// `x[idx]` in front form, differentiable.
    pub fn get(x: &Tensor, idx: &[Option<Tensor>]) -> Result<Tensor> {
        index_front(x, idx)
    }
    /// `index_put` with front-form values, differentiable.
    pub fn put(x: &Tensor, idx: &[Option<Tensor>], v: &Tensor, accumulate: bool) -> Result<Tensor> {
        index_put_front(x, idx, v, accumulate)
    }
}

fn wrap_index(op: &str, i: i64, dim: usize, size: usize) -> Result<i64> {
    let s = size as i64;
    if i < -s || i >= s {
        return Err(Error::index(op, format!("index {i} is out of bounds for dimension {dim} with size {size}")));
    }
    Ok(if i < 0 { i + s } else { i })
}

impl Tensor {
    /// `tensor[indices]` with Python / PyTorch semantics: basic indexing (ints, slices, None,
    /// ellipsis) gives a view; tensor indices then apply advanced indexing (a copy).
    pub fn index(&self, indices: &[TensorIndex]) -> Result<Tensor> {
        let (view, adv) = self.apply_basic("index", indices)?;
        if adv.iter().all(|a| a.is_none()) {
            return Ok(if view.is_same(self) { self.alias() } else { view });
        }
        index(&view, &adv)
    }

    /// `tensor[indices] = values` (PyTorch's `index_put_` through `__setitem__`), in place.
    pub fn index_put_(&self, indices: &[TensorIndex], values: &Tensor) -> Result<Tensor> {
        self.index_put_acc_(indices, values, false)
    }

    /// Like [`Tensor::index_put_`], adding instead of assigning when `accumulate`.
    pub fn index_put_acc_(&self, indices: &[TensorIndex], values: &Tensor, accumulate: bool) -> Result<Tensor> {
        self.check_inplace("index_put_")?;
        let v = values.to_dtype(self.dtype())?;
        if autograd::is_grad_enabled() && (self.requires_grad() || v.requires_grad()) {
            // Out of place on the indexed region, scattered back into a copy of the whole
            // tensor, then this tensor takes that value and history (PyTorch's in-place rebase).
            let (view, adv) = self.apply_basic("index_put_", indices)?;
            let region = if adv.iter().all(|a| a.is_none()) {
                let b = v.broadcast_to(view.shape())?;
                if accumulate { view.add(&b)? } else { b.copy()? }
            } else {
                index_put(&view, &adv, &v, accumulate)?
            };
            let idx = indices.to_vec();
            let f: crate::ops::shape_ops::ViewFn = std::sync::Arc::new(move |t: &Tensor| Ok(t.apply_basic("index_put_", &idx)?.0));
            let full = crate::ops::shape_ops::view_scatter("index_put_", self, &region, f)?;
            return self.assign_("index_put_", &full);
        }
        let _ng = autograd::no_grad();
        let (view, adv) = self.apply_basic("index_put_", indices)?;
        if adv.iter().all(|a| a.is_none()) {
            let b = v.broadcast_to(view.shape())?;
            if accumulate {
                let s = view.add(&b)?;
                view.copy_(&s)?;
            } else {
                view.copy_(&b)?;
            }
            return Ok(self.clone());
        }
        let idx = expand_masks("index_put_", &view, &adv)?;
        let p = plan("index_put_", &view, &idx)?;
        let pub_shape = public_shape(&p);
        let vb = v.broadcast_to(&pub_shape)?;
        let vf = public_to_front(&vb, &p)?.contiguous()?;
        scatter_front(&view, &p, &vf, if accumulate { Reduce::Sum } else { Reduce::Assign }, true)?;
        Ok(self.clone())
    }

    /// Applies the basic part of an index expression (views) and returns the view and the
    /// advanced indices aligned to the view's dims.
    fn apply_basic(&self, op: &str, indices: &[TensorIndex]) -> Result<(Tensor, Vec<Option<Tensor>>)> {
        let consumed: usize = indices
            .iter()
            .map(|i| match i {
                TensorIndex::Int(_) | TensorIndex::Slice(..) => 1,
                TensorIndex::Tensor(t) if matches!(t.dtype(), DType::Bool | DType::U8) => t.ndim(),
                TensorIndex::Tensor(_) => 1,
                _ => 0,
            })
            .sum();
        if indices.iter().filter(|i| matches!(i, TensorIndex::Ellipsis)).count() > 1 {
            return Err(Error::index(op, "an index can only have a single ellipsis ('...')"));
        }
        if consumed > self.ndim() {
            return Err(Error::index(op, format!("too many indices for tensor of dimension {}", self.ndim())));
        }
        let mut r = self.clone();
        let mut dim = 0usize;
        // (dim of the view where the index starts, index tensor); masks span several dims
        let mut adv: Vec<(usize, Tensor)> = Vec::new();
        let push_adv = |adv: &mut Vec<(usize, Tensor)>, dim: usize, t: Tensor| adv.push((dim, t));
        for ix in indices {
            match ix {
                TensorIndex::Int(i) => {
                    let size = *r.shape().get(dim).ok_or_else(|| Error::index(op, "too many indices"))?;
                    let w = wrap_index(op, *i, dim, size)?;
                    r = r.select(dim as i64, w)?;
                }
                TensorIndex::Slice(s, e, st) => {
                    let step = st.unwrap_or(1);
                    if step <= 0 {
                        return Err(Error::value(op, "step must be greater than zero"));
                    }
                    r = r.slice(dim as i64, *s, *e, step)?;
                    dim += 1;
                }
                TensorIndex::None => {
                    r = r.unsqueeze(dim as i64)?;
                    dim += 1;
                }
                TensorIndex::Ellipsis => {
                    dim += self.ndim() - consumed;
                }
                TensorIndex::Bool(b) => {
                    r = r.unsqueeze(dim as i64)?;
                    let t = if *b { Tensor::from_vec(vec![0i64], &[1])? } else { Tensor::from_vec(Vec::<i64>::new(), &[0])? };
                    push_adv(&mut adv, dim, t);
                    dim += 1;
                }
                TensorIndex::Tensor(t) => {
                    if matches!(t.dtype(), DType::Bool | DType::U8) && t.ndim() == 0 {
                        r = r.unsqueeze(dim as i64)?;
                        let b = t.item()?.to_bool();
                        let t = if b { Tensor::from_vec(vec![0i64], &[1])? } else { Tensor::from_vec(Vec::<i64>::new(), &[0])? };
                        push_adv(&mut adv, dim, t);
                        dim += 1;
                    } else if matches!(t.dtype(), DType::Bool | DType::U8) {
                        push_adv(&mut adv, dim, t.clone());
                        dim += t.ndim();
                    } else {
                        push_adv(&mut adv, dim, t.clone());
                        dim += 1;
                    }
                }
            }
        }
        // one slot per plain dim, one slot per mask (expand_masks splits masks into their dims)
        let mut aligned: Vec<Option<Tensor>> = Vec::new();
        let mut covered = 0usize;
        for (pos, t) in adv {
            while covered < pos {
                aligned.push(None);
                covered += 1;
            }
            covered += if matches!(t.dtype(), DType::Bool | DType::U8) { t.ndim() } else { 1 };
            aligned.push(Some(t));
        }
        Ok((r, aligned))
    }
}

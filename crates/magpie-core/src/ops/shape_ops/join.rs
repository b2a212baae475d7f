//! Joining tensors: `cat`, `stack`, `hstack`/`vstack`/`dstack`/`column_stack`, `block_diag`,
//! `cartesian_prod`, `combinations`, `meshgrid`, `broadcast_tensors`, `atleast_*d`.

use crate::autograd;
use crate::backend::cpu;
use crate::dtype::{result_type, DType, Operand};
use crate::scalar::Scalar;
use crate::shape::wrap_dim;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.cat(tensors, dim)`: concatenation along `dim` with type promotion. 1-d empty tensors
/// (shape `[0]`) are skipped, PyTorch's legacy rule.
pub fn cat(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let _prof = crate::profiler::op_list("cat", tensors);
    if crate::amp::any_active() {
        let refs: Vec<&Tensor> = tensors.iter().collect();
        if let Some(c) = crate::amp::tensors("cat", &refs)? {
            return cat(&c.args, dim);
        }
    }
    let op = "cat";
    if tensors.is_empty() {
        return Err(Error::value(op, "torch.cat(): expected a non-empty list of Tensors"));
    }
    let promo: Vec<Operand> = tensors.iter().map(|t| Operand::Dim(t.dtype())).collect();
    let dt = result_type(&promo)?;
    crate::ops::same_device(op, &tensors.iter().collect::<Vec<_>>())?;
    let skip = |t: &Tensor| t.ndim() == 1 && t.shape()[0] == 0;
    let kept: Vec<usize> = (0..tensors.len()).filter(|&i| !skip(&tensors[i])).collect();
    if kept.is_empty() {
        return Tensor::zeros_on(tensors[0].shape(), dt, tensors[0].device());
    }
    for (i, t) in tensors.iter().enumerate() {
        if t.ndim() == 0 {
            return Err(Error::value(op, format!("zero-dimensional tensor (at position {i}) cannot be concatenated")));
        }
    }
    let r = &tensors[kept[0]];
    let nd = r.ndim();
    let d = wrap_dim(op, dim, nd)?;
    for &i in &kept {
        let t = &tensors[i];
        if t.ndim() != nd {
            return Err(Error::shape(op, format!("Tensors must have same number of dimensions: got {nd} and {}", t.ndim())));
        }
        for k in 0..nd {
            if k != d && t.shape()[k] != r.shape()[k] {
                return Err(Error::shape(
                    op,
                    format!("Sizes of tensors must match except in dimension {d}. Expected size {} but got size {} for tensor number {i} in the list.", r.shape()[k], t.shape()[k]),
                ));
            }
        }
    }
    let mut shape = r.shape().to_vec();
    shape[d] = kept.iter().map(|&i| tensors[i].shape()[d]).sum();
    let device = r.device();
    let out = if device != crate::device::Device::Cpu {
        // on a GPU: each part copied (and cast) into its slice of the output by the device's copy
        let out = Tensor::zeros_on(&shape, dt, device)?;
        let _ng = autograd::no_grad();
        let mut off = 0;
        for &i in &kept {
            let n = tensors[i].shape()[d];
            out.narrow(d as i64, off as i64, n as i64)?.copy_(&tensors[i])?;
            off += n;
        }
        out
    } else {
        cat_cpu(tensors, &kept, &shape, d, dt)?
    };
    let sizes: Vec<Option<(i64, i64)>> = {
        let mut off = 0i64;
        tensors
            .iter()
            .map(|t| {
                if skip(t) {
                    None
                } else {
                    let n = t.shape()[d] as i64;
                    off += n;
                    Some((off - n, n))
                }
            })
            .collect()
    };
    let refs: Vec<&Tensor> = tensors.iter().collect();
    autograd::record("Cat", &refs, &[out.clone()], move |ctx, g| {
        let mut res = Vec::with_capacity(sizes.len());
        for (i, s) in sizes.iter().enumerate() {
            res.push(match s {
                Some((o, n)) if ctx.needs_input_grad(i) => Some(g[0].narrow(d as i64, *o, *n)?),
                None if ctx.needs_input_grad(i) => Some(Tensor::zeros_on(&[0], g[0].dtype(), g[0].device())?),
                _ => None,
            });
        }
        Ok(res)
    });
    Ok(out)
}

/// `torch.stack(tensors, dim)`: joins equal-shaped tensors along a new dim.
pub fn stack(tensors: &[Tensor], dim: i64) -> Result<Tensor> {
    let _prof = crate::profiler::op_list("stack", tensors);
    if crate::amp::any_active() {
        let refs: Vec<&Tensor> = tensors.iter().collect();
        if let Some(c) = crate::amp::tensors("stack", &refs)? {
            return stack(&c.args, dim);
        }
    }
    let op = "stack";
    let first = tensors.first().ok_or_else(|| Error::value(op, "stack expects a non-empty TensorList"))?;
    for (i, t) in tensors.iter().enumerate() {
        if t.shape() != first.shape() {
            return Err(Error::shape(
                op,
                format!("stack expects each tensor to be equal size, but got {:?} at entry 0 and {:?} at entry {i}", first.shape(), t.shape()),
            ));
        }
    }
    let d = wrap_dim(op, dim, first.ndim() + 1)?;
    let us: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(d as i64)).collect::<Result<_>>()?;
    cat(&us, d as i64)
}

fn non_empty(op: &str, tensors: &[Tensor]) -> Result<()> {
    if tensors.is_empty() {
        return Err(Error::value(op, format!("{op} expects a non-empty TensorList")));
    }
    Ok(())
}

/// `torch.hstack(tensors)`: `cat` along dim 1 (dim 0 for 1-d tensors).
pub fn hstack(tensors: &[Tensor]) -> Result<Tensor> {
    non_empty("hstack", tensors)?;
    let ts: Vec<Tensor> = tensors.iter().map(|t| t.atleast_1d()).collect::<Result<_>>()?;
    let d = if ts[0].ndim() == 1 { 0 } else { 1 };
    cat(&ts, d)
}
/// `torch.vstack(tensors)`: `cat` of `atleast_2d` along dim 0.
pub fn vstack(tensors: &[Tensor]) -> Result<Tensor> {
    non_empty("vstack", tensors)?;
    let ts: Vec<Tensor> = tensors.iter().map(|t| t.atleast_2d()).collect::<Result<_>>()?;
    cat(&ts, 0)
}
/// `torch.dstack(tensors)`: `cat` of `atleast_3d` along dim 2.
pub fn dstack(tensors: &[Tensor]) -> Result<Tensor> {
    non_empty("dstack", tensors)?;
    let ts: Vec<Tensor> = tensors.iter().map(|t| t.atleast_3d()).collect::<Result<_>>()?;
    cat(&ts, 2)
}
/// `torch.column_stack(tensors)`: 0-d and 1-d tensors become columns, then `cat` along dim 1.
pub fn column_stack(tensors: &[Tensor]) -> Result<Tensor> {
    non_empty("column_stack", tensors)?;
    let ts: Vec<Tensor> = tensors
        .iter()
        .map(|t| if t.ndim() <= 1 { t.reshape(&[t.numel() as i64, 1]) } else { Ok(t.clone()) })
        .collect::<Result<_>>()?;
    cat(&ts, 1)
}

/// `torch.block_diag(*tensors)`: the tensors (at most 2-d) on the diagonal of a zero matrix.
pub fn block_diag(tensors: &[Tensor]) -> Result<Tensor> {
    let op = "block_diag";
    let mut mats = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        mats.push(match t.ndim() {
            0 => t.reshape(&[1, 1])?,
            1 => t.reshape(&[1, -1])?,
            2 => t.clone(),
            n => return Err(Error::shape(op, format!("torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {n} dimensions"))),
        });
    }
    if mats.is_empty() {
        return Tensor::zeros_on(&[1, 0], crate::default_dtype(), crate::Device::Cpu);
    }
    let dt = result_type(&mats.iter().map(|t| Operand::Dim(t.dtype())).collect::<Vec<_>>())?;
    let cols: i64 = mats.iter().map(|m| m.shape()[1] as i64).sum();
    let mut off = 0i64;
    let mut rows = Vec::with_capacity(mats.len());
    for m in &mats {
        let c = m.shape()[1] as i64;
        rows.push(m.to_dtype(dt)?.constant_pad_nd(&[off, cols - off - c], Scalar::Int(0))?);
        off += c;
    }
    cat(&rows, 0)
}

/// `torch.meshgrid(*tensors, indexing)`: `indexing` is `"ij"` (matrix) or `"xy"` (Cartesian).
pub fn meshgrid(tensors: &[Tensor], indexing: &str) -> Result<Vec<Tensor>> {
    let op = "meshgrid";
    if tensors.is_empty() {
        return Err(Error::value(op, "torch.meshgrid: Expected at least one tensor"));
    }
    let xy = match indexing {
        "xy" => true,
        "ij" => false,
        s => return Err(Error::value(op, format!("torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {s}"))),
    };
    for t in tensors {
        if t.ndim() > 1 {
            return Err(Error::shape(op, format!("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {:?}", t.shape())));
        }
        if t.dtype() != tensors[0].dtype() {
            return Err(Error::dtype(op, "torch.meshgrid: expects all tensors to have the same dtype"));
        }
    }
    let n = tensors.len();
    let swap = xy && n >= 2;
    let pos = |i: usize| if swap && i < 2 { 1 - i } else { i };
    let mut shape = vec![0usize; n];
    for (i, t) in tensors.iter().enumerate() {
        shape[pos(i)] = t.numel();
    }
    tensors
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut v = vec![1i64; n];
            v[pos(i)] = -1;
            t.reshape(&v)?.expand(&shape.iter().map(|&s| s as i64).collect::<Vec<_>>())
        })
        .collect()
}

/// `torch.cartesian_prod(*tensors)`: every combination of elements, one row each.
pub fn cartesian_prod(tensors: &[Tensor]) -> Result<Tensor> {
    for t in tensors {
        if t.ndim() != 1 {
            return Err(Error::shape("cartesian_prod", format!("Expect a 1D vector, but got shape {:?}", t.shape())));
        }
    }
    if tensors.len() == 1 {
        return tensors[0].alias_copy();
    }
    let grids = meshgrid(tensors, "ij")?;
    let flat: Vec<Tensor> = grids.iter().map(|g| g.reshape(&[-1])).collect::<Result<_>>()?;
    stack(&flat, 1)
}

/// `torch.broadcast_tensors(*tensors)`: every tensor expanded to the common shape.
pub fn broadcast_tensors(tensors: &[Tensor]) -> Result<Vec<Tensor>> {
    let shapes: Vec<&[usize]> = tensors.iter().map(|t| t.shape()).collect();
    let s = crate::shape::broadcast_all("broadcast_tensors", &shapes)?;
    tensors.iter().map(|t| if t.shape() == s.as_slice() { Ok(t.alias()) } else { t.broadcast_to(&s) }).collect()
}

impl Tensor {
    /// `torch.combinations(x, r, with_replacement)`: all length-`r` combinations of a 1-d tensor's elements.
    pub fn combinations(&self, r: i64, with_replacement: bool) -> Result<Tensor> {
        let op = "combinations";
        if self.ndim() != 1 {
            return Err(Error::shape(op, format!("Expect a 1D vector, but got shape {:?}", self.shape())));
        }
        if r < 0 {
            return Err(Error::value(op, format!("Expect a non-negative number, but got {r}")));
        }
        if r == 0 {
            return Tensor::zeros_on(&[0], self.dtype(), self.device());
        }
        let n = self.numel();
        let r = r as usize;
        let mut idx: Vec<i64> = Vec::new();
        let mut cur: Vec<usize> = Vec::with_capacity(r);
        fn rec(n: usize, r: usize, start: usize, rep: bool, cur: &mut Vec<usize>, out: &mut Vec<i64>) {
            if cur.len() == r {
                out.extend(cur.iter().map(|&i| i as i64));
                return;
            }
            for i in start..n {
                cur.push(i);
                rec(n, r, if rep { i } else { i + 1 }, rep, cur, out);
                cur.pop();
            }
        }
        rec(n, r, 0, with_replacement, &mut cur, &mut idx);
        let c = idx.len() / r;
        let it = Tensor::from_vec(idx, &[c * r])?.to_device(self.device())?;
        self.index_select(0, &it)?.reshape(&[c as i64, r as i64])
    }
    /// `torch.atleast_1d(x)`.
    pub fn atleast_1d(&self) -> Result<Tensor> {
        if self.ndim() == 0 { self.reshape(&[1]) } else { Ok(self.alias()) }
    }
    /// `torch.atleast_2d(x)`.
    pub fn atleast_2d(&self) -> Result<Tensor> {
        match self.ndim() {
            0 => self.reshape(&[1, 1]),
            1 => self.unsqueeze(0),
            _ => Ok(self.alias()),
        }
    }
    /// `torch.atleast_3d(x)`.
    pub fn atleast_3d(&self) -> Result<Tensor> {
        match self.ndim() {
            0 => self.reshape(&[1, 1, 1]),
            1 => self.unsqueeze(0)?.unsqueeze(2),
            2 => self.unsqueeze(2),
            _ => Ok(self.alias()),
        }
    }
    /// `torch.alias_copy(x)`: a copy (PyTorch's functional form of an alias).
    pub fn alias_copy(&self) -> Result<Tensor> {
        self.copy()
    }
}

/// `torch.broadcast_shapes(*shapes)`.
pub fn broadcast_shapes(shapes: &[Vec<usize>]) -> Result<Vec<usize>> {
    let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
    crate::shape::broadcast_all("broadcast_shapes", &refs)
}

/// The dtype cats promote to, for callers that pre-check (kept public for the registry).
pub fn cat_dtype(tensors: &[Tensor]) -> Result<DType> {
    result_type(&tensors.iter().map(|t| Operand::Dim(t.dtype())).collect::<Vec<_>>())
}

/// `cat` of CPU tensors: the parts' rows interleaved along `d` into one buffer (`kept` are the
/// tensors not skipped by the legacy empty-tensor rule, `shape` the output's).
fn cat_cpu(tensors: &[Tensor], kept: &[usize], shape: &[usize], d: usize, dt: DType) -> Result<Tensor> {
    let outer: usize = shape[..d].iter().product();
    let tail: usize = shape[d + 1..].iter().product();
    Ok(crate::with_dtype!(dt, T, {
        let parts: Vec<Vec<T>> = kept.iter().map(|&i| cpu::to_vec::<T>(&tensors[i])).collect::<Result<_>>()?;
        let inner: Vec<usize> = kept.iter().map(|&i| tensors[i].shape()[d] * tail).collect();
        let mut v: Vec<T> = Vec::with_capacity(crate::shape::numel(shape));
        for o in 0..outer {
            for (p, &n) in parts.iter().zip(&inner) {
                v.extend_from_slice(&p[o * n..(o + 1) * n]);
            }
        }
        Tensor::from_vec(v, shape)?
    }))
}

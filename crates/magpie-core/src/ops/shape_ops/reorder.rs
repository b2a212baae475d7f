//! Ops that reorder or repeat elements: `flip`, `roll`, `rot90`, `repeat`, `tile`,
//! `repeat_interleave`, `tril`/`triu`, `diag`, `diag_embed`, `diagflat`, `fill`, `T`/`H`/`mH`.

use super::join::cat;
use crate::autograd;
use crate::element::Element;
use crate::ops::index::FillValue;
use crate::shape::{wrap_dim, wrap_dims};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Reads `x`'s storage through signed strides (`offset + sum(i_k * strides_k)`) into a row-major vector.
fn read_signed<T: Element>(x: &Tensor, offset: isize, strides: &[isize]) -> Result<Vec<T>> {
    let shape = x.shape().to_vec();
    let n = x.numel();
    crate::ops::convert::with_cpu(x, |c| -> Result<Vec<T>> {
        let src = T::slice(c).ok_or_else(|| Error::dtype("flip", "storage dtype mismatch"))?;
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return Ok(out);
        }
        let nd = shape.len();
        let mut idx = vec![0usize; nd];
        let mut pos = offset;
        for _ in 0..n {
            out.push(src[pos as usize]);
            for d in (0..nd).rev() {
                idx[d] += 1;
                pos += strides[d];
                if idx[d] < shape[d] {
                    break;
                }
                pos -= strides[d] * shape[d] as isize;
                idx[d] = 0;
            }
        }
        Ok(out)
    })?
}

fn shape_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&x| x as i64).collect()
}

impl Tensor {
    /// `torch.flip(x, dims)`: reverses the order of elements along `dims`.
    pub fn flip(&self, dims: &[i64]) -> Result<Tensor> {
        let ds = wrap_dims("flip", dims, self.ndim())?;
        #[cfg(feature = "cuda")]
        if self.device().is_cuda() && crate::backend::cuda::elementwise::ctype(self.dtype()).is_some() {
            use crate::{dtype::DType, scalar::Scalar};
            // on the device: one index_select with a reversed arange per flipped dim
            let out = {
                let _ng = autograd::no_grad();
                let mut y = self.detach();
                let mut moved = false;
                for &d in &ds {
                    let n = self.shape().get(d).copied().unwrap_or(1) as i64;
                    if n > 1 {
                        let rev = Tensor::arange_on(Scalar::Int(n - 1), Scalar::Int(-1), Scalar::Int(-1), DType::I64, self.device())?;
                        y = y.index_select(d as i64, &rev)?;
                        moved = true;
                    }
                }
                if moved { y } else { self.detach().copy()? }
            };
            let dv = dims.to_vec();
            autograd::record("Flip", &[self], std::slice::from_ref(&out), move |_, g| Ok(vec![Some(g[0].flip(&dv)?)]));
            return Ok(out);
        }
        let l = self.layout();
        let mut offset = l.offset as isize;
        let mut strides: Vec<isize> = l.strides.iter().map(|&s| s as isize).collect();
        for &d in &ds {
            if d < self.ndim() && l.shape[d] > 0 {
                offset += (l.shape[d] as isize - 1) * strides[d];
                strides[d] = -strides[d];
            }
        }
        let out = crate::with_dtype!(self.dtype(), T, { Tensor::from_vec(read_signed::<T>(self, offset, &strides)?, self.shape())? });
        let dv = dims.to_vec();
        autograd::record("Flip", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].flip(&dv)?)]));
        Ok(out)
    }
    /// `torch.fliplr(x)`: flips dim 1 (needs at least 2 dims).
    pub fn fliplr(&self) -> Result<Tensor> {
        if self.ndim() < 2 {
            return Err(Error::shape("fliplr", "Input must be >= 2-d."));
        }
        self.flip(&[1])
    }
    /// `torch.flipud(x)`: flips dim 0 (needs at least 1 dim).
    pub fn flipud(&self) -> Result<Tensor> {
        if self.ndim() < 1 {
            return Err(Error::shape("flipud", "Input must be >= 1-d."));
        }
        self.flip(&[0])
    }
    /// `torch.roll(x, shifts, dims)`: elements shifted cyclically; no dims rolls the flattened tensor.
    pub fn roll(&self, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
        let op = "roll";
        if shifts.is_empty() {
            return Err(Error::value(op, "`shifts` required"));
        }
        if dims.is_empty() {
            if shifts.len() != 1 {
                return Err(Error::value(op, format!("shifts and dimensions must align. shifts: {}, dims:0", shifts.len())));
            }
            return self.reshape(&[-1])?.roll(shifts, &[0])?.reshape(&shape_i64(self.shape()));
        }
        if shifts.len() != dims.len() {
            return Err(Error::value(op, format!("shifts and dimensions must align. shifts: {}, dims:{}", shifts.len(), dims.len())));
        }
        let mut x = self.clone();
        let mut changed = false;
        for (&s, &dim) in shifts.iter().zip(dims) {
            let d = wrap_dim(op, dim, self.ndim())?;
            let n = *x.shape().get(d).unwrap_or(&1) as i64;
            if n == 0 || x.ndim() == 0 {
                continue;
            }
            let s = s.rem_euclid(n);
            if s == 0 {
                continue;
            }
            x = cat(&[x.narrow(d as i64, n - s, s)?, x.narrow(d as i64, 0, n - s)?], d as i64)?;
            changed = true;
        }
        if changed { Ok(x) } else { self.copy() }
    }
    /// `torch.rot90(x, k, dims)`: rotation by 90 degrees `k` times in the plane of `dims`.
    pub fn rot90(&self, k: i64, dims: &[i64]) -> Result<Tensor> {
        let op = "rot90";
        if dims.len() != 2 {
            return Err(Error::value(op, format!("expected total rotation dims == 2, but got dims = {}", dims.len())));
        }
        if self.ndim() < 2 {
            return Err(Error::shape(op, format!("expected total dims >= 2, but got total dims = {}", self.ndim())));
        }
        let d0 = wrap_dim(op, dims[0], self.ndim())? as i64;
        let d1 = wrap_dim(op, dims[1], self.ndim())? as i64;
        if d0 == d1 {
            return Err(Error::value(op, format!("expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")));
        }
        match k.rem_euclid(4) {
            1 => self.flip(&[d1])?.transpose(d0, d1),
            2 => self.flip(&[d0, d1]),
            3 => self.flip(&[d0])?.transpose(d0, d1),
            _ => self.copy(),
        }
    }
    /// `x.repeat(repeats)`: tiles the tensor; `repeats` has at least `ndim` entries.
    pub fn repeat(&self, repeats: &[i64]) -> Result<Tensor> {
        let op = "repeat";
        if repeats.len() < self.ndim() {
            return Err(Error::shape(op, "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
        }
        if let Some(r) = repeats.iter().find(|&&r| r < 0) {
            return Err(Error::value(op, format!("Trying to create tensor with negative dimension {r}: {repeats:?}")));
        }
        let lead = repeats.len() - self.ndim();
        let mut src = vec![1i64; lead];
        src.extend(shape_i64(self.shape()));
        let inter: Vec<i64> = src.iter().flat_map(|&s| [1, s]).collect();
        let big: Vec<i64> = src.iter().zip(repeats).flat_map(|(&s, &r)| [r, s]).collect();
        let out: Vec<i64> = src.iter().zip(repeats).map(|(&s, &r)| s * r).collect();
        self.reshape(&inter)?.expand(&big)?.contiguous()?.reshape(&out)
    }
    /// `torch.tile(x, reps)`: `repeat` with `reps` padded by leading ones.
    pub fn tile(&self, reps: &[i64]) -> Result<Tensor> {
        let mut r = vec![1i64; self.ndim().saturating_sub(reps.len())];
        r.extend_from_slice(reps);
        self.repeat(&r)
    }
    /// `torch.repeat_interleave(x, repeats, dim)` with an integer count; `dim` None flattens first.
    pub fn repeat_interleave(&self, repeats: i64, dim: Option<i64>) -> Result<Tensor> {
        let op = "repeat_interleave";
        if repeats < 0 {
            return Err(Error::value(op, "repeats can not be negative"));
        }
        let (x, d) = match dim {
            None => (self.reshape(&[-1])?, 0usize),
            Some(dm) => {
                if self.ndim() == 0 {
                    (self.reshape(&[1])?, wrap_dim(op, dm, 1)?)
                } else {
                    (self.clone(), wrap_dim(op, dm, self.ndim())?)
                }
            }
        };
        let mut big = shape_i64(x.shape());
        big.insert(d + 1, repeats);
        let mut out = shape_i64(x.shape());
        out[d] *= repeats;
        x.unsqueeze(d as i64 + 1)?.expand(&big)?.contiguous()?.reshape(&out)
    }
    /// `torch.repeat_interleave(x, repeats_tensor, dim)`: element `i` repeated `repeats[i]` times.
    pub fn repeat_interleave_tensor(&self, repeats: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        let op = "repeat_interleave";
        let (x, d) = match dim {
            None => (self.reshape(&[-1])?, 0usize),
            Some(dm) => (if self.ndim() == 0 { self.reshape(&[1])? } else { self.clone() }, wrap_dim(op, dm, self.ndim())?),
        };
        if !repeats.dtype().is_int() || repeats.ndim() > 1 {
            return Err(Error::value(op, "repeat_interleave: repeats must be a 0-dim or 1-dim integer tensor"));
        }
        let n = x.shape()[d];
        let mut r: Vec<i64> = repeats.to_vec()?;
        if r.len() == 1 {
            r = vec![r[0]; n];
        }
        if r.len() != n {
            return Err(Error::value(op, format!("repeats must have the same size as input along dim, but got repeats.size(0) = {} and input.size({d}) = {n}", r.len())));
        }
        let idx = repeat_counts(op, &r)?.to_device(x.device())?;
        x.index_select(d as i64, &idx)
    }
    /// `torch.tril(x, diagonal)`: zeros above the `diagonal`-th diagonal of the last two dims.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("tril", diagonal, true)
    }
    /// `torch.triu(x, diagonal)`: zeros below the `diagonal`-th diagonal of the last two dims.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("triu", diagonal, false)
    }
    fn triangle(&self, op: &str, k: i64, lower: bool) -> Result<Tensor> {
        if self.ndim() < 2 {
            return Err(Error::shape(op, format!("{op}: input tensor must have at least 2 dimensions")));
        }
        let (m, n) = (self.shape()[self.ndim() - 2], self.shape()[self.ndim() - 1]);
        let mut mask = Vec::with_capacity(m * n);
        for i in 0..m as i64 {
            for j in 0..n as i64 {
                mask.push(if lower { j - i <= k } else { j - i >= k });
            }
        }
        let mask = Tensor::from_vec(mask, &[m, n])?.to_device(self.device())?;
        let zero = Tensor::zeros_on(&[], self.dtype(), self.device())?;
        mask.where_(self, &zero)
    }
    /// `torch.diag(x, diagonal)`: a 1-d tensor becomes a diagonal matrix; a matrix gives its diagonal.
    pub fn diag(&self, diagonal: i64) -> Result<Tensor> {
        match self.ndim() {
            1 => {
                let n = self.numel() + diagonal.unsigned_abs() as usize;
                let z = Tensor::zeros_on(&[n, n], self.dtype(), self.device())?;
                z.diagonal_scatter(self, diagonal, 0, 1)
            }
            2 => self.diagonal(diagonal, 0, 1)?.copy(),
            d => Err(Error::shape("diag", format!("diag(): Supports 1D or 2D tensors. Got {d}D"))),
        }
    }
    /// `torch.diag_embed(x, offset, dim1, dim2)`: the last dim of `x` on diagonals of new matrices.
    pub fn diag_embed(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        let op = "diag_embed";
        let nd = self.ndim() + 1;
        let a = wrap_dim(op, dim1, nd)?;
        let b = wrap_dim(op, dim2, nd)?;
        if a == b {
            return Err(Error::value(op, format!("diagonal dimensions cannot be identical {dim1}, {dim2}")));
        }
        let last = *self.shape().last().unwrap_or(&1);
        let n = last + offset.unsigned_abs() as usize;
        let mut shape: Vec<usize> = if self.ndim() == 0 { vec![] } else { self.shape()[..self.ndim() - 1].to_vec() };
        let (lo, hi) = (a.min(b), a.max(b));
        shape.insert(lo, n);
        shape.insert(hi, n);
        let z = Tensor::zeros_on(&shape, self.dtype(), self.device())?;
        let src = if self.ndim() == 0 { self.reshape(&[1])? } else { self.clone() };
        z.diagonal_scatter(&src, offset, a as i64, b as i64)
    }
    /// `torch.diagflat(x, offset)`: the flattened input on a diagonal.
    pub fn diagflat(&self, offset: i64) -> Result<Tensor> {
        self.reshape(&[-1])?.diag(offset)
    }
    /// `torch.fill(x, value)`: a tensor like `x` filled with `value` (a scalar or a 0-d tensor,
    /// which then receives the summed gradient).
    pub fn fill(&self, value: &FillValue) -> Result<Tensor> {
        let v = value.to_tensor("fill", self.dtype())?;
        let out = {
            let _ng = autograd::no_grad();
            v.broadcast_to(self.shape())?.copy()?
        };
        // the result does not depend on `x` (zero gradient) and sums into a tensor `value`
        autograd::record("Fill", &[self, &v], &[out.clone()], |ctx, g| {
            let gx = if ctx.needs_input_grad(0) { Some(g[0].zeros_like()?) } else { None };
            let gv = if ctx.needs_input_grad(1) { Some(g[0].sum()?) } else { None };
            Ok(vec![gx, gv])
        });
        Ok(out)
    }
    /// `x.T`: all dims reversed.
    pub fn t_all(&self) -> Result<Tensor> {
        let perm: Vec<i64> = (0..self.ndim() as i64).rev().collect();
        self.permute(&perm)
    }
    /// `x.H`: conjugate transpose of a matrix (0-d and 2-d only).
    pub fn h(&self) -> Result<Tensor> {
        if self.ndim() != 0 && self.ndim() != 2 {
            return Err(Error::shape("H", format!("tensor.H is only supported on matrices (2-D tensors). Got {}-D tensor.", self.ndim())));
        }
        if self.dtype().is_complex() {
            return Err(Error::unsupported("H", "conjugation of complex tensors"));
        }
        self.t_all()
    }
    /// `x.mH`: conjugate transpose of the last two dims.
    pub fn mh(&self) -> Result<Tensor> {
        if self.dtype().is_complex() {
            return Err(Error::unsupported("mH", "conjugation of complex tensors"));
        }
        if self.ndim() < 2 {
            return Err(Error::shape("mH", format!("tensor.mH is only supported on matrices or batches of matrices. Got {}-D tensor.", self.ndim())));
        }
        self.transpose(-2, -1)
    }
}

/// `[0]*r[0] ++ [1]*r[1] ++ ...` as an int64 tensor (`repeat_interleave(repeats)`).
pub fn repeat_counts(op: &str, r: &[i64]) -> Result<Tensor> {
    if r.iter().any(|&v| v < 0) {
        return Err(Error::value(op, "repeats can not be negative"));
    }
    let total: i64 = r.iter().sum();
    let mut idx = Vec::with_capacity(total as usize);
    for (i, &c) in r.iter().enumerate() {
        idx.extend(std::iter::repeat_n(i as i64, c as usize));
    }
    Tensor::from_vec(idx, &[total as usize])
}

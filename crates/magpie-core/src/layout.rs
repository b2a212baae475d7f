//! `Layout`: shape, strides and offset into a storage. Every view op is a function from
//! one Layout to another over the same storage; nothing here touches data.

use crate::shape::{numel, wrap_dim};
use crate::{Error, Result};

/// Where a tensor's elements lie in its storage: element `idx` is at
/// `offset + sum(idx[i] * strides[i])` (in elements, not bytes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub offset: usize,
}

/// Row-major strides for a shape.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1usize;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1));
    }
    strides
}

impl Layout {
    /// A row-major layout at offset 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout { shape: shape.to_vec(), strides: contiguous_strides(shape), offset: 0 }
    }
    /// Number of dims.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }
    /// Row-major and dense (size-1 dims may have any stride, as in PyTorch).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for i in (0..self.ndim()).rev() {
            if self.shape[i] == 1 {
                continue;
            }
            if self.shape[i] == 0 {
                return true;
            }
            if self.strides[i] != expected {
                return false;
            }
            expected *= self.shape[i];
        }
        true
    }
    /// True when the elements tile `numel` consecutive storage slots in some dim order (a
    /// permutation of a contiguous layout: transposes, `permute`s); contiguous layouts are dense.
    pub fn is_dense(&self) -> bool {
        let mut dims: Vec<(usize, usize)> =
            self.shape.iter().zip(&self.strides).filter(|(s, _)| **s != 1).map(|(&s, &st)| (st, s)).collect();
        if dims.iter().any(|&(_, s)| s == 0) {
            return true;
        }
        dims.sort_unstable();
        let mut expected = 1usize;
        for (st, s) in dims {
            if st != expected {
                return false;
            }
            expected *= s;
        }
        true
    }
    /// The storage range `[lo, hi)` this layout can touch (empty for an empty tensor).
    pub fn storage_span(&self) -> (usize, usize) {
        if self.numel() == 0 {
            return (self.offset, self.offset);
        }
        let max: usize = self.shape.iter().zip(&self.strides).map(|(&s, &st)| (s - 1) * st).sum();
        (self.offset, self.offset + max + 1)
    }

    /// `transpose(d0, d1)`.
    pub fn transpose(&self, d0: usize, d1: usize) -> Layout {
        let mut l = self.clone();
        l.shape.swap(d0, d1);
        l.strides.swap(d0, d1);
        l
    }
    /// `permute(dims)`; `dims` must be a permutation of `0..ndim`.
    pub fn permute(&self, op: &str, dims: &[i64]) -> Result<Layout> {
        if dims.len() != self.ndim() {
            return Err(Error::shape(
                op,
                format!("number of dims don't match in permute: got {} for a tensor of {} dims", dims.len(), self.ndim()),
            ));
        }
        let d = crate::shape::wrap_dims(op, dims, self.ndim())?;
        Ok(Layout {
            shape: d.iter().map(|&i| self.shape[i]).collect(),
            strides: d.iter().map(|&i| self.strides[i]).collect(),
            offset: self.offset,
        })
    }
    /// `narrow(dim, start, len)` on a wrapped dim.
    pub fn narrow(&self, op: &str, dim: usize, start: usize, len: usize) -> Result<Layout> {
        if start + len > self.shape[dim] {
            return Err(Error::index(
                op,
                format!("start ({start}) + length ({len}) exceeds dimension size ({}) of dim {dim}", self.shape[dim]),
            ));
        }
        let mut l = self.clone();
        l.shape[dim] = len;
        if len > 0 {
            l.offset += start * self.strides[dim];
        }
        Ok(l)
    }
    /// A strided slice `start..end` by `step` (> 0) along a wrapped dim; bounds already clamped.
    pub fn slice(&self, dim: usize, start: usize, end: usize, step: usize) -> Layout {
        let mut l = self.clone();
        let len = if end > start { (end - start).div_ceil(step) } else { 0 };
        l.shape[dim] = len;
        if len > 0 {
            l.offset += start * self.strides[dim];
        }
        l.strides[dim] = self.strides[dim] * step;
        l
    }
    /// `select(dim, index)` on a wrapped dim and non-negative index.
    pub fn select(&self, dim: usize, index: usize) -> Layout {
        let mut l = self.clone();
        l.offset += index * self.strides[dim];
        l.shape.remove(dim);
        l.strides.remove(dim);
        l
    }
    /// Inserts a size-1 dim at a wrapped position `0..=ndim`.
    pub fn unsqueeze(&self, dim: usize) -> Layout {
        let mut l = self.clone();
        let stride = if dim < self.ndim() { self.shape[dim] * self.strides[dim] } else { 1 };
        l.shape.insert(dim, 1);
        l.strides.insert(dim, stride.max(1));
        l
    }
    /// Removes the given size-1 dims (others are left alone, as in PyTorch).
    pub fn squeeze_dims(&self, dims: &[usize]) -> Layout {
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        for i in 0..self.ndim() {
            if !(dims.contains(&i) && self.shape[i] == 1) {
                shape.push(self.shape[i]);
                strides.push(self.strides[i]);
            }
        }
        Layout { shape, strides, offset: self.offset }
    }
    /// Broadcasts to `shape` (stride 0 on stretched and new dims).
    pub fn broadcast_to(&self, op: &str, shape: &[usize]) -> Result<Layout> {
        if shape.len() < self.ndim() {
            return Err(Error::shape(
                op,
                format!("the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})", shape.len(), self.ndim()),
            ));
        }
        let lead = shape.len() - self.ndim();
        let mut strides = vec![0; shape.len()];
        for i in 0..shape.len() {
            if i < lead {
                continue;
            }
            let (s, st) = (self.shape[i - lead], self.strides[i - lead]);
            if s == shape[i] {
                strides[i] = st;
            } else if s == 1 {
                strides[i] = 0;
            } else {
                return Err(Error::shape(
                    op,
                    format!(
                        "The expanded size of the tensor ({}) must match the existing size ({s}) at non-singleton dimension {i}. Target sizes: {shape:?}. Tensor sizes: {:?}",
                        shape[i], self.shape
                    ),
                ));
            }
        }
        Ok(Layout { shape: shape.to_vec(), strides, offset: self.offset })
    }
    /// A view with a new shape if the strides allow it without a copy (PyTorch's `computeStride`).
    pub fn view(&self, new_shape: &[usize]) -> Option<Layout> {
        let numel = self.numel();
        if numel == 0 || self.ndim() == 0 {
            return Some(Layout { shape: new_shape.to_vec(), strides: contiguous_strides(new_shape), offset: self.offset });
        }
        let mut new_strides = vec![0usize; new_shape.len()];
        let mut view_d = new_shape.len() as isize - 1;
        let mut chunk_base_stride = *self.strides.last()?;
        let mut tensor_numel = 1usize;
        let mut view_numel = 1usize;
        for tensor_d in (0..self.ndim()).rev() {
            tensor_numel *= self.shape[tensor_d];
            if tensor_d == 0
                || (self.shape[tensor_d - 1] != 1 && self.strides[tensor_d - 1] != tensor_numel * chunk_base_stride)
            {
                while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                    new_strides[view_d as usize] = view_numel * chunk_base_stride;
                    view_numel *= new_shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base_stride = self.strides[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(Layout { shape: new_shape.to_vec(), strides: new_strides, offset: self.offset })
    }
    /// `diagonal(offset, dim1, dim2)` on wrapped, distinct dims: the diagonal becomes the last dim.
    pub fn diagonal(&self, offset: i64, d1: usize, d2: usize) -> Layout {
        let mut l = self.clone();
        let (s1, s2) = (self.shape[d1] as i64, self.shape[d2] as i64);
        let len = if offset >= 0 { (s1).min(s2 - offset).max(0) } else { (s1 + offset).min(s2).max(0) } as usize;
        if len > 0 {
            if offset >= 0 {
                l.offset += offset as usize * self.strides[d2];
            } else {
                l.offset += (-offset) as usize * self.strides[d1];
            }
        }
        let diag_stride = self.strides[d1] + self.strides[d2];
        let (hi, lo) = if d1 > d2 { (d1, d2) } else { (d2, d1) };
        l.shape.remove(hi);
        l.strides.remove(hi);
        l.shape.remove(lo);
        l.strides.remove(lo);
        l.shape.push(len);
        l.strides.push(diag_stride);
        l
    }
    /// `unfold(dim, size, step)` on a wrapped dim: windows become a new last dim.
    pub fn unfold(&self, op: &str, dim: usize, size: usize, step: usize) -> Result<Layout> {
        let dim_size = if self.ndim() == 0 { 1 } else { self.shape[dim] };
        if size > dim_size {
            return Err(Error::value(op, format!("maximum size for tensor at dimension {dim} is {dim_size} but size is {size}")));
        }
        if step == 0 {
            return Err(Error::value(op, "step is 0 but must be > 0"));
        }
        let mut l = self.clone();
        if self.ndim() == 0 {
            l.shape = vec![size];
            l.strides = vec![1];
            return Ok(l);
        }
        l.shape[dim] = (dim_size - size) / step + 1;
        l.strides[dim] = self.strides[dim] * step;
        l.shape.push(size);
        l.strides.push(self.strides[dim]);
        Ok(l)
    }
    /// Wraps a dim of this layout.
    pub fn wrap(&self, op: &str, dim: i64) -> Result<usize> {
        wrap_dim(op, dim, self.ndim())
    }
}

/// The `(size, stride)` dims of `l` with size-1 dims dropped and neighbours merged where one
/// steps exactly over the other (`stride[d] == size[d+1] * stride[d+1]`): the same elements
/// in the same row-major order, in as few (and as long) runs as the memory allows.
fn coalesced(l: &Layout) -> Vec<(usize, usize)> {
    let mut dims: Vec<(usize, usize)> = Vec::with_capacity(l.ndim());
    for (&n, &st) in l.shape.iter().zip(&l.strides) {
        if n == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.1 == n * st => *last = (last.0 * n, st),
            _ => dims.push((n, st)),
        }
    }
    dims
}

/// Calls `f(start, len, stride)` for each innermost run of `l` (dims coalesced first), in
/// row-major order: the run's elements are at `start + j * stride` for `j < len`.
#[inline]
pub fn for_each_run(l: &Layout, mut f: impl FnMut(usize, usize, usize)) {
    if l.numel() == 0 {
        return;
    }
    let dims = coalesced(l);
    let Some((&(inner, inner_stride), outer)) = dims.split_last() else {
        f(l.offset, 1, 1);
        return;
    };
    let mut idx = vec![0usize; outer.len()];
    let mut base = l.offset;
    loop {
        f(base, inner, inner_stride);
        // advance the odometer over the outer dims, innermost first
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            let (n, st) = outer[d];
            idx[d] += 1;
            base += st;
            if idx[d] < n {
                break;
            }
            base -= idx[d] * st;
            idx[d] = 0;
        }
    }
}

/// Visits the storage index of every element of `l` in row-major order (a tight loop over
/// each run of [`for_each_run`]).
#[inline]
pub fn for_each_index(l: &Layout, mut f: impl FnMut(usize)) {
    for_each_run(l, |start, len, stride| {
        for j in 0..len {
            f(start + j * stride);
        }
    });
}

/// The storage indices of every element of `l`, row-major.
pub fn indices(l: &Layout) -> Vec<usize> {
    let mut v = Vec::with_capacity(l.numel());
    for_each_index(l, |i| v.push(i));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn view_of_transpose_fails_and_contiguous_succeeds() {
        let l = Layout::contiguous(&[2, 3, 4]);
        assert!(l.view(&[6, 4]).is_some());
        assert!(l.transpose(0, 1).view(&[24]).is_none());
        assert_eq!(l.view(&[4, 6]).unwrap().strides, vec![6, 1]);
    }
    #[test]
    fn odometer_order() {
        let l = Layout::contiguous(&[2, 3]).transpose(0, 1);
        assert_eq!(indices(&l), vec![0, 3, 1, 4, 2, 5]);
    }
    #[test]
    fn runs_coalesce_and_keep_order() {
        // a narrowed last dim: rows of 2 at stride 4 (dims 0 and 1 merge into 6 runs)
        let l = Layout::contiguous(&[2, 3, 4]).narrow("t", 2, 1, 2).unwrap();
        let mut runs = Vec::new();
        for_each_run(&l, |s, n, st| runs.push((s, n, st)));
        assert_eq!(runs, vec![(1, 2, 1), (5, 2, 1), (9, 2, 1), (13, 2, 1), (17, 2, 1), (21, 2, 1)]);
        // contiguous: one run; size-1 dims and 0-d: one element
        let mut runs = Vec::new();
        for_each_run(&Layout::contiguous(&[2, 1, 3]), |s, n, st| runs.push((s, n, st)));
        assert_eq!(runs, vec![(0, 6, 1)]);
        let mut runs = Vec::new();
        for_each_run(&Layout::contiguous(&[]), |s, n, st| runs.push((s, n, st)));
        assert_eq!(runs, vec![(0, 1, 1)]);
        // a transpose: every element its own stride-3 step inside runs of 2
        let t = Layout::contiguous(&[2, 3]).transpose(0, 1);
        let mut idx = Vec::new();
        for_each_index(&t, |i| idx.push(i));
        assert_eq!(idx, vec![0, 3, 1, 4, 2, 5]);
        // broadcast (stride 0) dims stay
        let b = Layout { shape: vec![3, 2], strides: vec![0, 1], offset: 4 };
        assert_eq!(indices(&b), vec![4, 5, 4, 5, 4, 5]);
    }
}

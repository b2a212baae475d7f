//! The `*_copy` variants of view ops (PyTorch's functional forms): the view, then a copy.
//! Also `view_as`, `reshape_as`, `ravel`.

use crate::tensor::Tensor;
use crate::Result;

fn shape_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&x| x as i64).collect()
}

impl Tensor {
    /// `torch.view_copy(x, size)`.
    pub fn view_copy(&self, size: &[i64]) -> Result<Tensor> {
        self.reshape(size)?.copy()
    }
    /// `torch.permute_copy(x, dims)`.
    pub fn permute_copy(&self, dims: &[i64]) -> Result<Tensor> {
        self.permute(dims)?.copy()
    }
    /// `torch.t_copy(x)`.
    pub fn t_copy(&self) -> Result<Tensor> {
        self.t()?.copy()
    }
    /// `torch.transpose_copy(x, d0, d1)`.
    pub fn transpose_copy(&self, d0: i64, d1: i64) -> Result<Tensor> {
        self.transpose(d0, d1)?.copy()
    }
    /// `torch.unsqueeze_copy(x, dim)`.
    pub fn unsqueeze_copy(&self, dim: i64) -> Result<Tensor> {
        self.unsqueeze(dim)?.copy()
    }
    /// `torch.squeeze_copy(x, dims)`; None removes every size-1 dim.
    pub fn squeeze_copy(&self, dims: Option<&[i64]>) -> Result<Tensor> {
        match dims {
            None => self.squeeze()?.copy(),
            Some(d) => self.squeeze_dims(d)?.copy(),
        }
    }
    /// `torch.expand_copy(x, size)`.
    pub fn expand_copy(&self, size: &[i64]) -> Result<Tensor> {
        self.expand(size)?.copy()
    }
    /// `torch.diagonal_copy(x, offset, dim1, dim2)`.
    pub fn diagonal_copy(&self, offset: i64, dim1: i64, dim2: i64) -> Result<Tensor> {
        self.diagonal(offset, dim1, dim2)?.copy()
    }
    /// `torch.unfold_copy(x, dim, size, step)`.
    pub fn unfold_copy(&self, dim: i64, size: i64, step: i64) -> Result<Tensor> {
        self.unfold(dim, size, step)?.copy()
    }
    /// `torch.narrow_copy(x, dim, start, length)`.
    pub fn narrow_copy(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        self.narrow(dim, start, length)?.copy()
    }
    /// `torch.as_strided_copy(x, size, stride, storage_offset)`.
    pub fn as_strided_copy(&self, size: &[i64], stride: &[i64], storage_offset: Option<i64>) -> Result<Tensor> {
        self.as_strided(size, stride, storage_offset)?.copy()
    }
    /// `torch.split_with_sizes_copy(x, sizes, dim)`.
    pub fn split_with_sizes_copy(&self, sizes: &[i64], dim: i64) -> Result<Vec<Tensor>> {
        self.split_with_sizes(sizes, dim)?.iter().map(|t| t.copy()).collect()
    }
    /// `torch.unbind_copy(x, dim)`.
    pub fn unbind_copy(&self, dim: i64) -> Result<Vec<Tensor>> {
        self.unbind(dim)?.iter().map(|t| t.copy()).collect()
    }
    /// `x.view_as(other)`.
    pub fn view_as(&self, other: &Tensor) -> Result<Tensor> {
        self.view(&shape_i64(other.shape()))
    }
    /// `x.reshape_as(other)`.
    pub fn reshape_as(&self, other: &Tensor) -> Result<Tensor> {
        self.reshape(&shape_i64(other.shape()))
    }
    /// `torch.ravel(x)`: flattened (a view when possible).
    pub fn ravel(&self) -> Result<Tensor> {
        self.reshape(&[-1])
    }
}

//! `SparseTensor`: a COO or CSR tensor as index tensors plus a values tensor, with its accessors.

use magpie_core::{DType, Device, Error, Result, Tensor};
use std::sync::{Arc, OnceLock};

/// The sparse layouts (`torch.sparse_coo`, `torch.sparse_csr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SparseLayout {
    /// Coordinates: `indices [sparse_dim, nnz]`, `values [nnz, *dense_shape]`.
    Coo,
    /// Compressed rows of a 2-D matrix: `crow_indices [nrows + 1]`, `col_indices [nnz]`, `values [nnz]`.
    Csr,
}

impl std::fmt::Display for SparseLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SparseLayout::Coo => "torch.sparse_coo",
            SparseLayout::Csr => "torch.sparse_csr",
        })
    }
}

/// The index tensors of one layout (int64, on the values' device).
#[derive(Clone, Debug)]
pub(crate) enum Index {
    Coo { indices: Tensor },
    Csr { crow: Tensor, col: Tensor },
}

/// A sparse tensor (`torch.sparse_coo_tensor` / `torch.sparse_csr_tensor`): index tensors, a values
/// tensor and the full size. The values tensor carries autograd: a sparse tensor "requires grad"
/// when its values do, and its gradient ([`SparseTensor::grad`]) is sparse with the same pattern.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_sparse::sparse_coo_tensor;
/// let i = Tensor::from_vec(vec![0i64, 1, 1, 1, 0, 2], &[2, 3])?;
/// let v = Tensor::from_vec(vec![3f32, 4., 5.], &[3])?;
/// let s = sparse_coo_tensor(&i, &v, Some(&[2, 3]))?;
/// assert_eq!((s.nnz(), s.sparse_dim(), s.dense_dim()), (3, 2, 0));
/// assert_eq!(s.to_dense()?.to_vec::<f32>()?, vec![0., 3., 0., 4., 0., 5.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SparseTensor {
    pub(crate) index: Index,
    pub(crate) values: Tensor,
    pub(crate) size: Vec<usize>,
    pub(crate) coalesced: bool,
    /// `mm`'s CSR pattern of these indices, built on first use (indices never change in place).
    pub(crate) plan: Arc<OnceLock<crate::mm::Plan>>,
}

impl SparseTensor {
    /// A COO tensor from parts already checked by the caller.
    pub(crate) fn coo_unchecked(indices: Tensor, values: Tensor, size: Vec<usize>, coalesced: bool) -> SparseTensor {
        SparseTensor { index: Index::Coo { indices }, values, size, coalesced, plan: Default::default() }
    }
    /// A CSR tensor from parts already checked by the caller.
    pub(crate) fn csr_unchecked(crow: Tensor, col: Tensor, values: Tensor, size: Vec<usize>) -> SparseTensor {
        SparseTensor { index: Index::Csr { crow, col }, values, size, coalesced: true, plan: Default::default() }
    }
    /// `layout`.
    pub fn layout(&self) -> SparseLayout {
        match self.index {
            Index::Coo { .. } => SparseLayout::Coo,
            Index::Csr { .. } => SparseLayout::Csr,
        }
    }
    /// `size()` / `shape`.
    pub fn shape(&self) -> &[usize] {
        &self.size
    }
    /// `dim()`.
    pub fn ndim(&self) -> usize {
        self.size.len()
    }
    /// `dtype` (the values' dtype).
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }
    /// `device` (the values' device; the indices live there too).
    pub fn device(&self) -> Device {
        self.values.device()
    }
    /// `_nnz()`: the number of stored entries (duplicates counted).
    pub fn nnz(&self) -> usize {
        self.values.shape().first().copied().unwrap_or(0)
    }
    /// `sparse_dim()`: COO's number of index rows; 2 for CSR.
    pub fn sparse_dim(&self) -> usize {
        match &self.index {
            Index::Coo { indices } => indices.shape()[0],
            Index::Csr { .. } => 2,
        }
    }
    /// `dense_dim()`: the dimensions each stored entry holds (values' dimensions after the first).
    pub fn dense_dim(&self) -> usize {
        self.values.ndim().saturating_sub(1)
    }
    /// `is_coalesced()`: no duplicate indices and indices sorted (always true for CSR, whose
    /// invariants demand it).
    pub fn is_coalesced(&self) -> bool {
        self.coalesced
    }
    /// `values()`: the values; for COO only on a coalesced tensor, as in PyTorch.
    pub fn values(&self) -> Result<Tensor> {
        if !self.coalesced {
            return Err(Error::value("values", "Cannot get values on an uncoalesced tensor, please call .coalesce() first"));
        }
        Ok(self.values.clone())
    }
    /// `_values()`: the stored values whatever the coalesced state.
    pub fn values_raw(&self) -> &Tensor {
        &self.values
    }
    /// `indices()`: COO's `[sparse_dim, nnz]` int64 indices of a coalesced tensor.
    pub fn indices(&self) -> Result<Tensor> {
        if !self.coalesced {
            return Err(Error::value("indices", "Cannot get indices on an uncoalesced tensor, please call .coalesce() first"));
        }
        self.indices_raw().cloned()
    }
    /// `_indices()`: COO's stored indices whatever the coalesced state.
    pub fn indices_raw(&self) -> Result<&Tensor> {
        match &self.index {
            Index::Coo { indices } => Ok(indices),
            Index::Csr { .. } => Err(Error::value("indices", "indices expected sparse coordinate tensor layout but got SparseCsr")),
        }
    }
    /// `crow_indices()` of a CSR tensor.
    pub fn crow_indices(&self) -> Result<Tensor> {
        match &self.index {
            Index::Csr { crow, .. } => Ok(crow.clone()),
            Index::Coo { .. } => Err(Error::value("crow_indices", "crow_indices expected sparse row compressed tensor layout but got Sparse")),
        }
    }
    /// `col_indices()` of a CSR tensor.
    pub fn col_indices(&self) -> Result<Tensor> {
        match &self.index {
            Index::Csr { col, .. } => Ok(col.clone()),
            Index::Coo { .. } => Err(Error::value("col_indices", "col_indices expected sparse row compressed tensor layout but got Sparse")),
        }
    }
    /// `requires_grad`: whether the values require grad.
    pub fn requires_grad(&self) -> bool {
        self.values.requires_grad()
    }
    /// `requires_grad_()`: makes the values a leaf that requires grad (the values must be a leaf).
    pub fn requires_grad_(self, flag: bool) -> Result<SparseTensor> {
        self.values.requires_grad_(flag)?;
        Ok(self)
    }
    /// `detach()`: the same indices with detached values.
    pub fn detach(&self) -> SparseTensor {
        SparseTensor { values: self.values.detach(), ..self.clone() }
    }
    /// `.grad` of a sparse leaf: sparse, with the (coalesced) pattern of this tensor, as PyTorch's
    /// `torch.sparse.mm` leaves it; `None` before a backward reached the values.
    pub fn grad(&self) -> Result<Option<SparseTensor>> {
        let Some(g) = self.values.grad() else { return Ok(None) };
        let st = SparseTensor { values: g, ..self.clone() };
        if self.coalesced {
            return Ok(Some(st));
        }
        // duplicates of one position get the same gradient (every op sees only their sum): keep one
        crate::coalesce::first_of_duplicates(&st).map(Some)
    }
    /// `to(device)`: indices and values moved (differentiably for the values).
    pub fn to_device(&self, device: Device) -> Result<SparseTensor> {
        let index = match &self.index {
            Index::Coo { indices } => Index::Coo { indices: indices.to_device(device)? },
            Index::Csr { crow, col } => Index::Csr { crow: crow.to_device(device)?, col: col.to_device(device)? },
        };
        Ok(SparseTensor { index, values: self.values.to_device(device)?, size: self.size.clone(), coalesced: self.coalesced, plan: Default::default() })
    }
    /// `to(dtype)`: the values cast (differentiably).
    pub fn to_dtype(&self, dtype: DType) -> Result<SparseTensor> {
        Ok(SparseTensor { values: self.values.to_dtype(dtype)?, ..self.clone() })
    }
    /// The values replaced (same indices, size and coalesced state).
    pub(crate) fn with_values(&self, values: Tensor) -> SparseTensor {
        SparseTensor { values, ..self.clone() }
    }
}

/// Reads an int64 index tensor to the host.
pub(crate) fn host_i64(t: &Tensor) -> Result<Vec<i64>> {
    t.to_dtype(DType::I64)?.to_vec()
}

/// An int64 tensor of `shape` on `device`.
pub(crate) fn index_tensor(v: Vec<i64>, shape: &[usize], device: Device) -> Result<Tensor> {
    Tensor::from_vec(v, shape)?.to_device(device)
}

/// The number of elements of a shape.
pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `dim` wrapped into `0..n` with PyTorch's error.
pub(crate) fn wrap_dim(op: &str, dim: i64, n: usize) -> Result<usize> {
    let n = n as i64;
    let lo = -n.max(1);
    let hi = n.max(1) - 1;
    if dim < lo || dim > hi {
        return Err(Error::index(op, format!("Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")));
    }
    Ok(if dim < 0 { (dim + n) as usize } else { dim as usize })
}

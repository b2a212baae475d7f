//! Conversions: `to_dense`, dense `to_sparse()` / `to_sparse_csr()`, COO <-> CSR. Index work on
//! the host; values move with `index_add` / `index_select`, so every conversion is differentiable.

use crate::coalesce::keys;
use crate::construct::sparse_numel;
use crate::tensor::{host_i64, index_tensor, Index, SparseTensor};
use magpie_core::{DType, Error, Result, Scalar, Tensor};

/// The row of each CSR entry, from `crow` (host).
pub(crate) fn csr_rows(crow: &[i64]) -> Vec<i64> {
    let mut rows = Vec::with_capacity(crow.last().copied().unwrap_or(0).max(0) as usize);
    for r in 0..crow.len().saturating_sub(1) {
        rows.extend(std::iter::repeat_n(r as i64, (crow[r + 1] - crow[r]).max(0) as usize));
    }
    rows
}

/// `crow_indices` of `nrows` rows from the (sorted) row of each entry.
pub(crate) fn crow_from_rows(rows: &[i64], nrows: usize) -> Vec<i64> {
    let mut crow = vec![0i64; nrows + 1];
    for &r in rows {
        crow[r as usize + 1] += 1;
    }
    for r in 0..nrows {
        crow[r + 1] += crow[r];
    }
    crow
}

impl SparseTensor {
    /// COO-style host indices `[sparse_dim * nnz]` of either layout (CSR: rows then columns).
    pub(crate) fn host_coo_indices(&self) -> Result<Vec<i64>> {
        match &self.index {
            Index::Coo { indices } => host_i64(indices),
            Index::Csr { crow, col } => {
                let mut v = csr_rows(&host_i64(crow)?);
                v.extend(host_i64(col)?);
                Ok(v)
            }
        }
    }

    /// `to_dense()`: a strided tensor (duplicates summed), differentiable w.r.t. the values.
    pub fn to_dense(&self) -> Result<Tensor> {
        let sd = self.sparse_dim();
        let nnz = self.nnz();
        let idx = self.host_coo_indices()?;
        let lin: Vec<i64> = keys(&idx, nnz, &self.size).into_iter().map(|k| k as i64).collect();
        let dev = self.device();
        let mut flat_shape = vec![sparse_numel(&self.size, sd)];
        flat_shape.extend_from_slice(&self.size[sd..]);
        let zeros = Tensor::zeros_on(&flat_shape, self.dtype(), dev)?;
        let out = zeros.index_add(0, &index_tensor(lin, &[nnz], dev)?, &self.values, Scalar::Int(1))?;
        let shape: Vec<i64> = self.size.iter().map(|&s| s as i64).collect();
        out.reshape(&shape)
    }

    /// `to_sparse()`: COO (a CSR matrix's entries with their rows; coalesced). COO is returned as is.
    pub fn to_sparse(&self) -> Result<SparseTensor> {
        match &self.index {
            Index::Coo { .. } => Ok(self.clone()),
            Index::Csr { .. } => {
                let idx = self.host_coo_indices()?;
                let nnz = self.nnz();
                let indices = index_tensor(idx, &[2, nnz], self.device())?;
                Ok(SparseTensor::coo_unchecked(indices, self.values.clone(), self.size.clone(), true))
            }
        }
    }

    /// `to_sparse_csr()`: a 2-D COO matrix without dense dimensions as CSR (coalesced first).
    pub fn to_sparse_csr(&self) -> Result<SparseTensor> {
        if let Index::Csr { .. } = self.index {
            return Ok(self.clone());
        }
        let op = "coo_to_sparse_csr";
        if self.sparse_dim() != 2 {
            return Err(Error::unsupported(op, "conversion from Sparse to SparseCsr for input tensors with sparse_dim()!=2 is not supported"));
        }
        if self.dense_dim() != 0 {
            return Err(Error::unsupported(op, "conversion of hybrid COO tensors (dense_dim() > 0) to SparseCsr"));
        }
        let c = self.coalesce()?;
        let nnz = c.nnz();
        let idx = c.host_coo_indices()?;
        let crow = crow_from_rows(&idx[..nnz], self.size[0]);
        let dev = self.device();
        let crow_t = index_tensor(crow, &[self.size[0] + 1], dev)?;
        let col_t = index_tensor(idx[nnz..].to_vec(), &[nnz], dev)?;
        Ok(SparseTensor::csr_unchecked(crow_t, col_t, c.values, self.size.clone()))
    }
}

/// `dense.to_sparse()`: COO of every nonzero element (sparse_dim = ndim), coalesced.
///
/// ```
/// use magpie_core::Tensor;
/// let d = Tensor::from_vec(vec![0f32, 2., 0., 3.], &[2, 2])?;
/// let s = magpie_sparse::to_sparse(&d)?;
/// assert_eq!(s.indices()?.to_vec::<i64>()?, vec![0, 1, 1, 1]);
/// assert_eq!(s.values()?.to_vec::<f32>()?, vec![2., 3.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn to_sparse(dense: &Tensor) -> Result<SparseTensor> {
    to_sparse_dim(dense, dense.ndim())
}

/// `dense.to_sparse(sparse_dim)`: a hybrid COO tensor whose entries are the positions of the first
/// `sparse_dim` dims where any element of the remaining (dense) dims is nonzero.
pub fn to_sparse_dim(dense: &Tensor, sparse_dim: usize) -> Result<SparseTensor> {
    let op = "to_sparse";
    if sparse_dim > dense.ndim() {
        return Err(Error::value(op, format!("sparse_dim ({sparse_dim}) must be <= the tensor's dimensionality ({})", dense.ndim())));
    }
    if sparse_dim == 0 {
        return Err(Error::unsupported(op, "sparse_dim 0 (a COO tensor of one dense entry)"));
    }
    let size = dense.shape().to_vec();
    let p = sparse_numel(&size, sparse_dim);
    let block = crate::tensor::numel(&size[sparse_dim..]);
    let nz: Vec<bool> = dense.ne_scalar(0i64)?.to_dtype(DType::Bool)?.to_vec()?;
    let lin: Vec<usize> = (0..p).filter(|&i| nz[i * block..(i + 1) * block].iter().any(|&b| b)).collect();
    let nnz = lin.len();
    let mut idx = vec![0i64; sparse_dim * nnz];
    for (e, &l) in lin.iter().enumerate() {
        let mut rest = l;
        for d in (0..sparse_dim).rev() {
            idx[d * nnz + e] = (rest % size[d]) as i64;
            rest /= size[d];
        }
    }
    let dev = dense.device();
    let mut flat: Vec<i64> = vec![p as i64];
    flat.extend(size[sparse_dim..].iter().map(|&s| s as i64));
    let lin_t = index_tensor(lin.iter().map(|&l| l as i64).collect(), &[nnz], dev)?;
    let values = dense.reshape(&flat)?.index_select(0, &lin_t)?;
    Ok(SparseTensor::coo_unchecked(index_tensor(idx, &[sparse_dim, nnz], dev)?, values, size, true))
}

/// `dense.to_sparse_csr()`: a 2-D tensor's nonzero elements as CSR.
pub fn to_sparse_csr(dense: &Tensor) -> Result<SparseTensor> {
    if dense.ndim() != 2 {
        return Err(Error::unsupported("to_sparse_csr", format!("a {}-D tensor (batched CSR); only 2-D matrices", dense.ndim())));
    }
    to_sparse(dense)?.to_sparse_csr()
}

//! `torch.sparse.sum`: over all elements (a 0-d tensor) or over dims (dense when every sparse dim
//! is reduced, else a coalesced sparse tensor over the remaining dims).

use crate::tensor::{index_tensor, wrap_dim, SparseLayout, SparseTensor};
use magpie_core::{Error, Result, Tensor};

/// What a sum over dims gives: dense when all sparse dims were reduced, else sparse.
#[derive(Clone, Debug)]
pub enum Summed {
    Dense(Tensor),
    Sparse(SparseTensor),
}

impl Summed {
    /// The result as a strided tensor either way.
    pub fn to_dense(&self) -> Result<Tensor> {
        match self {
            Summed::Dense(t) => Ok(t.clone()),
            Summed::Sparse(s) => s.to_dense(),
        }
    }
}

impl SparseTensor {
    /// `torch.sparse.sum(input)` / `input.sum()`: the sum of every element, a 0-d dense tensor.
    pub fn sum(&self) -> Result<Tensor> {
        self.values.sum()
    }

    /// `torch.sparse.sum(input, dim)`: sums over `dims` (duplicates summed; keepdim is not
    /// offered, as in PyTorch). COO only: CSR is PyTorch's error.
    ///
    /// ```
    /// use magpie_core::Tensor;
    /// use magpie_sparse::Summed;
    /// let i = Tensor::from_vec(vec![1i64, 0, 1, 2, 0, 2], &[2, 3])?;
    /// let v = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?;
    /// let s = magpie_sparse::sparse_coo_tensor(&i, &v, Some(&[2, 3]))?;
    /// let Summed::Sparse(r) = s.sum_dims(&[0])? else { unreachable!() };
    /// assert_eq!(r.to_dense()?.to_vec::<f32>()?, vec![2., 0., 4.]);
    /// # Ok::<(), magpie_core::Error>(())
    /// ```
    pub fn sum_dims(&self, dims: &[i64]) -> Result<Summed> {
        let op = "sparse.sum";
        if self.layout() == SparseLayout::Csr {
            return Err(Error::unsupported(op, "reduction operations on CSR tensors with keepdim=False is unsupported"));
        }
        let nd = self.ndim();
        let mut ds = Vec::new();
        for &d in dims {
            let w = wrap_dim(op, d, nd)?;
            if ds.contains(&w) {
                return Err(Error::value(op, format!("dim {w} appears multiple times in the list of dims")));
            }
            ds.push(w);
        }
        let sd = self.sparse_dim();
        // dense dims of the values: dim d of the tensor is dim d - sd + 1 of the values
        let dense_red: Vec<i64> = ds.iter().filter(|&&d| d >= sd).map(|&d| (d - sd + 1) as i64).collect();
        let values = if dense_red.is_empty() { self.values.clone() } else { self.values.sum_dims(Some(&dense_red), false, None)? };
        let keep: Vec<usize> = (0..sd).filter(|d| !ds.contains(d)).collect();
        if keep.is_empty() {
            return Ok(Summed::Dense(values.sum_dims(Some(&[0]), false, None)?));
        }
        let nnz = self.nnz();
        let idx = self.host_coo_indices()?;
        let new_idx: Vec<i64> = keep.iter().flat_map(|&d| idx[d * nnz..(d + 1) * nnz].iter().copied()).collect();
        let mut size: Vec<usize> = keep.iter().map(|&d| self.size[d]).collect();
        size.extend((sd..nd).filter(|d| !ds.contains(d)).map(|d| self.size[d]));
        let indices = index_tensor(new_idx, &[keep.len(), nnz], self.device())?;
        Ok(Summed::Sparse(SparseTensor::coo_unchecked(indices, values, size, false).coalesce()?))
    }

    /// `transpose(d0, d1)` of two sparse dims of a COO tensor (the index rows swapped; the result
    /// is uncoalesced, as in PyTorch). CSR would give CSC, which torch-magpie does not have.
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<SparseTensor> {
        let op = "transpose";
        if self.layout() == SparseLayout::Csr {
            return Err(Error::unsupported(op, "transposing a CSR tensor gives a CSC tensor, which torch-magpie does not have; use to_sparse() first"));
        }
        let nd = self.ndim();
        let (a, b) = (wrap_dim(op, d0, nd)?, wrap_dim(op, d1, nd)?);
        let sd = self.sparse_dim();
        if a >= sd || b >= sd {
            return Err(Error::value(op, format!("sparse transpose: transposed dimensions must be sparse Got sparse_dim: {sd}, d0: {a}, d1: {b}")));
        }
        if a == b {
            return Ok(self.clone());
        }
        let nnz = self.nnz();
        let mut idx = self.host_coo_indices()?;
        for e in 0..nnz {
            idx.swap(a * nnz + e, b * nnz + e);
        }
        let mut size = self.size.clone();
        size.swap(a, b);
        let indices = index_tensor(idx, &[sd, nnz], self.device())?;
        Ok(SparseTensor::coo_unchecked(indices, self.values.clone(), size, false))
    }

    /// `t()`: the transpose of a 2-D COO matrix.
    pub fn t(&self) -> Result<SparseTensor> {
        if self.ndim() != 2 {
            return Err(Error::shape("t", format!("t() expects a tensor with <= 2 dimensions, but self is {}D", self.ndim())));
        }
        self.transpose(0, 1)
    }
}

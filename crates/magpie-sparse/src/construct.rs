//! `sparse_coo_tensor` and `sparse_csr_tensor`: construction with PyTorch's invariant checks
//! (what `check_invariants=True` checks, in its words), always on.

use crate::tensor::{host_i64, numel, SparseTensor};
use magpie_core::{DType, Error, Result, Tensor};
use magpie_core::ops::binary::scalar_type_name;

fn int_indices(op: &str, name: &str, t: &Tensor) -> Result<Tensor> {
    if !t.dtype().is_int() {
        return Err(Error::dtype(op, format!("{name} must be an int64 tensor")));
    }
    t.to_dtype(DType::I64)
}

/// `torch.sparse_coo_tensor(indices, values, size)`: `indices [sparse_dim, nnz]` (integers, stored
/// as int64), `values [nnz, *dense_shape]`; `size` `None` infers each sparse size as the largest
/// index + 1. Checks PyTorch's invariants (shapes, nnz, negative and out-of-range indices) with its
/// messages. The result is uncoalesced unless it has at most one entry.
///
/// ```
/// use magpie_core::Tensor;
/// let i = Tensor::from_vec(vec![5i64], &[1, 1])?;
/// let v = Tensor::from_vec(vec![1f32], &[1])?;
/// let e = magpie_sparse::sparse_coo_tensor(&i, &v, Some(&[3])).unwrap_err();
/// assert!(e.to_string().contains("size is inconsistent with indices: for dim 0, size is 3 but found index 5"));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn sparse_coo_tensor(indices: &Tensor, values: &Tensor, size: Option<&[usize]>) -> Result<SparseTensor> {
    let op = "sparse_coo_tensor";
    let indices = int_indices(op, "indices", indices)?;
    if indices.ndim() != 2 {
        return Err(Error::shape(op, format!("indices must be sparse_dim x nnz, but got: {:?}", indices.shape())));
    }
    if values.ndim() == 0 {
        return Err(Error::shape(op, "values must have at least one dimension (nnz first), got a 0-d tensor"));
    }
    if indices.device() != values.device() {
        return Err(Error::device(op, format!("device of indices ({}) must match device of values ({})", indices.device(), values.device())));
    }
    let (sparse_dim, nnz) = (indices.shape()[0], indices.shape()[1]);
    if values.shape()[0] != nnz {
        return Err(Error::shape(op, format!("indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from values: {}", values.shape()[0])));
    }
    let dense_dim = values.ndim() - 1;
    let idx = host_i64(&indices)?;
    for d in 0..sparse_dim {
        if let Some(&v) = idx[d * nnz..(d + 1) * nnz].iter().find(|&&v| v < 0) {
            return Err(Error::index(op, format!("found negative index {v} for dim {d}")));
        }
    }
    let size: Vec<usize> = match size {
        Some(s) => {
            if s.len() != sparse_dim + dense_dim {
                return Err(Error::shape(
                    op,
                    format!("'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {}, sparse_dim = {sparse_dim}, dense_dim = {dense_dim}", s.len()),
                ));
            }
            let mut expected = vec![nnz];
            expected.extend_from_slice(&s[sparse_dim..]);
            if values.shape() != expected.as_slice() {
                return Err(Error::shape(op, format!("values has incorrect size, expected {expected:?}, got {:?}", values.shape())));
            }
            for d in 0..sparse_dim {
                if let Some(&v) = idx[d * nnz..(d + 1) * nnz].iter().find(|&&v| v as u64 >= s[d] as u64) {
                    return Err(Error::index(op, format!("size is inconsistent with indices: for dim {d}, size is {} but found index {v}", s[d])));
                }
            }
            s.to_vec()
        }
        None => {
            let mut s: Vec<usize> = (0..sparse_dim).map(|d| idx[d * nnz..(d + 1) * nnz].iter().map(|&v| v as usize + 1).max().unwrap_or(0)).collect();
            s.extend_from_slice(&values.shape()[1..]);
            s
        }
    };
    Ok(SparseTensor::coo_unchecked(indices, values.clone(), size, nnz <= 1))
}

/// `torch.sparse_csr_tensor(crow_indices, col_indices, values, size)` for 2-D matrices (no batch
/// or dense dimensions): int32 or int64 indices (stored as int64), `values [nnz]`. Checks PyTorch's
/// compressed-sparse invariants with its messages (`crow_indices[..., 0] == 0`, the last entry
/// equal to nnz, row counts within ncols, column indices in range and sorted and distinct per row).
/// `size` `None` infers `(len(crow) - 1, max col + 1)`.
///
/// ```
/// use magpie_core::Tensor;
/// let crow = Tensor::from_vec(vec![0i64, 2, 3], &[3])?;
/// let col = Tensor::from_vec(vec![0i64, 2, 1], &[3])?;
/// let v = Tensor::from_vec(vec![1f64, 2., 3.], &[3])?;
/// let s = magpie_sparse::sparse_csr_tensor(&crow, &col, &v, Some(&[2, 3]))?;
/// assert_eq!(s.to_dense()?.to_vec::<f64>()?, vec![1., 0., 2., 0., 3., 0.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn sparse_csr_tensor(crow_indices: &Tensor, col_indices: &Tensor, values: &Tensor, size: Option<&[usize]>) -> Result<SparseTensor> {
    let op = "sparse_csr_tensor";
    let (cd, od) = (crow_indices.dtype(), col_indices.dtype());
    if cd != od {
        return Err(Error::dtype(op, format!("crow_indices and col_indices must have the same dtype, bot got {} and {}, respectively", scalar_type_name(cd), scalar_type_name(od))));
    }
    if !matches!(cd, DType::I32 | DType::I64) {
        return Err(Error::dtype(op, format!("crow_indices and col_indices must be an int32 or int64 type, but got: {}", scalar_type_name(cd))));
    }
    if crow_indices.ndim() != col_indices.ndim() {
        return Err(Error::shape(op, format!("crow_indices and col_indices dimensionalities must be equal but got {} and {}, respectively", crow_indices.ndim(), col_indices.ndim())));
    }
    if crow_indices.ndim() != 1 {
        return Err(Error::unsupported(op, format!("batched CSR tensors (indices of {} dimensions); only 2-D matrices", crow_indices.ndim())));
    }
    if values.ndim() != 1 {
        return Err(Error::unsupported(op, format!("CSR values of {} dimensions (hybrid CSR); values must be [nnz]", values.ndim())));
    }
    if crow_indices.device() != values.device() || col_indices.device() != values.device() {
        return Err(Error::device(op, "crow_indices, col_indices and values must be on the same device"));
    }
    let nnz = values.shape()[0];
    let crow = host_i64(crow_indices)?;
    let col = host_i64(col_indices)?;
    let size: Vec<usize> = match size {
        Some(s) => {
            if s.len() != 2 {
                return Err(Error::shape(op, format!("tensor dimensionality must be sum of batch, base, and dense dimensionalities (=0 + 2 + 0) but got {}", s.len())));
            }
            s.to_vec()
        }
        None => vec![crow.len().saturating_sub(1), col.iter().map(|&c| c.max(-1) + 1).max().unwrap_or(0) as usize],
    };
    let (nrows, ncols) = (size[0], size[1] as i64);
    if crow.len() != nrows + 1 {
        return Err(Error::shape(op, format!("crow_indices.shape[-1] must be equal to the number of rows + 1 (={}), but got {}", nrows + 1, crow.len())));
    }
    if col.len() != nnz {
        return Err(Error::shape(op, format!("col_indices.shape[-1] must be equal to nnz (={nnz}) as defined by values.shape[0], but got {}", col.len())));
    }
    let unmet = |what: &str| Err(Error::value(op, format!("`{what}` is not satisfied.")));
    if crow[0] != 0 {
        return unmet("crow_indices[..., 0] == 0");
    }
    if crow[nrows] != nnz as i64 {
        return unmet("crow_indices[..., -1] == nnz");
    }
    if crow.windows(2).any(|w| w[1] - w[0] < 0 || w[1] - w[0] > ncols) {
        return unmet("0 <= crow_indices[..., 1:] - crow_indices[..., :-1] <= ncols");
    }
    if col.iter().any(|&c| c < 0 || c >= ncols) {
        return unmet("0 <= col_indices < ncols");
    }
    let sorted = crow.windows(2).all(|w| col[w[0] as usize..w[1] as usize].windows(2).all(|p| p[0] < p[1]));
    if !sorted {
        return unmet("col_indices[..., crow_indices[..., i - 1]:crow_indices[..., i]] for all i = 1, ..., nrows are sorted and distinct along the last dimension values");
    }
    Ok(SparseTensor::csr_unchecked(crow_indices.to_dtype(DType::I64)?, col_indices.to_dtype(DType::I64)?, values.clone(), size))
}


/// The element count of the sparse dims of `size` (used by conversions).
pub(crate) fn sparse_numel(size: &[usize], sparse_dim: usize) -> usize {
    numel(&size[..sparse_dim])
}

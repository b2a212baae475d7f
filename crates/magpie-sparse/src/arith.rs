//! `add` and `mul` of sparse tensors: sparse + sparse, dense + sparse, sparse * scalar,
//! sparse * sparse (the common pattern), sparse * dense (the sparse pattern), as PyTorch allows.

use crate::coalesce::{gather_indices, keys};
use crate::construct::sparse_numel;
use crate::tensor::{index_tensor, Index, SparseLayout, SparseTensor};
use magpie_core::dtype::promote_types;
use magpie_core::{Error, Result, Tensor};

fn same_size(op: &str, a: &[usize], b: &[usize]) -> Result<()> {
    if a != b {
        return Err(Error::shape(op, format!("expected sizes of 'self' and 'other' to match, but {a:?} != {b:?}")));
    }
    Ok(())
}

fn same_device(op: &str, a: &SparseTensor, b: &SparseTensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(Error::device(op, format!("Expected all tensors to be on the same device, but found at least two devices, {} and {}!", a.device(), b.device())));
    }
    Ok(())
}

impl SparseTensor {
    /// `self + other` of two sparse tensors of one size and layout. COO: the entries of both
    /// (coalesced when both were; otherwise concatenated, as PyTorch leaves them); CSR: CSR.
    pub fn add(&self, other: &SparseTensor) -> Result<SparseTensor> {
        let op = "add";
        same_size(op, &self.size, &other.size)?;
        same_device(op, self, other)?;
        if self.layout() != other.layout() {
            return Err(Error::unsupported(op, format!("adding a {} tensor and a {} tensor; convert one first", self.layout(), other.layout())));
        }
        if self.layout() == SparseLayout::Csr {
            return self.to_sparse()?.add(&other.to_sparse()?)?.to_sparse_csr();
        }
        if self.sparse_dim() != other.sparse_dim() {
            return Err(Error::shape(op, format!("sparse_dim of the operands differ ({} and {})", self.sparse_dim(), other.sparse_dim())));
        }
        let dt = promote_types(self.dtype(), other.dtype())?;
        let (Index::Coo { indices: ia }, Index::Coo { indices: ib }) = (&self.index, &other.index) else {
            return Err(Error::value(op, "expected COO operands"));
        };
        let indices = magpie_core::ops::shape_ops::cat(&[ia.clone(), ib.clone()], 1)?;
        let values = magpie_core::ops::shape_ops::cat(&[self.values.to_dtype(dt)?, other.values.to_dtype(dt)?], 0)?;
        let sum = SparseTensor::coo_unchecked(indices, values, self.size.clone(), false);
        if self.coalesced && other.coalesced {
            sum.coalesce()
        } else {
            Ok(sum)
        }
    }

    /// `sparse + dense`: PyTorch's error for COO ("Use add(dense, sparse) instead"); a CSR matrix
    /// plus a dense one of its size is dense.
    pub fn add_dense(&self, dense: &Tensor) -> Result<Tensor> {
        if self.layout() == SparseLayout::Coo {
            return Err(Error::unsupported("add", "add(sparse, dense) is not supported. Use add(dense, sparse) instead."));
        }
        add_dense(dense, self)
    }

    /// `self * s` for a scalar: the values scaled (pattern and coalesced state kept).
    pub fn mul_scalar(&self, s: f64) -> Result<SparseTensor> {
        Ok(self.with_values(self.values.mul_scalar(s)?))
    }

    /// `self * other` elementwise of two sparse tensors of one size: the positions both hold
    /// (coalesced result; CSR operands give CSR).
    pub fn mul(&self, other: &SparseTensor) -> Result<SparseTensor> {
        let op = "mul";
        same_size(op, &self.size, &other.size)?;
        same_device(op, self, other)?;
        if self.layout() != other.layout() {
            return Err(Error::unsupported(op, format!("multiplying a {} tensor and a {} tensor; convert one first", self.layout(), other.layout())));
        }
        if self.layout() == SparseLayout::Csr {
            return self.to_sparse()?.mul(&other.to_sparse()?)?.to_sparse_csr();
        }
        if self.sparse_dim() != other.sparse_dim() {
            return Err(Error::shape(op, format!("sparse_dim of the operands differ ({} and {})", self.sparse_dim(), other.sparse_dim())));
        }
        let (a, b) = (self.coalesce()?, other.coalesce()?);
        let (ia, ib) = (a.host_coo_indices()?, b.host_coo_indices()?);
        let (ka, kb) = (keys(&ia, a.nnz(), &a.size), keys(&ib, b.nnz(), &b.size));
        // both are sorted by key: walk them together
        let (mut i, mut j) = (0, 0);
        let (mut ea, mut eb) = (Vec::new(), Vec::new());
        while i < ka.len() && j < kb.len() {
            match ka[i].cmp(&kb[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    ea.push(i);
                    eb.push(j);
                    i += 1;
                    j += 1;
                }
            }
        }
        let dev = self.device();
        let n = ea.len();
        let sd = self.sparse_dim();
        let indices = index_tensor(gather_indices(&ia, a.nnz(), sd, &ea), &[sd, n], dev)?;
        let sel = |e: &[usize]| index_tensor(e.iter().map(|&x| x as i64).collect(), &[n], dev);
        let values = a.values.index_select(0, &sel(&ea)?)?.mul(&b.values.index_select(0, &sel(&eb)?)?)?;
        Ok(SparseTensor::coo_unchecked(indices, values, self.size.clone(), true))
    }

    /// `self * dense`: `dense` (broadcast to this size) read at the stored positions times the
    /// values; the result keeps this pattern, layout and coalesced state.
    pub fn mul_dense(&self, dense: &Tensor) -> Result<SparseTensor> {
        let op = "mul";
        if dense.device() != self.device() {
            return Err(Error::device(op, format!("Expected all tensors to be on the same device, but found at least two devices, {} and {}!", self.device(), dense.device())));
        }
        let size: Vec<i64> = self.size.iter().map(|&s| s as i64).collect();
        let full = dense.expand(&size).map_err(|_| Error::shape(op, format!("the dense operand of shape {:?} cannot be broadcast to the sparse size {:?}", dense.shape(), self.size)))?;
        let sd = self.sparse_dim();
        let mut flat: Vec<i64> = vec![sparse_numel(&self.size, sd) as i64];
        flat.extend(size[sd..].iter().copied());
        let lin: Vec<i64> = keys(&self.host_coo_indices()?, self.nnz(), &self.size).into_iter().map(|k| k as i64).collect();
        let at = full.reshape(&flat)?.index_select(0, &index_tensor(lin, &[self.nnz()], self.device())?)?;
        Ok(self.with_values(self.values.mul(&at)?))
    }
}

/// `torch.add(dense, sparse)` (`dense + sparse`): a dense tensor of the same size (no broadcasting,
/// as in PyTorch), differentiable w.r.t. both.
///
/// ```
/// use magpie_core::Tensor;
/// let d = Tensor::from_vec(vec![1f32, 1., 1.], &[3])?;
/// let s = magpie_sparse::to_sparse(&Tensor::from_vec(vec![0f32, 5., 0.], &[3])?)?;
/// assert_eq!(magpie_sparse::add_dense(&d, &s)?.to_vec::<f32>()?, vec![1., 6., 1.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn add_dense(dense: &Tensor, sparse: &SparseTensor) -> Result<Tensor> {
    if dense.shape() != sparse.shape() {
        return Err(Error::shape(
            "add",
            format!(
                "expected 'self' and 'other' to have same size, but self has size {:?} while other has size {:?} (FYI: dense-sparse addition does not currently support broadcasting)",
                dense.shape(),
                sparse.shape()
            ),
        ));
    }
    dense.add(&sparse.to_dense()?)
}

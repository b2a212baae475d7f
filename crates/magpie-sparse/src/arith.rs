//! `add` and `mul` of sparse tensors: sparse + sparse, dense + sparse, sparse * scalar,
//! sparse * sparse (the common pattern), sparse * dense (the sparse pattern), as PyTorch allows.

use crate::coalesce::{gather_indices, keys};
use crate::construct::sparse_numel;
use crate::tensor::{index_tensor, SparseLayout, SparseTensor};
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
    /// `self + other` of two sparse tensors of one size and layout. COO: PyTorch's CPU merge of the
    /// two entry lists (coalesced when both were); CSR: CSR.
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
        merge_add(&self.to_dtype(dt)?, &other.to_dtype(dt)?)
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

/// PyTorch's CPU `sparse + sparse` of COO tensors of one size, dtype and sparse_dim: one walk over
/// both entry lists in their stored order, emitting the smaller index first and merging the heads
/// when their indices are equal. On coalesced operands this is the sorted union; on others it is
/// what PyTorch gives (nnz included). Coalesced when both operands are.
pub(crate) fn merge_add(a: &SparseTensor, b: &SparseTensor) -> Result<SparseTensor> {
    let (na, nb) = (a.nnz(), b.nnz());
    let (ia, ib) = (a.host_coo_indices()?, b.host_coo_indices()?);
    let (ka, kb) = (keys(&ia, na, &a.size), keys(&ib, nb, &b.size));
    let sd = a.sparse_dim();
    let (mut i, mut j) = (0, 0);
    let (mut slot_a, mut slot_b) = (Vec::with_capacity(na), Vec::with_capacity(nb));
    let mut idx: Vec<Vec<i64>> = vec![Vec::with_capacity(na + nb); sd];
    while i < na || j < nb {
        let take_a = j >= nb || (i < na && ka[i] <= kb[j]);
        let take_b = i >= na || (j < nb && kb[j] <= ka[i]);
        let out = idx[0].len() as i64;
        if take_a {
            slot_a.push(out);
            (0..sd).for_each(|d| idx[d].push(ia[d * na + i]));
            i += 1;
        } else {
            (0..sd).for_each(|d| idx[d].push(ib[d * nb + j]));
        }
        if take_b {
            slot_b.push(out);
            j += 1;
        }
    }
    let n = idx[0].len();
    let dev = a.device();
    let mut vshape = a.values.shape().to_vec();
    vshape[0] = n;
    let one = magpie_core::Scalar::Int(1);
    let values = Tensor::zeros_on(&vshape, a.dtype(), dev)?
        .index_add(0, &index_tensor(slot_a, &[na], dev)?, &a.values, one)?
        .index_add(0, &index_tensor(slot_b, &[nb], dev)?, &b.values, one)?;
    let indices = index_tensor(idx.concat(), &[sd, n], dev)?;
    Ok(SparseTensor::coo_unchecked(indices, values, a.size.clone(), a.coalesced && b.coalesced))
}

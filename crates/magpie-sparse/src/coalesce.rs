//! `coalesce`: duplicate COO entries summed, indices sorted (row-major). The index work runs on the
//! host; the values are summed with `index_add`, so coalescing is differentiable on every device.

use crate::tensor::{host_i64, index_tensor, Index, SparseTensor};
use magpie_core::{Result, Scalar, Tensor};

/// The row-major grouping of a COO tensor's entries by their linear key over the sparse dims.
pub(crate) struct Order {
    /// Per entry (original numbering): the slot of its unique index.
    pub slot: Vec<i64>,
    /// Per slot: the first entry (original numbering) with that index.
    pub first: Vec<usize>,
}

/// Linear keys of COO `indices` (host, `[sparse_dim * nnz]`) over `size`'s sparse dims.
pub(crate) fn keys(idx: &[i64], nnz: usize, size: &[usize]) -> Vec<i128> {
    let sd = idx.len().checked_div(nnz).unwrap_or(size.len());
    let mut k = vec![0i128; nnz];
    for d in 0..sd {
        let s = size[d] as i128;
        for (e, key) in k.iter_mut().enumerate() {
            *key = *key * s + idx[d * nnz + e] as i128;
        }
    }
    k
}

/// Sorts entries by key and groups duplicates.
pub(crate) fn order(keys: &[i128]) -> Order {
    let mut perm: Vec<usize> = (0..keys.len()).collect();
    perm.sort_by_key(|&e| keys[e]);
    let mut slot = vec![0i64; keys.len()];
    let mut first = Vec::new();
    for (j, &e) in perm.iter().enumerate() {
        if j == 0 || keys[e] != keys[perm[j - 1]] {
            first.push(e);
        }
        slot[e] = first.len() as i64 - 1;
    }
    Order { slot, first }
}

/// The COO indices `[sparse_dim, n]` of the given entries.
pub(crate) fn gather_indices(idx: &[i64], nnz: usize, sd: usize, entries: &[usize]) -> Vec<i64> {
    let mut out = Vec::with_capacity(sd * entries.len());
    for d in 0..sd {
        out.extend(entries.iter().map(|&e| idx[d * nnz + e]));
    }
    out
}

impl SparseTensor {
    /// `coalesce()`: duplicates summed, indices sorted; a coalesced tensor is returned as is
    /// (CSR: PyTorch's error, CSR is coalesced by its invariants).
    ///
    /// ```
    /// use magpie_core::Tensor;
    /// let i = Tensor::from_vec(vec![1i64, 0, 1], &[1, 3])?;
    /// let v = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?;
    /// let s = magpie_sparse::sparse_coo_tensor(&i, &v, Some(&[2]))?.coalesce()?;
    /// assert!(s.is_coalesced());
    /// assert_eq!(s.indices()?.to_vec::<i64>()?, vec![0, 1]);
    /// assert_eq!(s.values()?.to_vec::<f32>()?, vec![2., 4.]);
    /// # Ok::<(), magpie_core::Error>(())
    /// ```
    pub fn coalesce(&self) -> Result<SparseTensor> {
        let Index::Coo { indices } = &self.index else {
            return Err(magpie_core::Error::value("coalesce", "coalesce expected sparse coordinate tensor layout but got SparseCsr"));
        };
        if self.coalesced {
            return Ok(self.clone());
        }
        let nnz = self.nnz();
        let sd = self.sparse_dim();
        let idx = host_i64(indices)?;
        let o = order(&keys(&idx, nnz, &self.size));
        let dev = self.device();
        let new_idx = index_tensor(gather_indices(&idx, nnz, sd, &o.first), &[sd, o.first.len()], dev)?;
        let mut vshape = self.values.shape().to_vec();
        vshape[0] = o.first.len();
        let zeros = Tensor::zeros_on(&vshape, self.dtype(), dev)?;
        let slot = index_tensor(o.slot, &[nnz], dev)?;
        let values = zeros.index_add(0, &slot, &self.values, Scalar::Int(1))?;
        Ok(SparseTensor::coo_unchecked(new_idx, values, self.size.clone(), true))
    }
}

/// The coalesced pattern of `st` keeping, for each position, the value of its first entry
/// (not the sum): the gradient of an uncoalesced leaf, whose duplicates all get the same one.
pub(crate) fn first_of_duplicates(st: &SparseTensor) -> Result<SparseTensor> {
    let Index::Coo { indices } = &st.index else { return Ok(st.clone()) };
    let nnz = st.nnz();
    let sd = st.sparse_dim();
    let idx = host_i64(indices)?;
    let o = order(&keys(&idx, nnz, &st.size));
    let dev = st.device();
    let new_idx = index_tensor(gather_indices(&idx, nnz, sd, &o.first), &[sd, o.first.len()], dev)?;
    let firsts = index_tensor(o.first.iter().map(|&e| e as i64).collect(), &[o.first.len()], dev)?;
    let values = st.values.index_select(0, &firsts)?;
    Ok(SparseTensor::coo_unchecked(new_idx, values, st.size.clone(), true))
}

//! `embedding(..., sparse=True)`: the lookup of magpie-core's `embedding` whose weight gradient is a
//! sparse COO tensor of the looked-up rows (one entry per index, duplicates kept, the padding row
//! dropped), stored as the weight's sparse gradient (`crate::grad`).

use crate::grad;
use crate::tensor::{host_i64, index_tensor, SparseTensor};
use magpie_core::autograd::{Function, FunctionCtx};
use magpie_core::{Error, Result, Tensor};

/// `F.embedding(input, weight, padding_idx, max_norm, norm_type, sparse=True)`: rows of `weight`
/// at `input`; backward leaves `weight`'s gradient in [`crate::sparse_grad`] (sparse, `[num, dim]`,
/// indices `[1, n]` in lookup order) instead of `.grad`.
///
/// ```
/// use magpie_core::Tensor;
/// let w = Tensor::from_vec(vec![0f32; 10], &[5, 2])?.with_requires_grad()?;
/// let idx = Tensor::from_vec(vec![1i64, 3, 1], &[3])?;
/// magpie_sparse::embedding(&idx, &w, None, None, 2.0)?.sum()?.backward()?;
/// let g = magpie_sparse::sparse_grad(&w).unwrap();
/// assert_eq!(g.indices_raw()?.to_vec::<i64>()?, vec![1, 3, 1]);
/// assert!(w.grad().is_none());
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn embedding(input: &Tensor, weight: &Tensor, padding_idx: Option<i64>, max_norm: Option<f64>, norm_type: f64) -> Result<Tensor> {
    if weight.ndim() != 2 {
        return Err(Error::shape("embedding", "'weight' must be 2-D"));
    }
    let n = weight.shape()[0] as i64;
    let pad = match padding_idx {
        Some(p) if p >= n || p < -n => return Err(Error::value("embedding", "Padding_idx must be within num_embeddings")),
        Some(p) if p < 0 => Some(p + n),
        p => p,
    };
    let f = SparseEmbedding { input: input.clone(), weight_id: weight.id(), num: n as usize, pad, max_norm, norm_type };
    Ok(f.apply(std::slice::from_ref(weight))?.remove(0))
}

struct SparseEmbedding {
    input: Tensor,
    weight_id: usize,
    num: usize,
    pad: Option<i64>,
    max_norm: Option<f64>,
    norm_type: f64,
}

impl Function for SparseEmbedding {
    fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![magpie_core::ops::nn::embedding(&self.input, &inputs[0], self.pad, self.max_norm, self.norm_type)?])
    }
    fn backward(&self, _ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let g = &g[0];
        let d = *g.shape().last().unwrap_or(&0);
        let n = self.input.numel();
        let values = g.reshape(&[n as i64, d as i64])?;
        let idx = host_i64(&self.input)?;
        let dev = g.device();
        let (idx, values) = match self.pad {
            Some(p) if idx.contains(&p) => {
                let keep: Vec<i64> = (0..idx.len() as i64).filter(|&e| idx[e as usize] != p).collect();
                let k = keep.len();
                let kept: Vec<i64> = keep.iter().map(|&e| idx[e as usize]).collect();
                (kept, values.index_select(0, &index_tensor(keep, &[k], dev)?)?)
            }
            _ => (idx, values),
        };
        let nnz = idx.len();
        let st = SparseTensor::coo_unchecked(index_tensor(idx, &[1, nnz], dev)?, values.detach(), vec![self.num, d], nnz <= 1);
        grad::accumulate(self.weight_id, st)?;
        Ok(vec![None])
    }
    fn once_differentiable(&self) -> bool {
        true
    }
    fn name(&self) -> String {
        "EmbeddingSparse".into()
    }
}

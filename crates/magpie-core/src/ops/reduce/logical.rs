//! Logical reductions: `all`, `any`, `count_nonzero`.

use super::{reduce_dims, reduce_rows, reduced_shape};
use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Result;

/// Nonzero counts over the reduced dims `d`, as int64 on `x`'s device, from native ops (the CUDA
/// path of the logical reductions: `ne`, then an int64 sum).
fn nonzero_counts(x: &Tensor, d: &[usize], keepdim: bool) -> Result<Tensor> {
    let _ng = crate::autograd::no_grad();
    let nz = x.ne_scalar(0)?.to_dtype(DType::I64)?;
    if d.is_empty() {
        return Ok(nz);
    }
    let di: Vec<i64> = d.iter().map(|&k| k as i64).collect();
    nz.sum_dims(Some(&di), keepdim, None)
}

fn logical(op: &str, x: &Tensor, dims: Option<&[i64]>, keepdim: bool, all: bool) -> Result<Tensor> {
    let d = reduce_dims(op, x, dims)?;
    let shape = reduced_shape(x.shape(), &d, keepdim);
    if x.device().is_cuda() && !x.dtype().is_complex() {
        let c = nonzero_counts(x, &d, keepdim)?;
        let n = super::reduced_count(x.shape(), &d) as i64;
        let out = if all { c.eq_scalar(n)? } else { c.gt_scalar(0)? };
        return if x.dtype() == DType::U8 { out.to_dtype(DType::U8) } else { Ok(out) };
    }
    let (v, _) = reduce_rows::<bool, bool>(x, &d, |r| if all { r.iter().all(|&b| b) } else { r.iter().any(|&b| b) })?;
    let out = Tensor::from_vec(v, &shape)?;
    // PyTorch keeps uint8 for uint8 inputs (a legacy of masks); everything else gives bool.
    if x.dtype() == DType::U8 {
        out.to_dtype(DType::U8)
    } else {
        Ok(out)
    }
}

impl Tensor {
    /// `torch.all(x, dim, keepdim)`: true where every reduced element is nonzero.
    pub fn all_dims(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        logical("all", self, dims, keepdim, true)
    }
    /// `torch.any(x, dim, keepdim)`: true where some reduced element is nonzero.
    pub fn any_dims(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        logical("any", self, dims, keepdim, false)
    }
    /// `torch.count_nonzero(x, dim)`: int64 counts of nonzero elements.
    pub fn count_nonzero(&self, dims: Option<&[i64]>) -> Result<Tensor> {
        let d = reduce_dims("count_nonzero", self, dims)?;
        if self.device().is_cuda() && !self.dtype().is_complex() {
            return nonzero_counts(self, &d, false);
        }
        let shape = reduced_shape(self.shape(), &d, false);
        let (v, _) = reduce_rows::<bool, i64>(self, &d, |r| r.iter().filter(|&&b| b).count() as i64)?;
        Tensor::from_vec(v, &shape)
    }
}

//! `torch.sparse.mm(sparse, dense)`: a 2-D sparse matrix (COO or CSR) times a strided matrix, on
//! the CPU (rows in parallel) or CUDA (an NVRTC kernel, `cuda.rs`), differentiable w.r.t. the
//! dense operand (`Sᵀ G`, the same kernel on the transposed pattern) and the sparse operand's
//! values (`G[row] · D[col]` per entry: a gradient with the sparse operand's pattern).

use crate::convert::crow_from_rows;
use magpie_core::ops::binary::scalar_type_name;
use crate::tensor::{index_tensor, SparseTensor};
use magpie_core::autograd::{Function, FunctionCtx};
use magpie_core::{DType, Device, Error, Result, Tensor};
use rayon::prelude::*;
use std::sync::Arc;

/// A CSR pattern of an `m x k` matrix: host arrays (the CPU kernel, the transpose) and int64
/// tensors on the operands' device (the CUDA kernel, the values' gradient).
pub(crate) struct Pattern {
    pub m: usize,
    pub k: usize,
    pub crow: Vec<i64>,
    pub col: Vec<i64>,
    pub rows: Vec<i64>,
    pub crow_t: Tensor,
    pub col_t: Tensor,
    pub rows_t: Tensor,
    /// The pattern of the transpose (for the dense operand's gradient), built on first use.
    transposed: std::sync::OnceLock<Plan>,
}

impl Pattern {
    /// The CSR pattern of entries `(rows[e], cols[e])`, sorted by row (stable), and the order
    /// (`perm[j]`: the entry at CSR position j); `None` when the entries already are in row order.
    fn from_entries(m: usize, k: usize, rows: &[i64], cols: &[i64], dev: Device) -> Result<(Pattern, Option<Vec<i64>>)> {
        let nnz = rows.len();
        let sorted = rows.windows(2).all(|w| w[0] <= w[1]);
        let (rows, col, perm) = if sorted {
            (rows.to_vec(), cols.to_vec(), None)
        } else {
            let mut p: Vec<usize> = (0..nnz).collect();
            p.sort_by_key(|&e| rows[e]);
            (p.iter().map(|&e| rows[e]).collect(), p.iter().map(|&e| cols[e]).collect(), Some(p.iter().map(|&e| e as i64).collect()))
        };
        let crow = crow_from_rows(&rows, m);
        let pat = Pattern {
            m,
            k,
            crow_t: index_tensor(crow.clone(), &[m + 1], dev)?,
            col_t: index_tensor(col.clone(), &[nnz], dev)?,
            rows_t: index_tensor(rows.clone(), &[nnz], dev)?,
            transposed: Default::default(),
            crow,
            col,
            rows,
        };
        Ok((pat, perm))
    }
}

/// `torch.sparse.mm(sparse, dense)` / `sparse @ dense`: `[m, k] @ [k, n] -> [m, n]` (strided),
/// float32 or float64, both operands on one device. Gradients flow to `dense` and to the sparse
/// operand's values (see [`SparseTensor::grad`]).
///
/// ```
/// use magpie_core::Tensor;
/// let i = Tensor::from_vec(vec![0i64, 1, 1, 0], &[2, 2])?;
/// let v = Tensor::from_vec(vec![2f32, 3.], &[2])?;
/// let s = magpie_sparse::sparse_coo_tensor(&i, &v, Some(&[2, 2]))?.requires_grad_(true)?;
/// let d = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2])?.with_requires_grad()?;
/// let y = magpie_sparse::mm(&s, &d)?;                 // [[6, 8], [3, 6]]
/// assert_eq!(y.to_vec::<f32>()?, vec![6., 8., 3., 6.]);
/// y.sum()?.backward()?;
/// assert_eq!(s.grad()?.unwrap().values()?.to_vec::<f32>()?, vec![7., 3.]);
/// assert_eq!(d.grad().unwrap().to_vec::<f32>()?, vec![3., 3., 2., 2.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn mm(sparse: &SparseTensor, dense: &Tensor) -> Result<Tensor> {
    let op = "sparse.mm";
    if sparse.sparse_dim() != 2 || sparse.dense_dim() != 0 {
        return Err(Error::shape(op, format!("expected a 2-D sparse matrix (sparse_dim 2, dense_dim 0), got sparse_dim {} and dense_dim {}", sparse.sparse_dim(), sparse.dense_dim())));
    }
    if dense.ndim() != 2 {
        return Err(Error::shape("addmm", format!("matrices expected, got {}D tensor", dense.ndim())));
    }
    let (m, k) = (sparse.shape()[0], sparse.shape()[1]);
    if dense.shape()[0] != k {
        return Err(Error::shape("addmm", format!("mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {}x{})", dense.shape()[0], dense.shape()[1])));
    }
    if sparse.dtype() != dense.dtype() {
        return Err(Error::dtype(op, format!("expected scalar type {} but found {}", scalar_type_name(sparse.dtype()), scalar_type_name(dense.dtype()))));
    }
    if !matches!(dense.dtype(), DType::F32 | DType::F64) {
        return Err(Error::unsupported_dtype(op, dense.dtype()));
    }
    if sparse.device() != dense.device() {
        return Err(Error::device(op, format!("Expected all tensors to be on the same device, but found at least two devices, {} and {}!", sparse.device(), dense.device())));
    }
    let plan = match sparse.plan.get() {
        Some(p) => p.clone(),
        None => {
            let nnz = sparse.nnz();
            let idx = sparse.host_coo_indices()?;
            let (pat, perm) = Pattern::from_entries(m, k, &idx[..nnz], &idx[nnz..], dense.device())?;
            let perm = perm.map(|p| index_tensor(p, &[nnz], dense.device())).transpose()?;
            let p = Plan { pattern: Arc::new(pat), perm };
            let _ = sparse.plan.set(p.clone());
            p
        }
    };
    let vals = match &plan.perm {
        Some(p) => sparse.values_raw().index_select(0, p)?,
        None => sparse.values_raw().clone(),
    };
    Ok(SpMM(plan.pattern).apply(&[vals, dense.clone()])?.remove(0))
}

/// A sparse tensor's CSR pattern for `mm` and the permutation of its values into CSR order
/// (`None`: already in order), cached on the tensor.
#[derive(Clone)]
pub(crate) struct Plan {
    pattern: Arc<Pattern>,
    perm: Option<Tensor>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plan({}x{}, nnz {})", self.pattern.m, self.pattern.k, self.pattern.col.len())
    }
}

/// `sparse @ dense` for a 2-D sparse matrix (same as [`mm`]).
pub fn matmul(sparse: &SparseTensor, dense: &Tensor) -> Result<Tensor> {
    mm(sparse, dense)
}

/// The product of a CSR pattern with values (input 0, CSR order) and a dense matrix (input 1).
struct SpMM(Arc<Pattern>);

impl Function for SpMM {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let (vals, dense) = (&inputs[0], &inputs[1]);
        ctx.save_for_backward(&[vals.clone(), dense.clone()]);
        Ok(vec![spmm_raw(&self.0, vals, dense)?])
    }
    fn backward(&self, ctx: &FunctionCtx, g: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let pat = &self.0;
        let (vals, dense) = (&ctx.saved_tensors()[0], &ctx.saved_tensors()[1]);
        let g = &g[0];
        let gv = if ctx.needs_input_grad(0) {
            // d y[r, :] / d v_e = D[col_e, :]  =>  grad v_e = G[row_e, :] . D[col_e, :]
            Some(g.index_select(0, &pat.rows_t)?.mul(&dense.index_select(0, &pat.col_t)?)?.sum_dims(Some(&[1]), false, None)?)
        } else {
            None
        };
        let gd = if ctx.needs_input_grad(1) {
            // Sᵀ G: the entries (col, row) in column order
            let plan = match pat.transposed.get() {
                Some(p) => p.clone(),
                None => {
                    let (pt, perm) = Pattern::from_entries(pat.k, pat.m, &pat.col, &pat.rows, g.device())?;
                    let perm = perm.map(|p| index_tensor(p, &[pat.col.len()], g.device())).transpose()?;
                    let p = Plan { pattern: Arc::new(pt), perm };
                    let _ = pat.transposed.set(p.clone());
                    p
                }
            };
            let vt = match &plan.perm {
                Some(p) => vals.index_select(0, p)?,
                None => vals.clone(),
            };
            Some(SpMM(plan.pattern).apply(&[vt, g.clone()])?.remove(0))
        } else {
            None
        };
        Ok(vec![gv, gd])
    }
    fn name(&self) -> String {
        "SparseMm".into()
    }
}

/// `out [m, n] = CSR(pattern, vals) @ dense [k, n]` without autograd, on the operands' device.
pub(crate) fn spmm_raw(pat: &Pattern, vals: &Tensor, dense: &Tensor) -> Result<Tensor> {
    let vals = vals.contiguous()?;
    let dense = dense.contiguous()?;
    if dense.device().is_cuda() {
        return crate::cuda::spmm(pat, &vals, &dense);
    }
    match dense.dtype() {
        DType::F32 => spmm_cpu::<f32>(pat, &vals, &dense),
        DType::F64 => spmm_cpu::<f64>(pat, &vals, &dense),
        d => Err(Error::unsupported_dtype("sparse.mm", d)),
    }
}

fn spmm_cpu<T>(pat: &Pattern, vals: &Tensor, dense: &Tensor) -> Result<Tensor>
where
    T: magpie_core::Element + Copy + Send + Sync + std::ops::Add<Output = T> + std::ops::Mul<Output = T> + Default,
{
    let n = dense.shape()[1];
    let mut out = vec![T::default(); pat.m * n];
    magpie_core::backend::cpu::read(vals, |v: &[T]| {
        magpie_core::backend::cpu::read(dense, |d: &[T]| {
            if n == 0 {
                return;
            }
            out.par_chunks_mut(n).enumerate().for_each(|(r, row)| {
                let (lo, hi) = (pat.crow[r] as usize, pat.crow[r + 1] as usize);
                for (&a, &c) in v[lo..hi].iter().zip(&pat.col[lo..hi]) {
                    let c = c as usize;
                    for (o, &x) in row.iter_mut().zip(&d[c * n..(c + 1) * n]) {
                        *o = *o + a * x;
                    }
                }
            });
        })
    })??;
    Tensor::from_vec(out, &[pat.m, n])
}

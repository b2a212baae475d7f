//! `SparseAdam`: lazy Adam over sparse gradients (`Embedding(sparse=True)`'s, read with
//! `magpie_sparse::sparse_grad`), following PyTorch's `_functional.sparse_adam`: the gradient is
//! coalesced, and only its entries' moments and parameter elements are updated, with the bias
//! correction of the parameter's step count. A dense `.grad` is PyTorch's error.

use super::check;
use crate::core::{put, take, Hyper, OptFloat, OptimizerState, ParamGroup, ParamState};
use magpie_core::{DType, Error, Result, Tensor};
use magpie_sparse::SparseTensor;

/// `torch.optim.SparseAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False)`.
#[derive(Clone, Debug)]
pub struct SparseAdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub maximize: bool,
}

impl Default for SparseAdamConfig {
    fn default() -> Self {
        SparseAdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, maximize: false }
    }
}

impl SparseAdamConfig {
    fn validate(&self) -> Result<()> {
        let op = "SparseAdam";
        check(self.lr >= 0.0, op, format!("Invalid learning rate: {}", self.lr))?;
        check(self.eps >= 0.0, op, format!("Invalid epsilon value: {}", self.eps))?;
        check((0.0..1.0).contains(&self.betas.0), op, format!("Invalid beta parameter at index 0: {}", self.betas.0))?;
        check((0.0..1.0).contains(&self.betas.1), op, format!("Invalid beta parameter at index 1: {}", self.betas.1))
    }
    fn hyper(&self) -> Hyper {
        super::hyper(&[("lr", self.lr), ("beta1", self.betas.0), ("beta2", self.betas.1), ("eps", self.eps), ("maximize", self.maximize as u8 as f64)])
    }
}

/// `torch.optim.SparseAdam`: parameters whose gradients are sparse (see the module docs).
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_nn::{Embedding, Module};
/// use magpie_optim::{Optimizer, SparseAdam, SparseAdamConfig};
/// let emb = Embedding::new(100, 8, None)?.with_sparse(true);
/// let before: Vec<f32> = emb.weight.to_vec()?;
/// let mut opt = SparseAdam::new(vec![emb.weight.clone()], SparseAdamConfig { lr: 0.01, ..Default::default() })?;
/// emb.forward(&Tensor::from_vec(vec![3i64, 5, 3], &[3])?)?.sum()?.backward()?;
/// opt.step()?;
/// opt.zero_grad();
/// let after: Vec<f32> = emb.weight.to_vec()?;
/// let changed: Vec<usize> = (0..100).filter(|&r| before[r * 8..r * 8 + 8] != after[r * 8..r * 8 + 8]).collect();
/// assert_eq!(changed, vec![3, 5]);                  // only the looked-up rows moved
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub struct SparseAdam {
    st: OptimizerState,
}

impl SparseAdam {
    /// A new `SparseAdam` over `params` with `config`.
    pub fn new(params: Vec<Tensor>, config: SparseAdamConfig) -> Result<Self> {
        config.validate()?;
        Ok(SparseAdam { st: OptimizerState::new("SparseAdam", params, config.hyper())? })
    }
    /// `optimizer.add_param_group`: a group with its own config.
    pub fn add_param_group(&mut self, params: Vec<Tensor>, config: SparseAdamConfig) -> Result<()> {
        config.validate()?;
        self.st.add_group("SparseAdam", params, config.hyper())
    }
}

impl crate::core::Optimizer for SparseAdam {
    fn state(&self) -> &OptimizerState {
        &self.st
    }
    fn state_mut(&mut self) -> &mut OptimizerState {
        &mut self.st
    }
    fn step(&mut self) -> Result<()> {
        let _ng = magpie_core::autograd::no_grad();
        for gi in 0..self.st.groups.len() {
            let group = self.st.groups[gi].clone();
            for p in &group.params {
                if p.grad().is_some() {
                    return Err(Error::value("SparseAdam", "SparseAdam does not support dense gradients, please consider Adam instead"));
                }
                let Some(g) = magpie_sparse::sparse_grad(p) else { continue };
                let ps = self.st.state.entry(p.id()).or_default();
                ps.step += 1.0;
                step_param(&group, ps, p, &g)?;
            }
        }
        Ok(())
    }
    /// `zero_grad()`: clears the parameters' sparse (and any dense) gradients.
    fn zero_grad(&mut self) {
        for g in &self.st.groups {
            for p in &g.params {
                p.set_grad(None);
                magpie_sparse::set_sparse_grad(p, None);
            }
        }
    }
}

/// One parameter's update from its sparse gradient `g` (its step already counted).
fn step_param(group: &ParamGroup, ps: &mut ParamState, p: &Tensor, g: &SparseTensor) -> Result<()> {
    let op = "SparseAdam";
    if g.shape() != p.shape() {
        return Err(Error::shape(op, format!("the sparse gradient has size {:?}, the parameter {:?}", g.shape(), p.shape())));
    }
    // the update is not linear in the gradient: duplicate indices must be summed first
    let g = g.coalesce()?;
    let nnz = g.nnz();
    if nnz == 0 || g.values_raw().numel() == 0 {
        return Ok(());
    }
    let sd = g.sparse_dim();
    let idx: Vec<i64> = g.indices()?.to_vec()?;
    // each entry covers `block` consecutive elements of the (row-major) parameter
    let block: usize = p.shape()[sd..].iter().product();
    let offsets: Vec<usize> = (0..nnz)
        .map(|e| {
            let mut lin = 0usize;
            for d in 0..sd {
                lin = lin * p.shape()[d] + idx[d * nnz + e] as usize;
            }
            lin * block
        })
        .collect();
    match p.dtype() {
        DType::F32 => apply::<f32>(group, ps, p, &g, &offsets, block),
        DType::F64 => apply::<f64>(group, ps, p, &g, &offsets, block),
        d => Err(Error::unsupported(op, format!("parameters of dtype {d} (f32 and f64 only so far)"))),
    }
}

fn apply<T: OptFloat>(group: &ParamGroup, ps: &mut ParamState, p: &Tensor, g: &SparseTensor, offsets: &[usize], block: usize) -> Result<()> {
    let mut gv: Vec<T> = g.values_raw().to_dtype(p.dtype())?.to_vec()?;
    if group.flag("maximize") {
        gv.iter_mut().for_each(|x| *x = -*x);
    }
    let n = p.numel();
    let mut m = take(ps, "exp_avg", n, T::zero())?;
    let mut v = take(ps, "exp_avg_sq", n, T::zero())?;
    let c = T::c;
    let (lr, b1, b2, eps) = (group.get("lr"), group.get("beta1"), group.get("beta2"), c(group.get("eps")));
    let step_size = lr * (1.0 - b2.powf(ps.step)).sqrt() / (1.0 - b1.powf(ps.step));
    let (w1, w2, neg_step) = (c(1.0 - b1), c(1.0 - b2), c(-step_size));
    let mut upd = |pv: &mut [T]| {
        for (e, &off) in offsets.iter().enumerate() {
            for j in 0..block {
                let (i, d) = (off + j, gv[e * block + j]);
                // PyTorch's arithmetic: update values from the old moments, then numer / denom
                let (old_m, old_v) = (m[i], v[i]);
                let um = (d - old_m) * w1;
                let uv = (d * d - old_v) * w2;
                m[i] = old_m + um;
                v[i] = old_v + uv;
                let numer = um + old_m;
                let denom = (uv + old_v).sqrt() + eps;
                pv[i] = pv[i] + neg_step * (numer / denom);
            }
        }
    };
    if p.device().is_cuda() || !p.is_contiguous() {
        // a host round trip of the parameter (the moments live on the host)
        let mut pv: Vec<T> = p.to_vec()?;
        upd(&mut pv);
        p.copy_(&Tensor::from_vec(pv, p.shape())?.to_device(p.device())?)?;
    } else {
        magpie_core::backend::cpu::write(p, |pv: &mut [T]| upd(pv))?;
    }
    put(ps, "exp_avg", m);
    put(ps, "exp_avg_sq", v);
    Ok(())
}

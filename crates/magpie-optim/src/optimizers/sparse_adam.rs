//! `SparseAdam`, as a plainly stated substitute: torch-magpie has no sparse tensors yet, so
//! gradients are dense and the "sparse" entries are the nonzero ones. Like PyTorch's
//! SparseAdam, only those entries' moments and values are updated (lazy Adam), with the
//! step-count bias correction of the parameter.

use super::{check, hyper, optimizer, AdamConfig};
use crate::core::{put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::Result;

impl AdamConfig {
    fn sparse_hyper(&self) -> Hyper {
        hyper(&[("lr", self.lr), ("beta1", self.betas.0), ("beta2", self.betas.1), ("eps", self.eps)])
    }
}

/// SparseAdam's configuration: lr, betas and eps of [`AdamConfig`] (weight decay and amsgrad unsupported, as in PyTorch).
#[derive(Clone, Debug, Default)]
pub struct SparseAdamConfig(pub AdamConfig);

impl SparseAdamConfig {
    fn validate(&self) -> Result<()> {
        check(self.0.weight_decay == 0.0 && !self.0.amsgrad, "SparseAdam", "SparseAdam does not support weight_decay or amsgrad".into())
    }
    fn hyper(&self) -> Hyper {
        self.0.sparse_hyper()
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, b1, b2, eps) = (g.get("lr"), g.get("beta1"), g.get("beta2"), c(g.get("eps")));
    let n = p.len();
    let mut m = take(ps, "exp_avg", n, T::zero())?;
    let mut v = take(ps, "exp_avg_sq", n, T::zero())?;
    ps.step += 1.0;
    let step_size = c(lr * (1.0 - b2.powf(ps.step)).sqrt() / (1.0 - b1.powf(ps.step)));
    let (w1, w2) = (c(1.0 - b1), c(1.0 - b2));
    for i in 0..n {
        let d = grad[i];
        if d == T::zero() {
            continue;
        }
        let dm = (d - m[i]) * w1;
        m[i] = m[i] + dm;
        let dv = (d * d - v[i]) * w2;
        v[i] = v[i] + dv;
        p[i] = p[i] - step_size * (m[i] / (v[i].sqrt() + eps));
    }
    put(ps, "exp_avg", m);
    put(ps, "exp_avg_sq", v);
    Ok(())
}

optimizer!(
    /// SparseAdam substitute (lazy Adam on the nonzero gradient entries; see the module docs).
    SparseAdam, SparseAdamConfig, "SparseAdam", update
);

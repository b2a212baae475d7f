//! `torch.optim.SGD`: momentum, dampening, Nesterov, weight decay, maximize.

use super::{b, check, hyper, optimizer};
use crate::core::{dev_buf, put, take, Hyper, OptFloat, ParamGroup, ParamState};
use magpie_core::backend::cuda::optim::{sgd_step, SgdHyper};
use magpie_core::{Result, Tensor};

/// SGD's keyword arguments (PyTorch's defaults except `lr`, which SGD requires).
#[derive(Clone, Debug)]
pub struct SgdConfig {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    pub maximize: bool,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig { lr: 1e-3, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false, maximize: false }
    }
}

impl SgdConfig {
    fn validate(&self) -> Result<()> {
        check(self.lr >= 0.0, "SGD", format!("Invalid learning rate: {}", self.lr))?;
        check(self.momentum >= 0.0, "SGD", format!("Invalid momentum value: {}", self.momentum))?;
        check(self.weight_decay >= 0.0, "SGD", format!("Invalid weight_decay value: {}", self.weight_decay))?;
        check(!self.nesterov || (self.momentum > 0.0 && self.dampening == 0.0), "SGD", "Nesterov momentum requires a momentum and zero dampening".into())
    }
    fn hyper(&self) -> Hyper {
        hyper(&[
            ("lr", self.lr),
            ("momentum", self.momentum),
            ("dampening", self.dampening),
            ("weight_decay", self.weight_decay),
            ("nesterov", b(self.nesterov)),
            ("maximize", b(self.maximize)),
        ])
    }
}

fn update<T: OptFloat>(g: &ParamGroup, ps: &mut ParamState, p: &mut [T], grad: &[T]) -> Result<()> {
    let c = T::c;
    let (lr, mom, damp, wd) = (c(g.get("lr")), c(g.get("momentum")), c(g.get("dampening")), c(g.get("weight_decay")));
    let (nesterov, maximize) = (g.flag("nesterov"), g.flag("maximize"));
    let first = ps.step == 0.0;
    ps.step += 1.0;
    let mut buf = if mom != T::zero() { take(ps, "momentum_buffer", p.len(), T::zero())? } else { Vec::new() };
    for i in 0..p.len() {
        let mut d = if maximize { -grad[i] } else { grad[i] };
        if wd != T::zero() {
            d = d + wd * p[i];
        }
        if mom != T::zero() {
            buf[i] = if first { d } else { mom * buf[i] + (T::one() - damp) * d };
            d = if nesterov { d + mom * buf[i] } else { buf[i] };
        }
        p[i] = p[i] - lr * d;
    }
    if mom != T::zero() {
        put(ps, "momentum_buffer", buf);
    }
    Ok(())
}

/// The fused CUDA step: one kernel per parameter, the momentum buffer on the device.
fn update_dev(g: &ParamGroup, ps: &mut ParamState, p: &Tensor, grad: &Tensor) -> Result<()> {
    let mom = g.get("momentum");
    let first = ps.step == 0.0;
    let buf = if mom != 0.0 { Some(dev_buf(ps, "momentum_buffer", p)?) } else { None };
    let h = SgdHyper {
        lr: g.get("lr"),
        momentum: mom,
        dampening: g.get("dampening"),
        weight_decay: g.get("weight_decay"),
        nesterov: g.flag("nesterov"),
        maximize: g.flag("maximize"),
        first,
    };
    sgd_step(p, grad, buf.as_ref(), &h)?;
    ps.step += 1.0;
    Ok(())
}

optimizer!(
    /// Stochastic gradient descent (`torch.optim.SGD`).
    Sgd, SgdConfig, "SGD", update, Some(update_dev)
);

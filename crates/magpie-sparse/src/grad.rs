//! Sparse gradients of dense parameters (what PyTorch keeps in a parameter's `.grad` when it is a
//! sparse tensor, e.g. after `Embedding(sparse=True)`). magpie-core's `.grad` holds strided tensors,
//! so these live beside it, keyed by the parameter's tensor id: [`sparse_grad`] is `p.grad` for them.
//! Backward accumulates with PyTorch's sparse + sparse (`arith::merge_add`, uncoalesced); `set_sparse_grad(p, None)`
//! (called by `SparseAdam::zero_grad` and magpie-nn's `zero_grad`) clears one.

use crate::tensor::SparseTensor;
use magpie_core::{Error, Result, Tensor};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

fn store() -> MutexGuard<'static, HashMap<usize, SparseTensor>> {
    static S: OnceLock<Mutex<HashMap<usize, SparseTensor>>> = OnceLock::new();
    S.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// The sparse gradient of the dense tensor `p` (`p.grad` when it is sparse), if any.
pub fn sparse_grad(p: &Tensor) -> Option<SparseTensor> {
    store().get(&p.id()).cloned()
}

/// Sets (or with `None` clears) the sparse gradient of `p`.
pub fn set_sparse_grad(p: &Tensor, g: Option<SparseTensor>) {
    let mut s = store();
    match g {
        Some(g) => {
            s.insert(p.id(), g);
        }
        None => {
            s.remove(&p.id());
        }
    }
}

/// Adds `g` to the sparse gradient of the tensor with id `id` (sparse + sparse).
pub(crate) fn accumulate(id: usize, g: SparseTensor) -> Result<()> {
    let prev = store().remove(&id);
    let next = match prev {
        None => g,
        Some(p) => {
            if p.shape() != g.shape() || p.sparse_dim() != g.sparse_dim() {
                return Err(Error::shape("backward", format!("sparse gradient of size {:?} accumulated into one of size {:?}", g.shape(), p.shape())));
            }
            // PyTorch accumulates sparse gradients with sparse + sparse
            crate::arith::merge_add(&p, &g)?
        }
    };
    store().insert(id, next);
    Ok(())
}

//! In-place writes under autograd: which writes are allowed, and how the written tensor's history
//! changes (PyTorch's `check_inplace` and `rebase_history`).
//!
//! An in-place op is computed out of place (from a differentiable copy of the target, PyTorch's
//! `original_self`) into a `value` that carries the op's history; [`write`] then stores the data
//! and moves the history:
//! - a tensor that is not a view takes `value`'s history;
//! - a view's base gets a `CopySlices` node (the old history outside the view's region, `value`'s
//!   inside), and the view and every other view of the base regenerate their history from it
//!   (see [`super::view`]).

use super::node::{camel, record_edges, BackwardCtx, Edge};
use super::view::{copy_slices, CREATED_DEFAULT, CREATED_MULTI_OUTPUT};
use super::is_grad_enabled;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// Checks that an in-place write to `t` is allowed (PyTorch's `check_inplace` and
/// `assert_no_internal_overlap`).
pub(crate) fn check(t: &Tensor, op: &str) -> Result<()> {
    let l = t.layout();
    if l.shape.iter().zip(&l.strides).any(|(&s, &st)| st == 0 && s > 1) {
        return Err(Error::value(
            op,
            "unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.",
        ));
    }
    if !is_grad_enabled() {
        return Ok(());
    }
    match t.base() {
        None => {
            if t.requires_grad() && t.is_leaf() {
                return Err(Error::autograd(op, "a leaf Variable that requires grad is being used in an in-place operation."));
            }
        }
        Some(base) => {
            if !base.requires_grad() {
                return Ok(());
            }
            let creation = t.0.creation.load(Ordering::Relaxed);
            if creation != CREATED_DEFAULT {
                return Err(view_rebase_error(t, op, creation));
            }
            if base.is_leaf() {
                return Err(Error::autograd(op, "a view of a leaf Variable that requires grad is being used in an in-place operation."));
            }
        }
    }
    Ok(())
}

/// PyTorch's error for an in-place write into a view whose history cannot be rebased
/// (`handle_view_on_rebase`): one made in no_grad mode, or an output of a multi-output view function.
fn view_rebase_error(t: &Tensor, op: &str, creation: u8) -> Error {
    let what = match t.grad_edge() {
        Some((n, k)) => {
            let name = n.name().trim_end_matches(|c: char| c.is_ascii_digit());
            format!("Output {k} of {} is a view and is being modified inplace.", name.strip_suffix("Backward").unwrap_or(name))
        }
        None => "A view was created in no_grad mode and is being modified inplace with grad mode enabled.".to_string(),
    };
    let why = if creation == CREATED_MULTI_OUTPUT {
        "This view is the output of a function that returns multiple views. Such functions do not allow the output views to be modified inplace. You should replace the inplace operation by an out-of-place one."
    } else {
        "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked)."
    };
    Error::autograd(op, format!("{what} {why}"))
}

/// An in-place write of `value` (same shape and dtype as `dst`) into `dst`: `store` writes the
/// data (a no-op when it is already there, as for a custom function's dirty inputs); under
/// autograd, `dst`'s history (or its base's) is then rebased onto `value`'s.
pub(crate) fn write(op: &str, dst: &Tensor, value: &Tensor, store: impl FnOnce() -> Result<()>) -> Result<()> {
    check(dst, op)?;
    if !is_grad_enabled() {
        return store();
    }
    if let Some(base) = dst.base() {
        if value.requires_grad() || base.requires_grad() {
            // `check` let a view of a base that does not require grad through; a recorded write
            // into a view the function that made it cannot rebase is still refused
            let creation = dst.0.creation.load(Ordering::Relaxed);
            if creation != CREATED_DEFAULT {
                return Err(view_rebase_error(dst, op, creation));
            }
            let base_edge = Edge::of(base);
            // the node that produced the base may read it in backward: give it a copy
            if let Some((n, k)) = base.grad_edge() {
                n.preserve_output(k)?;
            }
            store()?;
            copy_slices(base, dst, base_edge, value);
            return Ok(());
        }
    }
    if !(value.requires_grad() || dst.requires_grad()) {
        return store();
    }
    let old = Edge::of(dst);
    if let Some((n, k)) = dst.grad_edge() {
        n.preserve_output(k)?;
    }
    store()?;
    if value.requires_grad() {
        match value.grad_edge() {
            Some(e) => dst.set_grad_fn(Some(e)),
            // a leaf value: an identity node in between (a leaf's edge cannot be a grad_fn)
            None => {
                let rule = |_: &BackwardCtx, g: &[Tensor]| -> Result<Vec<Option<Tensor>>> { Ok(vec![Some(g[0].clone())]) };
                record_edges("AliasBackward0".to_string(), vec![Edge::of(value)], &[dst.clone()], &[true], Box::new(rule));
            }
        }
    } else {
        // overwritten by a constant: the old history gets a zero gradient (PyTorch's FillBackward / CopyBackwards)
        let rule = |_: &BackwardCtx, g: &[Tensor]| -> Result<Vec<Option<Tensor>>> { Ok(vec![Some(g[0].zeros_like()?)]) };
        let name = format!("{}Backward0", camel(op.trim_end_matches('_')));
        record_edges(name, vec![old], &[dst.clone()], &[true], Box::new(rule));
    }
    Ok(())
}

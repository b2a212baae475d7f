//! Views under autograd (PyTorch's `DifferentiableViewMeta`): a view shares its base's storage and
//! version counter; when the storage is written in place, the view's history is regenerated from
//! the base's current history (an `AsStridedBackward0` node over the view's geometry), so every
//! view sees in-place writes made through the base or through any other view.
//!
//! Gradients between a base and a view go through [`restride`], the linear map "write through one
//! layout into zeroed storage, read through another". It works for any geometry (transposes,
//! diagonals, steps, expands), and its adjoint is the same map with the layouts swapped, so these
//! gradients are differentiable again.

use super::node::{record_edges, BackwardCtx, Edge};
use super::{is_grad_enabled, no_grad};
use crate::layout::Layout;
use crate::tensor::Tensor;
use crate::Result;
use std::sync::atomic::Ordering;

/// A view made by a view op with grad mode on (or of a base that did not require grad).
pub(crate) const CREATED_DEFAULT: u8 = 0;
/// A view of a tensor that requires grad, made in `no_grad` mode: writing it in place with grad
/// mode on is an error, and it does not pick up its base's history.
pub(crate) const CREATED_NO_GRAD: u8 = 1;

/// One of the views returned by a multi-output view function (`split`, `chunk`, `unbind`,
/// `split_with_sizes`) made with grad mode on, or a view of one: writing it in place while
/// autograd records is an error (PyTorch's `MULTI_OUTPUT_NODE`), since the function's single
/// node could not be rebased for one of its outputs.
pub(crate) const CREATED_MULTI_OUTPUT: u8 = 2;

/// Marks the outputs of a multi-output view function made now (no-op without grad mode: those
/// views keep their no-grad marking, as in PyTorch).
pub(crate) fn mark_multi_output(views: &[Tensor]) {
    if is_grad_enabled() {
        for v in views {
            v.0.creation.store(CREATED_MULTI_OUTPUT, Ordering::Relaxed);
        }
    }
}

/// How a view of `base` made now is marked (PyTorch's `CreationMeta`).
pub(crate) fn creation_of(base: Option<&Tensor>) -> u8 {
    match base {
        Some(b) if !is_grad_enabled() && b.requires_grad() => CREATED_NO_GRAD,
        _ => CREATED_DEFAULT,
    }
}

/// Gives `view` its base's current history, seen through the view's geometry. Called when the
/// storage version moved since the view's history was set (to `version`).
pub(crate) fn regenerate(view: &Tensor, base: &Tensor, version: u64) {
    view.0.attr_version.store(version, Ordering::Release);
    if view.0.creation.load(Ordering::Relaxed) == CREATED_NO_GRAD || !base.requires_grad() {
        return;
    }
    let (vl, bl) = (view.layout().clone(), base.layout().clone());
    let next = vec![Edge::of(base)];
    let rule = move |_: &BackwardCtx, g: &[Tensor]| -> Result<Vec<Option<Tensor>>> { Ok(vec![Some(restride(&g[0], &vl, &bl)?)]) };
    record_edges("AsStridedBackward0".to_string(), next, &[view.clone()], &[true], Box::new(rule));
}

/// `layout` moved down by `lo` storage elements.
fn shifted(layout: &Layout, lo: usize) -> Layout {
    Layout { shape: layout.shape.clone(), strides: layout.strides.clone(), offset: layout.offset - lo }
}

/// Writes `x` (of `from`'s shape) through the layout `from` into a zeroed storage, adding where
/// `from` visits a position twice, and reads that storage through `to`. With `from` a base's
/// layout and `to` a view's, this takes the view's part of a base-shaped tensor; the other way
/// round it scatters a view-shaped gradient into the base's shape. Recorded for autograd: the
/// adjoint is `restride(g, to, from)`.
pub(crate) fn restride(x: &Tensor, from: &Layout, to: &Layout) -> Result<Tensor> {
    let out = {
        let _ng = no_grad();
        let (a, b) = (from.storage_span(), to.storage_span());
        let (lo, hi) = (a.0.min(b.0), a.1.max(b.1));
        let z = Tensor::zeros_on(&[hi - lo], x.dtype(), x.device())?;
        crate::ops::binary::add_into_view(&z.with_layout(shifted(from, lo)), x)?;
        z.with_layout(shifted(to, lo)).copy()?
    };
    let (f, t) = (from.clone(), to.clone());
    super::record("AsStridedScatter", &[x], &[out.clone()], move |_, g| Ok(vec![Some(restride(&g[0], &t, &f)?)]));
    Ok(out)
}

/// A bool tensor of the base's shape, true where the view (layout `view` over the same storage)
/// has an element.
fn region_mask(g: &Tensor, base: &Layout, view: &Layout) -> Result<Tensor> {
    let _ng = no_grad();
    let ones = Tensor::ones_on(&view.shape, g.dtype(), g.device())?;
    restride(&ones, view, base)?.to_dtype(crate::DType::Bool)
}

/// Records PyTorch's `CopySlices` on `base` after the view `dst` of it was overwritten by
/// `value`: the base's new history takes the old history's gradient outside the view's region
/// and `value`'s history's gradient inside it. `base_edge` is the base's history before the write.
pub(crate) fn copy_slices(base: &Tensor, dst: &Tensor, base_edge: Option<Edge>, value: &Tensor) {
    let value_edge = if value.requires_grad() { Edge::of(value) } else { None };
    let (bl, vl) = (base.layout().clone(), dst.layout().clone());
    let rule = move |ctx: &BackwardCtx, g: &[Tensor]| -> Result<Vec<Option<Tensor>>> {
        let g = &g[0];
        let to_base = if ctx.needs_input_grad(0) { Some(g.masked_fill(&region_mask(g, &bl, &vl)?, 0.0)?) } else { None };
        let to_value = if ctx.needs_input_grad(1) { Some(restride(g, &bl, &vl)?) } else { None };
        Ok(vec![to_base, to_value])
    };
    record_edges("CopySlices".to_string(), vec![base_edge, value_edge], &[base.clone()], &[true], Box::new(rule));
    // the written view takes its history from the base's new one at once
    regenerate(dst, base, dst.version());
}

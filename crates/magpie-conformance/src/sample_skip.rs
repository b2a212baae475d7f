//! Samples that `--gradcheck` leaves out of one check, by a rule for an op family and with
//! the reason (PyTorch's where it has one); the op's other samples are still checked.
//! Each rule names a property of the sample at which the check cannot hold for any correct
//! implementation (or that the case format cannot reproduce), never a particular case.

use crate::manifest::Case;
use magpie_core::Tensor;
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};

/// The tensor a case argument refers to (`{"tensor": key}`), among the loaded ones.
fn tensor<'a>(j: Option<&Json>, tensors: &'a HashMap<String, Tensor>) -> Option<&'a Tensor> {
    let k = j?.as_object()?.get("tensor")?.as_str()?;
    tensors.get(k)
}

/// Positional argument `i` (after the input) or keyword `name`.
fn arg<'a>(c: &'a Case, i: usize, name: &str) -> Option<&'a Json> {
    c.args.get(i).or_else(|| c.kwargs.get(name))
}

fn ints(j: Option<&Json>) -> Option<Vec<i64>> {
    match j? {
        Json::Array(a) => a.iter().map(|x| x.as_i64()).collect(),
        x => x.as_i64().map(|v| vec![v]),
    }
}

/// Why a sample is left out of gradcheck (and so of gradgradcheck), if it is.
pub fn grad_skip(c: &Case, tensors: &HashMap<String, Tensor>) -> Option<String> {
    if let Some(d) = c.op.strip_prefix("nn.functional.max_unpool").and_then(|d| d.trim_end_matches('d').parse::<usize>().ok()) {
        return max_unpool_repeated(c, d, tensors);
    }
    if c.op == "as_strided" {
        return as_strided_outside(c, tensors);
    }
    None
}

/// max_unpool with an index repeated within one (batch, channel) plane: the forward keeps one
/// of the writes to that position, the backward gathers the gradient for every input that
/// points there, and finite differences perturb one input at a time, so they disagree for any
/// implementation (PyTorch's included).
fn max_unpool_repeated(c: &Case, d: usize, tensors: &HashMap<String, Tensor>) -> Option<String> {
    let idx = tensor(arg(c, 0, "indices"), tensors)?;
    let plane: usize = idx.shape().iter().rev().take(d).product();
    let v = idx.to_vec::<i64>().ok()?;
    let repeated = plane > 0 && v.chunks(plane).any(|p| p.iter().collect::<HashSet<_>>().len() < p.len());
    repeated.then(|| {
        "indices repeat within a plane (overlapping max_pool windows picked the same element): the forward keeps one write, \
         the backward gathers for all, and finite differences perturb one element at a time; PyTorch checks gradients only on \
         samples with unique indices (OpInfo variant `grad`, sample_inputs_max_unpool_grad: \"It could be that a single element \
         from the max_pool's input is mapped to several locations in its output. This situation leads to failed gradchecks\")"
            .to_string()
    })
}

/// as_strided reaching past the serialized input: OpInfo's `partial_views` input is
/// `base[5:15]` of a 20-element tensor, a view at storage offset 5 whose storage goes on past
/// it; the case stores only the 10 viewed elements, so a view of storage positions beyond them
/// cannot be rebuilt (on the stored input our error is right, as PyTorch's is).
fn as_strided_outside(c: &Case, tensors: &HashMap<String, Tensor>) -> Option<String> {
    let x = tensor(Some(&c.input), tensors)?;
    let size = ints(arg(c, 0, "size"))?;
    let stride = ints(arg(c, 1, "stride"))?;
    let offset = arg(c, 2, "storage_offset").and_then(|j| j.as_i64()).unwrap_or(0);
    if size.contains(&0) || size.len() != stride.len() {
        return None;
    }
    let extent = offset + size.iter().zip(&stride).map(|(n, s)| (n - 1) * s).sum::<i64>() + 1;
    (extent > x.numel() as i64).then(|| {
        format!(
            "the view needs storage elements up to {extent} but the case stores only the input's {} elements: OpInfo's input is a view \
             into a larger storage (as_strided partial_views: base[5:15] of a 20-element tensor) and the case format keeps only the \
             viewed elements, so this sample cannot be reproduced",
            x.numel()
        )
    })
}

/// Why a sample is left out of gradgradcheck (its gradcheck still runs), if it is: `outs` are
/// the op's outputs at the sample.
pub fn gradgrad_skip(c: &Case, outs: &[Tensor]) -> Option<String> {
    if matches!(c.op.as_str(), "linalg.norm" | "linalg.vector_norm" | "norm") {
        return norm_at_zero(c, outs);
    }
    None
}

/// A norm (of order other than 0) that is 0 at the sample: its gradient, PyTorch's subgradient
/// 0 at zero next to x/|x|-like values around it, is discontinuous there, so no second
/// derivative exists and finite differences of the gradient grow like 1/eps. PyTorch's own
/// gradgradcheck fails on these samples (OpInfo `linalg.norm` variant `subgradients_at_zero`,
/// every order but 0; checked with torch 2.15). Our second derivatives at zero are PyTorch's
/// (NaN for orders 0.5, 1.5, 2 and the negative ones, 0 for 1, 3.5 and ±inf).
fn norm_at_zero(c: &Case, outs: &[Tensor]) -> Option<String> {
    let ord = arg(c, 0, if c.op == "norm" { "p" } else { "ord" });
    if ord.and_then(|o| o.as_f64()) == Some(0.0) {
        return None;
    }
    let zero = outs.iter().any(|t| t.to_vec::<f64>().is_ok_and(|v| v.contains(&0.0)));
    zero.then(|| {
        "the norm is 0 at the sample: the gradient (subgradient 0 at zero) is discontinuous there, so no second derivative exists \
         (PyTorch's gradgradcheck fails on these samples too)"
            .to_string()
    })
}

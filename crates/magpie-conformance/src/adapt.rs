//! Maps an OpInfo case onto a registry call. Most OpInfo ops are `torch.<op>(input, *args, **kwargs)`
//! and map one to one; this file holds the exceptions (method-only ops, argument order quirks,
//! in-place variants), each a line or two, never a special case of a particular sample.

use crate::manifest::Case;
use magpie_core::registry::{self, Value};

/// A registry call: op name, positional and keyword arguments.
pub struct Call {
    pub op: String,
    /// In-place ops run on a copy of the input, as OpInfo's wrappers (`x.clone().zero_()`) do.
    pub clone_input: bool,
    pub args: Vec<Value>,
    pub kwargs: Vec<(String, Value)>,
    /// The OpInfo variant's `op=lambda ...` around the registry op, if it has one.
    pub wrap: Wrap,
}

/// What an OpInfo variant's lambda does around the op it calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wrap {
    None,
    /// `lambda a, b: op(a @ b.mT)` (`linalg.pinv` variant `singular`: products of two
    /// full-rank factors, so the rank stays fixed under perturbation).
    ProductWithMt,
    /// `lambda ...: op(...)[:n]` (`linalg.lstsq` variant `grad_oriented`).
    First(usize),
    /// OpInfo's `max_pool2d_backward(x, **pool_args)`: `max_pool2d_with_indices`, then
    /// `max_pool2d_with_indices_backward` of a gradient of ones at the indices it found.
    MaxPool2dBackward,
}

/// Runs a call through the registry, with its variant's lambda around it.
pub fn invoke(call: Call) -> magpie_core::Result<Value> {
    let Call { op, mut args, kwargs, wrap, .. } = call;
    if wrap == Wrap::ProductWithMt && args.len() >= 2 {
        if let (Value::Tensor(a), Value::Tensor(b)) = (&args[0], &args[1]) {
            let p = a.matmul(&b.mt()?)?;
            args.splice(0..2, [Value::Tensor(p)]);
        }
    }
    if wrap == Wrap::MaxPool2dBackward {
        return max_pool2d_backward(&op, args, kwargs);
    }
    let out = registry::call(&op, args, kwargs)?;
    Ok(match (wrap, out) {
        (Wrap::First(n), Value::List(mut l)) => {
            l.truncate(n);
            Value::List(l)
        }
        (_, v) => v,
    })
}

/// OpInfo's `max_pool2d_backward` helper: the pooling keywords go to both calls
/// (`return_indices` is swallowed, as the helper's `**kwargs` does).
fn max_pool2d_backward(op: &str, args: Vec<Value>, kwargs: Vec<(String, Value)>) -> magpie_core::Result<Value> {
    let kw: Vec<(String, Value)> = kwargs.into_iter().filter(|(k, v)| k != "return_indices" && !matches!(v, Value::None)).collect();
    let x = args.into_iter().next().ok_or_else(|| magpie_core::Error::value(op, "missing input"))?;
    let pooled = registry::call("nn.functional.max_pool2d_with_indices", vec![x.clone()], kw.clone())?;
    let (out, idx) = match pooled {
        Value::List(l) if l.len() == 2 => (l[0].clone(), l[1].clone()),
        v => return Err(magpie_core::Error::value(op, format!("max_pool2d_with_indices returned a {}", v.kind()))),
    };
    let Value::Tensor(out) = out else { return Err(magpie_core::Error::value(op, "max_pool2d_with_indices returned no tensor")) };
    let mut kw = kw;
    kw.push(("indices".into(), idx));
    registry::call(op, vec![Value::Tensor(out.ones_like()?), x], kw)
}

/// Builds the registry call for a case from its converted input, args and kwargs.
pub fn adapt(case: &Case, input: Value, args: Vec<Value>, kwargs: Vec<(String, Value)>) -> Call {
    let mut pos = Vec::with_capacity(args.len() + 1);
    let op = match (case.op.as_str(), case.variant.as_str()) {
        // OpInfo calls these with the input first, but torch's signature puts the first arg
        // before it: `torch.polygamma(n, input)`, `torch.where(condition, input, other)`,
        // `F.embedding(indices, weight)` (OpInfo's samples are (weight, indices, ...)).
        ("polygamma" | "special.polygamma" | "where" | "nn.functional.embedding" | "nn.functional.embedding_bag", _) => {
            let mut a = args.into_iter();
            pos.extend(a.next());
            pos.push(input);
            pos.extend(a);
            return Call { op: case.op.clone(), clone_input: false, args: pos, kwargs, wrap: Wrap::None };
        }
        // OpInfo's samplers are `input.<op>_(*args)`.
        (op @ ("cauchy" | "exponential" | "geometric" | "log_normal" | "uniform"), _) => format!("{op}_"),
        // In-place variants are `input.<op>_(*args)`.
        (op, "in_place") => format!("{op}_"),
        (op, _) => op.to_string(),
    };
    pos.push(input);
    pos.extend(args);
    let clone_input = op.ends_with('_') && !op.starts_with("__");
    let wrap = match (case.op.as_str(), case.variant.as_str()) {
        ("linalg.pinv", "singular") => Wrap::ProductWithMt,
        ("linalg.lstsq", "grad_oriented") => Wrap::First(2),
        ("max_pool2d_with_indices_backward", _) => Wrap::MaxPool2dBackward,
        _ => Wrap::None,
    };
    Call { op, clone_input, args: pos, kwargs, wrap }
}

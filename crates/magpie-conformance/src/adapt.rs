//! Maps an OpInfo case onto a registry call. Most OpInfo ops are `torch.<op>(input, *args, **kwargs)`
//! and map one to one; this file holds the exceptions (method-only ops, argument order quirks,
//! in-place variants), each a line or two, never a special case of a particular sample.

use crate::manifest::Case;
use magpie_core::registry::Value;

/// A registry call: op name, positional and keyword arguments.
pub struct Call {
    pub op: String,
    /// In-place ops run on a copy of the input, as OpInfo's wrappers (`x.clone().zero_()`) do.
    pub clone_input: bool,
    pub args: Vec<Value>,
    pub kwargs: Vec<(String, Value)>,
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
            return Call { op: case.op.clone(), clone_input: false, args: pos, kwargs };
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
    Call { op, clone_input, args: pos, kwargs }
}

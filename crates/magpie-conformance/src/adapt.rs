//! Maps an OpInfo case onto a registry call. Most OpInfo ops are `torch.<op>(input, *args, **kwargs)`
//! and map one to one; this file holds the exceptions (method-only ops, argument order quirks,
//! in-place variants), each a line or two, never a special case of a particular sample.

use crate::manifest::Case;
use magpie_core::registry::Value;

/// A registry call: op name, positional and keyword arguments.
pub struct Call {
    pub op: String,
    pub args: Vec<Value>,
    pub kwargs: Vec<(String, Value)>,
}

/// Builds the registry call for a case from its converted input, args and kwargs.
pub fn adapt(case: &Case, input: Value, args: Vec<Value>, kwargs: Vec<(String, Value)>) -> Call {
    let mut pos = Vec::with_capacity(args.len() + 1);
    let op = match (case.op.as_str(), case.variant.as_str()) {
        // torch.polygamma(n, input): OpInfo passes the input first. OpInfo's embedding and
        // embedding_bag samples are (weight, indices, ...) for F.embedding(indices, weight, ...).
        ("polygamma", _) | ("special.polygamma", _) | ("nn.functional.embedding", _) | ("nn.functional.embedding_bag", _) => {
            let mut a = args.into_iter();
            pos.extend(a.next());
            pos.push(input);
            pos.extend(a);
            return Call { op: case.op.clone(), args: pos, kwargs };
        }
        // In-place variants are `input.<op>_(*args)`.
        (op, "in_place") => format!("{op}_"),
        (op, _) => op.to_string(),
    };
    pos.push(input);
    pos.extend(args);
    Call { op, args: pos, kwargs }
}

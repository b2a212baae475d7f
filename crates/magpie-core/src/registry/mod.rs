//! The op registry: every public op reachable by its PyTorch name with dynamically typed
//! arguments (what `native_functions.yaml` does for PyTorch). The conformance runner, the C ABI's
//! generic call and future bindings all use this one table.
//!
//! ```
//! use magpie_core::registry::{call, Value};
//! use magpie_core::Tensor;
//! let a = Tensor::from_vec(vec![1f32, 2.], &[2])?;
//! let out = call("add", vec![Value::Tensor(a.clone()), Value::Tensor(a)], vec![])?;
//! assert_eq!(out.into_tensor()?.to_vec::<f32>()?, vec![2., 4.]);
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod args;
mod binary_ops;
mod core_ops;
mod creation_ops;
mod device_fallback;
mod fft_ops;
mod linalg_ops;
mod nn_ops;
mod numeric_ops;
mod reduce_ops;
mod shape_ops;
mod unary_ops;
mod value;

pub use args::{Args, TensorOrScalar};
pub use value::Value;

use crate::{Error, Result};
use std::collections::HashMap;
use std::sync::OnceLock;

/// An op's entry point: takes its arguments, returns its result.
pub type OpFn = fn(&mut Args) -> Result<Value>;

/// The table being filled by each family's `register` function.
#[derive(Default)]
pub struct Registry {
    ops: HashMap<&'static str, OpFn>,
    /// Names added twice: the later entry would silently win, so a test keeps this empty.
    duplicates: Vec<&'static str>,
}

impl Registry {
    /// Adds `f` under `name`; a second entry of the same name replaces the first and is recorded in
    /// `duplicates` (a registration mistake that `registry::tests` reports).
    pub fn add(&mut self, name: &'static str, f: OpFn) {
        if self.ops.insert(name, f).is_some() {
            self.duplicates.push(name);
        }
    }
    /// Adds `f` under each of `names` (PyTorch aliases: `absolute` for `abs`, ...).
    pub fn add_all(&mut self, names: &[&'static str], f: OpFn) {
        for n in names {
            self.add(n, f);
        }
    }
}

fn table() -> &'static Registry {
    static T: OnceLock<Registry> = OnceLock::new();
    T.get_or_init(|| {
        let mut r = Registry::default();
        core_ops::register(&mut r);
        unary_ops::register(&mut r);
        binary_ops::register(&mut r);
        reduce_ops::register(&mut r);
        shape_ops::register(&mut r);
        linalg_ops::register(&mut r);
        nn_ops::register(&mut r);
        creation_ops::register(&mut r);
        fft_ops::register(&mut r);
        numeric_ops::register(&mut r);
        r
    })
}

/// Calls the op `name` with positional and keyword arguments.
/// An unknown op, or an argument form it does not take yet, is [`Error::Unsupported`].
pub fn call(name: &str, args: Vec<Value>, kwargs: Vec<(String, Value)>) -> Result<Value> {
    let f = table().ops.get(name).ok_or_else(|| Error::unsupported(name, "no such op in the registry"))?;
    let _prof = if crate::profiler::is_enabled() {
        let ts: Vec<&crate::Tensor> = args.iter().filter_map(|v| if let Value::Tensor(t) = v { Some(t) } else { None }).collect();
        crate::profiler::op_named(|| name.to_string(), &ts)
    } else {
        None
    };
    if let Some(dev) = device_fallback::cuda_device(&args, &kwargs) {
        return device_fallback::call_on_cuda(*f, name, dev, args, kwargs);
    }
    let mut a = Args::new(name, args, kwargs);
    let out = f(&mut a)?;
    a.finish()?;
    Ok(out)
}

/// True if the registry has an op of this name.
pub fn has_op(name: &str) -> bool {
    table().ops.contains_key(name)
}

/// The names of every registered op, sorted.
pub fn op_names() -> Vec<&'static str> {
    let mut v: Vec<_> = table().ops.keys().copied().collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    /// Two families registering one name means one of the two implementations is dead code.
    #[test]
    fn no_op_is_registered_twice() {
        let dup = &super::table().duplicates;
        assert!(dup.is_empty(), "registered more than once: {dup:?}");
    }
}

//! The `Module` trait (`torch.nn.Module`): a forward pass plus a tree of named parameters,
//! buffers and children, from which `ModuleExt` derives everything else (state dicts,
//! train/eval, zero_grad, dtype/device moves, `apply`).

use magpie_core::autograd::no_grad;
use magpie_core::{DType, Device, Error, Result, Tensor};
use std::collections::BTreeSet;

/// A state dict: names (`layers.0.attn.q_proj.weight`) and tensors, in registration order
/// (PyTorch's `OrderedDict`).
pub type StateDict = Vec<(String, Tensor)>;

/// A neural-network layer or model. Implement `forward` and list what the module owns:
/// its own parameters and buffers (not its children's) and its children, each in
/// registration order; [`ModuleExt`] builds the recursive API from these.
///
/// Modules with several inputs (`Bilinear`, `MultiheadAttention`, losses) have their own typed
/// `forward`-like methods and implement [`Module::forward_many`]; their `forward` is an error.
pub trait Module: Send + Sync {
    /// The type name used in messages and `Debug` output (`"Linear"`).
    fn type_name(&self) -> &'static str;

    /// The forward pass on one input.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let _ = x;
        Err(Error::value(self.type_name(), "this module takes several inputs; call its own forward method"))
    }

    /// The forward pass on any number of inputs, for generic callers (the default takes one).
    fn forward_many(&self, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
        match xs {
            [x] => Ok(vec![self.forward(x)?]),
            _ => Err(Error::value(self.type_name(), format!("forward takes 1 input but {} were given", xs.len()))),
        }
    }

    /// This module's own parameters (not its children's), by local name.
    fn local_parameters(&self) -> Vec<(&'static str, &Tensor)> {
        Vec::new()
    }
    /// Mutable access to the same parameters, in the same order (for `to(dtype)`/`to(device)`).
    fn local_parameters_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        Vec::new()
    }
    /// This module's own buffers (`running_mean`, ...), by local name.
    fn local_buffers(&self) -> Vec<(&'static str, &Tensor)> {
        Vec::new()
    }
    /// Mutable access to the same buffers, in the same order.
    fn local_buffers_mut(&mut self) -> Vec<(&'static str, &mut Tensor)> {
        Vec::new()
    }
    /// The direct children, by name (`"0"`, `"attn"`).
    fn children(&self) -> Vec<(String, &dyn Module)> {
        Vec::new()
    }
    /// Mutable access to the same children, in the same order.
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        Vec::new()
    }
    /// Mutable access to the children this module holds boxed (`Box<dyn Module>`: `Sequential`,
    /// `ModuleList`, `ModuleDict`), which a model transform may replace by a module of another
    /// type, as `setattr(parent, name, new)` does in PyTorch (`magpie_quant::quantize_dynamic`).
    /// Children held in typed fields cannot change type and are not listed; the default lists none.
    fn child_slots_mut(&mut self) -> Vec<(String, &mut Box<dyn Module>)> {
        Vec::new()
    }
    /// Sets this module's own training flag (not its children's); modules that behave the
    /// same in both modes keep the default, which ignores it.
    fn set_training(&mut self, training: bool) {
        let _ = training;
    }
    /// This module's training flag (`module.training`); modules without one report true.
    fn is_training(&self) -> bool {
        true
    }
}

/// The tensors that are present among named optional ones, in order: the usual body of
/// `local_parameters` / `local_buffers` (`present([("weight", Some(&self.weight)), ("bias", self.bias.as_ref())])`).
pub(crate) fn present<'a, const K: usize>(items: [(&'static str, Option<&'a Tensor>); K]) -> Vec<(&'static str, &'a Tensor)> {
    items.into_iter().filter_map(|(n, t)| t.map(|t| (n, t))).collect()
}

/// [`present`] for the `_mut` lists (`self.bias.as_mut()`).
pub(crate) fn present_mut<'a, const K: usize>(items: [(&'static str, Option<&'a mut Tensor>); K]) -> Vec<(&'static str, &'a mut Tensor)> {
    items.into_iter().filter_map(|(n, t)| t.map(|t| (n, t))).collect()
}

/// What `load_state_dict` found: keys the module has but the dict lacks, and the reverse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    pub missing_keys: Vec<String>,
    pub unexpected_keys: Vec<String>,
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn walk<'a>(m: &'a dyn Module, prefix: &str, f: &mut dyn FnMut(&str, &'a dyn Module)) {
    f(prefix, m);
    for (n, c) in m.children() {
        walk(c, &join(prefix, &n), f);
    }
}

fn walk_mut(m: &mut dyn Module, prefix: &str, f: &mut dyn FnMut(&str, &mut dyn Module) -> Result<()>) -> Result<()> {
    f(prefix, m)?;
    for (n, c) in m.children_mut() {
        walk_mut(c, &join(prefix, &n), f)?;
    }
    Ok(())
}

/// The recursive `torch.nn.Module` API, for every [`Module`].
pub trait ModuleExt: Module {
    /// `named_parameters()`: every parameter with its dotted name; a tensor shared by two
    /// modules (weight tying) is listed once, under its first name, as in PyTorch.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut out: Vec<(String, Tensor)> = Vec::new();
        let mut seen = BTreeSet::new();
        walk(self.as_dyn(), "", &mut |p, m| {
            for (n, t) in m.local_parameters() {
                if seen.insert(t.id()) {
                    out.push((join(p, n), t.clone()));
                }
            }
        });
        out
    }
    /// `parameters()`.
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters().into_iter().map(|(_, t)| t).collect()
    }
    /// `named_buffers()`.
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        walk(self.as_dyn(), "", &mut |p, m| {
            for (n, t) in m.local_buffers() {
                out.push((join(p, n), t.clone()));
            }
        });
        out
    }
    /// `named_modules()`: this module (named `""`) and all descendants, depth first.
    fn named_modules(&self) -> Vec<(String, &dyn Module)> {
        let mut out = Vec::new();
        walk(self.as_dyn(), "", &mut |p, m| out.push((p.to_string(), m)));
        out
    }
    /// The number of parameter elements (each shared tensor counted once).
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|t| t.numel()).sum()
    }
    /// `state_dict()`: parameters and buffers of every module, by dotted name, detached.
    /// Tied weights appear under each name, as in PyTorch.
    fn state_dict(&self) -> StateDict {
        let mut out = Vec::new();
        walk(self.as_dyn(), "", &mut |p, m| {
            for (n, t) in m.local_parameters().into_iter().chain(m.local_buffers()) {
                out.push((join(p, n), t.detach()));
            }
        });
        out
    }
    /// `load_state_dict(sd, strict)`: copies values into the existing tensors (so optimizers
    /// holding them stay valid). With `strict`, any missing or unexpected key is an error naming
    /// them and nothing is changed; a shape mismatch is always an error, before any copy.
    fn load_state_dict(&self, sd: &[(String, Tensor)], strict: bool) -> Result<LoadReport> {
        let own = self.state_dict();
        let own_names: BTreeSet<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
        let given: std::collections::BTreeMap<&str, &Tensor> = sd.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let report = LoadReport {
            missing_keys: own.iter().filter(|(n, _)| !given.contains_key(n.as_str())).map(|(n, _)| n.clone()).collect(),
            unexpected_keys: sd.iter().filter(|(n, _)| !own_names.contains(n.as_str())).map(|(n, _)| n.clone()).collect(),
        };
        let op = "load_state_dict";
        if strict && (!report.missing_keys.is_empty() || !report.unexpected_keys.is_empty()) {
            return Err(Error::value(
                op,
                format!(
                    "Error(s) in loading state_dict for {}: Missing key(s): {:?}. Unexpected key(s): {:?}.",
                    self.type_name(),
                    report.missing_keys,
                    report.unexpected_keys
                ),
            ));
        }
        for (n, dst) in &own {
            if let Some(src) = given.get(n.as_str()) {
                if src.shape() != dst.shape() {
                    return Err(Error::shape(
                        op,
                        format!(
                            "size mismatch for {n}: copying a param with shape {:?} from checkpoint, the shape in current model is {:?}.",
                            src.shape(),
                            dst.shape()
                        ),
                    ));
                }
            }
        }
        let _g = no_grad();
        for (n, dst) in &own {
            if let Some(src) = given.get(n.as_str()) {
                dst.copy_(src)?;
            }
        }
        Ok(report)
    }
    /// `train()` / `train(false)`: sets the training flag of this module and every descendant.
    fn train(&mut self, training: bool) {
        // the closure never fails
        let _ = walk_mut(self.as_dyn_mut(), "", &mut |_, m| {
            m.set_training(training);
            Ok(())
        });
    }
    /// `eval()`: `train(false)`.
    fn eval(&mut self) {
        self.train(false);
    }
    /// `zero_grad()` (set_to_none=True, PyTorch's default).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.set_grad(None);
            // sparse gradients (Embedding(sparse=True)) live beside `.grad`
            magpie_sparse::set_sparse_grad(&p, None);
        }
    }
    /// `apply(fn)`: calls `f` on every descendant, children first and this module last, as PyTorch does.
    fn apply(&mut self, f: &mut dyn FnMut(&mut dyn Module) -> Result<()>) -> Result<()> {
        fn go(m: &mut dyn Module, f: &mut dyn FnMut(&mut dyn Module) -> Result<()>) -> Result<()> {
            for (_, c) in m.children_mut() {
                go(c, f)?;
            }
            f(m)
        }
        go(self.as_dyn_mut(), f)
    }
    /// `to(dtype)`: converts floating parameters and buffers (integer buffers keep their type);
    /// parameters stay leaves that require grad. Tied tensors stay tied.
    fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        if !dtype.is_float() {
            return Err(Error::dtype("Module.to", format!("nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")));
        }
        self.map_tensors("Module.to", &mut |t| if t.dtype().is_float() { t.to_dtype(dtype) } else { Ok(t.clone()) })
    }
    /// `to(device)`: moves parameters and buffers. Tied tensors stay tied.
    fn to_device(&mut self, device: Device) -> Result<()> {
        self.map_tensors("Module.to", &mut |t| t.to_device(device))
    }
    /// Replaces every parameter and buffer by `f(detached tensor)` (a leaf again; parameters keep
    /// `requires_grad`). A tensor shared by several modules is converted once and stays shared.
    fn map_tensors(&mut self, op: &str, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<()> {
        let mut done: std::collections::HashMap<usize, Tensor> = std::collections::HashMap::new();
        let mut conv = |t: &mut Tensor, is_param: bool| -> Result<()> {
            let new = match done.get(&t.id()) {
                Some(n) => n.clone(),
                None => {
                    let _g = no_grad();
                    let n = f(&t.detach())?.detach();
                    let n = if is_param && t.requires_grad() { n.with_requires_grad()? } else { n };
                    done.insert(t.id(), n.clone());
                    n
                }
            };
            *t = new;
            Ok(())
        };
        walk_mut(self.as_dyn_mut(), "", &mut |_, m| {
            for (_, t) in m.local_parameters_mut() {
                conv(t, true)?;
            }
            for (_, t) in m.local_buffers_mut() {
                conv(t, false)?;
            }
            Ok(())
        })
        .map_err(|e| Error::value(op, e.to_string()))
    }
    /// This module as a trait object.
    fn as_dyn(&self) -> &dyn Module;
    /// This module as a mutable trait object.
    fn as_dyn_mut(&mut self) -> &mut dyn Module;
}

impl<M: Module + Sized> ModuleExt for M {
    fn as_dyn(&self) -> &dyn Module {
        self
    }
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        self
    }
}

impl ModuleExt for dyn Module {
    fn as_dyn(&self) -> &dyn Module {
        self
    }
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        self
    }
}

impl std::fmt::Debug for dyn Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn go(m: &dyn Module, f: &mut std::fmt::Formatter<'_>, depth: usize) -> std::fmt::Result {
            let kids = m.children();
            if kids.is_empty() {
                return write!(f, "{}()", m.type_name());
            }
            writeln!(f, "{}(", m.type_name())?;
            for (n, c) in kids {
                write!(f, "{:w$}({n}): ", "", w = 2 * (depth + 1))?;
                go(c, f, depth + 1)?;
                writeln!(f)?;
            }
            write!(f, "{:w$})", "", w = 2 * depth)
        }
        go(self, f, 0)
    }
}

//! Turns the interpreter's arena into a [`PtValue`] tree, materializing each tensor once as a
//! view over its storage (so views share data and memo references share the tensor). Iterative,
//! with a nesting limit and a size budget, so cycles and deep or exponential sharing are errors.

use std::collections::HashMap;

use magpie_core::{Error, Result, Tensor};

use super::pickle::{Obj, Unpickled, V};
use super::value::{PtTensor, PtValue};

/// The deepest nesting of containers accepted. The tree's derived `Drop`, `Clone` and `Debug`
/// recurse, so the limit keeps them far from the stack's end (the interpreter itself is flat).
pub const MAX_DEPTH: usize = 1000;

fn err(msg: impl Into<String>) -> Error {
    Error::io("pt", msg.into())
}

enum Kind {
    List,
    Tuple,
    Dict,
    /// An OrderedDict whose first `n` children pairs are items, the rest attributes.
    ODict(usize),
}

struct Frame {
    kind: Kind,
    children: Vec<V>,
    out: Vec<PtValue>,
}

enum Start {
    Leaf(PtValue),
    Frame(Frame),
}

struct Builder<'a> {
    u: &'a Unpickled,
    roots: &'a [Tensor],
    tensors: HashMap<usize, PtTensor>,
    budget: usize,
}

/// Builds the tree of `u`; `roots[i]` is storage `i` of `u.storages` as a 1-d tensor.
pub(crate) fn build(u: &Unpickled, roots: &[Tensor], input_len: usize) -> Result<PtValue> {
    if roots.len() != u.storages.len() {
        return Err(err("internal: storage count mismatch"));
    }
    let mut b = Builder { u, roots, tensors: HashMap::new(), budget: input_len.saturating_mul(64).saturating_add(1 << 20) };
    b.run(&u.root)
}

impl Builder<'_> {
    fn charge(&mut self, n: usize) -> Result<()> {
        self.budget = self.budget.checked_sub(n).ok_or_else(|| err("object tree is larger than its pickle allows (shared references expand too much)"))?;
        Ok(())
    }

    fn run(&mut self, root: &V) -> Result<PtValue> {
        let mut stack: Vec<Frame> = Vec::new();
        match self.start(root)? {
            Start::Leaf(p) => return Ok(p),
            Start::Frame(f) => stack.push(f),
        }
        let mut done: Option<PtValue> = None;
        loop {
            let Some(top) = stack.last_mut() else { return Err(err("internal: empty build stack")) };
            if let Some(p) = done.take() {
                top.out.push(p);
            }
            if let Some(v) = top.children.get(top.out.len()).cloned() {
                match self.start(&v)? {
                    Start::Leaf(p) => done = Some(p),
                    Start::Frame(f) => {
                        if stack.len() >= MAX_DEPTH {
                            return Err(err(format!("containers nested deeper than {MAX_DEPTH} (or a reference cycle)")));
                        }
                        stack.push(f);
                    }
                }
            } else {
                let Some(f) = stack.pop() else { return Err(err("internal: empty build stack")) };
                let p = assemble(f)?;
                if stack.is_empty() {
                    return Ok(p);
                }
                done = Some(p);
            }
        }
    }

    fn start(&mut self, v: &V) -> Result<Start> {
        self.charge(1)?;
        let leaf = match v {
            V::None => PtValue::None,
            V::Bool(b) => PtValue::Bool(*b),
            V::Int(i) => PtValue::Int(*i),
            V::BigInt(s) => PtValue::BigInt(s.to_string()),
            V::Float(f) => PtValue::Float(*f),
            V::Str(s) => {
                self.charge(s.len() / 8)?;
                PtValue::Str(s.to_string())
            }
            V::Bytes(b) => {
                self.charge(b.len() / 8)?;
                PtValue::Bytes(b.to_vec())
            }
            V::Global(super::globals::Global::DType(n)) => PtValue::DType(n.to_string()),
            V::Global(g) => return Err(err(format!("the global {g:?} appears as a value, which is not supported"))),
            V::Storage { .. } => return Err(err("a bare storage appears as a value, which is not supported")),
            V::Obj(i) => {
                let u = self.u;
                let o = u.objs.get(*i).ok_or_else(|| err("internal: dangling object"))?;
                let frame = |kind, children: Vec<V>| Frame { kind, out: Vec::with_capacity(children.len()), children };
                let f = match o {
                    Obj::List(items) => frame(Kind::List, items.clone()),
                    Obj::Tuple(items) => frame(Kind::Tuple, items.clone()),
                    Obj::Dict(pairs) => frame(Kind::Dict, pairs.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect()),
                    Obj::ODict { items, attrs } => frame(
                        Kind::ODict(items.len()),
                        items.iter().chain(attrs).flat_map(|(k, v)| [k.clone(), v.clone()]).collect(),
                    ),
                    Obj::Size(d) => return Ok(Start::Leaf(PtValue::Size(d.clone()))),
                    Obj::Complex(re, im) => return Ok(Start::Leaf(PtValue::Complex(*re, *im))),
                    Obj::Tensor(_) => return Ok(Start::Leaf(PtValue::Tensor(self.tensor(*i)?))),
                };
                self.charge(f.children.len())?;
                return Ok(Start::Frame(f));
            }
        };
        Ok(Start::Leaf(leaf))
    }

    /// The tensor of arena object `i`, made once.
    fn tensor(&mut self, i: usize) -> Result<PtTensor> {
        if let Some(t) = self.tensors.get(&i) {
            return Ok(t.clone());
        }
        let Some(Obj::Tensor(spec)) = self.u.objs.get(i) else { return Err(err("internal: not a tensor")) };
        let root = self.roots.get(spec.storage).ok_or_else(|| err("internal: storage index out of range"))?;
        let key = self.u.storages.get(spec.storage).map(|s| s.key.clone()).unwrap_or_default();
        let t = root.as_strided(&spec.size, &spec.stride, Some(spec.offset as i64)).map_err(|e| err(format!("tensor on storage '{key}': {e}")))?;
        let t = t.detach();
        if spec.requires_grad {
            t.requires_grad_(true).map_err(|e| err(format!("tensor on storage '{key}': {e}")))?;
        }
        let pt = PtTensor { tensor: t, parameter: spec.parameter, storage: key };
        self.tensors.insert(i, pt.clone());
        Ok(pt)
    }
}

/// What makes two hashable scalar keys equal in Python (`1 == 1.0 == True`).
#[derive(Hash, PartialEq, Eq)]
enum KeyId {
    None,
    Int(i64),
    Big(String),
    Float(u64),
    Str(String),
    Bytes(Vec<u8>),
}

fn key_id(k: &PtValue) -> Option<KeyId> {
    Some(match k {
        PtValue::None => KeyId::None,
        PtValue::Bool(b) => KeyId::Int(*b as i64),
        PtValue::Int(i) => KeyId::Int(*i),
        PtValue::BigInt(s) => KeyId::Big(s.clone()),
        PtValue::Float(f) if f.is_nan() => return None,
        PtValue::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => KeyId::Int(*f as i64),
        PtValue::Float(f) => KeyId::Float(f.to_bits()),
        PtValue::Str(s) => KeyId::Str(s.clone()),
        PtValue::Bytes(b) => KeyId::Bytes(b.clone()),
        _ => return None,
    })
}

/// `n` key/value pairs; a key equal to an earlier one replaces that one's value, as a dict does.
fn take_pairs(out: &mut std::vec::IntoIter<PtValue>, n: usize) -> Vec<(PtValue, PtValue)> {
    let mut v: Vec<(PtValue, PtValue)> = Vec::with_capacity(n);
    let mut seen: HashMap<KeyId, usize> = HashMap::new();
    for _ in 0..n {
        if let (Some(k), Some(x)) = (out.next(), out.next()) {
            if let Some(id) = key_id(&k) {
                if let Some(&i) = seen.get(&id) {
                    if let Some(slot) = v.get_mut(i) {
                        slot.1 = x;
                    }
                    continue;
                }
                seen.insert(id, v.len());
            }
            v.push((k, x));
        }
    }
    v
}

fn assemble(f: Frame) -> Result<PtValue> {
    let n_children = f.children.len();
    let mut out = f.out.into_iter();
    Ok(match f.kind {
        Kind::List => PtValue::List(out.collect()),
        Kind::Tuple => PtValue::Tuple(out.collect()),
        Kind::Dict => PtValue::Dict(take_pairs(&mut out, n_children / 2)),
        Kind::ODict(n) => {
            let items = take_pairs(&mut out, n);
            let rest = (n_children / 2).saturating_sub(n);
            let mut attrs = Vec::with_capacity(rest);
            for (k, v) in take_pairs(&mut out, rest) {
                match k {
                    PtValue::Str(s) => attrs.push((s, v)),
                    other => return Err(err(format!("OrderedDict attribute name is not a str: {other:?}"))),
                }
            }
            PtValue::OrderedDict { items, attrs }
        }
    })
}

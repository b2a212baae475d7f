//! `Args`: typed access to a call's positional and keyword arguments by position and name.

use super::Value;
use crate::device::Device;
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// The arguments of one registry call. Each getter takes the parameter's position and name
/// (as in the PyTorch signature) and looks in the positional list first, then the keywords.
pub struct Args {
    op: String,
    pos: Vec<Value>,
    kw: Vec<(String, Value)>,
    used_pos: usize,
    used_kw: Vec<bool>,
}

impl Args {
    /// Wraps a call's arguments.
    pub fn new(op: &str, pos: Vec<Value>, kw: Vec<(String, Value)>) -> Args {
        let n = kw.len();
        Args { op: op.to_string(), pos, kw, used_pos: 0, used_kw: vec![false; n] }
    }
    /// The op's name.
    pub fn op(&self) -> &str {
        &self.op
    }
    /// Number of positional arguments given.
    pub fn n_pos(&self) -> usize {
        self.pos.len()
    }
    /// The raw argument at position `i` or keyword `name`, if given (None counts as given).
    pub fn get(&mut self, i: usize, name: &str) -> Option<Value> {
        if i < self.pos.len() {
            self.used_pos = self.used_pos.max(i + 1);
            return Some(self.pos[i].clone());
        }
        let k = self.kw.iter().position(|(n, _)| n == name)?;
        self.used_kw[k] = true;
        Some(self.kw[k].1.clone())
    }
    /// Like [`Args::get`], but a given `None` counts as absent.
    pub fn get_some(&mut self, i: usize, name: &str) -> Option<Value> {
        match self.get(i, name) {
            Some(Value::None) | None => None,
            v => v,
        }
    }
    /// All positional arguments from `i` on (for variadic signatures like `meshgrid(*tensors)`).
    pub fn rest(&mut self, i: usize) -> Vec<Value> {
        self.used_pos = self.pos.len();
        self.pos.get(i..).map(|s| s.to_vec()).unwrap_or_default()
    }
    fn missing(&self, name: &str) -> Error {
        Error::value(&self.op, format!("missing required argument '{name}'"))
    }
    fn wrong(&self, name: &str, want: &str, got: &Value) -> Error {
        Error::value(&self.op, format!("argument '{name}' must be {want}, not {}", got.kind()))
    }
    /// A required tensor.
    pub fn tensor(&mut self, i: usize, name: &str) -> Result<Tensor> {
        match self.get(i, name) {
            Some(Value::Tensor(t)) => Ok(t),
            Some(v) => Err(self.wrong(name, "Tensor", &v)),
            None => Err(self.missing(name)),
        }
    }
    /// An optional tensor.
    pub fn opt_tensor(&mut self, i: usize, name: &str) -> Result<Option<Tensor>> {
        match self.get_some(i, name) {
            Some(Value::Tensor(t)) => Ok(Some(t)),
            Some(v) => Err(self.wrong(name, "Tensor", &v)),
            None => Ok(None),
        }
    }
    /// A list of tensors.
    pub fn tensors(&mut self, i: usize, name: &str) -> Result<Vec<Tensor>> {
        match self.get(i, name) {
            Some(Value::List(v)) => v
                .into_iter()
                .map(|x| match x {
                    Value::Tensor(t) => Ok(t),
                    o => Err(self.wrong(name, "a list of Tensors", &o)),
                })
                .collect(),
            Some(Value::Tensor(t)) => Ok(vec![t]),
            Some(v) => Err(self.wrong(name, "a list of Tensors", &v)),
            None => Err(self.missing(name)),
        }
    }
    /// A tensor or a scalar (binary ops' `other`).
    pub fn tensor_or_scalar(&mut self, i: usize, name: &str) -> Result<TensorOrScalar> {
        match self.get(i, name) {
            Some(Value::Tensor(t)) => Ok(TensorOrScalar::Tensor(t)),
            Some(v) => match v.as_scalar() {
                Some(s) => Ok(TensorOrScalar::Scalar(s)),
                None => Err(self.wrong(name, "a Tensor or a number", &v)),
            },
            None => Err(self.missing(name)),
        }
    }
    /// A required scalar number.
    pub fn scalar(&mut self, i: usize, name: &str) -> Result<Scalar> {
        match self.get(i, name) {
            Some(v) => v.as_scalar().ok_or_else(|| self.wrong(name, "a number", &v)),
            None => Err(self.missing(name)),
        }
    }
    /// An optional scalar number.
    pub fn opt_scalar(&mut self, i: usize, name: &str) -> Result<Option<Scalar>> {
        match self.get_some(i, name) {
            Some(v) => v.as_scalar().map(Some).ok_or_else(|| self.wrong(name, "a number", &v)),
            None => Ok(None),
        }
    }
    /// A required int (bools are accepted as 0/1 like Python; floats are rejected).
    pub fn int(&mut self, i: usize, name: &str) -> Result<i64> {
        match self.get(i, name) {
            Some(Value::Int(v)) => Ok(v),
            Some(Value::Bool(b)) => Ok(b as i64),
            Some(v) => Err(self.wrong(name, "int", &v)),
            None => Err(self.missing(name)),
        }
    }
    /// An int with a default.
    pub fn int_or(&mut self, i: usize, name: &str, default: i64) -> Result<i64> {
        Ok(self.opt_int(i, name)?.unwrap_or(default))
    }
    /// An optional int.
    pub fn opt_int(&mut self, i: usize, name: &str) -> Result<Option<i64>> {
        match self.get_some(i, name) {
            Some(Value::Int(v)) => Ok(Some(v)),
            Some(Value::Bool(b)) => Ok(Some(b as i64)),
            Some(v) => Err(self.wrong(name, "int", &v)),
            None => Ok(None),
        }
    }
    /// A float with a default (ints are accepted).
    pub fn float_or(&mut self, i: usize, name: &str, default: f64) -> Result<f64> {
        Ok(self.opt_float(i, name)?.unwrap_or(default))
    }
    /// An optional float (ints are accepted).
    pub fn opt_float(&mut self, i: usize, name: &str) -> Result<Option<f64>> {
        match self.get_some(i, name) {
            Some(Value::Float(v)) => Ok(Some(v)),
            Some(Value::Int(v)) => Ok(Some(v as f64)),
            Some(Value::Bool(b)) => Ok(Some(b as u8 as f64)),
            Some(v) => Err(self.wrong(name, "float", &v)),
            None => Ok(None),
        }
    }
    /// A required float.
    pub fn float(&mut self, i: usize, name: &str) -> Result<f64> {
        self.opt_float(i, name)?.ok_or_else(|| self.missing(name))
    }
    /// A bool with a default.
    pub fn bool_or(&mut self, i: usize, name: &str, default: bool) -> Result<bool> {
        match self.get_some(i, name) {
            Some(Value::Bool(b)) => Ok(b),
            Some(Value::Int(v)) => Ok(v != 0),
            Some(v) => Err(self.wrong(name, "bool", &v)),
            None => Ok(default),
        }
    }
    /// A list of ints (a single int is a one-element list, as PyTorch's `IntArrayRef` allows).
    pub fn ints(&mut self, i: usize, name: &str) -> Result<Vec<i64>> {
        self.opt_ints(i, name)?.ok_or_else(|| self.missing(name))
    }
    /// An optional list of ints.
    pub fn opt_ints(&mut self, i: usize, name: &str) -> Result<Option<Vec<i64>>> {
        match self.get_some(i, name) {
            Some(v @ (Value::Int(_) | Value::List(_))) => v.to_ints(&self.op, name).map(Some),
            Some(v) => Err(self.wrong(name, "a list of ints", &v)),
            None => Ok(None),
        }
    }
    /// Variadic ints: `view(2, 3)` or `view([2, 3])` from position `i` on.
    pub fn int_list_or_varargs(&mut self, i: usize, name: &str) -> Result<Vec<i64>> {
        if self.pos.len() > i + 1 || matches!(self.pos.get(i), Some(Value::Int(_))) {
            let rest = self.rest(i);
            return rest
                .iter()
                .map(|v| match v {
                    Value::Int(x) => Ok(*x),
                    o => Err(self.wrong(name, "ints", o)),
                })
                .collect();
        }
        self.ints(i, name)
    }
    /// An optional dtype.
    pub fn opt_dtype(&mut self, i: usize, name: &str) -> Result<Option<DType>> {
        match self.get_some(i, name) {
            Some(Value::DType(d)) => Ok(Some(d)),
            Some(Value::Str(s)) => DType::parse(&s).map(Some),
            Some(v) => Err(self.wrong(name, "a dtype", &v)),
            None => Ok(None),
        }
    }
    /// An optional device (a `Device` or a string such as `"cuda:0"`).
    pub fn opt_device(&mut self, i: usize, name: &str) -> Result<Option<Device>> {
        match self.get_some(i, name) {
            Some(Value::Device(d)) => Ok(Some(d)),
            Some(Value::Str(s)) => Device::parse(&s).map(Some),
            Some(v) => Err(self.wrong(name, "a device", &v)),
            None => Ok(None),
        }
    }
    /// An optional string.
    pub fn opt_str(&mut self, i: usize, name: &str) -> Result<Option<String>> {
        match self.get_some(i, name) {
            Some(Value::Str(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong(name, "str", &v)),
            None => Ok(None),
        }
    }
    /// Marks keyword arguments as accepted and ignored (e.g. `layout`, `pin_memory`) when they hold their defaults.
    pub fn ignore(&mut self, names: &[&str]) {
        for (k, (n, _)) in self.kw.iter().enumerate() {
            if names.contains(&n.as_str()) {
                self.used_kw[k] = true;
            }
        }
    }
    /// `input.op_(...)` for an in-place op computed out of place by `f` and written into `x`
    /// through [`Tensor::update_`] (the one in-place path: PyTorch's checks, `f` reads a
    /// differentiable copy of `x` when autograd records). Every tensor among the call's
    /// arguments counts as an input of the op for that decision.
    pub(crate) fn inplace(&self, x: &Tensor, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Value> {
        fn collect<'a>(v: &'a Value, out: &mut Vec<&'a Tensor>) {
            match v {
                Value::Tensor(t) => out.push(t),
                Value::List(l) => l.iter().for_each(|x| collect(x, out)),
                _ => {}
            }
        }
        let mut others = Vec::new();
        self.pos.iter().chain(self.kw.iter().map(|(_, v)| v)).for_each(|v| collect(v, &mut others));
        Ok(Value::Tensor(x.update_(&self.op, &others, f)?))
    }
    /// Fails if arguments were given that the op did not read: an argument form not
    /// implemented yet is [`Error::Unsupported`], never silently ignored.
    pub fn finish(&self) -> Result<()> {
        if self.used_pos < self.pos.len() {
            return Err(Error::unsupported(
                &self.op,
                format!("{} positional arguments given, {} understood", self.pos.len(), self.used_pos),
            ));
        }
        let unused: Vec<&str> =
            self.kw.iter().zip(&self.used_kw).filter(|(_, u)| !**u).map(|((n, _), _)| n.as_str()).collect();
        if !unused.is_empty() {
            return Err(Error::unsupported(&self.op, format!("keyword arguments not supported: {unused:?}")));
        }
        Ok(())
    }
}

/// A binary op's `other`: a tensor or a Python number.
pub enum TensorOrScalar {
    Tensor(Tensor),
    Scalar(Scalar),
}

impl TensorOrScalar {
    /// As a binary-op operand.
    pub fn operand(&self) -> crate::ops::Operand<'_> {
        match self {
            TensorOrScalar::Tensor(t) => crate::ops::Operand::Tensor(t),
            TensorOrScalar::Scalar(s) => crate::ops::Operand::Scalar(*s),
        }
    }
}

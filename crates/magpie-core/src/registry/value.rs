//! `Value`: a dynamically typed argument or result (what a Python object is to a PyTorch op).

use crate::device::Device;
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// An argument or result of a registry call.
#[derive(Clone, Debug)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Complex(num_complex::Complex64),
    Str(String),
    DType(DType),
    Device(Device),
    Tensor(Tensor),
    /// A list or tuple (shapes, dims, lists of tensors, multi-output results).
    List(Vec<Value>),
    /// A Python slice `start:stop:step`.
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Ellipsis,
    /// A `torch.memory_format` by name (`contiguous_format`, `preserve_format`, ...).
    MemoryFormat(String),
}

impl Value {
    /// A short name of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Complex(_) => "complex",
            Value::Str(_) => "str",
            Value::DType(_) => "dtype",
            Value::Device(_) => "device",
            Value::Tensor(_) => "Tensor",
            Value::List(_) => "list",
            Value::Slice(..) => "slice",
            Value::Ellipsis => "ellipsis",
            Value::MemoryFormat(_) => "memory_format",
        }
    }
    /// The tensor, or an error.
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            v => Err(Error::value("value", format!("expected a Tensor, got {}", v.kind()))),
        }
    }
    /// An int or a list of ints (PyTorch's `int[]` argument, which also takes one int), for
    /// argument `name` of `op`. Integer tensors give their elements.
    pub fn to_ints(&self, op: &str, name: &str) -> Result<Vec<i64>> {
        match self {
            Value::Int(i) => Ok(vec![*i]),
            Value::List(l) => l
                .iter()
                .map(|x| match x {
                    Value::Int(i) => Ok(*i),
                    Value::Tensor(t) if t.numel() == 1 && t.dtype().is_integral() => t.item().map(|s| s.to_i64()),
                    o => Err(Error::value(op, format!("argument '{name}' must be a list of ints, not a list of {}", o.kind()))),
                })
                .collect(),
            Value::Tensor(t) if t.dtype().is_integral() && t.ndim() <= 1 => t.to_vec::<i64>(),
            o => Err(Error::value(op, format!("argument '{name}' must be an int or a list of ints, not {}", o.kind()))),
        }
    }
    /// The value as a scalar if it is a number or bool.
    pub fn as_scalar(&self) -> Option<Scalar> {
        match *self {
            Value::Bool(b) => Some(Scalar::Bool(b)),
            Value::Int(i) => Some(Scalar::Int(i)),
            Value::Float(f) => Some(Scalar::Float(f)),
            Value::Complex(c) => Some(Scalar::Complex(c)),
            _ => None,
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}
impl From<Vec<Tensor>> for Value {
    fn from(v: Vec<Tensor>) -> Self {
        Value::List(v.into_iter().map(Value::Tensor).collect())
    }
}
impl From<Scalar> for Value {
    fn from(s: Scalar) -> Self {
        match s {
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Int(i) => Value::Int(i),
            Scalar::Float(f) => Value::Float(f),
            Scalar::Complex(c) => Value::Complex(c),
        }
    }
}

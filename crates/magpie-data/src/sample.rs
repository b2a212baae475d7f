//! [`Sample`]: the value tree a dataset returns and a collate function batches (what a Python
//! sample is: a tensor, a number, a string, or lists, tuples and dicts of them).

use magpie_core::Tensor;

/// One sample or one batch: a tensor, a scalar, a string, or a container of samples.
///
/// `Map` keeps its keys in insertion order, as a Python `dict` does.
///
/// ```
/// use magpie_data::Sample;
/// let s = Sample::map([("label", Sample::Int(3)), ("name", Sample::from("cat"))]);
/// assert_eq!(s.get("label").and_then(Sample::as_int), Some(3));
/// ```
#[derive(Clone, Debug)]
pub enum Sample {
    Tensor(Tensor),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    List(Vec<Sample>),
    Tuple(Vec<Sample>),
    Map(Vec<(String, Sample)>),
}

impl Sample {
    /// A `Map` from `(key, value)` pairs, in their order.
    pub fn map<K: Into<String>>(items: impl IntoIterator<Item = (K, Sample)>) -> Sample {
        Sample::Map(items.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Sample::Tensor(t) => Some(t),
            _ => None,
        }
    }
    /// The tensor, if this is one (by value).
    pub fn into_tensor(self) -> Option<Tensor> {
        match self {
            Sample::Tensor(t) => Some(t),
            _ => None,
        }
    }
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Sample::Int(v) => Some(*v),
            _ => None,
        }
    }
    /// The float, if this is one.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Sample::Float(v) => Some(*v),
            _ => None,
        }
    }
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Sample::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The items of a `List` or a `Tuple`.
    pub fn as_list(&self) -> Option<&[Sample]> {
        match self {
            Sample::List(v) | Sample::Tuple(v) => Some(v),
            _ => None,
        }
    }
    /// The items of a `List` or a `Tuple` (by value).
    pub fn into_list(self) -> Option<Vec<Sample>> {
        match self {
            Sample::List(v) | Sample::Tuple(v) => Some(v),
            _ => None,
        }
    }
    /// The value under `key` of a `Map`.
    pub fn get(&self, key: &str) -> Option<&Sample> {
        match self {
            Sample::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    /// The Python type name of this value (for error messages).
    pub fn kind(&self) -> &'static str {
        match self {
            Sample::Tensor(_) => "Tensor",
            Sample::Int(_) => "int",
            Sample::Float(_) => "float",
            Sample::Bool(_) => "bool",
            Sample::Str(_) => "str",
            Sample::List(_) => "list",
            Sample::Tuple(_) => "tuple",
            Sample::Map(_) => "dict",
        }
    }
}

impl From<Tensor> for Sample {
    fn from(t: Tensor) -> Sample {
        Sample::Tensor(t)
    }
}
impl From<i64> for Sample {
    fn from(v: i64) -> Sample {
        Sample::Int(v)
    }
}
impl From<f64> for Sample {
    fn from(v: f64) -> Sample {
        Sample::Float(v)
    }
}
impl From<bool> for Sample {
    fn from(v: bool) -> Sample {
        Sample::Bool(v)
    }
}
impl From<&str> for Sample {
    fn from(v: &str) -> Sample {
        Sample::Str(v.to_string())
    }
}
impl From<String> for Sample {
    fn from(v: String) -> Sample {
        Sample::Str(v)
    }
}
impl From<Vec<Sample>> for Sample {
    fn from(v: Vec<Sample>) -> Sample {
        Sample::List(v)
    }
}

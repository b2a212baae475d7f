//! The object tree a `.pt` file holds, as `torch.load(weights_only=True)` returns it.

use magpie_core::Tensor;

/// A tensor of a checkpoint, with what PyTorch knows about it beyond the data.
#[derive(Clone)]
pub struct PtTensor {
    /// The tensor: a view over its storage, which other tensors of the file may share.
    pub tensor: Tensor,
    /// True for an `nn.Parameter` (rebuilt by `torch._utils._rebuild_parameter`).
    pub parameter: bool,
    /// The storage key as written in the file (`data/<key>` in a zip, the legacy key).
    pub storage: String,
}

impl std::fmt::Debug for PtTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtTensor")
            .field("dtype", &self.tensor.dtype())
            .field("shape", &self.tensor.shape())
            .field("stride", &self.tensor.strides())
            .field("storage_offset", &self.tensor.storage_offset())
            .field("parameter", &self.parameter)
            .field("storage", &self.storage)
            .finish()
    }
}

/// One node of the unpickled object tree.
#[derive(Clone, Debug)]
pub enum PtValue {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An int that fits 64 bits.
    Int(i64),
    /// An int beyond 64 bits, as its decimal string (`"-1180591620717411303425"`).
    BigInt(String),
    /// A float.
    Float(f64),
    /// A str.
    Str(String),
    /// bytes (or a bytearray).
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<PtValue>),
    /// A tuple.
    Tuple(Vec<PtValue>),
    /// A dict: `(key, value)` pairs in insertion order; keys may be any value (a key equal to
    /// an earlier str/int/bool/float/None/bytes key replaces that one's value, as in Python).
    Dict(Vec<(PtValue, PtValue)>),
    /// A `collections.OrderedDict`, with the instance attributes set on it (e.g. `_metadata`).
    OrderedDict {
        /// `(key, value)` pairs in order.
        items: Vec<(PtValue, PtValue)>,
        /// Attributes set by BUILD, in order.
        attrs: Vec<(String, PtValue)>,
    },
    /// A tensor or `nn.Parameter`.
    Tensor(PtTensor),
    /// A `torch.Size`.
    Size(Vec<i64>),
    /// A `torch.dtype`, by its canonical name (`"bfloat16"`, `"float32"`).
    DType(String),
    /// A Python complex.
    Complex(f64, f64),
}

impl PtValue {
    /// The `(key, value)` pairs of a dict or `OrderedDict`.
    pub fn items(&self) -> Option<&[(PtValue, PtValue)]> {
        match self {
            PtValue::Dict(items) | PtValue::OrderedDict { items, .. } => Some(items),
            _ => None,
        }
    }

    /// The value under the str key `key` of a dict or `OrderedDict`.
    pub fn get(&self, key: &str) -> Option<&PtValue> {
        self.items()?.iter().find(|(k, _)| matches!(k, PtValue::Str(s) if s == key)).map(|(_, v)| v)
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&PtTensor> {
        match self {
            PtValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

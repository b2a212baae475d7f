//! The allowlist of globals a checkpoint pickle may name (what `torch.load(weights_only=True)`
//! allows for plain state dicts), each call implemented here in Rust; nothing is imported.

use magpie_core::{DType, Error, Result};

/// A global the pickle named, resolved against the allowlist.
#[derive(Clone, Debug, PartialEq)]
pub enum Global {
    /// `collections.OrderedDict`.
    OrderedDict,
    /// `torch._utils._rebuild_tensor_v2`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_parameter`.
    RebuildParameter,
    /// `torch._utils._rebuild_parameter_with_state`.
    RebuildParameterWithState,
    /// A typed storage class such as `torch.FloatStorage`.
    StorageType(DType),
    /// `torch.Size`.
    Size,
    /// A `torch.dtype` object such as `torch.bfloat16` (canonical name).
    DType(&'static str),
    /// `builtins.complex` (`__builtin__.complex` in protocol 2).
    Complex,
    /// `_codecs.encode`, which protocol 2 uses to pickle `bytes`.
    CodecsEncode,
}

/// The storage classes and their element dtypes.
const STORAGES: &[(&str, DType)] = &[
    ("FloatStorage", DType::F32),
    ("DoubleStorage", DType::F64),
    ("HalfStorage", DType::F16),
    ("BFloat16Storage", DType::BF16),
    ("LongStorage", DType::I64),
    ("IntStorage", DType::I32),
    ("ShortStorage", DType::I16),
    ("CharStorage", DType::I8),
    ("ByteStorage", DType::U8),
    ("BoolStorage", DType::Bool),
    ("ComplexFloatStorage", DType::C64),
    ("ComplexDoubleStorage", DType::C128),
];

/// `torch.<name>` dtype attributes and their canonical names.
const DTYPES: &[(&str, &str)] = &[
    ("float32", "float32"),
    ("float", "float32"),
    ("float64", "float64"),
    ("double", "float64"),
    ("float16", "float16"),
    ("half", "float16"),
    ("bfloat16", "bfloat16"),
    ("int64", "int64"),
    ("long", "int64"),
    ("int32", "int32"),
    ("int", "int32"),
    ("int16", "int16"),
    ("short", "int16"),
    ("int8", "int8"),
    ("uint8", "uint8"),
    ("uint16", "uint16"),
    ("uint32", "uint32"),
    ("uint64", "uint64"),
    ("bool", "bool"),
    ("complex64", "complex64"),
    ("cfloat", "complex64"),
    ("complex128", "complex128"),
    ("cdouble", "complex128"),
    ("complex32", "complex32"),
    ("chalf", "complex32"),
    ("float8_e4m3fn", "float8_e4m3fn"),
    ("float8_e5m2", "float8_e5m2"),
];

/// Resolves `module.name` against the allowlist; anything else is an error naming it.
pub fn resolve(module: &str, name: &str) -> Result<Global> {
    let g = match (module, name) {
        ("collections", "OrderedDict") => Global::OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
        ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
        ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
        ("torch", "Size") => Global::Size,
        ("builtins" | "__builtin__", "complex") => Global::Complex,
        ("_codecs", "encode") => Global::CodecsEncode,
        ("torch", n) => {
            if let Some(&(_, d)) = STORAGES.iter().find(|(s, _)| *s == n) {
                Global::StorageType(d)
            } else if let Some(&(_, c)) = DTYPES.iter().find(|(s, _)| *s == n) {
                Global::DType(c)
            } else {
                return Err(refused(module, name));
            }
        }
        _ => return Err(refused(module, name)),
    };
    Ok(g)
}

fn refused(module: &str, name: &str) -> Error {
    Error::io("pt", format!("unsupported global {module}.{name}: not in the allowlist of a weights-only load"))
}

/// The storage class name of a dtype (for the writer).
pub fn storage_name(d: DType) -> Option<&'static str> {
    STORAGES.iter().find(|(_, s)| *s == d).map(|(n, _)| *n)
}

//! The one error type of torch-magpie: every failure names the op and what was wrong.

use crate::dtype::DType;

/// Every fallible call in torch-magpie returns this `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error raised by an op. `op` is the PyTorch-style name of the op that failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// Shapes that do not fit together (broadcasting, matmul, cat, view, ...).
    #[error("[{op}] {msg}")]
    Shape { op: String, msg: String },
    /// A dtype the op does not accept, or two dtypes that do not go together.
    #[error("[{op}] {msg}")]
    DType { op: String, msg: String },
    /// An index or dimension out of range.
    #[error("[{op}] {msg}")]
    Index { op: String, msg: String },
    /// Any other bad argument value.
    #[error("[{op}] {msg}")]
    Value { op: String, msg: String },
    /// Tensors on different devices, or a device that is not available.
    #[error("[{op}] {msg}")]
    Device { op: String, msg: String },
    /// Autograd misuse: backward through a freed graph, a saved tensor modified in place, ...
    #[error("[{op}] {msg}")]
    Autograd { op: String, msg: String },
    /// An op, argument form, dtype or device combination torch-magpie does not implement yet.
    /// Kept apart from the others so that callers (and the conformance runner) can tell
    /// "PyTorch would reject this" from "we cannot do this yet".
    #[error("[{op}] not implemented yet: {msg}")]
    Unsupported { op: String, msg: String },
    /// I/O and format errors (files, serialized tensors).
    #[error("[{op}] {msg}")]
    Io { op: String, msg: String },
}

macro_rules! ctor {
    ($fn:ident, $variant:ident) => {
        #[doc = concat!("Builds an [`Error::", stringify!($variant), "`] for `op`.")]
        pub fn $fn(op: impl Into<String>, msg: impl Into<String>) -> Self {
            Error::$variant { op: op.into(), msg: msg.into() }
        }
    };
}

impl Error {
    ctor!(shape, Shape);
    ctor!(dtype, DType);
    ctor!(index, Index);
    ctor!(value, Value);
    ctor!(device, Device);
    ctor!(autograd, Autograd);
    ctor!(unsupported, Unsupported);
    ctor!(io, Io);

    /// Shorthand for "`dtype` is not supported by `op`" as an [`Error::Unsupported`].
    pub fn unsupported_dtype(op: impl Into<String>, dtype: DType) -> Self {
        Error::unsupported(op, format!("dtype {dtype} is not supported"))
    }

    /// True for [`Error::Unsupported`].
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Error::Unsupported { .. })
    }

    /// The op that raised the error.
    pub fn op(&self) -> &str {
        match self {
            Error::Shape { op, .. }
            | Error::DType { op, .. }
            | Error::Index { op, .. }
            | Error::Value { op, .. }
            | Error::Device { op, .. }
            | Error::Autograd { op, .. }
            | Error::Unsupported { op, .. }
            | Error::Io { op, .. } => op,
        }
    }
}

/// Returns early with an error of the given kind: `bail!(shape, "matmul", "...{}", x)`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $op:expr, $($fmt:tt)+) => {
        return Err($crate::Error::$kind($op, format!($($fmt)+)))
    };
}

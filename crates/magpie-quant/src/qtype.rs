//! The quantized dtypes (`torch.quint8`, `torch.qint8`, `torch.qint32`) and quantization schemes
//! (`torch.per_tensor_affine`, ...).

use magpie_core::DType;
use std::fmt;

/// A quantized element type: the integer type its values are stored in and its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QDType {
    /// `torch.quint8`: 0..=255 in a `u8`.
    QUInt8,
    /// `torch.qint8`: -128..=127 in an `i8`.
    QInt8,
    /// `torch.qint32`: the whole `i32` range.
    QInt32,
}

impl QDType {
    /// The smallest stored value (`torch.iinfo` of the underlying type).
    pub fn qmin(self) -> i64 {
        match self {
            QDType::QUInt8 => 0,
            QDType::QInt8 => -128,
            QDType::QInt32 => i32::MIN as i64,
        }
    }
    /// The largest stored value.
    pub fn qmax(self) -> i64 {
        match self {
            QDType::QUInt8 => 255,
            QDType::QInt8 => 127,
            QDType::QInt32 => i32::MAX as i64,
        }
    }
    /// The dtype of `int_repr()` (`uint8`, `int8`, `int32`).
    pub fn int_dtype(self) -> DType {
        match self {
            QDType::QUInt8 => DType::U8,
            QDType::QInt8 => DType::I8,
            QDType::QInt32 => DType::I32,
        }
    }
}

impl fmt::Display for QDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QDType::QUInt8 => "torch.quint8",
            QDType::QInt8 => "torch.qint8",
            QDType::QInt32 => "torch.qint32",
        })
    }
}

/// How scales and zero points map real values to integers (`torch.qscheme`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QScheme {
    /// `torch.per_tensor_affine`: one scale and zero point, from the observed min and max.
    PerTensorAffine,
    /// `torch.per_tensor_symmetric`: one scale from max(|min|, |max|), zero point 0 (128 for quint8).
    PerTensorSymmetric,
    /// `torch.per_channel_affine`: a scale and zero point per slice along an axis.
    PerChannelAffine,
    /// `torch.per_channel_symmetric`: symmetric scales per slice along an axis.
    PerChannelSymmetric,
}

impl QScheme {
    /// True for the two per-channel schemes.
    pub fn is_per_channel(self) -> bool {
        matches!(self, QScheme::PerChannelAffine | QScheme::PerChannelSymmetric)
    }
    /// True for the two symmetric schemes.
    pub fn is_symmetric(self) -> bool {
        matches!(self, QScheme::PerTensorSymmetric | QScheme::PerChannelSymmetric)
    }
}

impl fmt::Display for QScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QScheme::PerTensorAffine => "torch.per_tensor_affine",
            QScheme::PerTensorSymmetric => "torch.per_tensor_symmetric",
            QScheme::PerChannelAffine => "torch.per_channel_affine",
            QScheme::PerChannelSymmetric => "torch.per_channel_symmetric",
        })
    }
}

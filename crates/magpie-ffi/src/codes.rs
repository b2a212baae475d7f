//! The numbers C uses for dtypes and devices.

use crate::error::{arg, FfiResult};
use magpie_core::{DType, Device};

/// dtype codes, in `magpie.h`'s order. Written out (not `DType::ALL`) because these numbers are
/// the ABI: they must not move if the enum's order ever does.
pub const DTYPES: [DType; 14] = [
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::C64,
    DType::C128,
    DType::F8E4M3,
    DType::F8E5M2,
];

/// The dtype of code `c`.
pub fn dtype(c: i32) -> FfiResult<DType> {
    usize::try_from(c).ok().and_then(|i| DTYPES.get(i).copied()).ok_or_else(|| arg(format!("{c} is not a dtype code (0..13)")))
}

/// The code of `d`.
pub fn dtype_code(d: DType) -> i32 {
    DTYPES.iter().position(|&x| x == d).map_or(-1, |i| i as i32)
}

/// The device of code `c`: -1 is the CPU, n >= 0 CUDA device n.
pub fn device(c: i32) -> FfiResult<Device> {
    match c {
        -1 => Ok(Device::Cpu),
        n if n >= 0 => Ok(Device::Cuda(n as usize)),
        n => Err(arg(format!("{n} is not a device code (-1 for the CPU, n >= 0 for CUDA device n)"))),
    }
}

/// The code of `d`.
pub fn device_code(d: Device) -> i32 {
    match d {
        Device::Cpu => -1,
        Device::Cuda(n) => n as i32,
    }
}

//! `Device`: where a tensor lives. A runtime value, as in PyTorch.

use crate::{Error, Result};
use std::fmt;

/// A device: the CPU or the n-th CUDA GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    #[default]
    Cpu,
    Cuda(usize),
}

impl Device {
    /// Parses `"cpu"`, `"cuda"`, `"cuda:1"`.
    pub fn parse(s: &str) -> Result<Device> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => match s.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
                Some(n) => Ok(Device::Cuda(n)),
                None => Err(Error::value("device", format!("expected one of cpu, cuda, cuda:N but got '{s}'"))),
            },
        }
    }
    /// True for CUDA devices.
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

//! CUDA backend. Not built yet: `CudaStorage` has no values, so every CUDA request is a clean
//! `Err` and no code path can reach a CUDA buffer.

use crate::{Error, Result};

/// Device memory of one CUDA tensor. Uninhabited until the CUDA backend lands.
#[derive(Debug)]
pub enum CudaStorage {}

/// `torch.cuda.is_available()`: false until the CUDA backend lands.
pub fn is_available() -> bool {
    false
}

/// `torch.cuda.device_count()`.
pub fn device_count() -> usize {
    0
}

/// The error every CUDA request returns in a build without the CUDA backend.
pub fn unavailable(op: &str) -> Error {
    Error::device(op, "CUDA is not available in this build (the CUDA backend is not implemented yet)")
}

/// Fails unless CUDA can be used.
pub fn require(op: &str) -> Result<()> {
    if is_available() {
        Ok(())
    } else {
        Err(unavailable(op))
    }
}

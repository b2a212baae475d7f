//! Devices: whether CUDA is there, synchronizing, memory in use; and the library's version.

use crate::codes;
use crate::error::guard;
use crate::ptr::out;
use magpie_core::backend::cuda;
use magpie_core::Device;
use std::ffi::c_char;

/// 1 when a CUDA GPU and driver are usable, else 0 (never an error).
///
/// # Safety
/// `out` points to an `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_cuda_is_available(out_flag: *mut i32) -> i32 {
    guard("magpie_cuda_is_available", || {
        *out(out_flag, "out")? = cuda::is_available() as i32;
        Ok(())
    })
}

/// Waits for the work queued on `device` (a no-op for the CPU, -1).
#[no_mangle]
pub extern "C" fn magpie_synchronize(device: i32) -> i32 {
    guard("magpie_synchronize", || {
        if let Device::Cuda(n) = codes::device(device)? {
            cuda::synchronize(Some(Device::Cuda(n)))?;
        }
        Ok(())
    })
}

/// Bytes held by live tensors on CUDA device `device`, and the peak since the start (0 for the CPU).
///
/// # Safety
/// `allocated` and `peak` point to `uint64_t`s.
#[no_mangle]
pub unsafe extern "C" fn magpie_cuda_memory(device: i32, allocated: *mut u64, peak: *mut u64) -> i32 {
    guard("magpie_cuda_memory", || {
        let (a, p) = (out(allocated, "allocated")?, out(peak, "peak")?);
        (*a, *p) = match codes::device(device)? {
            Device::Cuda(n) => (cuda::memory_allocated(n) as u64, cuda::max_memory_allocated(n) as u64),
            Device::Cpu => (0, 0),
        };
        Ok(())
    })
}

/// The library's version ("0.1.0"), a static string.
#[no_mangle]
pub extern "C" fn magpie_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

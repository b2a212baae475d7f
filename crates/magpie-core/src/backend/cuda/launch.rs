//! Launching kernels: arguments by value (copied into the builder), grid sizes for grid-stride
//! loops, errors that name the op.

use super::device::{drv, CudaDevice, Func};
use crate::Result;
use cudarc::driver::result;
use std::ffi::c_void;

/// Threads per block of the elementwise kernels.
pub const BLOCK: u32 = 256;

/// The arguments of one kernel launch, in order.
#[derive(Default)]
pub struct Args {
    bufs: Vec<Vec<u64>>,
}

impl Args {
    /// An empty argument list.
    pub fn new() -> Args {
        Args::default()
    }
    /// Appends one argument passed by value: a device pointer (`u64`), a scalar, or a `#[repr(C)]`
    /// struct that matches the kernel's parameter type.
    pub fn push<T: Copy>(&mut self, v: T) -> &mut Args {
        let n = std::mem::size_of::<T>().div_ceil(8).max(1);
        let mut buf = vec![0u64; n];
        // SAFETY: `buf` has at least size_of::<T>() bytes and u64 alignment (>= T's for our args).
        unsafe { std::ptr::copy_nonoverlapping(&v as *const T as *const u8, buf.as_mut_ptr() as *mut u8, std::mem::size_of::<T>()) };
        self.bufs.push(buf);
        self
    }
}

/// A grid for `n` elements handled by a grid-stride loop: enough blocks to fill the GPU, at most
/// one element per thread.
pub fn grid_for(dev: &CudaDevice, n: usize) -> u32 {
    let blocks = n.div_ceil(BLOCK as usize).max(1);
    blocks.min(dev.sm_count as usize * 16).max(1) as u32
}

/// Queues `f` on `dev`'s stream with `grid` x `block` threads and `shared` bytes of dynamic
/// shared memory. Asynchronous: errors of the kernel itself surface at the next sync.
pub fn launch(dev: &CudaDevice, op: &str, f: Func, grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32, args: &mut Args) -> Result<()> {
    let mut ptrs: Vec<*mut c_void> = args.bufs.iter_mut().map(|b| b.as_mut_ptr() as *mut c_void).collect();
    // SAFETY: `f` is a loaded kernel whose parameter list matches `args` (each call site builds
    // its arguments next to the kernel source it launches); the buffers outlive the call, and the
    // driver copies the parameter values before returning.
    unsafe { result::launch_kernel(f.0, grid, block, shared, dev.cu_stream(), &mut ptrs) }.map_err(|e| drv(op, format!("kernel launch failed: {e}")))
}

/// Launches a 1-d grid-stride kernel over `n` elements.
pub fn launch_1d(dev: &CudaDevice, op: &str, f: Func, n: usize, args: &mut Args) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    launch(dev, op, f, (grid_for(dev, n), 1, 1), (BLOCK, 1, 1), 0, args)
}

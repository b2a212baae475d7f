//! Launching kernels: arguments by value (copied into an inline buffer: no heap allocation per
//! launch), grid sizes for grid-stride loops, errors that name the op.

use super::device::{drv, CudaDevice, Func};
use crate::Result;
use cudarc::driver::result;
use std::ffi::c_void;

/// Threads per block of the elementwise kernels.
pub const BLOCK: u32 = 256;

/// 8-byte words of argument values kept inline (a `Strided` parameter is 55 of them).
const WORDS: usize = 128;
/// Arguments kept inline.
const MAX_ARGS: usize = 24;

/// The arguments of one kernel launch, in order. The values live in an inline buffer (the
/// launch path of a small op allocates nothing); arguments past its capacity spill to the heap.
pub struct Args {
    words: [u64; WORDS],
    used: usize,
    offs: [u16; MAX_ARGS],
    n: usize,
    /// Arguments pushed after the inline buffer filled up (in order, after the inline ones).
    spill: Vec<Vec<u64>>,
}

impl Default for Args {
    fn default() -> Args {
        Args { words: [0; WORDS], used: 0, offs: [0; MAX_ARGS], n: 0, spill: Vec::new() }
    }
}

impl Args {
    /// An empty argument list.
    pub fn new() -> Args {
        Args::default()
    }
    /// Appends one argument passed by value: a device pointer (`u64`), a scalar, or a `#[repr(C)]`
    /// struct that matches the kernel's parameter type.
    pub fn push<T: Copy>(&mut self, v: T) -> &mut Args {
        let size = std::mem::size_of::<T>();
        let w = size.div_ceil(8).max(1);
        let dst: *mut u64 = if self.spill.is_empty() && self.n < MAX_ARGS && self.used + w <= WORDS {
            self.offs[self.n] = self.used as u16;
            self.n += 1;
            let p = self.words[self.used..].as_mut_ptr();
            self.used += w;
            p
        } else {
            self.spill.push(vec![0u64; w]);
            self.spill.last_mut().map_or(std::ptr::null_mut(), |b| b.as_mut_ptr())
        };
        // SAFETY: `dst` points at `w` zeroed u64 words (>= size_of::<T>() bytes, u64-aligned,
        // which covers the alignment of our argument types), inside `self.words` or a spill buffer.
        unsafe { std::ptr::copy_nonoverlapping(&v as *const T as *const u8, dst as *mut u8, size) };
        self
    }
    /// Number of arguments pushed.
    pub fn len(&self) -> usize {
        self.n + self.spill.len()
    }
    /// True when no argument was pushed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    let mut inline: [*mut c_void; MAX_ARGS] = [std::ptr::null_mut(); MAX_ARGS];
    for k in 0..args.n {
        inline[k] = args.words[args.offs[k] as usize..].as_mut_ptr() as *mut c_void;
    }
    let mut heap: Vec<*mut c_void>;
    let ptrs: &mut [*mut c_void] = if args.spill.is_empty() {
        &mut inline[..args.n]
    } else {
        heap = inline[..args.n].to_vec();
        heap.extend(args.spill.iter_mut().map(|b| b.as_mut_ptr() as *mut c_void));
        &mut heap
    };
    // SAFETY: `f` is a loaded kernel whose parameter list matches `args` (each call site builds
    // its arguments next to the kernel source it launches); the buffers outlive the call, and the
    // driver copies the parameter values before returning.
    unsafe { result::launch_kernel(f.0, grid, block, shared, dev.cu_stream(), ptrs) }.map_err(|e| drv(op, format!("kernel launch failed: {e}")))
}

/// Launches a 1-d grid-stride kernel over `n` elements.
pub fn launch_1d(dev: &CudaDevice, op: &str, f: Func, n: usize, args: &mut Args) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    launch(dev, op, f, (grid_for(dev, n), 1, 1), (BLOCK, 1, 1), 0, args)
}

/// [`launch`] with programmatic dependent launch: the kernel may be scheduled while the previous
/// kernel on the stream drains, and must execute `griddepcontrol.wait` before it touches memory
/// that kernel writes or reads (then ordering is as for a plain launch, minus the launch gap).
/// Captured into CUDA graphs as programmatic edges.
pub fn launch_pdl(dev: &CudaDevice, op: &str, f: Func, grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32, args: &mut Args) -> Result<()> {
    use cudarc::driver::sys;
    let mut ptrs: Vec<*mut c_void> = (0..args.n).map(|k| args.words[args.offs[k] as usize..].as_mut_ptr() as *mut c_void).collect();
    ptrs.extend(args.spill.iter_mut().map(|b| b.as_mut_ptr() as *mut c_void));
    // SAFETY: a zeroed attribute is valid plain data; the fields set below are the ones read.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let cfg = sys::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block.0,
        blockDimY: block.1,
        blockDimZ: block.2,
        sharedMemBytes: shared,
        hStream: dev.cu_stream(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: as for `launch`: `f` matches `args`, whose buffers outlive the call; `cfg` and `attr`
    // live until the call returns.
    let r = unsafe { sys::cuLaunchKernelEx(&cfg, f.0, ptrs.as_mut_ptr(), std::ptr::null_mut()) };
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(drv(op, format!("kernel launch failed: {r:?}")))
    }
}

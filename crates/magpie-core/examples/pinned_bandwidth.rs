//! Host-to-device copy bandwidth on cuda:0 from pageable and from pinned memory (issue 19):
//! `x.to_device(cuda)` from an ordinary CPU tensor, and `x.pin_memory()` then
//! `to_device_with(cuda, true)`, at 1, 16 and 256 MiB. Each line is `size, kind, GB/s` over
//! back-to-back copies with one synchronization at the end, as `benchmark/pinned/torch_h2d.py`
//! measures PyTorch.
//!
//!     cargo run --release -p magpie-core --example pinned_bandwidth

use magpie_core::backend::cuda;
use magpie_core::{Device, Result, Tensor};
use std::time::Instant;

const GPU: Device = Device::Cuda(0);

/// Seconds per copy of `x` to the GPU over `iters` copies (after 3 warm-up copies).
fn time_copies(x: &Tensor, non_blocking: bool, iters: usize) -> Result<f64> {
    for _ in 0..3 {
        x.to_device_with(GPU, non_blocking)?;
    }
    cuda::synchronize(None)?;
    let t0 = Instant::now();
    for _ in 0..iters {
        // the device copy is dropped at once; the caching allocator hands its block to the next
        x.to_device_with(GPU, non_blocking)?;
    }
    cuda::synchronize(None)?;
    Ok(t0.elapsed().as_secs_f64() / iters as f64)
}

fn main() -> Result<()> {
    if !cuda::is_available() {
        println!("CUDA not available: {}", cuda::unavailable("pinned_bandwidth"));
        return Ok(());
    }
    println!("size_mib,kind,gb_per_s");
    for (mib, iters) in [(1usize, 200usize), (16, 50), (256, 10)] {
        let n = mib << 18; // f32 elements
        let pageable = Tensor::from_vec((0..n).map(|i| (i % 1024) as f32).collect::<Vec<_>>(), &[n])?;
        let pinned = pageable.pin_memory()?;
        let bytes = (n * 4) as f64;
        let s = time_copies(&pageable, false, iters)?;
        println!("{mib},pageable,{:.2}", bytes / s / 1e9);
        let s = time_copies(&pinned, true, iters)?;
        println!("{mib},pinned non_blocking,{:.2}", bytes / s / 1e9);
        // the copies were correct
        let back = pinned.to_device_with(GPU, true)?.to_vec::<f32>()?;
        if back != pageable.to_vec::<f32>()? {
            return Err(magpie_core::Error::value("pinned_bandwidth", "the pinned copy differs from its source"));
        }
    }
    let st = cuda::pinned_stats();
    println!("# pinned allocator: {} driver allocations, {} cache hits", st.driver_allocs, st.cache_hits);
    Ok(())
}

//! Timings of the CUDA sort family and scans on cuda:0 (`backend::cuda::sort`, `scan`): sort
//! (short rows in shared memory, one long row), topk, cumsum and cummax at a few shapes, float32,
//! timed with CUDA events around repeated calls after a warm-up. Prints one `case ms` line per
//! case; `benchmark/cuda/sort_scan.sh` runs it beside `sort_scan_torch.py` (the same cases in
//! PyTorch) and prints both.
//!
//!     cargo run --release -p magpie-core --example sort_scan_bench

#[path = "support/cuda_time.rs"]
mod cuda_time;

use cuda_time::time;
use magpie_core::backend::cuda::device::device;
use magpie_core::{Device, Result, Tensor};

const GPU: Device = Device::Cuda(0);

fn main() -> Result<()> {
    if !magpie_core::backend::cuda::is_available() {
        println!("CUDA not available");
        return Ok(());
    }
    let dev = device("bench", 0)?;
    let _ng = magpie_core::autograd::no_grad();
    let x = |shape: &[usize]| -> Result<Tensor> { Tensor::randn(shape)?.to_device(GPU) };
    type Case = (&'static str, Vec<usize>, fn(&Tensor) -> Result<()>);
    let cases: Vec<Case> = vec![
        ("sort 4096x1024 dim -1", vec![4096, 1024], |t| t.sort(-1, false).map(drop)),
        ("sort 16384x128 dim -1", vec![16384, 128], |t| t.sort(-1, false).map(drop)),
        ("sort 1x1048576", vec![1, 1 << 20], |t| t.sort(-1, false).map(drop)),
        ("sort 64x32000 descending", vec![64, 32000], |t| t.sort(-1, true).map(drop)),
        ("topk k=50 64x32000", vec![64, 32000], |t| t.topk(50, -1, true).map(drop)),
        ("topk k=8 4096x1024", vec![4096, 1024], |t| t.topk(8, -1, true).map(drop)),
        ("cumsum 4096x4096 dim -1", vec![4096, 4096], |t| t.cumsum(-1, None).map(drop)),
        ("cumsum 4096x4096 dim 0", vec![4096, 4096], |t| t.cumsum(0, None).map(drop)),
        ("cumsum 1x16777216", vec![1, 1 << 24], |t| t.cumsum(-1, None).map(drop)),
        ("cummax 4096x4096 dim -1", vec![4096, 4096], |t| t.cummax(-1).map(drop)),
    ];
    for (name, shape, f) in cases {
        let t = x(&shape)?;
        let ms = time(&dev, 20, || f(&t))?;
        println!("{name}\t{ms:.4}");
    }
    Ok(())
}

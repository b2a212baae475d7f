//! Timings of the CUDA index, mask and search ops on cuda:0 (`backend::cuda::adv_index`):
//! advanced indexing and `index_put(accumulate=True)` of rows, `scatter_reduce`, `nonzero`,
//! `masked_select`, `searchsorted`, `multinomial`, `any`, `flip`; float32 values, timed with CUDA
//! events around repeated calls after a warm-up (ops that read a count back synchronize inside).
//! Prints one `case ms` line per case; `benchmark/cuda/index.sh` runs it beside
//! `index_torch.py` (the same cases in PyTorch) and prints both.
//!
//!     cargo run --release -p magpie-core --example index_bench

#[path = "support/cuda_time.rs"]
mod cuda_time;

use cuda_time::time;
use magpie_core::backend::cuda::device::device;
use magpie_core::ops::indexing::{index, index_put};
use magpie_core::{DType, Device, Result, Tensor};

const GPU: Device = Device::Cuda(0);

fn main() -> Result<()> {
    if !magpie_core::backend::cuda::is_available() {
        println!("CUDA not available");
        return Ok(());
    }
    let dev = device("bench", 0)?;
    let _ng = magpie_core::autograd::no_grad();
    let randn = |shape: &[usize]| -> Result<Tensor> { Tensor::randn_on(shape, DType::F32, GPU) };
    let randint = |hi: i64, shape: &[usize]| -> Result<Tensor> { Tensor::randint_on(0, hi, shape, DType::I64, GPU) };
    let row = |name: &str, f: &mut dyn FnMut() -> Result<()>| -> Result<()> {
        let ms = time(&dev, 20, f)?;
        println!("{name}\t{ms:.4}");
        Ok(())
    };
    let x = randn(&[100_000, 128])?;
    let rows = randint(100_000, &[50_000])?;
    row("index rows 100000x128 [50000]", &mut || index(&x, &[Some(rows.clone())]).map(drop))?;
    let v = randn(&[50_000, 128])?;
    row("index_put accumulate 100000x128 [50000]", &mut || index_put(&x, &[Some(rows.clone())], &v, true).map(drop))?;
    let dst = randn(&[10_000, 128])?;
    let gi = randint(10_000, &[100_000, 128])?;
    let src = randn(&[100_000, 128])?;
    row("scatter_reduce sum 10000x128 <- 100000x128", &mut || dst.scatter_reduce(0, &gi, &src, "sum", true).map(drop))?;
    row("scatter_reduce amax 10000x128 <- 100000x128", &mut || dst.scatter_reduce(0, &gi, &src, "amax", true).map(drop))?;
    let big = randn(&[1 << 24])?;
    let mask = big.gt_scalar(0.0)?;
    row("nonzero 16M", &mut || mask.nonzero().map(drop))?;
    row("masked_select 16M", &mut || big.masked_select(&mask).map(drop))?;
    let seq = randn(&[100_000])?.sort(0, false)?.0;
    let probe = randn(&[1 << 20])?;
    row("searchsorted 1M in 100000", &mut || seq.searchsorted(&probe, false, false, None).map(drop))?;
    let p = Tensor::rand_on(&[64, 50_000], DType::F32, GPU)?;
    row("multinomial 64x50000 1 draw", &mut || p.multinomial(1, true).map(drop))?;
    row("multinomial 64x50000 16 without replacement", &mut || p.multinomial(16, false).map(drop))?;
    let sq = randn(&[4096, 4096])?;
    row("any 4096x4096 dim 1", &mut || sq.any_dims(Some(&[1]), false).map(drop))?;
    row("flip 4096x4096 dim 0", &mut || sq.flip(&[0]).map(drop))?;
    Ok(())
}

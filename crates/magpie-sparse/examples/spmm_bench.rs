//! Times `magpie_sparse::mm` (sparse @ dense) against the dense product of the same matrix, on the
//! CPU and, where present, on CUDA: `cargo run --release -p magpie-sparse --example spmm_bench`.
//! Prints one line per (device, size, density): median milliseconds of sparse mm and dense matmul.

use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Result, Tensor};
use magpie_sparse::{mm, sparse_coo_tensor, SparseTensor};
use std::time::Instant;

fn rand_sparse(m: usize, k: usize, nnz: usize, seed: u64) -> Result<SparseTensor> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut idx: Vec<i64> = (0..nnz).map(|_| (next() % m as u64) as i64).collect();
    idx.extend((0..nnz).map(|_| (next() % k as u64) as i64));
    let vals: Vec<f32> = (0..nnz).map(|_| (next() % 1000) as f32 / 500.0 - 1.0).collect();
    sparse_coo_tensor(&Tensor::from_vec(idx, &[2, nnz])?, &Tensor::from_vec(vals, &[nnz])?, Some(&[m, k]))?.coalesce()
}

fn median_ms(dev: Device, reps: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<f64> {
    f()?; // warm-up (kernel compilation, pattern)
    let mut t = Vec::new();
    for _ in 0..reps {
        let s = Instant::now();
        let y = f()?;
        if let Device::Cuda(_) = dev {
            cuda::synchronize(Some(dev))?;
        }
        drop(y);
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(|a, b| a.total_cmp(b));
    Ok(t[t.len() / 2])
}

fn main() -> Result<()> {
    let mut devices = vec![Device::Cpu];
    if cuda::is_available() {
        devices.push(Device::Cuda(0));
    }
    println!("device  m x k @ k x n            density  nnz       sparse mm ms  dense matmul ms");
    for dev in devices {
        for &(m, k, n, density) in &[(4096usize, 4096usize, 128usize, 0.01f64), (4096, 4096, 128, 0.001), (16384, 16384, 64, 0.001)] {
            let nnz = (m as f64 * k as f64 * density) as usize;
            let s = rand_sparse(m, k, nnz, 42)?.to_device(dev)?;
            let d = Tensor::from_vec((0..k * n).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<f32>>(), &[k, n])?.to_device(dev)?;
            let dense = s.to_dense()?.to_dtype(DType::F32)?;
            let reps = if dev == Device::Cpu { 5 } else { 20 };
            let ts = median_ms(dev, reps, || mm(&s, &d))?;
            let td = median_ms(dev, reps, || dense.matmul(&d))?;
            println!("{:<7} {m} x {k} @ {k} x {n}  {density:<8} {:<9} {ts:<13.3} {td:.3}", format!("{dev}"), s.nnz());
        }
    }
    Ok(())
}

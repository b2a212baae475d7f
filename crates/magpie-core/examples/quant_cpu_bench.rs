//! CPU quantized matmul timings (`backend::cpu::quant::quant_matmul`): y = x Wᵀ with W in its
//! blocks, at Llama-3.2-1B shapes, for decode (1 row) and a prefill chunk (64 rows), against
//! the f32 GEMM on the dequantized weight. Reports ms, GB/s of the quantized bytes read, and
//! GFLOP/s. For diagnosis, not a test.
//!
//!     cargo run --release -p magpie-core --example quant_cpu_bench

use magpie_core::backend::cpu::quant::{dequantize_rows, quant_matmul, QuantType};
use magpie_core::{Result, Tensor};
use std::time::Instant;

fn blocks(ty: QuantType, n: usize, k: usize, seed: &mut u64) -> Result<Vec<u8>> {
    let bytes = ty.matrix_bytes("bench", n, k)?;
    let mut b: Vec<u8> = (0..bytes)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect();
    // finite scales: a fixed small f16 in every scale field
    let fields: &[usize] = match ty {
        QuantType::Q8_0 | QuantType::Q4_0 => &[0],
        QuantType::Q4_K => &[0, 2],
        QuantType::Q6_K => &[208],
    };
    for blk in b.chunks_exact_mut(ty.block_bytes()) {
        for &o in fields {
            blk[o..o + 2].copy_from_slice(&half::f16::from_f32(0.01).to_bits().to_le_bytes());
        }
    }
    Ok(b)
}

fn best_ms(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(best)
}

fn main() -> Result<()> {
    println!("threads: {}", rayon::current_num_threads());
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for ty in QuantType::ALL {
        for (n, k) in [(2048usize, 2048usize), (8192, 2048), (2048, 8192)] {
            let w = blocks(ty, n, k, &mut seed)?;
            let wf = Tensor::from_vec(dequantize_rows(ty, &w, n, k)?, &[n, k])?;
            for m in [1usize, 64] {
                let x: Vec<f32> = (0..m * k).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
                let xt = Tensor::from_vec(x.clone(), &[m, k])?;
                let q = best_ms(10, || quant_matmul(ty, &w, n, k, &x, m).map(|_| ()))?;
                let f = best_ms(10, || xt.matmul(&wf.t()?).map(|_| ()))?;
                let flops = 2.0 * (m * n * k) as f64;
                println!(
                    "{ty} {n}x{k} m={m}: quantized {q:.3} ms ({:.1} GB/s of blocks, {:.1} GFLOP/s), f32 GEMM on dequantized {f:.3} ms ({:.1} GB/s of f32)",
                    w.len() as f64 / q / 1e6,
                    flops / q / 1e6,
                    (n * k * 4) as f64 / f / 1e6
                );
            }
        }
    }
    Ok(())
}

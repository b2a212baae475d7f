//! `scaled_dot_product_attention` forward + backward on cuda:0 at training shapes: the flash
//! kernels (no mask; for float32 the tiled kernels and the older scalar ones) against the composite (an explicit all-zero or causal float mask sends it
//! there), in ms per forward+backward and peak-free memory. PyTorch's side of the same cases is
//! `benchmark/train/sdpa_torch.py`. For diagnosis, not a test.
//!
//!     cargo run --release -p magpie-core --example sdpa_train_bench

use magpie_core::backend::cuda;
use magpie_core::backend::cuda::attention_bwd::{scalar_backward_min_scores, set_scalar_backward_min_scores};
use magpie_core::backend::cuda::attention_f32;
use magpie_core::ops::nn;
use magpie_core::{DType, Device, Result, Tensor};
use std::time::Instant;

const GPU: Device = Device::Cuda(0);

fn main() -> Result<()> {
    if !cuda::is_available() {
        println!("CUDA not available");
        return Ok(());
    }
    let default_min = scalar_backward_min_scores();
    // (label, batch, heads, length, head_dim, causal)
    let cases = [("gpt 6x384 ctx256 b64", 64usize, 6usize, 256usize, 64usize, true), ("bert 768 b4x128", 4, 12, 128, 64, false), ("gpt2-small ctx1024 b8", 8, 12, 1024, 64, true)];
    for (label, b, h, l, d, causal) in cases {
        for dt in [DType::F32, DType::BF16] {
            let mk = || -> Result<Tensor> { Tensor::randn_on(&[b, h, l, d], DType::F32, GPU)?.to_dtype(dt)?.requires_grad_(true) };
            let (q, k, v) = (mk()?, mk()?, mk()?);
            let go = Tensor::randn_on(&[b, h, l, d], DType::F32, GPU)?.to_dtype(dt)?;
            let mut mask = Tensor::zeros_on(&[l, l], dt, Device::Cpu)?;
            if causal {
                let keep = Tensor::ones_on(&[l, l], DType::Bool, Device::Cpu)?.tril(0)?;
                mask = mask.masked_fill(&keep.logical_not()?, f64::NEG_INFINITY)?;
            }
            let mask = mask.to_device(GPU)?;
            let paths: &[(&str, Option<&Tensor>)] = if dt == DType::F32 { &[("flash", None), ("flash-scalar", None), ("composite", Some(&mask))] } else { &[("flash", None), ("composite", Some(&mask))] };
            for &(path, m) in paths {
                // float32 "flash": the tiled kernels (attention_f32); "flash-scalar": the older
                // scalar kernels, forced (by default they leave small float32 cases to the composite)
                attention_f32::set_enabled(path != "flash-scalar");
                set_scalar_backward_min_scores(if path == "composite" { default_min } else { 0 });
                let step = || -> Result<()> {
                    let y = nn::scaled_dot_product_attention(&q, &k, &v, m, 0.0, causal && m.is_none(), None, false)?;
                    y.backward_with(Some(&go), false, false)?;
                    Ok(())
                };
                for _ in 0..3 {
                    step()?;
                }
                cuda::synchronize(Some(GPU))?;
                let reps = 20;
                let t0 = Instant::now();
                for _ in 0..reps {
                    step()?;
                }
                cuda::synchronize(Some(GPU))?;
                let ms = t0.elapsed().as_secs_f64() * 1e3 / reps as f64;
                println!("{{\"case\": \"{label}\", \"dtype\": \"{}\", \"impl\": \"magpie-{path}\", \"ms\": {ms:.4}}}", dt.name());
            }
        }
    }
    Ok(())
}

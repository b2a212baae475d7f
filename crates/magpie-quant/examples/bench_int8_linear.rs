//! Times torch-magpie's dynamic int8 Linear against its float32 Linear of the same shape (and
//! each int8 kernel this CPU runs). Prints one JSON line per (shape, variant): median ms per call.
//! Used by `benchmark/quant/run.sh`, which alternates it with PyTorch's side.
//!
//! `cargo run --release -p magpie-quant --example bench_int8_linear -- [secs per case]`

use magpie_core::autograd::no_grad;
use magpie_core::{Result, Tensor};
use magpie_nn::{Linear, Module};
use magpie_quant::gemm::Int8Kernel;
use magpie_quant::DynamicQuantizedLinear;
use std::time::Instant;

/// (batch, in_features, out_features)
pub const SHAPES: [(usize, usize, usize); 5] = [(1, 768, 3072), (16, 768, 3072), (128, 768, 3072), (128, 1024, 1024), (32, 4096, 4096)];

fn median_ms(secs: f64, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed().as_secs_f64() < secs && times.len() < 2000) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(times[times.len() / 2])
}

fn main() -> Result<()> {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    let _g = no_grad();
    for &(m, k, n) in &SHAPES {
        let lin = Linear::new(k, n, true)?;
        let x = Tensor::randn(&[m, k])?;
        let f32_ms = median_ms(secs, || lin.forward(&x).map(|_| ()))?;
        println!("{{\"side\":\"magpie\",\"m\":{m},\"k\":{k},\"n\":{n},\"variant\":\"f32\",\"ms\":{f32_ms}}}");
        let mut q = DynamicQuantizedLinear::from_float(&lin, false)?;
        for kern in Int8Kernel::available().into_iter().filter(|k| *k != Int8Kernel::Scalar) {
            q.set_kernel(kern)?;
            let ms = median_ms(secs, || q.forward(&x).map(|_| ()))?;
            println!("{{\"side\":\"magpie\",\"m\":{m},\"k\":{k},\"n\":{n},\"variant\":\"int8_{kern:?}\",\"ms\":{ms}}}");
        }
    }
    Ok(())
}

//! Timings of the CUDA activations and predicates on cuda:0 (the expression kernels of
//! `ops/unary/cuda_expr.rs`), float32 4096x4096, timed with CUDA events around repeated calls after
//! a warm-up; `relu masked_fill` is the composite relu ran before (`masked_fill(x <= 0, 0)`).
//! Prints one `case ms` line per case; `benchmark/cuda/act.sh` runs it beside `act_torch.py`.
//!
//!     cargo run --release -p magpie-core --example act_bench

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
    let x = Tensor::randn(&[4096, 4096])?.to_device(GPU)?;
    let g = Tensor::randn(&[4096, 4096])?.to_device(GPU)?;
    type Case = (&'static str, fn(&Tensor) -> Result<Tensor>);
    let cases: Vec<Case> = vec![
        ("relu", |t| t.relu()),
        ("relu masked_fill", |t| t.masked_fill(&t.le_scalar(0.0)?, 0.0)),
        ("leaky_relu", |t| t.leaky_relu(0.01)),
        ("elu", |t| t.elu(1.0)),
        ("hardtanh", |t| t.hardtanh(-1.0, 1.0)),
        ("hardswish", |t| t.hardswish()),
        ("softplus", |t| t.softplus(1.0, 20.0)),
        ("mish", |t| t.mish()),
        ("logsigmoid", |t| t.logsigmoid()),
        ("isnan", |t| t.isnan()),
        ("nan_to_num", |t| t.nan_to_num(None, None, None)),
    ];
    {
        let _ng = magpie_core::autograd::no_grad();
        for (name, f) in &cases {
            let ms = time(&dev, 20, || f(&x).map(drop))?;
            println!("{name}\t{ms:.4}");
        }
    }
    // forward and backward: the input gradient through the kernel's derivative
    for (name, f) in [("elu fwd+bwd", cases[3].1), ("mish fwd+bwd", cases[7].1)] {
        let ms = time(&dev, 20, || {
            let xr = x.detach().requires_grad_(true)?;
            f(&xr)?.backward_with(Some(&g), false, false)
        })?;
        println!("{name}\t{ms:.4}");
    }
    Ok(())
}

//! The fused engine's folded Q4_K decode GEMV (`fused::QuantFold`) at the Llama-3.2-1B layer
//! shapes on cuda:0, one bf16 row, each launch with its epilogue as in a decode step: q|k|v
//! 3072x2048 (RMSNorm; rotary embedding + KV-cache write), o 2048x2048 (residual add), gate|up
//! 16384x2048 (RMSNorm; SwiGLU), down 2048x8192 (residual add). Each shape runs as a CUDA graph
//! of 16 programmatic-dependent launches over 16 weight copies (its own buffers, no L2 reuse), as
//! the 16 layers of a step would; then the whole chain (4 launches x 16 layers, 548 MB of Q4_K
//! blocks). Reported: microseconds per launch and the share of a measured device-to-device copy
//! rate that the launch's bytes (weights + x + outputs) would take, for x coded per lane in
//! registers (`warp_coding`, one-row K <= 2048 launches) and by the block through shared memory;
//! and beside them the core's Q4_K GEMV (`quant_gemv_parts_raw`: no norm, plain store) on the same
//! weights, launched the same way.
//!
//!     cargo run --release -p magpie-models --example quant_fold_bench

use magpie_core::backend::cuda::device::{device, CudaDevice};
use magpie_core::backend::cuda::graph::capture;
use magpie_core::backend::cuda::kern::elem_ptr;
use magpie_core::backend::cuda::memcpy::dtod;
use magpie_core::backend::cuda::quant::{quant_gemv_parts_raw, QuantGemv, QuantPart};
use magpie_core::quant::QuantType;
use magpie_core::{DType, Device, Result, Tensor};
use magpie_models::fused::{ActKind, GemvEpi, GemvNorm, QuantFold};
use std::sync::Arc;
use std::time::Instant;

const GPU: Device = Device::Cuda(0);
const LAYERS: usize = 16;

/// Seconds per call of `f` over `iters` calls after a warm-up (the device synchronized around).
fn time(dev: &CudaDevice, iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    dev.synchronize()?;
    let t = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    dev.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / iters as f64)
}

/// `n` pseudo-random bytes (xorshift, advancing `seed`); as Q4_K blocks, finite scales are
/// likely but not needed for timing.
fn random_bytes(seed: &mut u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

fn addr(t: &Tensor) -> Result<u64> {
    Ok(elem_ptr("bench", t)?.0)
}

fn zeros(n: usize, dt: DType) -> Result<Tensor> {
    Tensor::zeros(&[n])?.to_dtype(dt)?.to_device(GPU)
}

/// One shape of the step: name, rows n, columns k.
struct Shape {
    name: &'static str,
    n: usize,
    k: usize,
}

fn main() -> Result<()> {
    if !magpie_core::backend::cuda::is_available() {
        println!("CUDA not available");
        return Ok(());
    }
    let dev: Arc<CudaDevice> = device("bench", 0)?;
    println!("device: {:?}, {} SMs", dev, dev.sm_count);
    let bytes = 1usize << 30;
    let (src, dst) = (zeros(bytes / 4, DType::F32)?, zeros(bytes / 4, DType::F32)?);
    let (sp, dp) = (addr(&src)?, addr(&dst)?);
    // SAFETY: both tensors hold `bytes` bytes of live device memory.
    let s = time(&dev, 10, || unsafe { dtod(&dev, dp, sp, bytes) })?;
    let copy_gbs = 2.0 * bytes as f64 / s / 1e9;
    println!("device copy: {copy_gbs:.0} GB/s (read + write)");
    drop((src, dst));

    let (hidden, heads, kvh, hd, inter, max_len) = (2048usize, 32usize, 8usize, 64usize, 8192usize, 64usize);
    let shapes = [Shape { name: "q|k|v 3072x2048", n: (heads + 2 * kvh) * hd, k: hidden }, Shape { name: "o 2048x2048", n: hidden, k: heads * hd }, Shape { name: "gate|up 16384x2048", n: 2 * inter, k: hidden }, Shape { name: "down 2048x8192", n: hidden, k: inter }];
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut ws: Vec<Vec<Tensor>> = Vec::new();
    for s in &shapes {
        let host = random_bytes(&mut seed, s.n * s.k / 256 * 144);
        ws.push((0..LAYERS).map(|_| Tensor::from_vec(host.clone(), &[host.len()])?.to_device(GPU)).collect::<Result<_>>()?);
    }
    let bf = DType::BF16;
    let x = Tensor::randn_on(&[hidden], DType::F32, GPU)?.to_dtype(bf)?;
    let act = Tensor::randn_on(&[inter], DType::F32, GPU)?.to_dtype(bf)?;
    let attn = Tensor::randn_on(&[heads * hd], DType::F32, GPU)?.to_dtype(bf)?;
    let nw = Tensor::randn_on(&[hidden], DType::F32, GPU)?.to_dtype(bf)?;
    let q = zeros(heads * hd, bf)?;
    let (kc, vc) = (zeros(kvh * max_len * hd, bf)?, zeros(kvh * max_len * hd, bf)?);
    let pos = Tensor::from_vec(vec![5i32], &[1])?.to_device(GPU)?;
    let (cos, sin) = (zeros(max_len * hd / 2, DType::F32)?, zeros(max_len * hd / 2, DType::F32)?);
    let norm = Some(GemvNorm { rms: true, w: addr(&nw)?, b: 0, eps: 1e-5 });
    let qkv = GemvEpi::Qkv { q: addr(&q)?, kc: addr(&kc)?, vc: addr(&vc)?, bias: 0, pos: addr(&pos)?, cos: addr(&cos)?, sin: addr(&sin)?, heads: (heads, kvh, hd), cache_strides: ((kvh * max_len * hd) as i64, (max_len * hd) as i64) };
    // (input, norm, epilogue) of each shape, and the bytes its outputs move
    let calls = [
        (addr(&x)?, norm, qkv, 2 * (heads + 2 * kvh) * hd),
        (addr(&attn)?, None, GemvEpi::Residual { res: addr(&x)?, bias: 0 }, 4 * hidden),
        (addr(&x)?, norm, GemvEpi::Gated { out: addr(&act)?, bias: 0, kind: ActKind::Silu }, 2 * inter),
        (addr(&act)?, None, GemvEpi::Residual { res: addr(&x)?, bias: 0 }, 4 * hidden),
    ];
    let wp: Vec<Vec<u64>> = ws.iter().map(|v| v.iter().map(addr).collect::<Result<_>>()).collect::<Result<_>>()?;
    let moved = |i: usize| shapes[i].n * shapes[i].k / 256 * 144 + 2 * shapes[i].k + calls[i].3;
    let y = zeros(2 * inter, bf)?;
    let yp = addr(&y)?;
    // 0: the core's GEMV, 1: folded with x coded by the block, 2: folded with x coded per lane
    for mode in 0..3 {
        let mut qf = QuantFold::new(&dev, bf)?;
        qf.warp_coding = mode == 2;
        let launch = |i: usize, l: usize| -> Result<()> {
            let (x, norm, epi, _) = calls[i];
            let (n, k) = (shapes[i].n, shapes[i].k);
            if mode == 0 {
                let g = QuantGemv { ty: QuantType::Q4_K, dtype: bf, m: 1, n, k };
                // SAFETY: x holds k values, y n values, the weight n x k / 256 Q4_K blocks.
                return unsafe { quant_gemv_parts_raw(&dev, &g, &[QuantPart { w: wp[i][l], n, y: yp }], x, k, n, None, true) };
            }
            // SAFETY: every address is a live device tensor of the sizes the call reads and
            // writes (one row); the weights hold n x k / 256 Q4_K blocks.
            unsafe { qf.gemv(&dev, 1, n, k, x, wp[i][l], norm, epi) }
        };
        println!("{}:", ["core Q4_K GEMV (no norm, plain store)", "folded, x coded by the block", "folded, x coded per lane (one-row K <= 2048 launches)"][mode]);
        for (i, s) in shapes.iter().enumerate() {
            let g = capture(&dev, || (0..LAYERS).try_for_each(|l| launch(i, l)))?;
            let t = time(&dev, 50, || g.replay())? / LAYERS as f64;
            let floor = moved(i) as f64 / (copy_gbs * 1e9);
            println!("  {:<20} {:7.2} us per launch, floor {:5.2} us: {:3.0}% of the copy rate", s.name, t * 1e6, floor * 1e6, 100.0 * floor / t);
        }
        let g = capture(&dev, || (0..LAYERS).try_for_each(|l| (0..shapes.len()).try_for_each(|i| launch(i, l))))?;
        let t = time(&dev, 50, || g.replay())?;
        let all: usize = (0..shapes.len()).map(moved).sum::<usize>() * LAYERS;
        let floor = all as f64 / (copy_gbs * 1e9);
        println!("  chain: {} launches, {:.1} MB, {:7.1} us (floor {:.1} us): {:3.0}% of the copy rate", LAYERS * shapes.len(), all as f64 / 1e6, t * 1e6, floor * 1e6, 100.0 * floor / t);
    }
    Ok(())
}

//! Quantized decode GEMV timings on cuda:0 (`backend::cuda::quant`): Llama-3.2-1B-shaped
//! matrices (q/o 2048x2048, gate/up 8192x2048, down 2048x8192, lm_head 128256x2048), bf16
//! activations, timed with CUDA events, reported as GB/s of the bytes a launch must move
//! (quantized weights + x + y) and as a fraction of a measured device-to-device copy rate
//! (read + write bytes). Weights rotate over enough copies to exceed the L2 cache. Q4_K with bf16
//! activations runs the 8-bit-activation kernels; "Q4_K f32" lines time its exact f32 path.
//!
//! Then the decode chain: the 7 Q4_K GEMVs of a Llama-3.2-1B layer (q, k, v, o, gate, up, down)
//! x 16 layers, one activation row, each layer's weights their own buffers (546 MB, no L2 reuse),
//! launched back to back on the stream and as a CUDA graph, plain and with programmatic
//! dependent launch: its time against the floor of all its bytes is the figure for layer shapes
//! in a real decode step, where the kernels run back to back.
//!
//! Q4_K (bf16) shapes are also timed as a CUDA graph of PDL launches of the same shape (rotating
//! weights), which removes the host's launch rate from the figure, for the default launch shape
//! and the others of `Q8Launch` (blocks per SM, split K); and the decode chain with q|k|v and
//! gate|up each in one launch (4 launches per layer instead of 7).
//!
//!     cargo run --release -p magpie-core --example quant_gemv_bench

use cudarc::driver::{result as cu, sys};
use magpie_core::backend::cpu::quant::QuantType;
use magpie_core::backend::cuda::device::{device, CudaDevice};
use magpie_core::backend::cuda::kern::elem_ptr;
use magpie_core::backend::cuda::memcpy::dtod;
use magpie_core::backend::cuda::graph::capture;
use magpie_core::backend::cuda::quant::{quant_gemv_parts_raw, quant_gemv_raw, quant_gemv_raw_pdl, Q8Launch, QuantGemv, QuantPart};
use magpie_core::{DType, Device, Error, Result, Tensor};

const GPU: Device = Device::Cuda(0);

fn drv(e: impl std::fmt::Debug) -> Error {
    Error::device("bench", format!("{e:?}"))
}

/// Milliseconds per call of `f`, from CUDA events around `iters` calls after a warm-up.
fn time(dev: &CudaDevice, iters: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    for i in 0..3 {
        f(i)?;
    }
    let (a, b) = (cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(drv)?, cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(drv)?);
    // SAFETY: live events recorded on the device's live stream, read after synchronizing.
    unsafe { cu::event::record(a, dev.cu_stream()) }.map_err(drv)?;
    for i in 0..iters {
        f(i)?;
    }
    unsafe { cu::event::record(b, dev.cu_stream()) }.map_err(drv)?;
    unsafe { cu::event::synchronize(b) }.map_err(drv)?;
    let ms = unsafe { cu::event::elapsed(a, b) }.map_err(drv)? as f64 / iters as f64;
    unsafe {
        cu::event::destroy(a).ok();
        cu::event::destroy(b).ok();
    }
    Ok(ms)
}

/// `n` pseudo-random bytes (xorshift, advancing `seed`).
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

/// The decode chain (see the module doc): per launch mode, microseconds per chain and % of the
/// copy rate for its bytes.
fn decode_chain(dev: &std::sync::Arc<CudaDevice>, copy_gbs: f64, seed: &mut u64) -> Result<()> {
    let shapes = [("q", 2048usize, 2048usize), ("k", 512, 2048), ("v", 512, 2048), ("o", 2048, 2048), ("gate", 8192, 2048), ("up", 8192, 2048), ("down", 2048, 8192)];
    let layers = 16;
    let ty = QuantType::Q4_K;
    let mut ws = Vec::new();
    let mut moved = 0usize;
    for &(_, n, k) in &shapes {
        let host = random_bytes(seed, ty.matrix_bytes("bench", n, k)?);
        for _ in 0..layers {
            ws.push(Tensor::from_vec(host.clone(), &[host.len()])?.to_device(GPU)?);
            moved += host.len() + 2 * (n + k);
        }
    }
    let x = Tensor::randn_on(&[1, 8192], DType::F32, GPU)?.to_dtype(DType::BF16)?;
    let ys: Vec<Tensor> = shapes.iter().map(|&(_, n, _)| Tensor::zeros(&[n])?.to_dtype(DType::BF16)?.to_device(GPU)).collect::<Result<_>>()?;
    let xp = elem_ptr("bench", &x)?.0;
    let wp: Vec<u64> = ws.iter().map(|t| elem_ptr("bench", t).map(|p| p.0)).collect::<Result<_>>()?;
    let yp: Vec<u64> = ys.iter().map(|t| elem_ptr("bench", t).map(|p| p.0)).collect::<Result<_>>()?;
    let chain = |pdl: bool| -> Result<()> {
        for l in 0..layers {
            for (s, &(_, n, k)) in shapes.iter().enumerate() {
                let g = QuantGemv { ty, dtype: DType::BF16, m: 1, n, k };
                let w = wp[s * layers + l];
                // SAFETY: w holds the matrix's blocks, x 8192 bf16 values, y n values; no kernel
                // writes any weight.
                unsafe {
                    if pdl {
                        quant_gemv_raw_pdl(dev, &g, w, xp, k, yp[s], n)?
                    } else {
                        quant_gemv_raw(dev, &g, w, xp, k, yp[s], n)?
                    }
                }
            }
        }
        Ok(())
    };
    // q|k|v and gate|up in one launch each (shapes 0-2 and 4-5 share x)
    // `launch`: blocks per SM and the split of `down` (K = 8192; the K = 2048 launches take 1)
    let fused = |launch: Option<(usize, usize)>| -> Result<()> {
        for l in 0..layers {
            for group in [&[0usize, 1, 2][..], &[3], &[4, 5], &[6]] {
                let k = shapes[group[0]].2;
                let launch = launch.map(|(b, s)| Q8Launch { blocks_per_sm: b, split: if k > 2048 { s } else { 1 } });
                let parts: Vec<QuantPart> = group.iter().map(|&s| QuantPart { w: wp[s * layers + l], n: shapes[s].1, y: yp[s] }).collect();
                let g = QuantGemv { ty, dtype: DType::BF16, m: 1, n: 0, k };
                // SAFETY: as in `chain`.
                unsafe { quant_gemv_parts_raw(dev, &g, &parts, xp, k, 8192, launch, true)? };
            }
        }
        Ok(())
    };
    let floor_us = moved as f64 / copy_gbs / 1e3;
    println!("decode chain: {} Q4_K GEMVs (Llama-3.2-1B layer x {layers}), {:.1} MB, floor {floor_us:.1} us", shapes.len() * layers, moved as f64 / 1e6);
    let report = |mode: &str, us: f64, launches: usize| {
        println!("decode chain, {mode}: {us:.1} us ({:.2} us per launch), {:.0} GB/s = {:.0}% of the copy rate", us / launches as f64, moved as f64 / us / 1e3, 100.0 * floor_us / us);
    };
    for (mode, pdl, graph) in [("stream", false, false), ("stream + PDL", true, false), ("graph", false, true), ("graph + PDL", true, true)] {
        let ms = if graph {
            chain(pdl)?;
            let gr = capture(dev, || chain(pdl))?;
            time(dev, 20, |_| gr.replay())?
        } else {
            time(dev, 20, |_| chain(pdl))?
        };
        report(mode, ms * 1e3, shapes.len() * layers);
    }
    for (mode, launch) in [("q|k|v, gate|up fused, graph + PDL", None), ("fused, 1 block/SM, split 1", Some((1, 1))), ("fused, 1 block/SM, split 4", Some((1, 4))), ("fused, 2 blocks/SM, split 1", Some((2, 1))), ("fused, 2 blocks/SM, split 2", Some((2, 2))), ("fused, 2 blocks/SM, split 4", Some((2, 4)))] {
        fused(launch)?;
        let gr = capture(dev, || fused(launch))?;
        let ms = time(dev, 20, |_| gr.replay())?;
        report(mode, ms * 1e3, 4 * layers);
    }
    Ok(())
}

fn main() -> Result<()> {
    if !magpie_core::backend::cuda::is_available() {
        println!("CUDA not available");
        return Ok(());
    }
    let dev = device("bench", 0)?;
    println!("device: {:?}, {} SMs", dev, dev.sm_count);
    // device copy rate: 1 GiB device to device
    let bytes = 1usize << 30;
    let src = Tensor::zeros(&[bytes / 4])?.to_device(GPU)?;
    let dst = Tensor::zeros(&[bytes / 4])?.to_device(GPU)?;
    let (sp, dp) = (elem_ptr("bench", &src)?.0, elem_ptr("bench", &dst)?.0);
    // SAFETY: both tensors hold `bytes` bytes of live device memory.
    let ms = time(&dev, 10, |_| unsafe { dtod(&dev, dp, sp, bytes) })?;
    let copy_gbs = 2.0 * bytes as f64 / ms / 1e6;
    println!("device copy: {ms:.3} ms per GiB, {copy_gbs:.0} GB/s (read + write)");
    drop((src, dst));

    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let rows: &[usize] = &[1, 2, 4, 8];
    // bf16 activations; the Q4_K f32 case times the exact-product path for one row
    let cases: &[(QuantType, DType, &[usize])] = &[(QuantType::Q4_K, DType::BF16, rows), (QuantType::Q4_K, DType::F32, &[1]), (QuantType::Q6_K, DType::BF16, rows), (QuantType::Q8_0, DType::BF16, rows), (QuantType::Q4_0, DType::BF16, rows)];
    for &(ty, dt, rows) in cases {
        for (name, n, k) in [("q/o 2048x2048", 2048usize, 2048usize), ("gate/up 8192x2048", 8192, 2048), ("down 2048x8192", 2048, 8192), ("lm_head 128256x2048", 128256, 2048)] {
            let wbytes = ty.matrix_bytes("bench", n, k)?;
            let host = random_bytes(&mut seed, wbytes);
            // enough copies to exceed the L2 cache (50 MiB on an H100) several times over
            let copies = (512usize << 20).div_ceil(wbytes).clamp(2, 64);
            let ws: Vec<Tensor> = (0..copies).map(|_| Tensor::from_vec(host.clone(), &[wbytes])?.to_device(GPU)).collect::<Result<_>>()?;
            let wp: Vec<u64> = ws.iter().map(|t| elem_ptr("bench", t).map(|p| p.0)).collect::<Result<_>>()?;
            for &m in rows {
                let x = Tensor::randn_on(&[m, k], DType::F32, GPU)?.to_dtype(dt)?;
                let y = Tensor::zeros(&[m, n])?.to_dtype(dt)?.to_device(GPU)?;
                let (xp, yp) = (elem_ptr("bench", &x)?.0, elem_ptr("bench", &y)?.0);
                let g = QuantGemv { ty, dtype: dt, m, n, k };
                let iters = (2_000_000_000 / wbytes).clamp(20, 400);
                // SAFETY: each weight copy holds the matrix's bytes; x and y are live and sized.
                let ms = time(&dev, iters, |i| unsafe { quant_gemv_raw(&dev, &g, wp[i % wp.len()], xp, k, yp, n) })?;
                let moved = (wbytes + dt.size() * m * (k + n)) as f64;
                let gbs = moved / ms / 1e6;
                // the floor: the bytes moved at the copy rate
                let floor_us = moved / copy_gbs / 1e3;
                let tag = if dt == DType::F32 { " f32" } else { "" };
                println!("{ty}{tag} {name} rows={m}: {:.2} us (floor {floor_us:.2} us), {gbs:.0} GB/s = {:.0}% of the copy rate", ms * 1e3, 100.0 * gbs / copy_gbs);
                if ty == QuantType::Q4_K && dt == DType::BF16 && g.rounds_activations() {
                    // a graph of PDL launches of this shape over the weight copies (at least 64)
                    let chunks = k.div_ceil(2048);
                    let mut launches: Vec<(&str, Option<Q8Launch>)> = vec![("default", None)];
                    if m == 1 {
                        for (b, sp, label) in [(1, 1, "1 block/SM, split 1"), (1, 2, "1 block/SM, split 2"), (1, 4, "1 block/SM, split 4"), (2, 1, "2 blocks/SM, split 1"), (2, 2, "2 blocks/SM, split 2"), (2, 4, "2 blocks/SM, split 4")] {
                            if chunks % sp == 0 {
                                launches.push((label, Some(Q8Launch { blocks_per_sm: b, split: sp })));
                            }
                        }
                    }
                    let reps = 64usize.div_ceil(wp.len()) * wp.len();
                    for (label, launch) in launches {
                        let run = || -> Result<()> {
                            for i in 0..reps {
                                let part = QuantPart { w: wp[i % wp.len()], n, y: yp };
                                // SAFETY: as above; no kernel writes a weight.
                                unsafe { quant_gemv_parts_raw(&dev, &g, &[part], xp, k, n, launch, true)? };
                            }
                            Ok(())
                        };
                        run()?;
                        let gr = capture(&dev, run)?;
                        let gms = time(&dev, 10, |_| gr.replay())? / reps as f64;
                        println!("{ty} {name} rows={m} graph + PDL, {label}: {:.2} us, {:.0} GB/s = {:.0}% of the copy rate", gms * 1e3, moved / gms / 1e6, 100.0 * moved / gms / 1e6 / copy_gbs);
                    }
                }
            }
        }
    }
    decode_chain(&dev, copy_gbs, &mut seed)
}

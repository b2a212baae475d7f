//! Flash attention timings on cuda:0: the bf16 prefill (32 query / 8 kv heads, head_dim 64 and
//! 128, causal, GQA) of every tensor-core variant at 4k-100k tokens and a 4096-query chunk at the
//! end of 98k keys (the engine's chunked prefill) in ms and TFLOP/s, then split-KV decode in GB/s
//! of K/V read. `benchmark/flash/sdpa_fwd_torch.py` times PyTorch's SDPA at the same shapes.
//! Arguments: `--prefill-only`, `--variants 2,3` (the head_dim-64 variants; head_dim 128 runs the
//! same numbers that exist), `--seqs 4096,16384`. For diagnosis, not a test.
//!
//!     cargo run --release -p magpie-core --example flash_bench

use magpie_core::backend::cuda::attention::{decode_workspace_bytes, flash_decode, flash_forward, reset_tc_variants, set_tc_variant_d128, set_tc_variant_d64, tc_kernel_name, AttnOperand, Causal, DecodeParams, FlashParams, TC_D64_VARIANTS};
use magpie_core::backend::cuda::device::device;
use magpie_core::backend::cuda::kern::elem_ptr;
use magpie_core::{DType, Device, Error, Result, Tensor};
use std::time::Instant;

const GPU: Device = Device::Cuda(0);

fn buf(shape: &[usize], dt: DType) -> Result<(Tensor, u64)> {
    let t = Tensor::randn_on(shape, DType::F32, GPU)?.to_dtype(dt)?;
    let p = elem_ptr("bench", &t)?.0;
    Ok((t, p))
}

fn opnd(ptr: u64, h: usize, s: usize, d: usize) -> AttnOperand {
    AttnOperand { ptr, sb: (h * s * d) as i64, sh: (s * d) as i64, ss: d as i64 }
}

/// The comma-separated numbers after `flag`, or `default`.
fn list(args: &[String], flag: &str, default: &[usize]) -> Result<Vec<usize>> {
    match args.iter().position(|a| a == flag) {
        None => Ok(default.to_vec()),
        Some(i) => {
            let s = args.get(i + 1).ok_or_else(|| Error::value("flash_bench", format!("{flag} needs a value")))?;
            s.split(',').map(|x| x.trim().parse::<usize>().map_err(|e| Error::value("flash_bench", format!("{flag} {s}: {e}")))).collect()
        }
    }
}

fn main() -> Result<()> {
    if !magpie_core::backend::cuda::is_available() {
        println!("CUDA not available");
        return Ok(());
    }
    let args: Vec<String> = std::env::args().collect();
    let variants = list(&args, "--variants", &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])?;
    let seqs = list(&args, "--seqs", &[4096, 16384, 32768, 100_000])?;
    let dev = device("bench", 0)?;
    println!("device: {:?}, {} SMs", dev, dev.sm_count);
    let dt = DType::BF16;
    let h = 32;
    let kvh = 8;
    for d in [64usize, 128] {
        // (q_len, kv_len): square causal prompts, then the last 4096-token chunk of a 100k prompt
        let mut shapes: Vec<(usize, usize, Causal)> = seqs.iter().map(|&s| (s, s, Causal::TopLeft)).collect();
        shapes.push((4096, 98_304, Causal::BottomRight));
        for (lq, lk, causal) in shapes {
            let (_q, qp) = buf(&[1, h, lq, d], dt)?;
            let (_k, kp) = buf(&[1, kvh, lk, d], dt)?;
            let (_v, vp) = buf(&[1, kvh, lk, d], dt)?;
            let (_o, op) = buf(&[1, h, lq, d], dt)?;
            let p = FlashParams { dtype: dt, batch: 1, n_heads: h, n_kv_heads: kvh, head_dim: d, q_len: lq, kv_len: lk, scale: 1.0 / (d as f32).sqrt(), causal };
            // multiply-adds of the visible (query, key) pairs, 2 products (QK^T, PV), 2 FLOP each
            let off = lk - lq;
            let pairs: f64 = (0..lq).map(|i| (i + off + 1).min(lk) as f64).sum();
            let flops = 4.0 * pairs * h as f64 * d as f64;
            let nv = if d == 64 { TC_D64_VARIANTS } else { 4 };
            for &w in variants.iter().filter(|&&w| w < nv) {
                set_tc_variant_d64(w);
                set_tc_variant_d128(w);
                let name = tc_kernel_name(&dev, &p);
                let run = || flash_forward(&dev, &p, opnd(qp, h, lq, d), opnd(kp, kvh, lk, d), opnd(vp, kvh, lk, d), opnd(op, h, lq, d), None);
                run()?;
                dev.synchronize()?;
                let iters = ((2e13 / flops) as usize).clamp(3, 20);
                let t0 = Instant::now();
                for _ in 0..iters {
                    run()?;
                }
                dev.synchronize()?;
                let ms = t0.elapsed().as_secs_f64() * 1e3 / iters as f64;
                println!("prefill {causal:?} bf16 d={d} H={h} KVH={kvh} q={lq} kv={lk} variant {w} [{name}]: {ms:.3} ms, {:.1} TFLOP/s", flops / ms / 1e9);
            }
            reset_tc_variants();
        }
    }
    if args.iter().any(|a| a == "--prefill-only") {
        return Ok(());
    }
    for (b, h, kvh, d, l) in [(1usize, 32usize, 8usize, 64usize, 32768usize), (1, 32, 8, 128, 32768), (16, 32, 8, 64, 1024), (16, 32, 8, 64, 4096), (64, 32, 8, 64, 1024), (64, 32, 8, 128, 4096)] {
        let (_q, qp) = buf(&[b, h, d], dt)?;
        let (_k, kp) = buf(&[b, kvh, l, d], dt)?;
        let (_v, vp) = buf(&[b, kvh, l, d], dt)?;
        let (_o, op) = buf(&[b, h, d], dt)?;
        let lens = Tensor::from_vec(vec![l as i32; b], &[b])?.to_device(GPU)?;
        let p = DecodeParams { dtype: dt, batch: b, n_heads: h, n_kv_heads: kvh, head_dim: d, max_kv_len: l, scale: 0.125 };
        let n = decode_workspace_bytes(&p);
        let ws = Tensor::zeros_on(&[n], DType::U8, GPU)?;
        let (lp, wp) = (elem_ptr("bench", &lens)?.0, elem_ptr("bench", &ws)?.0);
        let qo = AttnOperand { ptr: qp, sb: (h * d) as i64, sh: d as i64, ss: 0 };
        let run = || flash_decode(&dev, &p, qo, opnd(kp, kvh, l, d), opnd(vp, kvh, l, d), qo_o(op, h, d), lp, wp);
        run()?;
        dev.synchronize()?;
        let iters = 50;
        let t0 = Instant::now();
        for _ in 0..iters {
            run()?;
        }
        dev.synchronize()?;
        let us = t0.elapsed().as_secs_f64() * 1e6 / iters as f64;
        let bytes = 2.0 * (b * kvh * l * d * 2) as f64;
        let plan = magpie_core::backend::cuda::attention::decode_plan(&p, dev.sm_count);
        println!("decode bf16 B={b} H={h} KVH={kvh} d={d} L={l}: {us:.1} us, {:.0} GB/s ({} splits)", bytes / us / 1e3, plan.splits);
    }
    Ok(())
}

fn qo_o(ptr: u64, h: usize, d: usize) -> AttnOperand {
    AttnOperand { ptr, sb: (h * d) as i64, sh: d as i64, ss: 0 }
}

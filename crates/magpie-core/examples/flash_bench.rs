//! Flash attention timings on cuda:0: causal bf16 prefill (head_dim 64, 32 query / 8 kv heads)
//! in ms and TFLOP/s, and split-KV decode in GB/s of K/V read. For diagnosis, not a test.
//!
//!     cargo run --release -p magpie-core --example flash_bench

use magpie_core::backend::cuda::attention::{decode_workspace_bytes, flash_decode, flash_forward, set_tc_variant_d128, set_tc_variant_d64, AttnOperand, Causal, DecodeParams, FlashParams};
use magpie_core::backend::cuda::device::device;
use magpie_core::backend::cuda::kern::elem_ptr;
use magpie_core::{DType, Device, Result, Tensor};
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

fn main() -> Result<()> {
    if !magpie_core::backend::cuda::is_available() {
        println!("CUDA not available");
        return Ok(());
    }
    let dev = device("bench", 0)?;
    println!("device: {:?}, {} SMs", dev, dev.sm_count);
    let dt = DType::BF16;
    for (d, h, kvh) in [(64usize, 32usize, 8usize), (128, 16, 8)] {
        for s in [4096usize, 16384, 65536] {
            let (_q, qp) = buf(&[1, h, s, d], dt)?;
            let (_k, kp) = buf(&[1, kvh, s, d], dt)?;
            let (_v, vp) = buf(&[1, kvh, s, d], dt)?;
            let (_o, op) = buf(&[1, h, s, d], dt)?;
            let p = FlashParams { dtype: dt, batch: 1, n_heads: h, n_kv_heads: kvh, head_dim: d, q_len: s, kv_len: s, scale: 1.0 / (d as f32).sqrt(), causal: Causal::TopLeft };
            let variants: &[(usize, &str)] = if d == 64 { &[(0, "4 warps x 16 rows"), (1, "8 warps x 16 rows"), (2, "4 warps x 32 rows")] } else { &[(0, "P packed late"), (1, "P packed early")] };
            for &(w, label) in variants {
                set_tc_variant_d64(w);
                set_tc_variant_d128(w);
                let run = || flash_forward(&dev, &p, opnd(qp, h, s, d), opnd(kp, kvh, s, d), opnd(vp, kvh, s, d), opnd(op, h, s, d), None);
                run()?;
                dev.synchronize()?;
                let iters = (65536 * 4 / s).clamp(3, 20);
                let t0 = Instant::now();
                for _ in 0..iters {
                    run()?;
                }
                dev.synchronize()?;
                let ms = t0.elapsed().as_secs_f64() * 1e3 / iters as f64;
                let flops = 2.0 * (s as f64) * (s as f64) * h as f64 * d as f64; // causal: half of 4 S^2 H d
                println!("prefill causal bf16 d={d} H={h} KVH={kvh} S={s} [{label}]: {ms:.3} ms, {:.1} TFLOP/s", flops / ms / 1e9);
            }
            set_tc_variant_d64(2);
            set_tc_variant_d128(0);
        }
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

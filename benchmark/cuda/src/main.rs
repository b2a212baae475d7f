//! CUDA ops benchmark, torch-magpie side: the cases of `cases.json`, each timed with CUDA events
//! on the device's stream after warm-up (median of repeats), with the peak memory the case
//! allocated (inputs included, as PyTorch's `max_memory_allocated` after a reset). One JSON line
//! per case on stdout; `run.sh` runs the PyTorch side the same way and writes the ratio table.
//!
//!     bench-cuda benchmark/cuda/cases.json

use cudarc::driver::sys::CUevent_flags;
use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Result, Tensor};
use serde_json::{json, Value};
use std::time::Instant;

const WARMUP: usize = 5;
const REPS: usize = 30;
const DEV: Device = Device::Cuda(0);

fn dtype(s: &str) -> DType {
    match s {
        "bfloat16" => DType::BF16,
        "float16" => DType::F16,
        "float64" => DType::F64,
        _ => DType::F32,
    }
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_u64()).map(|x| x as usize).collect()).unwrap_or_default()
}

/// Random normal values on the GPU (never zeros: they can run faster than real data).
fn rnd(s: &[usize], dt: DType) -> Result<Tensor> {
    Tensor::randn_on(s, DType::F32, DEV)?.to_dtype(dt)
}

type Case = Box<dyn FnMut() -> Result<Tensor>>;

fn build(c: &Value) -> Result<Case> {
    let dt = dtype(c["dtype"].as_str().unwrap_or("float32"));
    let op = c["op"].as_str().unwrap_or("");
    let s = shape(&c["shape"]);
    Ok(match op {
        "copy" => {
            let x = rnd(&s, dt)?;
            let y = rnd(&s, dt)?;
            Box::new(move || y.copy_(&x))
        }
        "add" | "mul" => {
            let (a, b) = (rnd(&s, dt)?, rnd(&s, dt)?);
            let mul = op == "mul";
            Box::new(move || if mul { a.mul(&b) } else { a.add(&b) })
        }
        "sum_rows" | "sum_cols" => {
            let x = rnd(&s, dt)?;
            let d = if op == "sum_rows" { 1 } else { 0 };
            Box::new(move || x.sum_dims(Some(&[d]), false, None))
        }
        "softmax" => {
            let x = rnd(&s, dt)?;
            Box::new(move || x.softmax(-1, None))
        }
        "layer_norm" => {
            let x = rnd(&s, dt)?;
            let n = *s.last().unwrap_or(&1);
            let (w, b) = (rnd(&[n], dt)?, rnd(&[n], dt)?);
            Box::new(move || Ok(magpie_core::ops::nn::norm::native_layer_norm(&x, &[n as i64], Some(&w), Some(&b), 1e-5)?.0))
        }
        "mm" | "mm_ta" | "bmm" => {
            let (a, b) = (rnd(&shape(&c["a"]), dt)?, rnd(&shape(&c["b"]), dt)?);
            let ta = op == "mm_ta";
            Box::new(move || if ta { a.t()?.matmul(&b) } else { a.matmul(&b) })
        }
        _ => return Err(magpie_core::Error::value("bench", format!("unknown op {op}"))),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Median milliseconds of `f` between CUDA events on the device's stream.
fn time_case(dev: &cuda::CudaDevice, f: &mut Case) -> Result<f64> {
    for _ in 0..WARMUP {
        f()?;
    }
    dev.synchronize()?;
    let err = |e: cudarc::driver::DriverError| magpie_core::Error::device("bench", e.to_string());
    let mut evs = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        let s = dev.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
        let e = dev.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
        s.record(&dev.stream).map_err(err)?;
        let out = f()?;
        e.record(&dev.stream).map_err(err)?;
        drop(out);
        evs.push((s, e));
    }
    dev.synchronize()?;
    let mut ms = Vec::with_capacity(REPS);
    for (s, e) in &evs {
        ms.push(s.elapsed_ms(e).map_err(err)? as f64);
    }
    Ok(median(ms))
}

/// Host milliseconds of one small eager op (launch included): a loop of ops, then one sync.
fn overhead(dev: &cuda::CudaDevice, s: &[usize]) -> Result<f64> {
    let (a, b) = (rnd(s, DType::F32)?, rnd(s, DType::F32)?);
    for _ in 0..100 {
        a.add(&b)?;
    }
    dev.synchronize()?;
    let mut res = Vec::new();
    for _ in 0..5 {
        let n = 2000;
        let t0 = Instant::now();
        for _ in 0..n {
            a.add(&b)?;
        }
        let dt = t0.elapsed().as_secs_f64();
        dev.synchronize()?;
        res.push(dt / n as f64 * 1e3);
    }
    Ok(median(res))
}

fn run_case(dev: &cuda::CudaDevice, c: &Value) -> Result<(f64, usize)> {
    let _ng = magpie_core::autograd::no_grad();
    if c["op"] == "overhead" {
        return Ok((overhead(dev, &shape(&c["shape"]))?, 0));
    }
    let mut f = build(c)?;
    dev.synchronize()?;
    cuda::reset_peak_memory_stats(0);
    let ms = time_case(dev, &mut f)?;
    let peak = cuda::max_memory_allocated(0);
    Ok((ms, peak))
}

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| "benchmark/cuda/cases.json".into());
    let cases: Vec<Value> = match std::fs::read_to_string(&path).ok().and_then(|s| serde_json::from_str(&s).ok()) {
        Some(v) => v,
        None => {
            eprintln!("cannot read the cases from {path}");
            std::process::exit(2);
        }
    };
    let dev = match cuda::device::device("bench", 0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no CUDA device: {e}");
            std::process::exit(2);
        }
    };
    // BENCH_SWEEP="u:b,u:b,..": run the cases once per elementwise tuning (vectors in flight per
    // thread, grid cap in blocks per SM; 0 = no cap), names suffixed with the tuning.
    let sweep: Vec<(u32, u32)> = std::env::var("BENCH_SWEEP")
        .ok()
        .map(|s| s.split(',').filter_map(|p| p.split_once(':')).filter_map(|(u, b)| Some((u.trim().parse().ok()?, b.trim().parse().ok()?))).collect())
        .unwrap_or_default();
    if !sweep.is_empty() {
        for (u, b) in sweep {
            cuda::elementwise::set_tuning(u, b);
            for c in &cases {
                let name = format!("{} [unroll {u}, {b} blocks/SM]", c["name"].as_str().unwrap_or("?"));
                let _ = cuda::empty_cache();
                let line = match run_case(&dev, c) {
                    Ok((ms, peak)) => json!({"name": name, "ms": ms, "peak_bytes": peak}),
                    Err(e) => json!({"name": name, "ms": null, "error": e.to_string()}),
                };
                println!("{line}");
            }
        }
        return;
    }
    for c in &cases {
        let name = c["name"].as_str().unwrap_or("?");
        let _ = cuda::empty_cache();
        let line = match run_case(&dev, c) {
            Ok((ms, peak)) => json!({"name": name, "ms": ms, "peak_bytes": peak}),
            Err(e) => json!({"name": name, "ms": null, "error": e.to_string()}),
        };
        println!("{line}");
    }
}

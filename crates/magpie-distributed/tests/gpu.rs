//! NCCL on GPUs: collectives' values and DistributedDataParallel's gradients at world size 1
//! (in this process) and 2 (two processes, one GPU each), and the fault handling: a rank that
//! exits early or hangs ends the other with a clear error within the timeout.
//!
//! Skipped without CUDA/NCCL or with too few GPUs, unless `MAGPIE_REQUIRE_CUDA=1` (world size 1)
//! or `MAGPIE_REQUIRE_GPUS=2` (world size 2) make that a failure.

use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Result, Tensor};
use magpie_distributed::{nccl, DdpConfig, DistEnv, DistributedDataParallel, ProcessGroup, ReduceOp, FAULT_EXIT_CODE};
use magpie_nn::{Linear, ModuleExt, Sequential, Tanh};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// True when `n` GPUs and NCCL are here; panics when the environment requires them.
fn have_gpus(n: usize) -> bool {
    let need_cuda = std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1");
    let need_gpus: usize = std::env::var("MAGPIE_REQUIRE_GPUS").ok().and_then(|v| v.parse().ok()).unwrap_or(if need_cuda { 1 } else { 0 });
    let have = cuda::is_available() && cuda::device_count() >= n && nccl::is_available();
    if !have {
        assert!(n > need_gpus, "{n} GPU(s) with NCCL are required here: CUDA {}, {} GPU(s), NCCL {}", cuda::is_available(), cuda::device_count(), nccl::is_available());
        eprintln!("skipped: needs {n} GPU(s) and NCCL");
    }
    have
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_device(Device::Cpu).unwrap().to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
    }
}

/// A rank-dependent vector: element i of rank r is (r + 1) * (i + 1) - 3.
fn ranked(rank: usize, n: usize, dtype: DType, dev: Device) -> Tensor {
    let v: Vec<f64> = (0..n).map(|i| ((rank + 1) * (i + 1)) as f64 - 3.0).collect();
    Tensor::from_vec(v, &[n]).unwrap().to_dtype(dtype).unwrap().to_device(dev).unwrap()
}

/// Collectives' values against what they must be for this world size.
fn check_collectives(pg: &ProcessGroup) -> Result<()> {
    let (r, w, dev) = (pg.rank(), pg.world_size(), pg.device());
    let n = 1000;
    let expect = |f: &dyn Fn(f64, f64) -> f64, init: f64| -> Vec<f64> {
        (0..n).map(|i| (0..w).map(|q| ((q + 1) * (i + 1)) as f64 - 3.0).fold(init, |a, x| f(a, x))).collect()
    };
    for dt in [DType::F32, DType::BF16, DType::F16, DType::F64, DType::I64] {
        let tol = if matches!(dt, DType::BF16 | DType::F16) { 1e-2 } else { 1e-12 };
        let n_small = if matches!(dt, DType::BF16 | DType::F16) { 64 } else { n };
        let t = ranked(r, n_small, dt, dev);
        pg.all_reduce(&t, ReduceOp::Sum)?.wait()?;
        close(&format!("all_reduce sum {dt}"), &vals(&t), &expect(&|a, x| a + x, 0.0)[..n_small], tol);
        let t = ranked(r, n_small, dt, dev);
        pg.all_reduce(&t, ReduceOp::Max)?.wait()?;
        close(&format!("all_reduce max {dt}"), &vals(&t), &expect(&|a, x| a.max(x), f64::MIN)[..n_small], tol);
        if dt.is_float() {
            let t = ranked(r, n_small, dt, dev);
            pg.all_reduce(&t, ReduceOp::Avg)?.wait()?;
            let avg: Vec<f64> = expect(&|a, x| a + x, 0.0)[..n_small].iter().map(|s| s / w as f64).collect();
            close(&format!("all_reduce avg {dt}"), &vals(&t), &avg, tol);
        }
    }
    // broadcast from the last rank
    let t = ranked(r, n, DType::F32, dev);
    pg.broadcast(&t, w - 1)?.wait()?;
    close("broadcast", &vals(&t), &vals(&ranked(w - 1, n, DType::F32, Device::Cpu)), 0.0);
    // all_gather: every rank's vector in rank order
    let parts = pg.all_gather(&ranked(r, 7, DType::F32, dev))?;
    assert_eq!(parts.len(), w);
    for (q, p) in parts.iter().enumerate() {
        close("all_gather", &vals(p), &vals(&ranked(q, 7, DType::F32, Device::Cpu)), 0.0);
    }
    // reduce_scatter: block r of the sum over ranks of [w * 5] vectors
    let input = ranked(r, w * 5, DType::F32, dev);
    let out = Tensor::zeros_on(&[5], DType::F32, dev)?;
    pg.reduce_scatter_tensor(&out, &input, ReduceOp::Sum)?.wait()?;
    let full: Vec<f64> = (0..w * 5).map(|i| (0..w).map(|q| ((q + 1) * (i + 1)) as f64 - 3.0).sum()).collect();
    close("reduce_scatter", &vals(&out), &full[r * 5..(r + 1) * 5], 1e-12);
    pg.barrier()?;
    // async work: the compute stream keeps going, the result is there after wait()
    let big = Tensor::ones_on(&[1 << 22], DType::F32, dev)?;
    let work = pg.all_reduce(&big, ReduceOp::Sum)?;
    let other = Tensor::ones_on(&[1000], DType::F32, dev)?.mul_scalar(2.0)?;
    work.synchronize()?;
    assert_eq!(vals(&big.sum()?)[0], (w << 22) as f64);
    assert_eq!(vals(&other.sum()?)[0], 2000.0);
    // misuse is an error, not a crash
    let cpu = Tensor::ones(&[3])?;
    assert!(pg.all_reduce(&cpu, ReduceOp::Sum).is_err());
    let nc = Tensor::ones_on(&[4, 4], DType::F32, dev)?.transpose(0, 1)?;
    assert!(pg.all_reduce(&nc, ReduceOp::Sum).unwrap_err().to_string().contains("contiguous"));
    assert!(pg.broadcast(&big, w).is_err());
    assert!(pg.all_gather_into_tensor(&Tensor::zeros_on(&[3], DType::F32, dev)?, &big).is_err());
    Ok(())
}

fn model(dev: Device) -> Sequential {
    magpie_core::ops::random::manual_seed(0);
    let mut m = Sequential::new().add(Linear::new(16, 32, true).unwrap()).add(Tanh).add(Linear::new(32, 8, true).unwrap());
    m.to_device(dev).unwrap();
    m
}

/// Row k of the global batch (rows are spread over ranks in order).
fn rows(from: usize, n: usize, dev: Device) -> (Tensor, Tensor) {
    let x: Vec<f32> = (from * 16..(from + n) * 16).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect();
    let y: Vec<f32> = (from * 8..(from + n) * 8).map(|i| ((i * 13 % 29) as f32 / 14.0) - 1.0).collect();
    (Tensor::from_vec(x, &[n, 16]).unwrap().to_device(dev).unwrap(), Tensor::from_vec(y, &[n, 8]).unwrap().to_device(dev).unwrap())
}

fn mse(m: &Sequential, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    use magpie_nn::Module;
    let d = m.forward(x)?.sub(y)?;
    d.mul(&d)?.mean()
}

/// DDP gradients against one process's full-batch gradients: per-rank batch `b`, bucket caps
/// that give one and several buckets, and `no_sync` accumulation over two micro-batches.
fn check_ddp(pg: &ProcessGroup) -> Result<()> {
    let (r, w, dev) = (pg.rank(), pg.world_size(), pg.device());
    let b = 4;
    for cap in [magpie_distributed::ddp::DEFAULT_BUCKET_BYTES, 600] {
        // reference: the whole global batch on this GPU, no DDP
        let plain = model(dev);
        let (xg, yg) = rows(0, w * b, dev);
        mse(&plain, &xg, &yg)?.backward()?;
        let want: Vec<Vec<f64>> = plain.parameters().iter().map(|p| vals(&p.grad().unwrap())).collect();
        let m = model(dev);
        let ddp = DistributedDataParallel::with_config(&m, pg, DdpConfig { bucket_cap_bytes: cap, ..DdpConfig::default() })?;
        if cap == 600 {
            assert!(ddp.num_buckets() > 2, "{} buckets", ddp.num_buckets());
        }
        let (x, y) = rows(r * b, b, dev);
        ddp.backward(&mse(&m, &x, &y)?)?;
        for (p, g) in m.parameters().iter().zip(&want) {
            close(&format!("ddp grad (cap {cap})"), &vals(&p.grad().unwrap()), g, 1e-5);
        }
        // no_sync: accumulate micro-batch 1 locally, average at micro-batch 2
        for p in m.parameters() {
            p.set_grad(None);
        }
        let h = b / 2;
        {
            let _ns = ddp.no_sync();
            let (x1, y1) = rows(r * b, h, dev);
            mse(&m, &x1, &y1)?.backward()?;
            ddp.finish_gradient_sync()?; // inside no_sync: nothing to do
        }
        let (x2, y2) = rows(r * b + h, h, dev);
        ddp.backward(&mse(&m, &x2, &y2)?)?;
        let plain2 = model(dev);
        let mut total = Tensor::zeros_on(&[], DType::F32, dev)?;
        for q in 0..w {
            for k in 0..2 {
                let (xq, yq) = rows(q * b + k * h, h, dev);
                total = total.add(&mse(&plain2, &xq, &yq)?.div_scalar(w as f64)?)?;
            }
        }
        total.backward()?;
        for (p, q) in m.parameters().iter().zip(plain2.parameters()) {
            close(&format!("no_sync grad (cap {cap})"), &vals(&p.grad().unwrap()), &vals(&q.grad().unwrap()), 1e-5);
        }
        // an update keeps the replicas identical, bit for bit
        {
            let _ng = magpie_core::autograd::no_grad();
            for p in m.parameters() {
                p.sub_(&p.grad().unwrap().mul_scalar(0.1)?)?;
            }
        }
        for p in m.parameters() {
            let all = pg.all_gather(&p.detach().contiguous()?)?;
            for other in &all {
                assert_eq!(vals(other), vals(&p.detach()), "replicas differ after a step");
            }
        }
    }
    Ok(())
}

#[test]
fn world_size_one_collectives_and_ddp() -> Result<()> {
    if !have_gpus(1) {
        return Ok(());
    }
    let env = DistEnv { master_port: free_port(), ..DistEnv::single() };
    let pg = ProcessGroup::init(&env)?;
    assert_eq!((pg.rank(), pg.world_size(), pg.device()), (0, 1, Device::Cuda(0)));
    check_collectives(&pg)?;
    check_ddp(&pg)?;
    pg.shutdown()?;
    assert!(pg.all_reduce(&Tensor::ones_on(&[1], DType::F32, Device::Cuda(0))?, ReduceOp::Sum).is_err(), "no collective after shutdown");
    Ok(())
}

fn spawn_rank(mode: &str, rank: usize, port: u16, timeout_s: u32) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["gpu_worker", "--exact", "--ignored", "--nocapture", "--test-threads", "1"])
        .env("MAGPIE_TEST_WORKER", mode)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", rank.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("MAGPIE_DIST_TIMEOUT", timeout_s.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `c` up to `limit`; kills it past that. Returns (exit code, stderr, seconds).
fn finish(mut c: Child, limit: Duration) -> (Option<i32>, String, f64) {
    let t0 = Instant::now();
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            let out = c.wait_with_output().unwrap();
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            return (s.code(), text, t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > limit {
            let _ = c.kill();
            let out = c.wait_with_output().unwrap();
            return (None, format!("KILLED after {limit:?}\n{}", String::from_utf8_lossy(&out.stderr)), t0.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn world_size_two_collectives_and_ddp() {
    if !have_gpus(2) {
        return;
    }
    let port = free_port();
    let kids: Vec<Child> = (0..2).map(|r| spawn_rank("check", r, port, 120)).collect();
    for (r, c) in kids.into_iter().enumerate() {
        let (code, out, _) = finish(c, Duration::from_secs(240));
        assert_eq!(code, Some(0), "rank {r}:\n{out}");
    }
}

#[test]
fn a_rank_that_exits_early_ends_the_other_with_a_clear_error() {
    if !have_gpus(2) {
        return;
    }
    let port = free_port();
    let r0 = spawn_rank("exit-early", 0, port, 60);
    let r1 = spawn_rank("exit-early", 1, port, 60);
    let (c1, out1, _) = finish(r1, Duration::from_secs(120));
    assert_eq!(c1, Some(3), "rank 1 exits by itself:\n{out1}");
    let (c0, out0, secs) = finish(r0, Duration::from_secs(120));
    assert_eq!(c0, Some(FAULT_EXIT_CODE), "rank 0:\n{out0}");
    assert!(out0.contains("rank 1 ended unexpectedly"), "{out0}");
    eprintln!("rank 0 ended {secs:.1} s after start");
}

#[test]
fn a_hung_rank_ends_the_other_at_the_timeout() {
    if !have_gpus(2) {
        return;
    }
    let port = free_port();
    let timeout = 5;
    let r0 = spawn_rank("hang", 0, port, timeout);
    let r1 = spawn_rank("hang", 1, port, timeout);
    let (c0, out0, secs0) = finish(r0, Duration::from_secs(120));
    assert_eq!(c0, Some(FAULT_EXIT_CODE), "rank 0:\n{out0}");
    assert!(out0.contains("did not finish within the timeout of 5 s"), "{out0}");
    // the hung rank notices rank 0's exit through the rendezvous connection
    let (c1, out1, secs1) = finish(r1, Duration::from_secs(60));
    assert_eq!(c1, Some(FAULT_EXIT_CODE), "rank 1:\n{out1}");
    assert!(out1.contains("rank 0 ended unexpectedly"), "{out1}");
    eprintln!("rank 0 ended after {secs0:.1} s, rank 1 {secs1:.1} s later");
}

/// Not a test: one rank of the two-process tests above (`MAGPIE_TEST_WORKER` says which).
#[test]
#[ignore]
fn gpu_worker() -> Result<()> {
    let mode = std::env::var("MAGPIE_TEST_WORKER").unwrap_or_default();
    let pg = ProcessGroup::init_from_env()?;
    match mode.as_str() {
        "check" => {
            check_collectives(&pg)?;
            check_ddp(&pg)?;
        }
        "exit-early" | "hang" => {
            let t = Tensor::ones_on(&[1024], DType::F32, pg.device())?;
            for i in 0..100_000 {
                if pg.rank() == 1 && i == 5 {
                    if mode == "exit-early" {
                        std::process::exit(3);
                    }
                    std::thread::sleep(Duration::from_secs(600));
                }
                pg.all_reduce(&t, ReduceOp::Avg)?.synchronize()?;
            }
            panic!("rank {} finished every collective although its peer stopped", pg.rank());
        }
        m => panic!("unknown worker mode {m:?}"),
    }
    pg.shutdown()
}

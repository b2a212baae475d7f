//! GPT training throughput at 1 and N GPUs (the `gpt` case of benchmark/train: 6 layers, 6 heads,
//! n_embd 384, context 256, vocab 96, AdamW 0.9/0.95 with weight decay 0.1 on matrices, lr 1e-3,
//! gradient clipping at 1.0), `--batch` rows per GPU. With `--nproc-per-node N` (N > 1) this
//! program starts N copies of itself through `magpie_distributed::launch`; each rank wraps the
//! model in `DistributedDataParallel` (25 MB buckets, averaging overlapped with backward) and
//! trains on its own fixed batch. With N = 1 it trains one GPU without any distributed code (the
//! baseline of the scaling efficiency). Each dtype runs `--warmup` steps, then `--steps` timed
//! steps, each ended by reading the loss back; rank 0 prints one JSON line per dtype: the median
//! step time and tokens/s over all ranks.
//!
//!     ddp-bench [--nproc-per-node N] [--dtypes float32,bfloat16] [--batch 64] [--warmup 5] [--steps 30]

use magpie_core::backend::cuda;
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_distributed::{launch, DistEnv, DistributedDataParallel, LaunchConfig, ProcessGroup};
use magpie_models::gpt::{Gpt, GptConfig};
use magpie_nn::ModuleExt;
use magpie_optim::{AdamConfig, AdamW, Optimizer};
use serde_json::json;
use std::time::Instant;

struct Args {
    nproc: usize,
    dtypes: Vec<String>,
    batch: usize,
    warmup: usize,
    steps: usize,
    port: u16,
}

fn parse() -> Result<Args> {
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args { nproc: 1, dtypes: vec!["float32".into(), "bfloat16".into()], batch: 64, warmup: 5, steps: 30, port: 29510 };
    let bad = |m: String| Error::value("ddp-bench", m);
    let mut i = 0;
    while i < v.len() {
        let val = v.get(i + 1).ok_or_else(|| bad(format!("{} needs a value", v[i])))?;
        let num = || val.parse::<usize>().map_err(|_| bad(format!("{} expects a number, got {val}", v[i])));
        match v[i].as_str() {
            "--nproc-per-node" => a.nproc = num()?.max(1),
            "--dtypes" => a.dtypes = val.split(',').map(str::to_string).collect(),
            "--batch" => a.batch = num()?.max(1),
            "--warmup" => a.warmup = num()?,
            "--steps" => a.steps = num()?.max(1),
            "--master-port" => a.port = num()? as u16,
            f => return Err(bad(format!("unknown flag {f}"))),
        }
        i += 2;
    }
    Ok(a)
}

/// Rank `rank`'s fixed batch: token k of row r is (7r + 3k + 11 rank + shift) mod vocab.
fn batch(b: usize, t: usize, vocab: usize, shift: usize, rank: usize, dev: Device) -> Result<Tensor> {
    let x: Vec<i64> = (0..b * t).map(|k| ((7 * (k / t) + 3 * (k % t) + 11 * rank + shift) % vocab) as i64).collect();
    Tensor::from_vec(x, &[b, t])?.to_device(dev)
}

fn run_dtype(a: &Args, dtype: &str, dev: Device, pg: Option<&ProcessGroup>) -> Result<serde_json::Value> {
    let (layers, heads, embd, t, vocab) = (6, 6, 384, 256, 96);
    let cfg = GptConfig { vocab_size: vocab, block_size: t, n_layer: layers, n_head: heads, n_embd: embd, dropout: 0.0 };
    magpie_core::ops::random::manual_seed(0);
    let mut model = Gpt::new(cfg)?;
    model.to_device(dev)?;
    let ddp = match pg {
        Some(pg) => Some(DistributedDataParallel::new(&model, pg)?),
        None => None,
    };
    let (decay, no_decay) = model.decay_groups();
    let ac = AdamConfig { lr: 1e-3, betas: (0.9, 0.95), weight_decay: 0.1, ..AdamConfig::adamw() };
    let mut opt = AdamW::new(decay, ac.clone())?;
    opt.add_param_group(no_decay, AdamConfig { weight_decay: 0.0, ..ac })?;
    let rank = pg.map_or(0, |p| p.rank());
    let world = pg.map_or(1, |p| p.world_size());
    let (x, y) = (batch(a.batch, t, vocab, 0, rank, dev)?, batch(a.batch, t, vocab, 3, rank, dev)?);
    let params = model.parameters();
    let mut step = || -> Result<f64> {
        let loss = {
            let _ac = match dtype {
                "float32" => None,
                "bfloat16" => Some(magpie_core::amp::autocast(dev, Some(DType::BF16), true)?),
                d => return Err(Error::value("ddp-bench", format!("unsupported dtype {d} (float32, bfloat16)"))),
            };
            model.loss(&x, &y)?
        };
        opt.zero_grad();
        match &ddp {
            Some(d) => d.backward(&loss)?,
            None => loss.backward()?,
        }
        magpie_nn::utils::clip_grad_norm_(&params, 1.0, 2.0, false)?;
        opt.step()?;
        Ok(loss.item()?.to_f64())
    };
    let mut loss = 0.0;
    for _ in 0..a.warmup {
        loss = step()?;
    }
    cuda::synchronize(Some(dev))?;
    let mut ms = Vec::with_capacity(a.steps);
    for _ in 0..a.steps {
        let t0 = Instant::now();
        loss = step()?;
        cuda::synchronize(Some(dev))?;
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(|p, q| p.total_cmp(q));
    let med = ms[ms.len() / 2];
    let n = model.num_parameters();
    let tokens = a.batch * t * world;
    Ok(json!({"impl": "torch-magpie", "case": "gpt", "dtype": dtype, "world_size": world, "batch_per_gpu": a.batch,
              "step_ms": med, "tokens_per_s": tokens as f64 / med * 1e3, "params": n, "grad_bytes": 4 * n,
              "buckets": ddp.as_ref().map_or(0, |d| d.num_buckets()), "loss": loss,
              "nccl": magpie_distributed::nccl::version().unwrap_or_default()}))
}

fn main() {
    let res = (|| -> Result<()> {
        let a = parse()?;
        if !DistEnv::is_launched() && a.nproc > 1 {
            let cfg = LaunchConfig { nproc_per_node: a.nproc, master_port: a.port, ..LaunchConfig::default() };
            let exe = std::env::current_exe().map_err(|e| Error::io("ddp-bench", e.to_string()))?;
            let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
            return launch::launch(&cfg, &exe, &args);
        }
        let (pg, dev) = if DistEnv::is_launched() {
            let pg = ProcessGroup::init_from_env()?;
            let d = pg.device();
            (Some(pg), d)
        } else {
            (None, Device::Cuda(0))
        };
        for dt in &a.dtypes {
            let r = run_dtype(&a, dt, dev, pg.as_ref())?;
            if pg.as_ref().is_none_or(|p| p.rank() == 0) {
                println!("{r}");
            }
        }
        if let Some(pg) = pg {
            pg.shutdown()?;
        }
        Ok(())
    })();
    if let Err(e) = res {
        eprintln!("ddp-bench: {e}");
        std::process::exit(1);
    }
}

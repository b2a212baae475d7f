//! `magpie train`: trains a small GPT on a corpus (by default this project's own Rust sources,
//! embedded at build time) with a progress bar, periodic validation against the unigram
//! baseline, checkpoints, and a generated sample at the end.
//!
//! Data parallel: `--nproc-per-node N` starts N copies of this command (one per GPU) through
//! `magpie_distributed::launch`; a copy started with `RANK` set (by that launcher or torchrun)
//! joins the job, trains on its share of each global batch of `--batch-size` rows, and only
//! rank 0 prints, writes checkpoints and samples.

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use magpie_core::{Error, Result};
use magpie_distributed::{launch, DistEnv, LaunchConfig, ProcessGroup};
use magpie_models::data::{Dataset, Split};
use magpie_models::generate::{generate_char as generate, SampleConfig};
use magpie_models::gpt::GptConfig;
use magpie_models::tokenizer::CharTokenizer;
use magpie_models::trainer::{corpus_id, TrainConfig, Trainer};
use magpie_nn::ModuleExt;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// The built-in corpus: this project's sources, concatenated by build.rs.
pub const BUILTIN_CORPUS: &str = include_str!(concat!(env!("OUT_DIR"), "/corpus.txt"));

/// `magpie train` flags. Model and training flags left out take the defaults below, or the
/// checkpoint's values with `--resume`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Text file to train on (UTF-8). Default: the built-in corpus (this project's Rust sources).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Optimizer steps [default: 500].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Sequences per batch [default: 16].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Context length in characters [default: 64].
    #[arg(long)]
    pub block_size: Option<usize>,
    /// Transformer blocks [default: 2].
    #[arg(long)]
    pub n_layer: Option<usize>,
    /// Attention heads per block [default: 4].
    #[arg(long)]
    pub n_head: Option<usize>,
    /// Embedding width [default: 128].
    #[arg(long)]
    pub n_embd: Option<usize>,
    /// Dropout probability [default: 0].
    #[arg(long)]
    pub dropout: Option<f64>,
    /// Peak learning rate (warmup, then cosine decay to a tenth) [default: 3e-3].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Device: cpu or cuda [default: cpu].
    #[arg(long)]
    pub device: Option<String>,
    /// float32 or float64 (the parameters), or bfloat16 / float16: float32 parameters with the
    /// forward under autocast (float16 with dynamic loss scaling) [default: float32].
    #[arg(long)]
    pub dtype: Option<String>,
    /// Random seed (initialisation, dropout, batch order) [default: 1337].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Checkpoint folder to write.
    #[arg(long, default_value = "checkpoints/gpt")]
    pub out: PathBuf,
    /// Resume from this checkpoint folder (model, optimizer, scheduler, RNG and step).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Validation every N steps (0 = only at the end).
    #[arg(long, default_value_t = 100)]
    pub eval_every: usize,
    /// Checkpoint every N steps (0 = only at the end).
    #[arg(long, default_value_t = 0)]
    pub save_every: usize,
    /// Characters to generate at the end (0 = none).
    #[arg(long, default_value_t = 300)]
    pub sample_tokens: usize,
    /// End this run after N steps (the schedule still spans --steps) with a checkpoint, for
    /// --resume to continue, at any world size (0 = run to the end).
    #[arg(long, default_value_t = 0)]
    pub stop_after: usize,
    /// Append each step's training loss to this file as JSON lines ({"step": N, "loss": L}).
    #[arg(long)]
    pub loss_log: Option<PathBuf>,
    /// Data parallel: start this many processes on this node, one per GPU (needs --device cuda).
    /// --batch-size is then the global batch, split evenly over all ranks.
    #[arg(long)]
    pub nproc_per_node: Option<usize>,
    /// Data parallel over several machines: the number of nodes (run the same command on each).
    #[arg(long, default_value_t = 1)]
    pub nnodes: usize,
    /// This node's index, 0..nnodes.
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Address of node 0, where rank 0 listens (needed with --nnodes above 1) [default: 127.0.0.1].
    #[arg(long)]
    pub master_addr: Option<String>,
    /// Port rank 0 listens on.
    #[arg(long, default_value_t = 29500)]
    pub master_port: u16,
}

fn read_corpus(path: &Option<PathBuf>) -> Result<(String, String)> {
    match path {
        None => Ok((BUILTIN_CORPUS.to_string(), "built-in corpus (torch-magpie's Rust sources)".to_string())),
        Some(p) => {
            let bytes = std::fs::read(p).map_err(|e| Error::io("train", format!("cannot read corpus {}: {e}", p.display())))?;
            let text = String::from_utf8(bytes).map_err(|_| Error::value("train", format!("corpus {} is not UTF-8 text", p.display())))?;
            if text.is_empty() {
                return Err(Error::value("train", format!("corpus {} is empty", p.display())));
            }
            Ok((text, p.display().to_string()))
        }
    }
}

fn explicit_model_flags(a: &TrainArgs) -> Vec<&'static str> {
    let mut v = Vec::new();
    for (set, name) in [
        (a.steps.is_some(), "--steps"),
        (a.batch_size.is_some(), "--batch-size"),
        (a.block_size.is_some(), "--block-size"),
        (a.n_layer.is_some(), "--n-layer"),
        (a.n_head.is_some(), "--n-head"),
        (a.n_embd.is_some(), "--n-embd"),
        (a.dropout.is_some(), "--dropout"),
        (a.lr.is_some(), "--lr"),
        (a.dtype.is_some(), "--dtype"),
        (a.device.is_some(), "--device"),
        (a.seed.is_some(), "--seed"),
    ] {
        if set {
            v.push(name);
        }
    }
    v
}

fn fmt_params(n: usize) -> String {
    if n >= 1_000_000 {
        format!("{:.2}M", n as f64 / 1e6)
    } else {
        format!("{:.1}K", n as f64 / 1e3)
    }
}

/// Runs `magpie train`: as the launcher of `--nproc-per-node` ranks, as one rank of a job
/// (`RANK` set), or as a plain single-process run.
pub fn run(a: TrainArgs) -> Result<()> {
    let cuda_device = |a: &TrainArgs| -> Result<()> {
        match a.device.as_deref() {
            None => Ok(()),
            Some(d) if d == "cuda" || d.starts_with("cuda:") => Ok(()),
            Some(d) => Err(Error::value("train", format!("data-parallel training runs on GPUs (--device cuda), not --device {d}"))),
        }
    };
    if DistEnv::is_launched() {
        cuda_device(&a)?;
        let env = DistEnv::from_env()?;
        let pg = ProcessGroup::init(&env)?;
        let res = train(a, Some((&env, &pg)));
        if res.is_ok() {
            // a clean goodbye, so the other ranks do not take this exit for a crash
            pg.shutdown()?;
        }
        return res;
    }
    if let Some(n) = a.nproc_per_node {
        let cfg = LaunchConfig {
            nproc_per_node: n,
            nnodes: a.nnodes,
            node_rank: a.node_rank,
            master_addr: a.master_addr.clone().unwrap_or_else(|| "127.0.0.1".into()),
            master_port: a.master_port,
            ..LaunchConfig::default()
        };
        cfg.validate(a.master_addr.is_some())?;
        if a.device.is_none() && a.resume.is_none() {
            return Err(Error::value("train", "--nproc-per-node needs --device cuda (one process per GPU)"));
        }
        cuda_device(&a)?;
        magpie_core::backend::cuda::require("train")?;
        let gpus = magpie_core::backend::cuda::device_count();
        if n > gpus {
            return Err(Error::value("train", format!("--nproc-per-node {n} needs {n} GPUs, this machine has {gpus}")));
        }
        let exe = std::env::current_exe().map_err(|e| Error::io("train", format!("cannot find this program to start the ranks: {e}")))?;
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        return launch::launch(&cfg, &exe, &args);
    }
    if a.nnodes != 1 || a.node_rank != 0 || a.master_addr.is_some() {
        return Err(Error::value("train", "--nnodes, --node-rank and --master-addr need --nproc-per-node"));
    }
    train(a, None)
}

fn train(a: TrainArgs, dist: Option<(&DistEnv, &ProcessGroup)>) -> Result<()> {
    let (text, corpus_name) = read_corpus(&a.corpus)?;
    // each rank on its own GPU, whatever the checkpoint or --device say
    let rank_device = dist.map(|(e, _)| format!("cuda:{}", e.local_rank));
    let mut trainer = match &a.resume {
        Some(dir) => {
            let flags = explicit_model_flags(&a);
            if !flags.is_empty() {
                return Err(Error::value("train", format!("{} cannot be combined with --resume (the checkpoint fixes them)", flags.join(", "))));
            }
            let tok = magpie_models::trainer::load_for_inference(dir)?.1;
            let ids = tok.encode(&text).map_err(|e| Error::value("train", format!("the corpus does not fit the checkpoint's tokenizer: {e}")))?;
            let t = Trainer::load_on(dir, Some(corpus_id(&ids)), rank_device.as_deref())?;
            if t.step >= t.config.steps {
                return Err(Error::value("train", format!("checkpoint {} already finished its {} steps", dir.display(), t.config.steps)));
            }
            t
        }
        None => {
            let tok = CharTokenizer::fit(&text)?;
            let ids = tok.encode(&text)?;
            let mcfg = GptConfig {
                vocab_size: tok.vocab_size(),
                block_size: a.block_size.unwrap_or(64),
                n_layer: a.n_layer.unwrap_or(2),
                n_head: a.n_head.unwrap_or(4),
                n_embd: a.n_embd.unwrap_or(128),
                dropout: a.dropout.unwrap_or(0.0),
            };
            mcfg.validate()?;
            let lr = a.lr.unwrap_or(3e-3);
            let steps = a.steps.unwrap_or(500);
            let tcfg = TrainConfig {
                steps,
                batch_size: a.batch_size.unwrap_or(16),
                lr,
                min_lr: lr / 10.0,
                warmup_steps: (steps / 20).min(100),
                seed: a.seed.unwrap_or(1337),
                dtype: a.dtype.clone().unwrap_or_else(|| "float32".into()),
                device: rank_device.clone().or_else(|| a.device.clone()).unwrap_or_else(|| "cpu".into()),
                ..TrainConfig::default()
            };
            tcfg.validate()?;
            Trainer::new(mcfg, tcfg, tok, corpus_id(&ids))?
        }
    };
    if let Some((_, pg)) = dist {
        trainer.distribute(pg)?;
    }
    let main = trainer.is_main();
    // only rank 0 talks
    macro_rules! say {
        ($($t:tt)*) => { if main { println!($($t)*); } };
    }
    let ids = trainer.tokenizer.encode(&text)?;
    let data = Dataset::new(ids, trainer.config.val_fraction, trainer.model.config.block_size)?;
    let baseline = data.unigram_entropy(trainer.tokenizer.vocab_size());
    let (mc, tc) = (trainer.model.config.clone(), trainer.config.clone());
    if let Some((e, _)) = dist {
        say!("data parallel: {} ranks ({} per node), {} rows of each batch of {} per rank", e.world_size, e.local_world_size, tc.batch_size / e.world_size, tc.batch_size);
    }
    say!(
        "corpus: {corpus_name}: {} characters, vocabulary {} ({} train / {} val tokens)",
        text.chars().count(),
        mc.vocab_size,
        data.train.len(),
        data.val.len()
    );
    say!(
        "model: GPT, {} layers, {} heads, n_embd {}, block {}, {} parameters ({}, {})",
        mc.n_layer,
        mc.n_head,
        mc.n_embd,
        mc.block_size,
        fmt_params(trainer.model.num_parameters()),
        match tc.autocast_dtype() {
            Some(d) => format!("float32 parameters, {} autocast{}", d.name(), if d == magpie_core::DType::F16 { " with loss scaling" } else { "" }),
            None => tc.dtype.clone(),
        },
        tc.device
    );
    say!(
        "training: {} steps of {}x{} tokens, AdamW lr {:.1e} (warmup {}, cosine to {:.1e}), seed {}{}",
        tc.steps,
        tc.batch_size,
        mc.block_size,
        tc.lr,
        tc.warmup_steps,
        tc.min_lr,
        tc.seed,
        if trainer.step > 0 { format!(", resuming at step {}", trainer.step) } else { String::new() }
    );
    say!("unigram baseline (entropy of the training characters): {baseline:.4} nats");

    let bar = if main { ProgressBar::new(tc.steps as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed_precise} < {eta}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_position(trainer.step as u64);
    let tokens_per_step = (tc.batch_size * mc.block_size) as f64;
    let t0 = Instant::now();
    let start_step = trainer.step;
    let mut last_val = None;
    let stop_at = if a.stop_after > 0 { (start_step + a.stop_after).min(tc.steps) } else { tc.steps };
    while trainer.step < stop_at {
        let loss = trainer.train_step(&data)?;
        if let (true, Some(p)) = (main, &a.loss_log) {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(p).map_err(|e| Error::io("train", format!("cannot write {}: {e}", p.display())))?;
            writeln!(f, "{{\"step\": {}, \"loss\": {loss}}}", trainer.step).map_err(|e| Error::io("train", format!("cannot write {}: {e}", p.display())))?;
        }
        let done = trainer.step - start_step;
        let tps = done as f64 * tokens_per_step / t0.elapsed().as_secs_f64().max(1e-9);
        bar.set_position(trainer.step as u64);
        bar.set_message(format!("loss {loss:.4} | {tps:.0} tok/s"));
        let last = trainer.step == tc.steps;
        if (a.eval_every > 0 && trainer.step % a.eval_every == 0) || last {
            let tr = trainer.evaluate(&data, Split::Train)?;
            let va = trainer.evaluate(&data, Split::Val)?;
            last_val = Some(va);
            bar.suspend(|| {
                say!("step {:>5}: train loss {tr:.4}, val loss {va:.4} (unigram baseline {baseline:.4}), lr {:.2e}, {tps:.0} tok/s", trainer.step, trainer.lr())
            });
        }
        if main && ((a.save_every > 0 && trainer.step % a.save_every == 0) || last) {
            trainer.save(&a.out)?;
            if !last {
                bar.suspend(|| println!("step {:>5}: checkpoint saved to {}", trainer.step, a.out.display()));
            }
        }
    }
    bar.finish_and_clear();
    if !main {
        return Ok(());
    }
    if trainer.step < tc.steps {
        trainer.save(&a.out)?;
        println!("stopped after {} steps at step {} of {}; checkpoint in {} (continue with --resume {})", trainer.step - start_step, trainer.step, tc.steps, a.out.display(), a.out.display());
        return Ok(());
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "done: {} steps in {secs:.1} s ({:.0} tokens/s); final val loss {:.4} vs unigram baseline {baseline:.4}; checkpoint in {}",
        tc.steps - start_step,
        (tc.steps - start_step) as f64 * tokens_per_step / secs.max(1e-9),
        last_val.unwrap_or(f64::NAN),
        a.out.display()
    );
    if trainer.model.wte.weight.device().is_cuda() {
        report_cuda_paths()?;
    }
    if a.sample_tokens > 0 {
        let prompt = "fn ";
        let prompt_ids = trainer.tokenizer.encode(prompt).unwrap_or_else(|_| data.val[..1].to_vec());
        trainer.model.eval();
        println!("sample (temperature 0.8, top-k 40):\n---");
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{}", trainer.tokenizer.decode(&prompt_ids));
        let cfg = SampleConfig { max_new_tokens: a.sample_tokens, temperature: 0.8, top_k: Some(40), top_p: None, seed: tc.seed };
        let tok = trainer.tokenizer.clone();
        generate(&trainer.model, &prompt_ids, &cfg, |id| {
            let _ = write!(out, "{}", tok.decode(&[id]));
            let _ = out.flush();
            Ok(())
        })?;
        let _ = writeln!(out, "\n---");
        println!("more: magpie sample --checkpoint {} --prompt \"fn \"", a.out.display());
    }
    Ok(())
}

/// After a CUDA run: registry calls that fell back to the CPU and optimizer updates that took
/// the host round trip (both 0 when the step ran natively), also written to
/// `$MAGPIE_FALLBACK_LOG` (one `op native fallback` line per op) when it is set.
fn report_cuda_paths() -> Result<()> {
    let counts = magpie_core::backend::cuda::fallback_counts();
    let fell: Vec<String> = counts.iter().filter(|c| c.2 > 0).map(|c| format!("{} x{}", c.0, c.2)).collect();
    println!(
        "cuda: {} registry ops fell back to the CPU{}; optimizer host round trips: {}",
        fell.len(),
        if fell.is_empty() { String::new() } else { format!(" ({})", fell.join(", ")) },
        magpie_optim::host_round_trips()
    );
    if let Ok(path) = std::env::var("MAGPIE_FALLBACK_LOG") {
        let mut s = String::new();
        for (op, native, fallback) in &counts {
            s.push_str(&format!("{op} {native} {fallback}\n"));
        }
        s.push_str(&format!("# optimizer_host_round_trips {}\n", magpie_optim::host_round_trips()));
        std::fs::write(&path, s).map_err(|e| Error::io("train", format!("cannot write {path}: {e}")))?;
    }
    Ok(())
}

//! `magpie train`: trains a small GPT (`--model gpt`, next characters) or BERT (`--model bert`,
//! masked-language-model pretraining) on a corpus (by default this project's own Rust sources,
//! embedded at build time) with a progress bar, periodic validation against the unigram
//! baseline, checkpoints, and at the end a generated sample (GPT) or fill-mask predictions (BERT).
//!
//! Data parallel: `--nproc-per-node N` starts N copies of this command (one per GPU) through
//! `magpie_distributed::launch`; a copy started with `RANK` set (by that launcher or torchrun)
//! joins the job, trains on its share of each global batch of `--batch-size` rows, and only
//! rank 0 prints, writes checkpoints and samples.

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use magpie_core::{Error, Result};
use magpie_distributed::{launch, DistEnv, LaunchConfig, ProcessGroup};
use magpie_models::bert::BertForMaskedLM;
use magpie_models::bert_mlm::{bert_config, fill_mask};
use magpie_models::config::BertConfig;
use magpie_models::data::{Dataset, Split};
use magpie_models::generate::{generate_char as generate, SampleConfig};
use magpie_models::gpt::{Gpt, GptConfig};
use magpie_models::mlm_vocab::MlmTokenizer;
use magpie_models::tokenizer::CharTokenizer;
use magpie_models::train_model::{TrainModel, TrainTokenizer};
use magpie_models::trainer::{checkpoint_kind, checkpoint_tokenizer, corpus_id, TrainConfig, Trainer};
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
    /// gpt (a next-character language model) or bert (masked-language-model pretraining of a
    /// BertForMaskedLM) [default: gpt, or the checkpoint's with --resume].
    #[arg(long)]
    pub model: Option<String>,
    /// With --model bert: a WordPiece tokenizer.json (e.g. all-MiniLM's). Default: the corpus'
    /// characters plus [PAD] [UNK] [CLS] [SEP] [MASK].
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Text file to train on (UTF-8). Default: the built-in corpus (this project's Rust sources).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Optimizer steps [default: 500].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Sequences per batch [default: 16].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Context length in tokens (BERT: the sequence with [CLS] and [SEP], its positions) [default: 64].
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
    /// Peak learning rate (warmup, then cosine decay to a tenth) [default: 3e-3, BERT 1e-3].
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
    /// Checkpoint folder to write [default: checkpoints/gpt or checkpoints/bert].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Resume from this checkpoint folder (model, optimizer, scheduler, RNG and step).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Validation every N steps (0 = only at the end).
    #[arg(long, default_value_t = 100)]
    pub eval_every: usize,
    /// Checkpoint every N steps (0 = only at the end).
    #[arg(long, default_value_t = 0)]
    pub save_every: usize,
    /// GPT: characters to generate at the end (0 = none).
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
    /// Replay whole training steps from one CUDA graph (needs --device cuda; float32 or
    /// bfloat16, no dropout, one GPU): 3 eager warm-up steps, one capture, then one launch per
    /// step. The loss is read back only at log points (every 10 steps, evaluations, --loss-log).
    #[arg(long)]
    pub cuda_graph: bool,
    /// Log loss/train, loss/val and lr to TensorBoard event files in this folder.
    #[arg(long)]
    pub tensorboard: Option<PathBuf>,
    /// Profile steps 4 to 6 of this run (after 1 idle and 2 warm-up steps) and write their
    /// Chrome trace to this .json file; prints the key_averages table.
    #[arg(long)]
    pub profile: Option<PathBuf>,
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
        (a.tokenizer.is_some(), "--tokenizer"),
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

/// What `magpie train` needs per model kind beyond [`TrainModel`]: the config and tokenizer of a
/// fresh run from the flags, the model's line of the header, and what to show at the end.
trait CliModel: TrainModel {
    /// The config and tokenizer of a fresh run on `text`.
    fn fresh(a: &TrainArgs, text: &str) -> Result<(Self::Config, Self::Tokenizer)>;
    /// "GPT, 2 layers, ..." for the header.
    fn describe(cfg: &Self::Config) -> String;
    /// How the vocabulary is made, for the header.
    fn vocab_kind(tok: &Self::Tokenizer) -> &'static str;
    /// After the last step (rank 0 only): a sample, or fill-mask predictions.
    fn show(trainer: &mut Trainer<Self>, data: &Dataset, a: &TrainArgs, out: &std::path::Path) -> Result<()>;
}

impl CliModel for Gpt {
    fn fresh(a: &TrainArgs, text: &str) -> Result<(GptConfig, CharTokenizer)> {
        let tok = CharTokenizer::fit(text)?;
        let mcfg = GptConfig {
            vocab_size: tok.vocab_size(),
            block_size: a.block_size.unwrap_or(64),
            n_layer: a.n_layer.unwrap_or(2),
            n_head: a.n_head.unwrap_or(4),
            n_embd: a.n_embd.unwrap_or(128),
            dropout: a.dropout.unwrap_or(0.0),
        };
        mcfg.validate()?;
        Ok((mcfg, tok))
    }
    fn describe(mc: &GptConfig) -> String {
        format!("GPT, {} layers, {} heads, n_embd {}, block {}", mc.n_layer, mc.n_head, mc.n_embd, mc.block_size)
    }
    fn vocab_kind(_: &CharTokenizer) -> &'static str {
        "characters"
    }
    fn show(trainer: &mut Trainer<Gpt>, data: &Dataset, a: &TrainArgs, out: &std::path::Path) -> Result<()> {
        if a.sample_tokens == 0 {
            return Ok(());
        }
        let prompt = "fn ";
        let prompt_ids = trainer.tokenizer.encode(prompt).unwrap_or_else(|_| data.val[..1].to_vec());
        trainer.model.eval();
        println!("sample (temperature 0.8, top-k 40):\n---");
        let mut so = std::io::stdout().lock();
        let _ = write!(so, "{}", trainer.tokenizer.decode(&prompt_ids));
        let cfg = SampleConfig { max_new_tokens: a.sample_tokens, temperature: 0.8, top_k: Some(40), top_p: None, seed: trainer.config.seed };
        let tok = trainer.tokenizer.clone();
        generate(&trainer.model, &prompt_ids, &cfg, |id| {
            let _ = write!(so, "{}", tok.decode(&[id]));
            let _ = so.flush();
            Ok(())
        })?;
        let _ = writeln!(so, "\n---");
        println!("more: magpie sample --checkpoint {} --prompt \"fn \"", out.display());
        Ok(())
    }
}

impl CliModel for BertForMaskedLM {
    fn fresh(a: &TrainArgs, text: &str) -> Result<(BertConfig, MlmTokenizer)> {
        let tok = match &a.tokenizer {
            // the tokenizer's errors name the file given to --tokenizer
            Some(p) => MlmTokenizer::wordpiece_file(p)?,
            None => MlmTokenizer::fit_chars(text)?,
        };
        let cfg = bert_config(tok.vocab_size(), a.block_size.unwrap_or(64), a.n_layer.unwrap_or(2), a.n_head.unwrap_or(4), a.n_embd.unwrap_or(128), a.dropout.unwrap_or(0.0))?;
        Ok((cfg, tok))
    }
    fn describe(c: &BertConfig) -> String {
        format!(
            "BertForMaskedLM, {} layers, {} heads, hidden {}, intermediate {}, {} positions",
            c.num_hidden_layers, c.num_attention_heads, c.hidden_size, c.intermediate_size, c.max_position_embeddings
        )
    }
    fn vocab_kind(tok: &MlmTokenizer) -> &'static str {
        tok.describe()
    }
    fn show(trainer: &mut Trainer<BertForMaskedLM>, data: &Dataset, _a: &TrainArgs, out: &std::path::Path) -> Result<()> {
        // the first validation window, 8 evenly spaced positions, each masked alone
        let t = trainer.seq_len();
        let sp = trainer.tokenizer.special();
        let mut ids = vec![sp.cls];
        ids.extend_from_slice(&data.val[..t - 2]);
        ids.push(sp.sep);
        let k = 8.min(t - 2);
        let positions: Vec<usize> = (0..k).map(|i| 1 + i * (t - 2) / k).collect();
        let mut preds = Vec::new();
        for &p in &positions {
            preds.extend(fill_mask(&mut trainer.model, &trainer.tokenizer, &ids, &[p])?);
        }
        let tok = &trainer.tokenizer;
        let right = preds.iter().filter(|p| p.predicted == p.truth).count();
        println!("fill-mask on the first validation window ({k} positions, each masked alone: {right} right):");
        let shown: String = ids[1..t - 1].iter().enumerate().map(|(i, &id)| if positions.contains(&(i + 1)) { "[MASK]".to_string() } else { tok.token(id) }).collect::<Vec<_>>().join(if matches!(tok, MlmTokenizer::Char(_)) { "" } else { " " });
        println!("  {shown:?}");
        for p in &preds {
            println!("  position {:>3}: predicted {:?}, true {:?}{}", p.position, tok.token(p.predicted), tok.token(p.truth), if p.predicted == p.truth { "  ok" } else { "" });
        }
        println!("the checkpoint is a transformers folder: BertForMaskedLM.from_pretrained(\"{}\")", out.display());
        Ok(())
    }
}

/// The model kind of this run: the flag, or the checkpoint's with --resume (they must agree).
fn model_kind(a: &TrainArgs) -> Result<String> {
    let flag = match a.model.as_deref() {
        None => None,
        Some(m @ ("gpt" | "bert")) => Some(m.to_string()),
        Some(m) => return Err(Error::value("train", format!("unknown --model {m:?} (gpt or bert)"))),
    };
    let kind = match (&a.resume, flag) {
        (Some(dir), flag) => {
            let k = checkpoint_kind(dir)?;
            if let Some(f) = flag {
                if f != k {
                    return Err(Error::value("train", format!("checkpoint {} holds a {k} model; it cannot be resumed with --model {f}", dir.display())));
                }
            }
            k
        }
        (None, flag) => flag.unwrap_or_else(|| "gpt".into()),
    };
    if a.tokenizer.is_some() && kind != "bert" {
        return Err(Error::value("train", "--tokenizer is for --model bert (the GPT uses a character vocabulary)"));
    }
    Ok(kind)
}

fn train(a: TrainArgs, dist: Option<(&DistEnv, &ProcessGroup)>) -> Result<()> {
    match model_kind(&a)?.as_str() {
        "bert" => train_model::<BertForMaskedLM>(a, dist, "bert"),
        "gpt" => train_model::<Gpt>(a, dist, "gpt"),
        k => Err(Error::value("train", format!("checkpoint model kind {k:?} is not one this command trains (gpt, bert)"))),
    }
}

fn train_model<M: CliModel>(a: TrainArgs, dist: Option<(&DistEnv, &ProcessGroup)>, kind: &str) -> Result<()> {
    let (text, corpus_name) = read_corpus(&a.corpus)?;
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("checkpoints/{kind}")));
    // each rank on its own GPU, whatever the checkpoint or --device say
    let rank_device = dist.map(|(e, _)| format!("cuda:{}", e.local_rank));
    let mut trainer = match &a.resume {
        Some(dir) => {
            let flags = explicit_model_flags(&a);
            if !flags.is_empty() {
                return Err(Error::value("train", format!("{} cannot be combined with --resume (the checkpoint fixes them)", flags.join(", "))));
            }
            let tok = checkpoint_tokenizer::<M>(dir)?;
            let ids = tok.encode(&text).map_err(|e| Error::value("train", format!("the corpus does not fit the checkpoint's tokenizer: {e}")))?;
            let t = Trainer::<M>::resume_on(dir, Some(corpus_id(&ids)), rank_device.as_deref())?;
            if t.step >= t.config.steps {
                return Err(Error::value("train", format!("checkpoint {} already finished its {} steps", dir.display(), t.config.steps)));
            }
            t
        }
        None => {
            let (mcfg, tok) = M::fresh(&a, &text)?;
            let ids = tok.encode(&text)?;
            // post-LayerNorm BERT from scratch stalls at the unigram loss with the GPT's 3e-3
            let lr = a.lr.unwrap_or(if M::KIND == "bert" { 1e-3 } else { 3e-3 });
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
            Trainer::<M>::start(mcfg, tcfg, tok, corpus_id(&ids))?
        }
    };
    if let Some((_, pg)) = dist {
        trainer.distribute(pg)?;
    }
    if a.cuda_graph {
        trainer.use_cuda_graph(3)?;
    }
    let main = trainer.is_main();
    // only rank 0 talks
    macro_rules! say {
        ($($t:tt)*) => { if main { println!($($t)*); } };
    }
    let ids = trainer.tokenizer.encode(&text)?;
    let n_tokens = ids.len();
    let data = trainer.dataset(ids)?;
    let vocab = trainer.tokenizer.vocab_size();
    let baseline = data.unigram_entropy(vocab);
    let tc = trainer.config.clone();
    let seq = trainer.seq_len();
    if let Some((e, _)) = dist {
        say!("data parallel: {} ranks ({} per node), {} rows of each batch of {} per rank", e.world_size, e.local_world_size, tc.batch_size / e.world_size, tc.batch_size);
    }
    say!(
        "corpus: {corpus_name}: {} characters, {n_tokens} tokens, vocabulary {vocab} ({}) ({} train / {} val tokens)",
        text.chars().count(),
        M::vocab_kind(&trainer.tokenizer),
        data.train.len(),
        data.val.len()
    );
    say!(
        "model: {}, {} parameters ({}, {})",
        M::describe(trainer.model.config()),
        fmt_params(trainer.model.num_parameters()),
        match tc.autocast_dtype() {
            Some(d) => format!("float32 parameters, {} autocast{}", d.name(), if d == magpie_core::DType::F16 { " with loss scaling" } else { "" }),
            None => tc.dtype.clone(),
        },
        tc.device
    );
    if kind == "bert" {
        say!("masking: 15% of the tokens between [CLS] and [SEP] predicted (80% [MASK], 10% random, 10% kept)");
    }
    say!(
        "training: {} steps of {}x{} tokens, AdamW lr {:.1e} (warmup {}, cosine to {:.1e}), seed {}{}",
        tc.steps,
        tc.batch_size,
        seq,
        tc.lr,
        tc.warmup_steps,
        tc.min_lr,
        tc.seed,
        if trainer.step > 0 { format!(", resuming at step {}", trainer.step) } else { String::new() }
    );
    say!("unigram baseline (entropy of the training tokens): {baseline:.4} nats");

    let bar = if main { ProgressBar::new(tc.steps as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed_precise} < {eta}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_position(trainer.step as u64);
    let tokens_per_step = (tc.batch_size * seq) as f64;
    let t0 = Instant::now();
    let start_step = trainer.step;
    let mut last_val = None;
    let stop_at = if a.stop_after > 0 { (start_step + a.stop_after).min(tc.steps) } else { tc.steps };
    let mut log = crate::observe::RunLog::start(main, a.tensorboard.as_deref(), a.profile.as_deref(), trainer.device().is_cuda())?;
    let mut loss = f32::NAN;
    while trainer.step < stop_at {
        let mut fresh = true;
        if a.cuda_graph {
            // the GPU runs ahead: read the loss only where it is shown or logged
            trainer.train_step_deferred(&data)?;
            let at_eval = a.eval_every > 0 && trainer.step % a.eval_every == 0;
            fresh = a.loss_log.is_some() || a.tensorboard.is_some() || trainer.step % 10 == 0 || at_eval || trainer.step == stop_at;
            if fresh {
                loss = trainer.last_loss()?;
            }
        } else {
            loss = trainer.train_step(&data)?;
        }
        if let Some(table) = log.step(trainer.step, fresh.then_some(loss as f64), trainer.lr())? {
            bar.suspend(|| println!("{table}"));
        }
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
            let tr = trainer.evaluate_full(&data, Split::Train)?;
            let va = trainer.evaluate_full(&data, Split::Val)?;
            last_val = Some(va);
            log.eval(trainer.step, va.loss)?;
            let acc = match (tr.accuracy, va.accuracy) {
                (Some(t), Some(v)) => format!(", masked-token accuracy {:.1}% / {:.1}%", 100.0 * t, 100.0 * v),
                _ => String::new(),
            };
            bar.suspend(|| {
                say!("step {:>5}: train loss {:.4}, val loss {:.4} (unigram baseline {baseline:.4}){acc}, lr {:.2e}, {tps:.0} tok/s", trainer.step, tr.loss, va.loss, trainer.lr())
            });
        }
        if main && ((a.save_every > 0 && trainer.step % a.save_every == 0) || last) {
            trainer.save(&out)?;
            if !last {
                bar.suspend(|| println!("step {:>5}: checkpoint saved to {}", trainer.step, out.display()));
            }
        }
    }
    bar.finish_and_clear();
    if !main {
        return Ok(());
    }
    if trainer.step < tc.steps {
        trainer.save(&out)?;
        // loss.png goes into the checkpoint folder once that exists (the save refuses a folder it did not write)
        for line in log.finish(&out)? {
            println!("{line}");
        }
        println!("stopped after {} steps at step {} of {}; checkpoint in {} (continue with --resume {})", trainer.step - start_step, trainer.step, tc.steps, out.display(), out.display());
        return Ok(());
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "done: {} steps in {secs:.1} s ({:.0} tokens/s); final val loss {:.4} vs unigram baseline {baseline:.4}; checkpoint in {}",
        tc.steps - start_step,
        (tc.steps - start_step) as f64 * tokens_per_step / secs.max(1e-9),
        last_val.map(|v| v.loss).unwrap_or(f64::NAN),
        out.display()
    );
    for line in log.finish(&out)? {
        println!("{line}");
    }
    if trainer.device().is_cuda() {
        report_cuda_paths()?;
    }
    M::show(&mut trainer, &data, &a, &out)
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

//! Training a model on a token stream (the [`Gpt`] on next tokens, [`BertForMaskedLM`] on masked
//! tokens: one loop for both, through [`TrainModel`]): AdamW (decay on matrices only), linear warmup then
//! cosine decay (a `LambdaLR`), gradient clipping, validation loss, and checkpoints that resume
//! bit-identically: model, optimizer, scheduler, both random generators (the default one, which
//! dropout draws from, and the data-order one) and the step.
//!
//! Data parallel ([`Trainer::distribute`]): `batch_size` is the global batch. Every rank draws the
//! same global batch from the same data-order generator and trains on its `batch_size / N` rows,
//! with gradients averaged by [`DistributedDataParallel`], so N ranks follow the run of one
//! process with the whole batch (up to float reduction order), and a checkpoint (written by
//! rank 0) resumes at any world size that divides the batch.
//!
//! CUDA graphs ([`Trainer::use_cuda_graph`]): after a few eager warm-up steps, one whole step
//! (forward, backward, clipping, AdamW) is captured and then replayed for every later step, with
//! each batch copied into the captured (static) input tensors and AdamW's per-step scalars written
//! to device memory before the replay; the scheduler runs on the host between replays. Replays
//! give the eager steps' bits (`tests/cuda_graph_train.rs`).

use crate::bert::BertForMaskedLM;
use crate::data::{Dataset, Split};
use crate::gpt::{Gpt, GptConfig};
use crate::tokenizer::CharTokenizer;
use crate::train_model::{TrainModel, TrainTokenizer};
use magpie_core::autograd::no_grad;
use magpie_core::cuda_graph::CUDAGraph;
use magpie_core::ops::random::{self, Generator};
use magpie_core::{DType, Device, Error, Result, Tensor};
use magpie_distributed::{BatchShard, DistributedDataParallel, ProcessGroup, ReduceOp};
use magpie_io::checkpoint::{load_dir, save_dir, CheckpointFiles};
use magpie_nn::{ModuleExt, StateDict};
use magpie_optim::scheduler::{LambdaLr, LrScheduler};
use magpie_optim::{AdamConfig, AdamW, GradScaler, GradScalerConfig, Optimizer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// How to train (everything but the model's shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Total optimizer steps.
    pub steps: usize,
    pub batch_size: usize,
    /// Peak learning rate (reached after `warmup_steps`, then cosine-decayed to `min_lr`).
    pub lr: f64,
    pub min_lr: f64,
    pub warmup_steps: usize,
    pub weight_decay: f64,
    /// Max global gradient norm (0 = no clipping).
    pub grad_clip: f64,
    pub seed: u64,
    /// Batches averaged per validation estimate.
    pub eval_iters: usize,
    /// Share of the corpus (its end) held out for validation.
    pub val_fraction: f64,
    /// "float32" or "float64" (the parameters' dtype), or "bfloat16" / "float16": float32
    /// parameters with forward passes under autocast to that dtype (float16 with a `GradScaler`).
    pub dtype: String,
    /// "cpu" or "cuda[:N]".
    pub device: String,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            steps: 1000,
            batch_size: 16,
            lr: 3e-3,
            min_lr: 3e-4,
            warmup_steps: 50,
            weight_decay: 0.1,
            grad_clip: 1.0,
            seed: 1337,
            eval_iters: 8,
            val_fraction: 0.1,
            dtype: "float32".into(),
            device: "cpu".into(),
        }
    }
}

impl TrainConfig {
    /// Checks the values (a clear error for each impossible one).
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::value("TrainConfig", m));
        if self.steps == 0 {
            return bad("steps must be at least 1".into());
        }
        if self.batch_size == 0 {
            return bad("batch size must be at least 1".into());
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return bad(format!("learning rate must be a positive number, got {}", self.lr));
        }
        if !(self.min_lr >= 0.0 && self.min_lr <= self.lr) {
            return bad(format!("min_lr must lie in [0, lr], got {}", self.min_lr));
        }
        if !(self.weight_decay >= 0.0) || !(self.grad_clip >= 0.0) {
            return bad("weight decay and gradient clip must be non-negative".into());
        }
        if self.eval_iters == 0 {
            return bad("eval_iters must be at least 1".into());
        }
        if !(self.val_fraction > 0.0 && self.val_fraction < 1.0) {
            return bad(format!("val_fraction must lie in (0, 1), got {}", self.val_fraction));
        }
        self.dtype()?;
        self.device()?;
        Ok(())
    }
    /// The parameter dtype (float32 under autocast).
    pub fn dtype(&self) -> Result<DType> {
        match self.dtype.as_str() {
            "float32" | "f32" => Ok(DType::F32),
            "float64" | "f64" => Ok(DType::F64),
            "bfloat16" | "bf16" | "float16" | "f16" | "half" => Ok(DType::F32),
            d => Err(Error::value("TrainConfig", format!("dtype {d:?} is not supported for training (float32, float64, bfloat16 or float16)"))),
        }
    }
    /// The autocast dtype of the forward passes: bfloat16 or float16 for those `dtype`s, else None.
    pub fn autocast_dtype(&self) -> Option<DType> {
        match self.dtype.as_str() {
            "bfloat16" | "bf16" => Some(DType::BF16),
            "float16" | "f16" | "half" => Some(DType::F16),
            _ => None,
        }
    }
    /// The device, checked to be usable.
    pub fn device(&self) -> Result<Device> {
        let d = Device::parse(&self.device)?;
        if d.is_cuda() {
            magpie_core::backend::cuda::require("train")?;
        }
        Ok(d)
    }
    /// The learning-rate factor at `step` (LambdaLR's function): linear warmup to 1, then a cosine
    /// from 1 down to `min_lr / lr` at the last step.
    pub fn lr_factor(&self) -> impl Fn(i64) -> f64 + Send + 'static {
        let (warm, total, floor) = (self.warmup_steps as f64, self.steps as f64, self.min_lr / self.lr);
        move |e: i64| {
            let e = e as f64;
            if e < warm {
                return (e + 1.0) / (warm + 1.0);
            }
            let span = (total - warm).max(1.0);
            let t = ((e - warm) / span).clamp(0.0, 1.0);
            floor + (1.0 - floor) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
        }
    }
}

/// The model, optimizer, scheduler and random state of one training run.
pub struct Trainer<M: TrainModel = Gpt> {
    pub model: M,
    pub opt: AdamW,
    pub sched: LambdaLr,
    /// Draws the batches (kept apart from the default generator that dropout uses).
    pub data_rng: Generator,
    /// Optimizer steps taken so far.
    pub step: usize,
    pub config: TrainConfig,
    pub tokenizer: M::Tokenizer,
    /// Checksum and length of the token stream trained on, so a resume can check the corpus.
    pub corpus_id: (u64, usize),
    device: Device,
    /// Dynamic loss scaling for float16 autocast (a resumed run starts from the initial scale).
    scaler: Option<GradScaler>,
    /// Data parallelism, after [`Trainer::distribute`].
    dist: Option<Dist>,
    /// CUDA-graph replay of whole steps, after [`Trainer::use_cuda_graph`].
    graph: Option<GraphState>,
    /// The last step's loss on the device (read by [`Trainer::last_loss`]).
    last_loss: Option<Tensor>,
}

/// A trainer's CUDA-graph state: eager warm-up steps left, then the captured step.
struct GraphState {
    warmup_left: usize,
    captured: Option<Captured>,
}

/// One captured training step: the graph, its static batch tensors and its loss.
struct Captured {
    graph: CUDAGraph,
    inputs: Vec<Tensor>,
    loss: Tensor,
}

/// A data-parallel trainer's gradient averaging and its rows of each batch.
struct Dist {
    ddp: DistributedDataParallel,
    shard: BatchShard,
}

/// The scheduler fields a checkpoint keeps (PyTorch's `LRScheduler.state_dict()` for LambdaLR).
#[derive(Serialize, Deserialize)]
struct SchedState {
    base_lrs: Vec<f64>,
    last_epoch: i64,
    step_count: u64,
    last_lr: Vec<f64>,
}

/// `trainer.json`.
#[derive(Serialize, Deserialize)]
struct TrainerFile {
    step: usize,
    /// The model kind ([`TrainModel::KIND`]; checkpoints without it hold a GPT).
    #[serde(default = "gpt_kind")]
    kind: String,
    /// The model's config ([`TrainModel::config_to_json`]).
    model: serde_json::Value,
    train: TrainConfig,
    scheduler: SchedState,
    /// (seed, offset) of the default generator and of the data-order generator.
    rng_default: (u64, u64),
    rng_data: (u64, u64),
    corpus_fnv1a64: String,
    corpus_tokens: usize,
}

fn gpt_kind() -> String {
    Gpt::KIND.to_string()
}

/// Evaluation results: the mean loss and, for BERT, the masked-token accuracy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Eval {
    pub loss: f64,
    pub accuracy: Option<f64>,
}

/// A checksum of a token stream (identifies the corpus in checkpoints).
pub fn corpus_id(tokens: &[u32]) -> (u64, usize) {
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    (magpie_io::checkpoint::fnv1a64(&bytes), tokens.len())
}

fn make_optimizer<M: TrainModel>(model: &M, cfg: &TrainConfig) -> Result<(AdamW, LambdaLr)> {
    let (decay, no_decay) = model.decay_groups();
    let ac = AdamConfig { lr: cfg.lr, betas: (0.9, 0.95), weight_decay: cfg.weight_decay, ..AdamConfig::adamw() };
    let mut opt = AdamW::new(decay, ac.clone())?;
    if !no_decay.is_empty() {
        opt.add_param_group(no_decay, AdamConfig { weight_decay: 0.0, ..ac })?;
    }
    let sched = LambdaLr::new(&mut opt, vec![Box::new(cfg.lr_factor())])?;
    Ok((opt, sched))
}

impl Trainer<Gpt> {
    /// A fresh GPT run (see [`Trainer::start`]).
    pub fn new(model_cfg: GptConfig, config: TrainConfig, tokenizer: CharTokenizer, corpus_id: (u64, usize)) -> Result<Trainer<Gpt>> {
        Trainer::start(model_cfg, config, tokenizer, corpus_id)
    }

    /// Resumes a GPT run (see [`Trainer::resume`]).
    pub fn load(dir: &Path, corpus_id: Option<(u64, usize)>) -> Result<Trainer<Gpt>> {
        Trainer::resume(dir, corpus_id)
    }

    /// Resumes a GPT run onto `device` (see [`Trainer::resume_on`]).
    pub fn load_on(dir: &Path, corpus_id: Option<(u64, usize)>, device: Option<&str>) -> Result<Trainer<Gpt>> {
        Trainer::resume_on(dir, corpus_id, device)
    }
}

/// A BERT masked-language-model run.
pub type BertTrainer = Trainer<BertForMaskedLM>;

impl<M: TrainModel> Trainer<M> {
    /// A fresh run: seeds the default generator with `config.seed`, builds and initialises the model.
    pub fn start(model_cfg: M::Config, config: TrainConfig, tokenizer: M::Tokenizer, corpus_id: (u64, usize)) -> Result<Trainer<M>> {
        config.validate()?;
        M::check(&model_cfg, &tokenizer)?;
        let device = config.device()?;
        random::manual_seed(config.seed);
        let mut model = M::build(&model_cfg, config.seed)?;
        model.to_dtype(config.dtype()?)?;
        if device != Device::Cpu {
            model.to_device(device)?;
        }
        let (opt, sched) = make_optimizer(&model, &config)?;
        // the data order has its own stream, derived from the seed
        let data_rng = Generator::new(config.seed ^ 0x0da7_a0da_7a0d_a7a0);
        let scaler = match config.autocast_dtype() {
            Some(DType::F16) => Some(GradScaler::new(device, GradScalerConfig::default())?),
            _ => None,
        };
        Ok(Trainer { model, opt, sched, data_rng, step: 0, config, tokenizer, corpus_id, device, scaler, dist: None, graph: None, last_loss: None })
    }

    /// Trains data-parallel over `pg` from now on: the model (on this rank's GPU) gets rank 0's
    /// parameters, and each step uses this rank's `batch_size / world_size` rows of the global
    /// batch. The world size must divide `batch_size`.
    pub fn distribute(&mut self, pg: &ProcessGroup) -> Result<()> {
        if self.device != pg.device() {
            return Err(Error::device("train", format!("the model is on {} but this rank's GPU is {}", self.device, pg.device())));
        }
        let shard = BatchShard::new(pg.rank(), pg.world_size())?;
        shard.rows(self.config.batch_size)?;
        let ddp = DistributedDataParallel::new(&self.model, pg)?;
        self.dist = Some(Dist { ddp, shard });
        Ok(())
    }

    /// True on the rank that prints and writes checkpoints (rank 0, or the only process).
    pub fn is_main(&self) -> bool {
        self.dist.as_ref().is_none_or(|d| d.ddp.process_group().rank() == 0)
    }

    /// This rank's rows of a global batch.
    fn local(&self, t: Tensor) -> Result<Tensor> {
        match &self.dist {
            Some(d) => d.shard.slice(&t),
            None => Ok(t),
        }
    }

    /// A scalar loss averaged over the ranks (the global batch's loss), as f64.
    fn global_mean(&self, loss: &Tensor) -> Result<f64> {
        match &self.dist {
            Some(d) => {
                let l = loss.detach().to_dtype(DType::F32)?.reshape(&[1])?.copy()?;
                d.ddp.process_group().all_reduce(&l, ReduceOp::Avg)?.wait()?;
                Ok(l.item()?.to_f64())
            }
            None => Ok(loss.to_dtype(DType::F64)?.item()?.to_f64()),
        }
    }

    /// The current learning rate (of the first group).
    pub fn lr(&self) -> f64 {
        self.opt.lr(0)
    }

    /// The device the model trains on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Tokens per row of a batch.
    pub fn seq_len(&self) -> usize {
        M::seq_len(self.model.config())
    }

    /// A dataset of `tokens` for this model (each split holding at least one row's window).
    pub fn dataset(&self, tokens: Vec<u32>) -> Result<Dataset> {
        Dataset::new(tokens, self.config.val_fraction, M::data_window(self.model.config()))
    }

    /// A global batch drawn with `gen`, this rank's rows of it, on the model's device. On a GPU
    /// the rows go through pinned memory and copy without blocking (PyTorch's `pin_memory=True`
    /// with `.to(device, non_blocking=True)`): the copy queues behind the previous step's work
    /// instead of waiting for it.
    fn batch(&self, data: &Dataset, gen: &mut Generator, split: Split) -> Result<Vec<Tensor>> {
        let b = M::make_batch(self.model.config(), &self.tokenizer, data, gen, split, self.config.batch_size)?;
        let on_gpu = self.device.is_cuda();
        b.into_iter()
            .map(|t| {
                let t = self.local(t)?;
                if on_gpu {
                    t.pin_memory()?.to_device_with(self.device, true)
                } else {
                    t.to_device(self.device)
                }
            })
            .collect()
    }

    /// One optimizer step on a fresh training batch; returns the batch loss.
    pub fn train_step(&mut self, data: &Dataset) -> Result<f32> {
        if self.graph.is_some() {
            self.train_step_deferred(data)?;
            return self.last_loss();
        }
        self.model.train(true);
        let batch = self.next_batch(data)?;
        let loss = self.step_body(&batch)?;
        self.sched.step(&mut self.opt)?;
        self.step += 1;
        self.global_mean(&loss).map(|v| v as f32)
    }

    /// The next training batch from the data-order generator.
    fn next_batch(&mut self, data: &Dataset) -> Result<Vec<Tensor>> {
        let mut gen = std::mem::replace(&mut self.data_rng, Generator::new(0));
        let batch = self.batch(data, &mut gen, Split::Train);
        self.data_rng = gen;
        batch
    }

    /// Replays whole training steps from a CUDA graph from now on (`magpie train --cuda-graph`):
    /// the next `warmup` steps (at least 1) run eagerly (kernel compilation, optimizer state,
    /// workspaces), the one after is captured, and every later step copies its batch into the
    /// captured input tensors and replays. Needs a CUDA device, static shapes (every batch has
    /// the same shape, as the trainer's batches do) and no host work inside the step: no float16
    /// loss scaling (its step skipping reads the inf flag on the host), no data parallelism, no
    /// dropout (random draws are refused during capture). A step's loss stays on the device until
    /// [`Trainer::last_loss`] reads it.
    pub fn use_cuda_graph(&mut self, warmup: usize) -> Result<()> {
        let op = "cuda_graph";
        if !self.device.is_cuda() {
            return Err(Error::device(op, format!("CUDA-graph training steps need a CUDA device, got {}", self.device)));
        }
        if self.scaler.is_some() {
            return Err(Error::value(op, "CUDA-graph training steps do not support float16 with GradScaler yet (its step skipping reads the inf flag on the host); use bfloat16 or float32"));
        }
        if self.dist.is_some() {
            return Err(Error::value(op, "CUDA-graph training steps do not support data parallelism yet"));
        }
        self.graph = Some(GraphState { warmup_left: warmup.max(1), captured: None });
        Ok(())
    }

    /// True when the steps are replayed from a captured CUDA graph (after the warm-up).
    pub fn is_graph_captured(&self) -> bool {
        self.graph.as_ref().is_some_and(|g| g.captured.is_some())
    }

    /// One optimizer step like [`Trainer::train_step`] without reading the loss back (the GPU
    /// runs ahead of the host): read it with [`Trainer::last_loss`] at log points.
    pub fn train_step_deferred(&mut self, data: &Dataset) -> Result<()> {
        self.model.train(true);
        let batch = self.next_batch(data)?;
        let warm = self.graph.as_ref().is_some_and(|g| g.warmup_left > 0);
        if self.graph.is_none() || warm {
            let loss = self.step_body(&batch)?;
            if let Some(g) = &mut self.graph {
                g.warmup_left -= 1;
            }
            self.sched.step(&mut self.opt)?;
            self.step += 1;
            self.last_loss = Some(loss.detach());
            return Ok(());
        }
        let captured = self.graph.as_mut().and_then(|g| g.captured.take());
        let cap = match captured {
            Some(c) => c,
            None => self.capture_step(batch.clone())?,
        };
        let opt = &mut self.opt;
        let r = (|| {
            let _ng = no_grad();
            // the batch into the captured inputs (the capture's own batch is those tensors)
            for (s, b) in cap.inputs.iter().zip(&batch) {
                if !s.is_same(b) {
                    s.copy_(b)?;
                }
            }
            opt.prepare_graphed_step()?;
            cap.graph.replay()
        })();
        self.last_loss = Some(cap.loss.clone());
        if let Some(g) = &mut self.graph {
            g.captured = Some(cap);
        }
        r?;
        self.sched.step(&mut self.opt)?;
        self.step += 1;
        Ok(())
    }

    /// Captures one step on `batch` (which becomes the static input); nothing runs yet.
    fn capture_step(&mut self, batch: Vec<Tensor>) -> Result<Captured> {
        let mut graph = CUDAGraph::new();
        let mut loss = None;
        let device = self.device;
        graph.capture(device, None, || {
            loss = Some(self.step_body(&batch)?.detach());
            Ok(())
        })?;
        let loss = loss.ok_or_else(|| Error::value("cuda_graph", "the captured step produced no loss"))?;
        Ok(Captured { graph, inputs: batch, loss })
    }

    /// The loss of the last step, read from the device (a synchronization).
    pub fn last_loss(&self) -> Result<f32> {
        match &self.last_loss {
            Some(l) => self.global_mean(l).map(|v| v as f32),
            None => Err(Error::value("last_loss", "no training step has run yet")),
        }
    }

    /// Forward, backward, clipping and the optimizer step on `batch` (no scheduler step): the
    /// work an eager step runs and a CUDA graph captures. Returns the loss tensor.
    fn step_body(&mut self, batch: &[Tensor]) -> Result<Tensor> {
        let loss = {
            let _ac = self.autocast()?;
            self.model.loss(batch, false)?.0
        };
        self.opt.zero_grad();
        let clip = self.config.grad_clip;
        match &mut self.scaler {
            Some(s) => {
                s.scale(&loss)?.backward()?;
                sync_grads(&self.dist)?;
                if clip > 0.0 {
                    // clip the true gradients, not the scaled ones
                    s.unscale_(&mut self.opt)?;
                    magpie_nn::utils::clip_grad_norm_(&self.opt.params(), clip, 2.0, false)?;
                }
                s.step(&mut self.opt)?;
                s.update(None)?;
            }
            None => {
                loss.backward()?;
                sync_grads(&self.dist)?;
                if clip > 0.0 {
                    magpie_nn::utils::clip_grad_norm_(&self.opt.params(), clip, 2.0, false)?;
                }
                self.opt.step()?;
            }
        }
        Ok(loss)
    }

    /// The autocast region of a forward pass (None without mixed precision).
    fn autocast(&self) -> Result<Option<magpie_core::amp::AutocastGuard>> {
        self.config.autocast_dtype().map(|d| magpie_core::amp::autocast(self.device, Some(d), true)).transpose()
    }

    /// The mean loss over `config.eval_iters` batches of `split`, in eval mode without gradients.
    /// Batches come from a generator re-seeded each time, so evaluation does not disturb training
    /// and every evaluation sees the same windows.
    pub fn evaluate(&mut self, data: &Dataset, split: Split) -> Result<f64> {
        Ok(self.evaluate_full(data, split)?.loss)
    }

    /// [`Trainer::evaluate`] with the model's metric (BERT: masked-token accuracy) beside the loss.
    pub fn evaluate_full(&mut self, data: &Dataset, split: Split) -> Result<Eval> {
        let _g = no_grad();
        self.model.eval();
        let mut gen = Generator::new(self.config.seed ^ 0xe7a1_e7a1);
        let (mut sum, mut acc) = (0.0, None::<f64>);
        for _ in 0..self.config.eval_iters {
            let batch = self.batch(data, &mut gen, split)?;
            let (l, a) = {
                let _ac = self.autocast()?;
                self.model.loss(&batch, true)?
            };
            sum += self.global_mean(&l)?;
            if let Some(a) = a {
                let a = Tensor::from_vec(vec![a], &[])?.to_device(self.device)?;
                *acc.get_or_insert(0.0) += self.global_mean(&a)?;
            }
        }
        self.model.train(true);
        let n = self.config.eval_iters as f64;
        Ok(Eval { loss: sum / n, accuracy: acc.map(|a| a / n) })
    }

    /// Writes the checkpoint folder `dir` atomically (see `magpie_io::checkpoint`).
    pub fn save(&self, dir: &Path) -> Result<()> {
        let st = self.model.state_dict();
        let model_bytes = magpie_io::safetensors::serialize(&to_cpu(st)?, None)?;
        let (otensors, ojson) = self.opt.state_dict()?;
        let meta = BTreeMap::from([("optimizer".to_string(), ojson)]);
        let opt_bytes = magpie_io::safetensors::serialize(&otensors, Some(&meta))?;
        let b = self.sched.base();
        let file = TrainerFile {
            step: self.step,
            kind: M::KIND.to_string(),
            model: M::config_to_json(self.model.config())?,
            train: self.config.clone(),
            scheduler: SchedState { base_lrs: b.base_lrs.clone(), last_epoch: b.last_epoch, step_count: b.step_count, last_lr: b.last_lr.clone() },
            rng_default: random::with_default_generator(|g| g.get_state()),
            rng_data: self.data_rng.get_state(),
            corpus_fnv1a64: format!("{:016x}", self.corpus_id.0),
            corpus_tokens: self.corpus_id.1,
        };
        let json = serde_json::to_string_pretty(&file).map_err(|e| Error::io("checkpoint", e.to_string()))?;
        let mut files = vec![
            ("model.safetensors".to_string(), model_bytes),
            ("optimizer.safetensors".into(), opt_bytes),
            ("trainer.json".into(), json.into_bytes()),
            ("tokenizer.json".into(), self.tokenizer.to_json().into_bytes()),
        ];
        files.extend(self.model.extra_files()?);
        save_dir(dir, &files)
    }

    /// Resumes from a checkpoint folder: model, optimizer, scheduler, generators and step, exactly.
    /// `corpus_id` must be that of the token stream the run was started on.
    pub fn resume(dir: &Path, corpus_id: Option<(u64, usize)>) -> Result<Trainer<M>> {
        Trainer::resume_on(dir, corpus_id, None)
    }

    /// [`Trainer::resume`] onto `device` instead of the checkpoint's (a data-parallel rank resumes
    /// on its own GPU).
    pub fn resume_on(dir: &Path, corpus_id: Option<(u64, usize)>, device: Option<&str>) -> Result<Trainer<M>> {
        let ck = load_dir(dir)?;
        let mut file = read_trainer_file::<M>(&ck)?;
        if let Some(d) = device {
            file.train.device = d.to_string();
        }
        let tokenizer = read_tokenizer::<M::Tokenizer>(&ck)?;
        let model_cfg = M::config_from_json(&file.model).map_err(|e| bad_ck(&ck, &e.to_string()))?;
        let id = (u64::from_str_radix(&file.corpus_fnv1a64, 16).map_err(|_| bad_ck(&ck, "trainer.json has a bad corpus checksum"))?, file.corpus_tokens);
        if let Some(given) = corpus_id {
            if given != id {
                return Err(Error::value(
                    "resume",
                    format!("the corpus differs from the one checkpoint {} was trained on ({} tokens then, {} now)", dir.display(), id.1, given.1),
                ));
            }
        }
        let mut t = Trainer::<M>::start(model_cfg, file.train, tokenizer, id)?;
        load_model_weights(&ck, &t.model)?;
        let opt = ck.safetensors("optimizer.safetensors")?;
        let ojson = opt.metadata.get("optimizer").ok_or_else(|| bad_ck(&ck, "optimizer.safetensors has no optimizer metadata"))?;
        t.opt.load_state_dict(&opt.tensors, ojson)?;
        let s = file.scheduler;
        let b = t.sched.base_mut();
        (b.base_lrs, b.last_epoch, b.step_count, b.last_lr) = (s.base_lrs, s.last_epoch, s.step_count, s.last_lr);
        random::with_default_generator(|g| g.set_state(file.rng_default));
        t.data_rng.set_state(file.rng_data);
        t.step = file.step;
        Ok(t)
    }
}

/// Averages the gradients of the backward pass just run over the ranks (data parallel).
fn sync_grads(dist: &Option<Dist>) -> Result<()> {
    match dist {
        Some(d) => d.ddp.finish_gradient_sync(),
        None => Ok(()),
    }
}

fn to_cpu(sd: StateDict) -> Result<StateDict> {
    sd.into_iter().map(|(n, t)| Ok((n, t.to_device(Device::Cpu)?))).collect()
}

fn bad_ck(ck: &CheckpointFiles, msg: &str) -> Error {
    Error::io("checkpoint", format!("{}: {msg}", ck.dir().display()))
}

fn read_tokenizer<T: TrainTokenizer>(ck: &CheckpointFiles) -> Result<T> {
    let s = std::str::from_utf8(ck.bytes("tokenizer.json")?).map_err(|_| bad_ck(ck, "tokenizer.json is not UTF-8"))?;
    T::from_json(s).map_err(|e| bad_ck(ck, &e.to_string()))
}

/// `trainer.json`, checked to hold a model of kind `M`.
fn read_trainer_file<M: TrainModel>(ck: &CheckpointFiles) -> Result<TrainerFile> {
    let file: TrainerFile = ck.json("trainer.json")?;
    if file.kind != M::KIND {
        return Err(Error::value(
            "checkpoint",
            format!("checkpoint {} holds a {} model, not a {} one", ck.dir().display(), file.kind, M::KIND),
        ));
    }
    Ok(file)
}

/// The model kind of a checkpoint folder ("gpt" or "bert").
pub fn checkpoint_kind(dir: &Path) -> Result<String> {
    let file: TrainerFile = load_dir(dir)?.json("trainer.json")?;
    Ok(file.kind)
}

/// The tokenizer of a checkpoint folder of a `M` model.
pub fn checkpoint_tokenizer<M: TrainModel>(dir: &Path) -> Result<M::Tokenizer> {
    let ck = load_dir(dir)?;
    read_trainer_file::<M>(&ck)?;
    read_tokenizer(&ck)
}

fn load_model_weights<M: TrainModel>(ck: &CheckpointFiles, model: &M) -> Result<()> {
    let m = ck.safetensors("model.safetensors")?;
    let dt = model.param_dtype();
    let sd = m.tensors.into_iter().map(|(n, t)| Ok((n, t.to_dtype(dt)?))).collect::<Result<Vec<_>>>()?;
    model.load_state_dict(&sd, true).map_err(|e| bad_ck(ck, &format!("model.safetensors does not fit the model: {e}")))?;
    Ok(())
}

/// The model and tokenizer of a checkpoint folder, for generation (eval mode).
pub fn load_for_inference(dir: &Path) -> Result<(Gpt, CharTokenizer)> {
    let ck = load_dir(dir)?;
    let file = read_trainer_file::<Gpt>(&ck)?;
    let tokenizer: CharTokenizer = read_tokenizer(&ck)?;
    let cfg = Gpt::config_from_json(&file.model).map_err(|e| bad_ck(&ck, &e.to_string()))?;
    if cfg.vocab_size != tokenizer.vocab_size() {
        return Err(bad_ck(&ck, "the model's vocab_size does not match tokenizer.json"));
    }
    let mut model = Gpt::new(cfg)?;
    load_model_weights(&ck, &model)?;
    model.eval();
    Ok((model, tokenizer))
}

/// Loss of a model on one batch, as a plain number (for tests and tools).
pub fn batch_loss(model: &Gpt, x: &Tensor, y: &Tensor) -> Result<f64> {
    let _g = no_grad();
    Ok(model.loss(x, y)?.item()?.to_f64())
}

//! The fused decoder: every buffer (activations, the KV cache, logits, sampling state) allocated once
//! per (model, max batch, max length); prefill in chunks through cuBLAS and flash attention; a decode
//! step of all layers, the LM head and token selection queued as raw kernel launches over those
//! buffers, captured once per batch size as a CUDA graph and replayed per token. Only the chosen
//! token ids come back to the host.

use super::buffers::{download, opt_ptr, ptr, upload, Buf};
use magpie_core::backend::cuda::memcpy;
use super::kernels::{ActKind, AttnShape, GemvCall, GemvEpi, GemvNorm, Kernels, SampleArgs};
use super::lt::{LtEpi, LtGemm};
use super::short_attn::ShortAttention;
use super::prefetch::{self, Prefetch, Read};
use super::quant::{self as q, QSegP, MAX_ROWS};
use super::quant_fold::{QuantFold, FOLD_MAX_ROWS};
use super::weights::{DecoderWeights, NormKind, NormW, Proj, Spec};
use magpie_core::backend::cuda::attention::{self, AttnOperand, Causal, DecodeParams, FlashParams};
use magpie_core::backend::cuda::device::{self, CudaDevice};
use magpie_core::backend::cuda::graph::{self, CudaGraph};
use magpie_core::backend::cuda::host_mapped::{Event, MappedI32};
use magpie_core::{DType, Device, Error, Result};
use std::collections::HashMap;
use std::sync::Arc;

#[path = "quant_step.rs"]
mod quant_step;

/// Bytes of the prefill products' cuBLASLt workspace (algorithms that need more are not timed).
const LT_WORKSPACE: usize = 16 << 20;

/// Sizes and switches of a [`FusedDecoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Sequences decoded together at most.
    pub max_batch: usize,
    /// Tokens per sequence at most (prompt plus new tokens): the KV cache's length.
    pub max_len: usize,
    /// Prompt tokens per prefill chunk (bounds the activation buffers; long prompts run in chunks).
    pub prefill_chunk: usize,
    /// Replay decode steps as CUDA graphs (false: launch the same kernels one by one).
    pub cuda_graphs: bool,
    /// Our GEMV kernel for decode projections of 1-4 rows (false: cuBLAS for every product).
    pub gemv: bool,
    /// Programmatic dependent launch of the engine's kernels (false: plain launches).
    pub pdl: bool,
    /// Decode steps of 1-4 rows with the norms, residual adds, activation, bias, rotary embedding
    /// and KV-cache write folded into the GEMVs (needs `gemv`; false: the separate kernels).
    pub fuse: bool,
    /// Warps per output of the fused GEMV (1, 2 or 4); 0 chooses from the shape.
    pub gemv_split: usize,
    /// With `gemv_split` 0: split K only where that divides the estimated round trips of the
    /// weight loads (rounds of batched loads per lane times waves of warps) by at least this
    /// factor (`fused::split_by_rounds`; default 2); 0: split while the SMs hold under 32 warps
    /// each (the rule before 2026-11-27).
    pub gemv_split_min_gain: u32,
    /// In the folded decode step, attention as one kernel (a cluster of blocks per kv head that
    /// merges its key splits on the chip) where its shapes allow (false: the core's split-KV
    /// kernel and its combine).
    pub attention_kernel: bool,
    /// In the folded decode step, each kernel asks L2 for the weights of the next ones, up to
    /// this many bytes past what has been read (capped at three quarters of the device's L2; 0:
    /// no prefetch, the default: on an H200 it made the Llama-3.2-1B step slower at 12, 24 and
    /// 36 MiB, see benchmark/NOTES.md), and the attention kernel for its keys and values; the
    /// GEMVs then read their weights with the L2 evict-first policy (see `prefetch.rs`).
    pub l2_prefetch: usize,
    /// In the folded decode step, the LM head also finds each row's largest logit, so a greedy
    /// selection without repetition penalty needs no pass over the logits.
    pub fused_argmax: bool,
    /// In the folded decode step (without an L2 prefetch plan), each block's products after
    /// attention (o, gate|up, down) and the next block's q|k|v run as one persistent kernel with
    /// grid barriers between them instead of four kernels (false: one kernel per product, the
    /// default until the chain is faster on the benchmark).
    pub decode_chain: bool,
    /// Blocks of a chain's grid (0: as many as stay resident on the device; tests use fewer).
    pub chain_grid: usize,
    /// Prefill passes run their products through cuBLASLt with the algorithm timed per shape on
    /// first use ([`LtGemm`]), the bias and activation of a non-gated MLP in the up projection's
    /// epilogue (false, the default: the legacy cuBLAS call and the separate activation kernel;
    /// on an NVIDIA H200 the cuBLASLt path made GPT-2's 128-token prefill slower, see
    /// docs/fused-prefill.md).
    pub prefill_lt: bool,
    /// Prefill passes of at most [`SHORT_ATTN_MAX_KEYS`] keys per sequence run their attention as
    /// blocks of 16 queries of one head ([`ShortAttention`], head dims 32, 64, 128) instead of the
    /// core's flash kernel, whose 64-query tiles leave most SMs idle at these lengths (false, the
    /// default: it was slower than the flash kernel on an NVIDIA H200, see docs/fused-prefill.md).
    pub prefill_short_attn: bool,
    /// In the folded decode step of a quantized model, one-row Q4_K products of up to 2048 inputs
    /// code their input to 8 bits per lane in registers, with no block barrier (false, the
    /// default: through shared memory, as the other shapes; see `fused::QuantFold::warp_coding`).
    /// Measured slower on an NVIDIA H200 (Llama-3.2-1B-shaped Q4_K decode 1344 against 1679
    /// tok/s, benchmark/NOTES.md): every warp then reads and codes the whole row.
    pub quant_warp_coding: bool,
}

/// Keys per sequence up to which [`EngineConfig::prefill_short_attn`] applies.
pub const SHORT_ATTN_MAX_KEYS: usize = 256;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_batch: 1,
            max_len: 2048,
            prefill_chunk: 4096,
            cuda_graphs: true,
            gemv: true,
            pdl: true,
            fuse: true,
            gemv_split: 0,
            gemv_split_min_gain: 2,
            attention_kernel: true,
            l2_prefetch: 0,
            fused_argmax: true,
            decode_chain: false,
            chain_grid: 0,
            prefill_lt: false,
            prefill_short_attn: false,
            quant_warp_coding: false,
        }
    }
}

/// Raw addresses of one block's weights (a quantized projection's dense address is 0; its blocks
/// are in `quant`).
#[derive(Clone)]
struct LayerP {
    n1: (u64, u64),
    qkv_w: u64,
    qkv_b: u64,
    o_w: u64,
    o_b: u64,
    n2: (u64, u64),
    up_w: u64,
    up_b: u64,
    down_w: u64,
    down_b: u64,
    /// The segments of the quantized projections (q|k|v, o, gate|up, down; None: dense).
    quant: [Option<Vec<QSegP>>; 4],
}

/// A projection's weight as the engine launches it.
#[derive(Clone, Copy)]
enum WRef<'a> {
    Dense(u64),
    Quant(&'a [QSegP]),
}

/// The dense address of a projection (0 when quantized) and its quantized segments.
fn proj_p(p: &Proj) -> Result<(u64, Option<Vec<QSegP>>)> {
    match p {
        Proj::Dense(t) => Ok((ptr(t)?, None)),
        Proj::Quant(qp) => Ok((0, Some(qp.raw()?))),
    }
}

impl LayerP {
    fn w(&self, i: usize, dense: u64) -> WRef<'_> {
        match &self.quant[i] {
            Some(segs) => WRef::Quant(segs),
            None => WRef::Dense(dense),
        }
    }
}

fn norm_p(n: &NormW) -> Result<(u64, u64)> {
    Ok((ptr(&n.w)?, opt_ptr(&n.b)?))
}

/// The preallocated state of the engine.
struct Buffers {
    x: Buf,
    h: Buf,
    qkv: Buf,
    q: Buf,
    attn: Buf,
    o: Buf,
    mlp: Buf,
    act: Buf,
    /// f32 `[max_batch, vocab]`.
    logits: Buf,
    /// Per layer: `[max_batch, kv_heads, max_len, head_dim]`.
    k_cache: Vec<Buf>,
    v_cache: Vec<Buf>,
    /// f32 `[max_len, head_dim / 2]` (rotary models).
    cos: Option<Buf>,
    sin: Option<Buf>,
    /// i32 prefill token ids and positions `[chunk]`.
    pre_tok: Buf,
    pre_pos: Buf,
    /// i32 decode state `[max_batch]`: the next input token, its position, the key count.
    tok: Buf,
    pos: Buf,
    kvlen: Buf,
    /// u8 `[max_batch, vocab]`: tokens seen (repetition penalty).
    seen: Buf,
    /// u64 `[max_batch]`: draws made per sequence.
    ctr: Buf,
    /// `SampleArgs` read by the selection kernel.
    sargs: Buf,
    /// Split-KV decode workspace.
    ws: Buf,
    /// u64 `[max_batch]`: the LM head's fused argmax (packed logit key and row), zero between steps.
    amax: Buf,
    /// Host-mapped i32 `[max_batch, max_len]`: each selected token at its step, read by the host
    /// while the next step runs.
    hist: MappedI32,
    /// Marks the end of the last two steps (even and odd).
    events: [Event; 2],
    /// u32 `[2]`: the grid barrier of the persistent chain (arrivals, generation), zeroed once.
    chain_bar: Buf,
}

/// A decoder (GPT-2, Llama, Qwen2) as fused CUDA work. Built from a loaded model; holds its own
/// references to the weights, so the module tree can be dropped.
pub struct FusedDecoder {
    dev: Arc<CudaDevice>,
    dtype: DType,
    k: Kernels,
    w: DecoderWeights,
    lp: Vec<LayerP>,
    cfg: EngineConfig,
    b: Buffers,
    graphs: HashMap<usize, CudaGraph>,
    /// The selection rule last set.
    sampling: SampleArgs,
    /// The L2 prefetch window of the folded decode step in bytes ([`EngineConfig::l2_prefetch`]
    /// within the device's L2).
    l2_window: u64,
    /// The prefill products ([`EngineConfig::prefill_lt`]).
    lt: Option<LtGemm>,
    /// The short prefill attention ([`EngineConfig::prefill_short_attn`]).
    short_attn: Option<ShortAttention>,
    /// The LM head: its dense address (0 when quantized) and quantized segments.
    lm_head: (u64, Option<Vec<QSegP>>),
    /// Quantized layers' weights dequantized for prefill products of more than [`MAX_ROWS`] rows
    /// (the largest quantized projection of a block; None without quantized layers).
    qscratch: Option<(Buf, usize)>,
    /// A quantized LM head's outputs in the storage dtype before they widen to the f32 logits
    /// (None when the LM head is dense or the dtype is f32).
    lm_tmp: Option<Buf>,
    /// The folded Q4_K decode GEMV (quantized bf16/f16 Llama-style models with `fuse`; see
    /// `quant_step.rs`).
    qfold: Option<QuantFold>,
}

impl std::fmt::Debug for FusedDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FusedDecoder({}, {}, {:?})", self.w.spec.class, self.dtype, self.cfg)
    }
}

impl FusedDecoder {
    /// Builds the engine for `w` with `cfg`'s sizes: compiles the kernels, allocates every buffer.
    pub fn new(w: DecoderWeights, cfg: EngineConfig) -> Result<FusedDecoder> {
        let op = "fused";
        let s = w.spec.clone();
        let Device::Cuda(ord) = w.wte.device() else {
            return Err(Error::device(op, "the fused engine runs on CUDA; the model is on the CPU"));
        };
        if cfg.max_batch == 0 || cfg.max_len == 0 || cfg.prefill_chunk == 0 {
            return Err(Error::value(op, format!("max_batch, max_len and prefill_chunk must be positive, got {cfg:?}")));
        }
        if let Some(mp) = s.max_positions {
            if cfg.max_len > mp {
                return Err(Error::value(op, format!("max_len {} exceeds the model's {mp} positions", cfg.max_len)));
            }
        }
        if !s.heads.is_multiple_of(s.kv_heads) || s.heads * s.head_dim == 0 {
            return Err(Error::value(op, format!("{} heads over {} kv heads of dim {}", s.heads, s.kv_heads, s.head_dim)));
        }
        let dtype = w.wte.dtype();
        let dev = device::device(op, ord)?;
        let mut k = Kernels::new(&dev, dtype)?;
        k.pdl = cfg.pdl;
        k.gemv_split = cfg.gemv_split;
        k.split_min_gain = cfg.gemv_split_min_gain;
        k.evict_first = cfg.l2_prefetch > 0;
        k.chain_grid = cfg.chain_grid;
        if cfg.decode_chain {
            k.load_chain(&dev)?;
        }
        let lp = w
            .layers
            .iter()
            .map(|l| {
                let (qkv, o, up, down) = (proj_p(&l.qkv_w)?, proj_p(&l.o_w)?, proj_p(&l.up_w)?, proj_p(&l.down_w)?);
                Ok(LayerP {
                    n1: norm_p(&l.norm1)?,
                    qkv_w: qkv.0,
                    qkv_b: opt_ptr(&l.qkv_b)?,
                    o_w: o.0,
                    o_b: opt_ptr(&l.o_b)?,
                    n2: norm_p(&l.norm2)?,
                    up_w: up.0,
                    up_b: opt_ptr(&l.up_b)?,
                    down_w: down.0,
                    down_b: opt_ptr(&l.down_b)?,
                    quant: [qkv.1, o.1, up.1, down.1],
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let lm_head = proj_p(&w.lm_head)?;
        // the quantized GEMV reads x with 16-byte loads: rows of a multiple of 8 values
        let quantized = lp.iter().any(|l| l.quant.iter().any(Option::is_some)) || lm_head.1.is_some();
        if quantized && [s.hidden, s.heads * s.head_dim, s.inter].iter().any(|d| !d.is_multiple_of(8)) {
            return Err(Error::unsupported(op, format!("quantized layers need hidden, attention and MLP widths that are multiples of 8, got {}, {} and {}", s.hidden, s.heads * s.head_dim, s.inter)));
        }
        // prefill passes hold up to `prefill_chunk` tokens of all the sequences together
        let rows = pass_rows(&cfg);
        let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let up = if s.gated { 2 * s.inter } else { s.inter };
        let cache_len = cfg.max_batch * s.kv_heads * cfg.max_len * s.head_dim;
        let f32s = DType::F32;
        let bf = |dt: DType, n: usize, what: &str| Buf::new(&dev, dt, n, what);
        let (cos, sin) = match &s.rope {
            Some(r) => {
                let (c, sn) = r.half_tables(cfg.max_len);
                let up = |v: Vec<f32>| -> Result<Buf> {
                    let b = bf(f32s, v.len(), "rotary table")?;
                    upload(&dev, b.ptr, &v)?;
                    Ok(b)
                };
                (Some(up(c)?), Some(up(sn)?))
            }
            None => (None, None),
        };
        // The split count may depend on the batch: room for the largest plan of any batch size.
        let ws_bytes = (1..=cfg.max_batch).map(|n| attention::decode_workspace_bytes(&decode_params(&s, dtype, n, cfg.max_len))).max().unwrap_or(0);
        let b = Buffers {
            x: bf(dtype, rows * s.hidden, "hidden states")?,
            h: bf(dtype, rows * s.hidden, "normed hidden states")?,
            qkv: bf(dtype, rows * (qd + 2 * kvd), "q/k/v projections")?,
            q: bf(dtype, rows * qd, "queries")?,
            attn: bf(dtype, rows * qd, "attention output")?,
            o: bf(dtype, rows * s.hidden, "projection output")?,
            mlp: bf(dtype, rows * up, "MLP input projection")?,
            act: bf(dtype, rows * s.inter, "MLP activation")?,
            logits: bf(f32s, cfg.max_batch * s.vocab, "logits")?,
            k_cache: (0..w.layers.len()).map(|_| bf(dtype, cache_len, "key cache")).collect::<Result<_>>()?,
            v_cache: (0..w.layers.len()).map(|_| bf(dtype, cache_len, "value cache")).collect::<Result<_>>()?,
            cos,
            sin,
            pre_tok: bf(DType::I32, rows, "prefill ids")?,
            pre_pos: bf(DType::I32, rows, "prefill positions")?,
            tok: bf(DType::I32, cfg.max_batch, "token ids")?,
            pos: bf(DType::I32, cfg.max_batch, "positions")?,
            kvlen: bf(DType::I32, cfg.max_batch, "key counts")?,
            seen: bf(DType::U8, cfg.max_batch * s.vocab, "seen-token marks")?,
            ctr: bf(DType::I64, cfg.max_batch, "draw counters")?,
            sargs: bf(DType::U8, std::mem::size_of::<SampleArgs>(), "sampling settings")?,
            ws: bf(DType::U8, ws_bytes, "attention workspace")?,
            amax: bf(DType::I64, cfg.max_batch, "argmax slots")?,
            hist: MappedI32::new(&dev, cfg.max_batch * cfg.max_len)?,
            events: [Event::new(&dev)?, Event::new(&dev)?],
            chain_bar: bf(DType::I32, 2, "chain barrier")?,
        };
        let greedy = SampleArgs { temperature: 0.0, top_k: 0, top_p: 1.0, penalty: 1.0, seed: 0 };
        upload(&dev, b.amax.ptr, &vec![0u64; cfg.max_batch])?;
        upload(&dev, b.chain_bar.ptr, &[0u32; 2])?;
        let l2 = dev.ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).map_err(|e| Error::device(op, format!("reading the L2 cache size: {e}")))?;
        let l2_window = cfg.l2_prefetch.min(l2.max(0) as usize / 4 * 3) as u64;
        let lt = if cfg.prefill_lt { Some(LtGemm::new(&dev, LT_WORKSPACE)?) } else { None };
        let short_attn = if cfg.prefill_short_attn && ShortAttention::supports_head_dim(s.head_dim) { Some(ShortAttention::new(&dev, dtype, s.head_dim)?) } else { None };
        // scratch for one quantized projection of a block dequantized (prefill passes past the GEMV's rows)
        let qmax = w.layers.iter().flat_map(|l| [&l.qkv_w, &l.o_w, &l.up_w, &l.down_w]).filter_map(|p| if let Proj::Quant(qp) = p { Some(qp.rows() * qp.cols) } else { None }).max();
        let qscratch = match qmax {
            Some(n) if rows > MAX_ROWS => Some((bf(dtype, n, "dequantized weight scratch")?, n)),
            _ => None,
        };
        let lm_tmp = if lm_head.1.is_some() && dtype != DType::F32 { Some(bf(dtype, cfg.max_batch * s.vocab, "quantized LM head output")?) } else { None };
        if quantized {
            // the quantized kernels' module loads now, not inside the first graph capture
            magpie_core::backend::cuda::kern::kfunc(&dev, magpie_core::backend::cuda::kern::KFile::Quant, dtype, "quant_dequant_q8_0")?;
        }
        // decode steps of quantized models fold the small kernels into the Q4_K GEMV (RMSNorm,
        // gated MLP; 8-bit activation codes, so bf16 / f16 only)
        let qfold = if quantized && cfg.fuse && cfg.gemv && s.norm == NormKind::Rms && s.gated && s.head_dim.is_multiple_of(2) && dtype != DType::F32 {
            let mut f = QuantFold::new(&dev, dtype)?;
            f.pdl = cfg.pdl;
            f.warp_coding = cfg.quant_warp_coding;
            Some(f)
        } else {
            None
        };
        let mut e = FusedDecoder { dev, dtype, k, w, lp, cfg, b, graphs: HashMap::new(), sampling: greedy, l2_window, lt, short_attn, lm_head, qscratch, lm_tmp, qfold };
        e.set_sampling(greedy)?;
        Ok(e)
    }

    /// The model's shapes.
    pub fn spec(&self) -> &Spec {
        &self.w.spec
    }
    /// The sizes it was built with.
    pub fn config(&self) -> EngineConfig {
        self.cfg
    }
    /// The storage dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Bytes of the weights the engine keeps quantized (GGUF blocks on the device; 0 for a dense
    /// model).
    pub fn quantized_weight_bytes(&self) -> usize {
        let q = |p: &Proj| if let Proj::Quant(qp) = p { qp.nbytes() } else { 0 };
        q(&self.w.lm_head) + self.w.layers.iter().map(|l| q(&l.qkv_w) + q(&l.o_w) + q(&l.up_w) + q(&l.down_w)).sum::<usize>()
    }
    /// The device.
    pub fn device(&self) -> Device {
        Device::Cuda(self.dev.ordinal)
    }

    /// Sets the selection rule of the following [`prefill`](Self::prefill) and
    /// [`decode_step`](Self::decode_step) calls, and restarts every sequence's draw counter.
    pub fn set_sampling(&mut self, s: SampleArgs) -> Result<()> {
        // SAFETY: SampleArgs is plain old data (repr(C), no padding reads on the device side).
        let bytes = unsafe { std::slice::from_raw_parts(&s as *const SampleArgs as *const u8, std::mem::size_of::<SampleArgs>()) };
        upload(&self.dev, self.b.sargs.ptr, bytes)?;
        self.sampling = s;
        upload(&self.dev, self.b.ctr.ptr, &vec![0u64; self.cfg.max_batch])
    }

    /// Runs `prompt` into sequence `row`'s cache (from position 0, in chunks) and selects its first
    /// new token (read it with [`tokens`](Self::tokens)); the row's logits stay in the logits buffer.
    pub fn prefill(&mut self, row: usize, prompt: &[u32]) -> Result<()> {
        self.prefill_rows(row, &[prompt])
    }

    /// [`prefill`](Self::prefill) of prompts of one length into sequences `row0..`, together: each
    /// pass runs a slice of every prompt through the blocks with one GEMM per projection.
    pub fn prefill_rows(&mut self, row0: usize, prompts: &[&[u32]]) -> Result<()> {
        let op = "fused.prefill";
        let s = self.w.spec.clone();
        let n = prompts.len();
        let len = prompts.first().map_or(0, |p| p.len());
        if n == 0 || row0 + n > self.cfg.max_batch {
            return Err(Error::index(op, format!("sequences {row0}..{} of an engine built for {} sequences", row0 + n, self.cfg.max_batch)));
        }
        if len == 0 || prompts.iter().any(|p| p.len() != len) {
            return Err(Error::value(op, "the prompts must be non-empty and of one length"));
        }
        if len >= self.cfg.max_len {
            return Err(Error::value(op, format!("the prompt has {len} tokens but the cache holds {} (prompt plus new tokens); build the engine with a larger max_len", self.cfg.max_len)));
        }
        for p in prompts {
            if let Some(&bad) = p.iter().find(|&&t| t as usize >= s.vocab) {
                return Err(Error::index(op, format!("token id {bad} is outside the vocabulary (size {})", s.vocab)));
            }
        }
        if self.sampling.penalty != 1.0 {
            for (r, p) in prompts.iter().enumerate() {
                let mut seen = vec![0u8; s.vocab];
                for &t in p.iter() {
                    seen[t as usize] = 1;
                }
                upload(&self.dev, self.b.seen.at((row0 + r) * s.vocab, DType::U8), &seen)?;
            }
        }
        // tokens per sequence per pass: the buffers hold `rows` tokens
        let rows = pass_rows(&self.cfg);
        let step = (rows / n).clamp(1, self.cfg.prefill_chunk);
        let mut p0 = 0;
        let mut last_c = 0;
        while p0 < len {
            let c = step.min(len - p0);
            let ids: Vec<i32> = prompts.iter().flat_map(|p| p[p0..p0 + c].iter().map(|&v| v as i32)).collect();
            let pos: Vec<i32> = (0..n).flat_map(|_| (p0..p0 + c).map(|p| p as i32)).collect();
            upload(&self.dev, self.b.pre_tok.ptr, &ids)?;
            upload(&self.dev, self.b.pre_pos.ptr, &pos)?;
            self.blocks(n * c, self.b.pre_tok.ptr, self.b.pre_pos.ptr, 0, Some(Pre { row0, seqs: n, per_seq: c, p0 }))?;
            p0 += c;
            last_c = c;
        }
        // The LM head on each sequence's last position, into its logits row; then the first tokens.
        let dt = self.dtype;
        let last_rows = if n == 1 {
            self.b.h.at((last_c - 1) * s.hidden, dt)
        } else {
            for r in 0..n {
                // SAFETY: row r * last_c + last_c - 1 of `h` and row r of `o` hold `hidden` elements.
                unsafe { memcpy::dtod(&self.dev, self.b.o.at(r * s.hidden, dt), self.b.h.at((r * last_c + last_c - 1) * s.hidden, dt), s.hidden * dt.size()) }?;
            }
            self.b.o.ptr
        };
        self.head(n, last_rows, row0)?;
        upload(&self.dev, self.b.pos.at(row0, DType::I32), &vec![len as i32 - 1; n])?;
        self.select(n, row0, false)
    }

    /// One decode step for sequences `0..batch`: each one's token and position from the device
    /// state, all layers, the LM head and the selection of the next token. Replays the step's CUDA
    /// graph (captured on first use for this batch size) unless graphs are off. While a graph is
    /// captured, no other thread may queue work on this device (all work shares its one stream).
    pub fn decode_step(&mut self, batch: usize) -> Result<()> {
        let op = "fused.decode";
        if batch == 0 || batch > self.cfg.max_batch {
            return Err(Error::value(op, format!("batch {batch} on an engine built for 1..={} sequences", self.cfg.max_batch)));
        }
        if !self.cfg.cuda_graphs {
            return self.step_body(batch);
        }
        if !self.graphs.contains_key(&batch) {
            let dev = self.dev.clone();
            let g = graph::capture(&dev, || self.step_body(batch))?;
            self.graphs.insert(batch, g);
        }
        match self.graphs.get(&batch) {
            Some(g) => g.replay(),
            None => Err(Error::device(op, "the decode graph is missing")),
        }
    }

    /// Whether a decode step of `batch` sequences runs with the small kernels folded into the
    /// GEMVs (see [`EngineConfig::fuse`]).
    pub fn decode_fused(&self, batch: usize) -> bool {
        self.fusable(batch).unwrap_or(false)
    }

    /// The current token of sequences `0..batch` (waits for the device).
    pub fn tokens(&self, batch: usize) -> Result<Vec<u32>> {
        let v: Vec<i32> = download(&self.dev, self.b.tok.ptr, batch.min(self.cfg.max_batch))?;
        Ok(v.into_iter().map(|t| t.max(0) as u32).collect())
    }

    /// Marks the end of the work queued so far as step `step`'s (see [`wait_step`](Self::wait_step)).
    pub fn mark_step(&self, step: usize) -> Result<()> {
        self.b.events[step % 2].record()
    }

    /// Waits for step `step` (marked with [`mark_step`](Self::mark_step); at most one later step
    /// may have been marked since) and returns the token each of sequences `0..batch` selected in
    /// it (the `step`-th selection since [`set_sampling`](Self::set_sampling)).
    pub fn wait_step(&self, step: usize, batch: usize) -> Result<Vec<u32>> {
        self.b.events[step % 2].synchronize()?;
        let n = self.cfg.max_len;
        (0..batch.min(self.cfg.max_batch))
            .map(|r| self.b.hist.get(r * n + step).map(|t| t.max(0) as u32).ok_or_else(|| Error::index("fused", format!("step {step} is past the cache of {n} tokens"))))
            .collect()
    }

    /// The f32 logits of sequences `0..batch` from the last prefill / decode step (after the
    /// repetition penalty, when one is set). Waits for the device.
    pub fn logits(&self, batch: usize) -> Result<Vec<f32>> {
        download(&self.dev, self.b.logits.ptr, batch.min(self.cfg.max_batch) * self.w.spec.vocab)
    }

    /// `amax`: whether the LM head filled the argmax slots (the folded decode step).
    fn select(&self, rows: usize, row0: usize, amax: bool) -> Result<()> {
        let v = self.w.spec.vocab;
        self.k.select(
            &self.dev,
            rows,
            self.b.logits.at(row0 * v, DType::F32),
            v,
            self.b.seen.at(row0 * v, DType::U8),
            self.b.tok.at(row0, DType::I32),
            self.b.pos.at(row0, DType::I32),
            self.b.ctr.at(row0, DType::I64),
            self.b.sargs.ptr,
            row0,
            (self.b.hist.device_ptr(), self.cfg.max_len),
            if amax { self.b.amax.at(row0, DType::I64) } else { 0 },
        )
    }

    fn step_body(&self, batch: usize) -> Result<()> {
        if self.fusable(batch)? {
            return self.fused_step(batch);
        }
        self.blocks(batch, self.b.tok.ptr, self.b.pos.ptr, self.b.kvlen.ptr, None)?;
        self.head(batch, self.b.h.ptr, 0)?;
        self.select(batch, 0, false)
    }

    /// The LM head on `m` normed rows at `x` into the f32 logits of sequences `row0..`: the dense
    /// product, or the quantized GEMV (in the storage dtype, then widened to f32).
    fn head(&self, m: usize, x: u64, row0: usize) -> Result<()> {
        let s = &self.w.spec;
        let logits = self.b.logits.at(row0 * s.vocab, DType::F32);
        match &self.lm_head {
            (w, None) => self.k.linear(&self.dev, m, s.vocab, s.hidden, x, *w, logits, DType::F32, self.cfg.gemv),
            (_, Some(segs)) => {
                let y = self.lm_tmp.as_ref().map_or(logits, |t| t.ptr);
                // SAFETY: x holds m normed rows of `hidden` values (a row of an activation buffer,
                // 16-byte aligned: hidden is a multiple of 8), y m rows of vocab values of the
                // storage dtype (the logits themselves when it is f32); the blocks are the engine's.
                unsafe { q::qgemv(&self.dev, self.dtype, self.cfg.pdl, m, s.hidden, segs, x, y, s.vocab)? };
                match &self.lm_tmp {
                    Some(t) => self.k.widen(&self.dev, m * s.vocab, t.ptr, logits),
                    None => Ok(()),
                }
            }
        }
    }

    /// `y[m, n] = x[m, k] · Wᵀ` for a quantized weight: the quantized GEMV for up to
    /// [`MAX_ROWS`] rows; more rows dequantize W into the scratch and run `gemm` on it.
    #[allow(clippy::too_many_arguments)]
    fn qlinear(&self, m: usize, n: usize, k: usize, x: u64, segs: &[QSegP], y: u64, gemm: impl Fn(u64) -> Result<()>) -> Result<()> {
        match &self.qscratch {
            Some((buf, cap)) if m > MAX_ROWS && n * k <= *cap => {
                // SAFETY: the scratch holds `cap >= n * k` values of the storage dtype.
                unsafe { q::dequantize_into(&self.dev, self.dtype, k, segs, buf.ptr)? };
                gemm(buf.ptr)
            }
            // SAFETY: x and y are the engine's activation buffers of m rows of k and n values.
            _ => unsafe { q::qgemv(&self.dev, self.dtype, self.cfg.pdl, m, k, segs, x, y, n) },
        }
    }

    /// Whether a decode step of `m` rows runs as [`fused_step`](Self::fused_step): asked for, and
    /// every product fits the fused GEMV.
    fn fusable(&self, m: usize) -> Result<bool> {
        let s = &self.w.spec;
        if !(self.cfg.fuse && self.cfg.gemv && s.head_dim.is_multiple_of(2)) {
            return Ok(false);
        }
        let k = &self.k;
        let b = &self.b;
        let qd = s.heads * s.head_dim;
        let fin = (ptr(&self.w.final_norm.w)?, opt_ptr(&self.w.final_norm.b)?);
        if self.lm_head.1.is_some() || self.lp.iter().any(|l| l.quant.iter().any(Option::is_some)) {
            // quantized weights: the folded Q4_K step where it is built (other block types run
            // their unfolded kernels inside it)
            return Ok(self.qfold.is_some() && (1..=FOLD_MAX_ROWS).contains(&m));
        }
        let mut ok = k.gemv_fusable(m, s.hidden, b.x.ptr, self.lm_head.0, fin);
        for l in &self.lp {
            ok &= k.gemv_fusable(m, s.hidden, b.x.ptr, l.qkv_w, l.n1)
                && k.gemv_fusable(m, qd, b.attn.ptr, l.o_w, (0, 0))
                && k.gemv_fusable(m, s.hidden, b.x.ptr, l.up_w, l.n2)
                && k.gemv_fusable(m, s.inter, b.act.ptr, l.down_w, (0, 0));
        }
        Ok(ok)
    }

    /// A decode step of `m` (1-4) rows with the small kernels folded into the GEMVs: per block the
    /// q|k|v GEMV (norm on the fly; bias, rotary embedding and cache write in its epilogue), decode
    /// attention (one kernel where [`EngineConfig::attention_kernel`] and its shapes allow), the o GEMV (residual add), the gate|up or fc GEMV (norm on the fly; activation),
    /// the down GEMV (residual add); then the LM head (final norm on the fly) and the selection.
    /// Same values as the unfused step up to the order of f32 sums and the rounding of the
    /// normalized rows (not rounded to the storage dtype before the product).
    fn fused_step(&self, m: usize) -> Result<()> {
        if let Some(qf) = &self.qfold {
            return self.quant_step(qf, m);
        }
        let (s, d, k, b) = (&self.w.spec, &*self.dev, &self.k, &self.b);
        let dt = self.dtype;
        let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let rms = s.norm == NormKind::Rms;
        let norm = |n: (u64, u64)| Some(GemvNorm { rms, w: n.0, b: n.1, eps: s.eps });
        let wpe = self.w.wpe.as_ref().map_or(Ok(0), ptr)?;
        k.embed(d, m, b.tok.ptr, b.pos.ptr, ptr(&self.w.wte)?, wpe, b.x.ptr, s.hidden, b.kvlen.ptr, 0, 0)?;
        let cache_sh = (self.cfg.max_len * s.head_dim) as i64;
        let cache_sb = s.kv_heads as i64 * cache_sh;
        let (cos, sin) = (b.cos.as_ref().map_or(0, |x| x.ptr), b.sin.as_ref().map_or(0, |x| x.ptr));
        let p = decode_params(s, dt, m, self.cfg.max_len);
        let shape = AttnShape { batch: m, heads: (s.heads, s.kv_heads, s.head_dim), cache_strides: (cache_sb, cache_sh), max_len: self.cfg.max_len, scale: s.scale };
        let use_attn = |kc: u64, vc: u64| self.cfg.attention_kernel && k.attn_fits(&shape, [b.q.ptr, kc, vc, b.attn.ptr]);
        let pf = self.prefetch_plan(use_attn)?;
        let mut pf = pf.iter();
        let mut next = || pf.next().copied().unwrap_or_default();
        // the persistent chain: a block's o, gate|up, down and the next block's q|k|v in one kernel
        let chain = self.cfg.decode_chain && self.l2_window == 0;
        let qkv_call = |li: usize| {
            let l = &self.lp[li];
            let (kc, vc) = (b.k_cache[li].ptr, b.v_cache[li].ptr);
            let epi = GemvEpi::Qkv { q: b.q.ptr, kc, vc, bias: l.qkv_b, pos: b.pos.ptr, cos, sin, heads: (s.heads, s.kv_heads, s.head_dim), cache_strides: (cache_sb, cache_sh) };
            GemvCall { m, n: qd + 2 * kvd, k: s.hidden, x: b.x.ptr, w: l.qkv_w, norm: norm(l.n1), epi }
        };
        for (li, l) in self.lp.iter().enumerate() {
            let (kc, vc) = (b.k_cache[li].ptr, b.v_cache[li].ptr);
            if !chain || li == 0 {
                let c = qkv_call(li);
                k.gemv_fused(d, m, c.n, c.k, c.x, c.w, c.norm, c.epi, &next())?;
            }
            if use_attn(kc, vc) {
                k.attn_decode(d, &shape, b.q.ptr, kc, vc, b.attn.ptr, b.kvlen.ptr, &next(), self.l2_window > 0)?;
            } else {
                let qo = |ptr: u64| AttnOperand { ptr, sb: qd as i64, sh: s.head_dim as i64, ss: 0 };
                let cache = |ptr: u64| AttnOperand { ptr, sb: cache_sb, sh: cache_sh, ss: s.head_dim as i64 };
                attention::flash_decode(d, &p, qo(b.q.ptr), cache(kc), cache(vc), qo(b.attn.ptr), b.kvlen.ptr, b.ws.ptr)?;
            }
            let (up, mlp) = if s.gated {
                (2 * s.inter, GemvEpi::Gated { out: b.act.ptr, bias: l.up_b, kind: s.act })
            } else {
                (s.inter, GemvEpi::Act { out: b.act.ptr, bias: l.up_b, kind: s.act })
            };
            let calls = [
                GemvCall { m, n: s.hidden, k: qd, x: b.attn.ptr, w: l.o_w, norm: None, epi: GemvEpi::Residual { res: b.x.ptr, bias: l.o_b } },
                GemvCall { m, n: up, k: s.hidden, x: b.x.ptr, w: l.up_w, norm: norm(l.n2), epi: mlp },
                GemvCall { m, n: s.hidden, k: s.inter, x: b.act.ptr, w: l.down_w, norm: None, epi: GemvEpi::Residual { res: b.x.ptr, bias: l.down_b } },
            ];
            if chain {
                let mut v = calls.to_vec();
                if li + 1 < self.lp.len() {
                    v.push(qkv_call(li + 1));
                }
                k.gemv_chain(d, &v, b.chain_bar.ptr)?;
            } else {
                for c in calls {
                    k.gemv_fused(d, m, c.n, c.k, c.x, c.w, c.norm, c.epi, &next())?;
                }
            }
        }
        let fin = (ptr(&self.w.final_norm.w)?, opt_ptr(&self.w.final_norm.b)?);
        let amax = if self.cfg.fused_argmax { b.amax.ptr } else { 0 };
        k.gemv_fused(d, m, s.vocab, s.hidden, b.x.ptr, self.lm_head.0, norm(fin), GemvEpi::Store { y: b.logits.ptr, out: DType::F32, amax }, &next())?;
        self.select(m, 0, amax != 0)
    }

    /// The L2 prefetches of the folded decode step's kernels in launch order (see
    /// `prefetch.rs`): per block q|k|v, attention (when `use_attn(k cache, v cache)`: the
    /// one-kernel attention; the core's kernels take none and have no entry), o, gate|up, down;
    /// then the LM head.
    fn prefetch_plan(&self, use_attn: impl Fn(u64, u64) -> bool) -> Result<Vec<Prefetch>> {
        let s = &self.w.spec;
        let es = self.dtype.size() as u64;
        let (qd, kvd) = ((s.heads * s.head_dim) as u64, (s.kv_heads * s.head_dim) as u64);
        let (h, inter) = (s.hidden as u64, s.inter as u64);
        let one = |p: u64, rows: u64, k: u64| Some(Read { parts: vec![p], part_bytes: rows * k * es });
        let mut reads = Vec::new();
        for (li, l) in self.lp.iter().enumerate() {
            reads.push(one(l.qkv_w, qd + 2 * kvd, h));
            if use_attn(self.b.k_cache[li].ptr, self.b.v_cache[li].ptr) {
                reads.push(None);
            }
            reads.push(one(l.o_w, h, qd));
            reads.push(if s.gated { Some(Read { parts: vec![l.up_w, l.up_w + inter * h * es], part_bytes: inter * h * es }) } else { one(l.up_w, inter, h) });
            reads.push(one(l.down_w, h, inter));
        }
        reads.push(one(self.lm_head.0, s.vocab as u64, h));
        Ok(prefetch::plan(&reads, self.l2_window))
    }

    /// Embeddings and every block for `m` rows, leaving the final norm's output in `h`.
    /// `prefill`: the rows are tokens of prompts (see [`Pre`]); None: row m is the next token of
    /// sequence m (a decode step, key counts written to `kvlen`).
    fn blocks(&self, m: usize, tok: u64, pos: u64, kvlen: u64, prefill: Option<Pre>) -> Result<()> {
        let (s, d, k, b) = (&self.w.spec, &*self.dev, &self.k, &self.b);
        let dt = self.dtype;
        let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let rms = s.norm == NormKind::Rms;
        let wpe = self.w.wpe.as_ref().map_or(Ok(0), ptr)?;
        let gemv = self.cfg.gemv;
        k.embed(d, m, tok, pos, ptr(&self.w.wte)?, wpe, b.x.ptr, s.hidden, if prefill.is_some() { 0 } else { kvlen }, 0, 0)?;
        let first = self.lp.first().map(|l| l.n1).unwrap_or((ptr(&self.w.final_norm.w)?, opt_ptr(&self.w.final_norm.b)?));
        k.add_norm(d, m, b.x.ptr, 0, 0, first.0, first.1, b.h.ptr, s.hidden, s.eps, rms)?;
        let cache_sh = (self.cfg.max_len * s.head_dim) as i64;
        let cache_sb = s.kv_heads as i64 * cache_sh;
        let (cos, sin) = (b.cos.as_ref().map_or(0, |x| x.ptr), b.sin.as_ref().map_or(0, |x| x.ptr));
        let n_layers = self.lp.len();
        // prefill products through cuBLASLt (None: the decode step's path)
        let lt = self.lt.as_ref().filter(|_| prefill.is_some());
        let dense = |n: usize, kk: usize, x: u64, w: u64, y: u64| match lt {
            Some(lt) => lt.linear(d, dt, dt, m, n, kk, x, w, y, LtEpi::Bias(0)),
            None => k.linear(d, m, n, kk, x, w, y, dt, gemv),
        };
        let linear = |n: usize, kk: usize, x: u64, w: WRef<'_>, y: u64| match w {
            WRef::Dense(w) => dense(n, kk, x, w, y),
            WRef::Quant(segs) => self.qlinear(m, n, kk, x, segs, y, |wd| dense(n, kk, x, wd, y)),
        };
        // the up projection's bias and activation in its epilogue (non-gated MLPs)
        let up_epi = |bias: u64| match (s.gated, s.act) {
            (false, ActKind::GeluTanh) => Some(LtEpi::GeluTanhBias(bias)),
            (false, ActKind::Relu) => Some(LtEpi::ReluBias(bias)),
            (false, ActKind::Identity) => Some(LtEpi::Bias(bias)),
            _ => None,
        };
        for (li, l) in self.lp.iter().enumerate() {
            linear(qd + 2 * kvd, s.hidden, b.h.ptr, l.w(0, l.qkv_w), b.qkv.ptr)?;
            let seqs = prefill.map_or((0, 0), |p| (p.row0, p.per_seq));
            k.rope_kv(d, m, b.qkv.ptr, l.qkv_b, pos, seqs, b.q.ptr, b.k_cache[li].ptr, b.v_cache[li].ptr, cos, sin, (s.heads, s.kv_heads, s.head_dim), (cache_sb, cache_sh))?;
            match prefill {
                Some(pre) => {
                    let c = pre.per_seq;
                    let p = FlashParams {
                        dtype: dt,
                        batch: pre.seqs,
                        n_heads: s.heads,
                        n_kv_heads: s.kv_heads,
                        head_dim: s.head_dim,
                        q_len: c,
                        kv_len: pre.p0 + c,
                        scale: s.scale,
                        causal: Causal::BottomRight,
                    };
                    let tok_major = |ptr: u64| AttnOperand { ptr, sb: (c * qd) as i64, sh: s.head_dim as i64, ss: qd as i64 };
                    let cache = |buf: &Buf| AttnOperand { ptr: buf.at(pre.row0 * cache_sb as usize, dt), sb: cache_sb, sh: cache_sh, ss: s.head_dim as i64 };
                    match self.short_attn.as_ref().filter(|_| p.kv_len <= SHORT_ATTN_MAX_KEYS) {
                        Some(sa) => sa.forward(d, &p, tok_major(b.q.ptr), cache(&b.k_cache[li]), cache(&b.v_cache[li]), tok_major(b.attn.ptr))?,
                        None => attention::flash_forward(d, &p, tok_major(b.q.ptr), cache(&b.k_cache[li]), cache(&b.v_cache[li]), tok_major(b.attn.ptr), None)?,
                    }
                }
                None => {
                    let p = decode_params(s, dt, m, self.cfg.max_len);
                    let qo = |ptr: u64| AttnOperand { ptr, sb: qd as i64, sh: s.head_dim as i64, ss: 0 };
                    let cache = |buf: &Buf| AttnOperand { ptr: buf.ptr, sb: cache_sb, sh: cache_sh, ss: s.head_dim as i64 };
                    attention::flash_decode(d, &p, qo(b.q.ptr), cache(&b.k_cache[li]), cache(&b.v_cache[li]), qo(b.attn.ptr), kvlen, b.ws.ptr)?;
                }
            }
            linear(s.hidden, qd, b.attn.ptr, l.w(1, l.o_w), b.o.ptr)?;
            k.add_norm(d, m, b.x.ptr, b.o.ptr, l.o_b, l.n2.0, l.n2.1, b.h.ptr, s.hidden, s.eps, rms)?;
            let up = if s.gated { 2 * s.inter } else { s.inter };
            // an epilogue cuBLASLt has no algorithm for runs as the plain product and the kernel
            let in_epilogue = match (lt.filter(|_| l.quant[2].is_none()), up_epi(l.up_b)) {
                (Some(lt), Some(e)) => match lt.linear(d, dt, dt, m, up, s.hidden, b.h.ptr, l.up_w, b.act.ptr, e) {
                    Ok(()) => true,
                    Err(err) if err.is_unsupported() => false,
                    Err(err) => return Err(err),
                },
                _ => false,
            };
            if !in_epilogue {
                linear(up, s.hidden, b.h.ptr, l.w(2, l.up_w), b.mlp.ptr)?;
                k.act(d, m, s.inter, b.mlp.ptr, l.up_b, b.act.ptr, s.act, s.gated)?;
            }
            linear(s.hidden, s.inter, b.act.ptr, l.w(3, l.down_w), b.o.ptr)?;
            let next = if li + 1 < n_layers { self.lp[li + 1].n1 } else { (ptr(&self.w.final_norm.w)?, opt_ptr(&self.w.final_norm.b)?) };
            k.add_norm(d, m, b.x.ptr, b.o.ptr, l.down_b, next.0, next.1, b.h.ptr, s.hidden, s.eps, rms)?;
        }
        Ok(())
    }
}

/// The rows of one prefill pass: `seqs` sequences from `row0`, `per_seq` tokens each (positions
/// `p0..p0 + per_seq`), sequence-major.
#[derive(Clone, Copy)]
struct Pre {
    row0: usize,
    seqs: usize,
    per_seq: usize,
    p0: usize,
}

/// Rows of the activation buffers: a decode batch, or one prefill pass.
fn pass_rows(cfg: &EngineConfig) -> usize {
    cfg.max_batch.max(cfg.prefill_chunk.min(cfg.max_batch * cfg.max_len))
}

fn decode_params(s: &Spec, dtype: DType, batch: usize, max_len: usize) -> DecodeParams {
    DecodeParams { dtype, batch, n_heads: s.heads, n_kv_heads: s.kv_heads, head_dim: s.head_dim, max_kv_len: max_len, scale: s.scale }
}


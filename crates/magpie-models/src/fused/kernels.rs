//! Host side of the engine's kernels (`kernels.cu`): compiled once per storage dtype by NVRTC,
//! launched on raw device addresses. Every launch is asynchronous and capturable in a CUDA graph.

use magpie_core::backend::cuda::blas;
use magpie_core::backend::cuda::compile::{self, PREAMBLE};
use magpie_core::backend::cuda::device::{CudaDevice, Func};
use magpie_core::backend::cuda::launch::{launch, launch_pdl, Args};
use super::prefetch::{Prefetch, PF_SEGS};
use magpie_core::{DType, Error, Result};
use std::collections::HashMap;

const SRC: &str = include_str!("kernels.cu");

/// The activation of an MLP, as `act`'s `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    Silu = 0,
    Gelu = 1,
    GeluTanh = 2,
    Relu = 3,
    /// The bias alone (`in + bias`).
    Identity = 4,
    Tanh = 5,
}

/// What `select_token` does with a row of logits.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleArgs {
    /// <= 0: greedy.
    pub temperature: f32,
    /// 0: off.
    pub top_k: i32,
    /// >= 1: off.
    pub top_p: f32,
    /// 1: off.
    pub penalty: f32,
    pub seed: u64,
}

/// The norm a fused decode GEMV applies to its input rows (the residual stream): the product is
/// taken with `norm(x)`, the statistics summed alongside it (see `gemv_fused` in kernels.cu).
#[derive(Clone, Copy, Debug)]
pub struct GemvNorm {
    /// RMSNorm (true) or LayerNorm.
    pub rms: bool,
    /// The norm's weight and bias (0: none) addresses, `k` elements each.
    pub w: u64,
    pub b: u64,
    pub eps: f32,
}

/// What a fused decode GEMV does with its sums `y [m, n]` (see `gemv_fused` in kernels.cu). Bias
/// addresses may be 0 (none).
#[derive(Clone, Copy, Debug)]
pub enum GemvEpi {
    /// `y` into `y`, in the storage dtype or f32 (`out`). With `amax` (f32 output; 0: none), each
    /// batch row's greedy pick is folded into the u64 `amax[m]` as well (see `gemv_fused` in
    /// kernels.cu; [`Kernels::select`] reads and clears it).
    Store { y: u64, out: DType, amax: u64 },
    /// The residual step: `res [m, n] += round(y + bias)`.
    Residual { res: u64, bias: u64 },
    /// `out [m, n] = act(y + bias)`.
    Act { out: u64, bias: u64, kind: ActKind },
    /// The gated MLP over a `[2 inter, k]` gate | up weight (`n` = 2 inter):
    /// `out [m, inter] = round(act(gate + bias)) * (up + bias)`.
    Gated { out: u64, bias: u64, kind: ActKind },
    /// The attention input of a decode step (row m is sequence m, at position `pos[m]`): q|k|v plus
    /// `bias`, the rotary embedding (`cos`/`sin` tables, 0: none), q into `q [m, heads, head_dim]`
    /// and k, v into the caches, as `rope_kv`.
    Qkv { q: u64, kc: u64, vc: u64, bias: u64, pos: u64, cos: u64, sin: u64, heads: (usize, usize, usize), cache_strides: (i64, i64) },
}

/// `GemvArgs` of kernels.cu, field for field.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GemvArgs {
    x: u64,
    w: u64,
    y: u64,
    nw: u64,
    nb: u64,
    bias: u64,
    res: u64,
    out: u64,
    kc: u64,
    vc: u64,
    pos: u64,
    cos: u64,
    sin: u64,
    amax: u64,
    pfp: [u64; PF_SEGS],
    pfn: [i64; PF_SEGS],
    cache_sb: i64,
    cache_sh: i64,
    n: i32,
    k: i32,
    units: i32,
    ks: i32,
    norm: i32,
    epi: i32,
    act: i32,
    h: i32,
    kvh: i32,
    d: i32,
    eps: f32,
    pf_early: i32,
    evict_first: i32,
    pad: i32,
}

/// Products of one persistent chain at most (`CH_MAX` in kernels.cu).
pub const CHAIN_MAX: usize = 4;

/// Blocks of 128 threads per SM that the chain kernel of (rows, norm) is compiled to keep resident
/// (`CH_MINB` in kernels.cu; index `[rows - 1][norm - 1]`, norm 1 RMS, 2 Layer): its grid never
/// exceeds this many blocks per SM, so every block is resident at once and the grid barriers
/// cannot wait on a block that has no SM.
const CHAIN_MIN_BLOCKS: [[usize; 2]; 4] = [[8, 4], [7, 4], [6, 4], [5, 4]];

/// One product of a persistent chain ([`Kernels::gemv_chain`]): the arguments of
/// [`Kernels::gemv_fused`].
#[derive(Clone, Copy, Debug)]
pub struct GemvCall {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub x: u64,
    pub w: u64,
    pub norm: Option<GemvNorm>,
    pub epi: GemvEpi,
}

/// `ChainArgs` of kernels.cu, field for field.
#[repr(C)]
#[derive(Clone, Copy)]
struct ChainArgs {
    p: [GemvArgs; CHAIN_MAX],
    bar: u64,
    n: i32,
    var: [i32; CHAIN_MAX],
    pad: i32,
}

/// A fused GEMV's arguments as planned by [`Kernels::gemv_plan`].
struct GemvPlan {
    a: GemvArgs,
    /// 0 one row a unit, no norm; 1 one row, a norm; 2 row pairs, a norm.
    rows_norm: usize,
    f32_out: bool,
}

/// The compiled kernels of one storage dtype.
pub struct Kernels {
    pub dtype: DType,
    embed: Func,
    add_norm: Func,
    rope_kv: Func,
    act: Func,
    widen: Func,
    select: Func,
    /// GEMV for 1..=4 rows, output in the storage dtype.
    gemv: [Func; 4],
    /// GEMV for 1..=4 rows with f32 output (the LM head).
    gemv_f32: [Func; 4],
    /// Fused decode GEMV (`gemv_fused`) for 1..=4 rows, by (weight rows per unit, norm): (1, none),
    /// (1, RMS), (1, Layer), (2, RMS), (2, Layer).
    gemvx: [[Func; 5]; 4],
    /// The same with f32 output (the LM head; the first three variants).
    gemvx_f32: [[Func; 3]; 4],
    /// One-kernel decode attention (`attn_decode`) by (lanes per key, query heads per block).
    attn: Vec<((usize, usize), Func)>,
    /// Persistent chains of fused GEMVs (`gemv_chain`) for 1..=4 rows, by norm (RMS, Layer):
    /// a module of their own, compiled by [`load_chain`](Self::load_chain).
    chain: Option<[[Func; 2]; 4]>,
    /// Blocks of a chain's grid (0: the most that stay resident, [`CHAIN_MIN_BLOCKS`] per SM;
    /// fewer for tests: the products then loop over more unit groups per block).
    pub chain_grid: usize,
    /// Warps per output unit of the fused GEMV (1, 2 or 4); 0 chooses from the shape.
    pub gemv_split: usize,
    /// With `gemv_split` 0, choose the split by the rounds of batched weight loads
    /// ([`split_by_rounds`] with this least gain; 0: split while the SMs hold under 32 warps each).
    pub split_min_gain: u32,
    /// Launch with programmatic dependent launch (each kernel's launch overlaps the previous one's tail).
    pub pdl: bool,
    /// The fused GEMV reads its weight rows with the L2 evict-first policy (they are read once per
    /// step; what the prefetch plan asked for stays in L2).
    pub evict_first: bool,
}

fn ctype(dt: DType) -> Result<&'static str> {
    match dt {
        DType::F32 => Ok("float"),
        DType::BF16 => Ok("bf16_t"),
        DType::F16 => Ok("half_t"),
        d => Err(Error::unsupported("fused", format!("the fused engine runs float32, bfloat16 or float16, not {d}"))),
    }
}

/// The fused GEMV variants of `mb` rows (see [`Kernels::gemvx`]).
fn gemvx(mb: usize, f: &dyn Fn(&str) -> Result<Func>) -> Result<[Func; 5]> {
    let [a, b, c] = gemvx_plain(mb, f)?;
    Ok([a, b, c, f(&format!("gemvx{mb}r2n1"))?, f(&format!("gemvx{mb}r2n2"))?])
}

/// The one-row-per-unit fused GEMV variants of `mb` rows: no norm, RMSNorm, LayerNorm.
fn gemvx_plain(mb: usize, f: &dyn Fn(&str) -> Result<Func>) -> Result<[Func; 3]> {
    Ok([f(&format!("gemvx{mb}r1n0"))?, f(&format!("gemvx{mb}r1n1"))?, f(&format!("gemvx{mb}r1n2"))?])
}

/// Weight loads a lane of the fused GEMV issues together (`8 / R` chunks of R rows: GU in
/// kernels.cu).
const GEMV_BATCH_LOADS: usize = 8;

/// Warps per unit (1, 2 or 4) for a fused GEMV of `units` units of `rows` weight rows (1 or 2)
/// over `chunks` 16-byte chunks on `sms` SMs. A lane of a unit split over `ks` warps streams
/// `n = ceil(chunks / 32 ks)` chunks in rounds of batched loads (batches of `8 / rows` chunks,
/// then halving batches for the rest: one memory round trip each), and the units' warps fill
/// the SMs in waves of about 32 warps per SM. The estimated round trips are rounds times waves
/// (a part-full wave counting its fraction). A split costs too (a cross-warp sum through shared
/// memory, two block barriers per unit group; measured on an H200, `benchmark/NOTES.md`), so it
/// is taken only where it divides the round trips of the unsplit GEMV by at least `min_gain`
/// (1: any gain); then the split with the fewest round trips wins, ties going to fewer warps.
///
/// ```
/// use magpie_models::fused::split_by_rounds;
/// // Llama-3.2-1B bf16 on 132 SMs: o (2048 rows of 256 chunks) one warp a row, one round of 8
/// // loads a lane; the q|k|v row pairs two warps (two rounds become one); down (1024 chunks a
/// // row) four
/// assert_eq!(split_by_rounds(2048, 256, 1, 132, 2), 1);
/// assert_eq!(split_by_rounds(1536, 256, 2, 132, 2), 2);
/// assert_eq!(split_by_rounds(2048, 1024, 1, 132, 2), 4);
/// ```
pub fn split_by_rounds(units: usize, chunks: usize, rows: usize, sms: usize, min_gain: u32) -> usize {
    let batch = (GEMV_BATCH_LOADS / rows.max(1)).max(1);
    let cap = (sms.max(1) * 32) as f64;
    let cost = |ks: usize| {
        let n = chunks.div_ceil(32 * ks);
        let rounds = n / batch + (n % batch).count_ones() as usize;
        rounds as f64 * ((units * ks) as f64 / cap).max(1.0)
    };
    let whole = cost(1);
    let mut best = (whole, 1);
    for ks in [2usize, 4] {
        if chunks < 32 * ks {
            break;
        }
        let c = cost(ks);
        if c * min_gain.max(1) as f64 <= whole + 1e-9 && c < best.0 - 1e-9 {
            best = (c, ks);
        }
    }
    best.1
}

/// The (lanes per key, query heads per block) instances of `attn_decode` in kernels.cu.
const ATTN_VARIANTS: [(usize, usize); 14] = [(2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (4, 4), (8, 1), (8, 2), (8, 4), (16, 1), (16, 2), (16, 4), (32, 1), (32, 2)];
/// Key splits of `attn_decode` (the cluster size, `ATT_SPLITS` in kernels.cu) and its threads.
const ATTN_SPLITS: u32 = 4;
const ATTN_THREADS: u32 = 256;
/// The longest cache `attn_decode` serves (each block walks a quarter of the keys; past this the
/// split-KV kernels of the core spread the keys over more blocks).
pub const ATTN_MAX_LEN: usize = 4096;

/// `AttnArgs` of kernels.cu, field for field.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AttnArgs {
    q: u64,
    kc: u64,
    vc: u64,
    o: u64,
    kvlen: u64,
    pfp: [u64; PF_SEGS],
    pfn: [i64; PF_SEGS],
    cache_sb: i64,
    cache_sh: i64,
    h: i32,
    kvh: i32,
    hgroups: i32,
    max_len: i32,
    scale_log2: f32,
    kv_prefetch: i32,
}

/// The shapes of one [`Kernels::attn_decode`] call.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    /// Sequences (rows of q).
    pub batch: usize,
    /// Query heads, key/value heads, head dim.
    pub heads: (usize, usize, usize),
    /// Element strides of the caches between sequences and between kv heads (keys are `head_dim` apart).
    pub cache_strides: (i64, i64),
    /// The caches' length: key counts are clamped to it.
    pub max_len: usize,
    /// Softmax scale of the scores.
    pub scale: f32,
}

impl Kernels {
    /// Compiles (or loads from the kernel cache) the kernels for `dtype` on `dev`.
    pub fn new(dev: &CudaDevice, dtype: DType) -> Result<Kernels> {
        let t = ctype(dtype)?;
        // kernel `fused_<k>` is compiled as `fused_<k><suffix>`: the name NVRTC's module exports and
        // the key of the kernel cache
        let src = |ot: &str, suffix: &str| format!("{PREAMBLE}\ntypedef {t} T;\ntypedef {ot} OT;\n#define MP_SUFFIX {suffix}\n{SRC}");
        let (s1, s2) = (format!("_{}", dtype.name()), format!("_{}_f32out", dtype.name()));
        let (same, f32o) = (src(t, &s1), src("float", &s2));
        // every kernel of a module from one NVRTC compilation (the GEMV variants make the source
        // heavy: compiling it once per kernel took minutes)
        let mut plain: Vec<String> = ["embed", "add_norm", "rope_kv", "act", "widen", "select_token", "gemv1", "gemv2", "gemv3", "gemv4"].iter().map(|k| k.to_string()).collect();
        let mut wide: Vec<String> = ["gemv1", "gemv2", "gemv3", "gemv4"].iter().map(|k| k.to_string()).collect();
        for mb in 1..=4 {
            for v in ["r1n0", "r1n1", "r1n2", "r2n1", "r2n2"] {
                plain.push(format!("gemvx{mb}{v}"));
            }
            for v in ["r1n0", "r1n1", "r1n2"] {
                wide.push(format!("gemvx{mb}{v}"));
            }
        }
        for (lk, g) in ATTN_VARIANTS {
            plain.push(format!("attn_l{lk}g{g}"));
        }
        let load = |names: &[String], suffix: &str, src: &str| -> Result<HashMap<String, Func>> {
            let full: Vec<String> = names.iter().map(|k| format!("fused_{k}{suffix}")).collect();
            let fs = compile::functions(dev, &format!("fused{suffix}"), src, &full)?;
            Ok(names.iter().cloned().zip(fs).collect())
        };
        let fm = load(&plain, &s1, &same)?;
        let gm = load(&wide, &s2, &f32o)?;
        let pick = |m: &HashMap<String, Func>, k: &str| m.get(k).copied().ok_or_else(|| Error::device("fused", format!("kernel {k} missing")));
        let f = |k: &str| pick(&fm, k);
        let g = |k: &str| pick(&gm, k);
        Ok(Kernels {
            dtype,
            embed: f("embed")?,
            add_norm: f("add_norm")?,
            rope_kv: f("rope_kv")?,
            act: f("act")?,
            widen: f("widen")?,
            select: f("select_token")?,
            gemv: [f("gemv1")?, f("gemv2")?, f("gemv3")?, f("gemv4")?],
            gemv_f32: [g("gemv1")?, g("gemv2")?, g("gemv3")?, g("gemv4")?],
            gemvx: [gemvx(1, &f)?, gemvx(2, &f)?, gemvx(3, &f)?, gemvx(4, &f)?],
            gemvx_f32: [gemvx_plain(1, &g)?, gemvx_plain(2, &g)?, gemvx_plain(3, &g)?, gemvx_plain(4, &g)?],
            attn: ATTN_VARIANTS.iter().map(|&(lk, gb)| Ok(((lk, gb), f(&format!("attn_l{lk}g{gb}"))?))).collect::<Result<_>>()?,
            chain: None,
            chain_grid: 0,
            gemv_split: 0,
            split_min_gain: 2,
            pdl: true,
            evict_first: true,
        })
    }

    /// Compiles (or loads from the kernel cache) the persistent chain kernels ([`gemv_chain`](Self::gemv_chain)),
    /// a module of their own so that engines without the chain do not pay their compilation.
    pub fn load_chain(&mut self, dev: &CudaDevice) -> Result<()> {
        if self.chain.is_some() {
            return Ok(());
        }
        let t = ctype(self.dtype)?;
        let suffix = format!("_{}_chain", self.dtype.name());
        let src = format!("{PREAMBLE}\ntypedef {t} T;\ntypedef {t} OT;\n#define MP_SUFFIX {suffix}\n#define MP_CHAIN_MODULE\n{SRC}");
        let names: Vec<String> = (1..=4).flat_map(|mb| [1, 2].map(|n| format!("fused_chain{mb}n{n}{suffix}"))).collect();
        let fs = compile::functions(dev, &format!("fused{suffix}"), &src, &names)?;
        let mut chain = [[None; 2]; 4];
        for (i, f) in fs.into_iter().enumerate().take(8) {
            chain[i / 2][i % 2] = Some(f);
        }
        let get = |mb: usize, n: usize| chain[mb][n].ok_or_else(|| Error::device("fused", format!("kernel chain{}n{} missing", mb + 1, n + 1)));
        self.chain = Some([[get(0, 0)?, get(0, 1)?], [get(1, 0)?, get(1, 1)?], [get(2, 0)?, get(2, 1)?], [get(3, 0)?, get(3, 1)?]]);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn go(&self, dev: &CudaDevice, op: &str, f: Func, grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32, a: &mut Args) -> Result<()> {
        if self.pdl {
            launch_pdl(dev, op, f, grid, block, shared, a)
        } else {
            launch(dev, op, f, grid, block, shared, a)
        }
    }

    /// `x[m] = wte[tok[m]] (+ wpe[pos[m]]) (+ tte[types[m]])` for `m < rows` (0 addresses: absent;
    /// `types` 0 with a `tte`: type 0); with `kvlen`, `kvlen[m] = pos[m] + 1`.
    #[allow(clippy::too_many_arguments)]
    pub fn embed(&self, dev: &CudaDevice, rows: usize, tok: u64, pos: u64, wte: u64, wpe: u64, x: u64, dim: usize, kvlen: u64, tte: u64, types: u64) -> Result<()> {
        let mut a = Args::new();
        a.push(tok).push(pos).push(wte).push(wpe).push(x).push(dim as i32).push(kvlen).push(tte).push(types);
        self.go(dev, "fused.embed", self.embed, (rows as u32, 1, 1), (256, 1, 1), 0, &mut a)
    }

    /// `x += delta + dbias` (delta 0: none), then `h = norm(x)` per row.
    #[allow(clippy::too_many_arguments)]
    pub fn add_norm(&self, dev: &CudaDevice, rows: usize, x: u64, delta: u64, dbias: u64, w: u64, b: u64, h: u64, dim: usize, eps: f32, rms: bool) -> Result<()> {
        let threads = if dim >= 4096 { 1024 } else if dim >= 1024 { 512 } else { 256 };
        let mut a = Args::new();
        a.push(x).push(delta).push(dbias).push(w).push(b).push(h).push(dim as i32).push(eps).push(rms as i32);
        self.go(dev, "fused.add_norm", self.add_norm, (rows as u32, 1, 1), (threads, 1, 1), (dim * 4) as u32, &mut a)
    }

    /// Bias, rotary embedding and the KV-cache write of `rows` tokens (see `rope_kv` in kernels.cu);
    /// `seqs = (first sequence, tokens per sequence)`, or `(0, 0)` for a decode step.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_kv(&self, dev: &CudaDevice, rows: usize, qkv: u64, bias: u64, pos: u64, seqs: (usize, usize), q_out: u64, kc: u64, vc: u64, cos: u64, sin: u64, heads: (usize, usize, usize), cache_strides: (i64, i64)) -> Result<()> {
        let (h, kvh, d) = heads;
        let threads = (d / 2).clamp(32, 256) as u32;
        let mut a = Args::new();
        a.push(qkv).push(bias).push(pos).push(seqs.0 as i32).push(seqs.1 as i32).push(q_out).push(kc).push(vc).push(cos).push(sin);
        a.push(h as i32).push(kvh as i32).push(d as i32).push(cache_strides.0).push(cache_strides.1);
        self.go(dev, "fused.rope_kv", self.rope_kv, (rows as u32, (h + 2 * kvh) as u32, 1), (threads, 1, 1), 0, &mut a)
    }

    /// `out = act(in + bias)` (times the up half when `gated`), `rows x inter` outputs.
    #[allow(clippy::too_many_arguments)]
    pub fn act(&self, dev: &CudaDevice, rows: usize, inter: usize, input: u64, bias: u64, out: u64, kind: ActKind, gated: bool) -> Result<()> {
        let n = rows * inter;
        let blocks = n.div_ceil(256).clamp(1, dev.sm_count as usize * 8) as u32;
        let mut a = Args::new();
        a.push(input).push(bias).push(out).push(rows as i64).push(inter as i32).push(kind as i32).push(gated as i32);
        self.go(dev, "fused.act", self.act, (blocks, 1, 1), (256, 1, 1), 0, &mut a)
    }

    /// `y[j] = x[j]` as f32 for `j < n` (`x` in the storage dtype).
    pub fn widen(&self, dev: &CudaDevice, n: usize, x: u64, y: u64) -> Result<()> {
        let blocks = n.div_ceil(256).clamp(1, dev.sm_count as usize * 8) as u32;
        let mut a = Args::new();
        a.push(x).push(y).push(n as i64);
        self.go(dev, "fused.widen", self.widen, (blocks, 1, 1), (256, 1, 1), 0, &mut a)
    }

    /// Picks each row's next token from f32 `logits [rows, vocab]`.
    #[allow(clippy::too_many_arguments)]
    /// Each row's buffers start at the given addresses; `sargs` addresses a [`SampleArgs`] and
    /// `row0` is the first row's sequence index (it seeds the row's draws).
    /// `hist` (0: none) receives each sequence's token at its draw count (`hist_stride` per sequence).
    /// `amax` (0: none): the u64 per row that a [`GemvEpi::Store`] with `amax` filled; a greedy
    /// selection without penalty takes its token from there; it is cleared either way.
    pub fn select(&self, dev: &CudaDevice, rows: usize, logits: u64, vocab: usize, seen: u64, tok: u64, pos: u64, ctr: u64, sargs: u64, row0: usize, hist: (u64, usize), amax: u64) -> Result<()> {
        let mut a = Args::new();
        a.push(logits).push(vocab as i32).push(seen).push(tok).push(pos).push(ctr).push(sargs).push(row0 as i32).push(hist.0).push(hist.1 as i32).push(amax);
        self.go(dev, "fused.select_token", self.select, (rows as u32, 1, 1), (1024, 1, 1), 0, &mut a)
    }

    /// `y[m, n] = x[m, k] · w[n, k]ᵀ`: our GEMV for 1 to 4 rows where its alignment holds (the
    /// decode case: the weights dominate), cuBLAS otherwise. `out` is the storage dtype or f32.
    #[allow(clippy::too_many_arguments)]
    pub fn linear(&self, dev: &CudaDevice, m: usize, n: usize, k: usize, x: u64, w: u64, y: u64, out: DType, use_gemv: bool) -> Result<()> {
        let vec = 16 / self.dtype.size();
        let aligned = k.is_multiple_of(vec) && x.is_multiple_of(16) && w.is_multiple_of(16);
        if use_gemv && (1..=4).contains(&m) && aligned && n > 0 {
            let f = if out == self.dtype { self.gemv[m - 1] } else { self.gemv_f32[m - 1] };
            let warps = 4u32;
            let mut a = Args::new();
            a.push(x).push(w).push(y).push(n as i32).push(k as i32);
            return self.go(dev, "fused.gemv", f, (n.div_ceil(warps as usize) as u32, 1, 1), (32 * warps, 1, 1), 0, &mut a);
        }
        blas::gemm_nt(dev, self.dtype, out, m, n, k, x, w, y)
    }

    /// Whether `gemv_fused` takes `m` rows of `k` (16-byte aligned rows and addresses, the norm's
    /// weight and bias included; `norm` holds their addresses, 0 for none).
    pub fn gemv_fusable(&self, m: usize, k: usize, x: u64, w: u64, norm: (u64, u64)) -> bool {
        let vec = 16 / self.dtype.size();
        (1..=4).contains(&m) && k > 0 && k.is_multiple_of(vec) && k <= i32::MAX as usize && [x, w, norm.0, norm.1].iter().all(|p| p.is_multiple_of(16))
    }

    /// `y [m, n] = norm(x) [m, k] · w [n, k]ᵀ` for a decode batch of 1 to 4 rows, with the
    /// neighbouring steps folded in: `norm` (None: x as given) and `epi` (what happens to the
    /// sums); the blocks also ask L2 for `pf`'s ranges (the weights of later kernels). See
    /// `gemv_fused` in kernels.cu.
    #[allow(clippy::too_many_arguments)]
    pub fn gemv_fused(&self, dev: &CudaDevice, m: usize, n: usize, k: usize, x: u64, w: u64, norm: Option<GemvNorm>, epi: GemvEpi, pf: &Prefetch) -> Result<()> {
        let op = "fused.gemv_fused";
        let GemvPlan { a, rows_norm, f32_out } = self.gemv_plan(op, dev, &GemvCall { m, n, k, x, w, norm, epi }, pf)?;
        let f = match (f32_out, rows_norm, a.norm) {
            (false, 0, _) => self.gemvx[m - 1][0],
            (false, 1, nk) => self.gemvx[m - 1][nk as usize],
            (false, _, nk) => self.gemvx[m - 1][2 + nk as usize],
            (true, 0, _) => self.gemvx_f32[m - 1][0],
            (true, 1, nk) => self.gemvx_f32[m - 1][nk as usize],
            _ => return Err(Error::value(op, "f32 output is for plain products")),
        };
        let warps = 4usize;
        let blocks = (a.units as usize).div_ceil(warps / a.ks as usize).clamp(1, i32::MAX as usize);
        let mut args = Args::new();
        args.push(a);
        self.go(dev, op, f, (blocks as u32, 1, 1), (32 * warps as u32, 1, 1), 0, &mut args)
    }

    /// Several fused GEMVs (at most [`CHAIN_MAX`], each as [`gemv_fused`](Self::gemv_fused) would
    /// run it, the same sums bit for bit) in one persistent kernel: every block stays resident and
    /// the blocks meet at a grid barrier between products (`bar`: two zeroed u32 of device memory,
    /// used by one chain at a time; each barrier leaves them ready for the next). For products
    /// that each need all of the one before, e.g. a decode step's o, gate|up, down and next q|k|v.
    /// Storage-dtype outputs only (not the LM head's f32 logits); the normed products share one
    /// norm kind; no L2 prefetch plan.
    pub fn gemv_chain(&self, dev: &CudaDevice, calls: &[GemvCall], bar: u64) -> Result<()> {
        let op = "fused.gemv_chain";
        let Some(chain) = self.chain.as_ref() else {
            return Err(Error::value(op, "the chain kernels are not loaded (Kernels::load_chain)"));
        };
        if calls.is_empty() || calls.len() > CHAIN_MAX {
            return Err(Error::value(op, format!("a chain runs 1 to {CHAIN_MAX} products, got {}", calls.len())));
        }
        let m = calls[0].m;
        if calls.iter().any(|c| c.m != m) || bar == 0 || !bar.is_multiple_of(8) {
            return Err(Error::value(op, format!("the products of a chain take the same rows and an 8-byte aligned barrier, got rows {:?} and {bar:#x}", calls.iter().map(|c| c.m).collect::<Vec<_>>())));
        }
        let mut p = [GemvArgs::default(); CHAIN_MAX];
        let mut var = [0i32; CHAIN_MAX];
        let mut norm = 0;
        let mut groups = 1usize;
        for (i, c) in calls.iter().enumerate() {
            let plan = self.gemv_plan(op, dev, c, &Prefetch::default())?;
            if plan.f32_out {
                return Err(Error::value(op, "a chain writes storage-dtype outputs, not f32"));
            }
            if plan.a.norm != 0 {
                if norm != 0 && norm != plan.a.norm {
                    return Err(Error::value(op, "the products of a chain take one norm kind"));
                }
                norm = plan.a.norm;
            }
            groups = groups.max((plan.a.units as usize).div_ceil(4 / plan.a.ks as usize));
            p[i] = plan.a;
            var[i] = plan.rows_norm as i32;
        }
        let nk = norm.max(1) as usize;
        let sms = dev.sm_count.max(1) as usize;
        let resident = sms * CHAIN_MIN_BLOCKS[m - 1][nk - 1];
        let grid = match self.chain_grid {
            0 => resident,
            g => g.min(resident),
        }
        .min(groups)
        .max(1);
        let a = ChainArgs { p, bar, n: calls.len() as i32, var, pad: 0 };
        let mut args = Args::new();
        args.push(a);
        self.go(dev, op, chain[m - 1][nk - 1], (grid as u32, 1, 1), (128, 1, 1), 0, &mut args)
    }

    /// The kernel arguments of one fused GEMV (see [`gemv_fused`](Self::gemv_fused)) and its variant.
    fn gemv_plan(&self, op: &str, dev: &CudaDevice, c: &GemvCall, pf: &Prefetch) -> Result<GemvPlan> {
        let GemvCall { m, n, k, x, w, norm, epi } = *c;
        let nptr = norm.map_or((0, 0), |nm| (nm.w, nm.b));
        if !self.gemv_fusable(m, k, x, w, nptr) || n == 0 || n > i32::MAX as usize {
            return Err(Error::value(op, format!("{m} rows of {k} (x at {x:#x}, w at {w:#x}) x {n} outputs do not fit the fused GEMV")));
        }
        let (pfp, pfn) = pf_fields(op, pf)?;
        let mut a = GemvArgs { x, w, n: n as i32, k: k as i32, units: n as i32, pfp, pfn, pf_early: pf.early as i32, evict_first: self.evict_first as i32, ..GemvArgs::default() };
        if let Some(nm) = norm {
            a.norm = if nm.rms { 1 } else { 2 };
            a.nw = nm.w;
            a.nb = nm.b;
            a.eps = nm.eps;
        }
        let mut pair = false;
        let mut f32_out = false;
        match epi {
            GemvEpi::Store { y, out, amax } => {
                a.y = y;
                if out == DType::F32 && self.dtype != DType::F32 {
                    f32_out = true;
                } else if out != self.dtype {
                    return Err(Error::value(op, format!("output dtype {out} of a {} GEMV", self.dtype)));
                }
                if amax != 0 && (out != DType::F32 || !amax.is_multiple_of(8)) {
                    return Err(Error::value(op, format!("the fused argmax needs f32 output and an 8-byte aligned slot, got {out} at {amax:#x}")));
                }
                a.amax = amax;
            }
            GemvEpi::Residual { res, bias } => {
                a.epi = 1;
                a.res = res;
                a.bias = bias;
            }
            GemvEpi::Act { out, bias, kind } => {
                a.epi = 2;
                a.out = out;
                a.bias = bias;
                a.act = kind as i32;
            }
            GemvEpi::Gated { out, bias, kind } => {
                if !n.is_multiple_of(2) {
                    return Err(Error::value(op, format!("a gate | up weight has an even row count, got {n}")));
                }
                a.epi = 3;
                a.out = out;
                a.bias = bias;
                a.act = kind as i32;
                a.units = (n / 2) as i32;
                pair = true;
            }
            GemvEpi::Qkv { q, kc, vc, bias, pos, cos, sin, heads: (h, kvh, d), cache_strides: (sb, sh) } => {
                if d == 0 || !d.is_multiple_of(2) || (h + 2 * kvh) * d != n {
                    return Err(Error::value(op, format!("{n} q|k|v rows for {h} + 2 x {kvh} heads of dim {d} (even dims only)")));
                }
                a.epi = 4;
                a.out = q;
                a.kc = kc;
                a.vc = vc;
                a.bias = bias;
                a.pos = pos;
                a.cos = cos;
                a.sin = sin;
                a.h = h as i32;
                a.kvh = kvh as i32;
                a.d = d as i32;
                a.cache_sb = sb;
                a.cache_sh = sh;
                a.units = (n / 2) as i32;
                pair = true;
            }
        }
        let units = a.units as usize;
        let chunks = k / (16 / self.dtype.size());
        let sms = dev.sm_count.max(1) as usize;
        let ks = match self.gemv_split {
            0 if self.split_min_gain > 0 => split_by_rounds(units, chunks, if pair { 2 } else { 1 }, sms, self.split_min_gain),
            0 => {
                // the rule of 2026-11-26: split K while the units alone leave the SMs under ~32
                // warps each and every warp still loops at least twice
                let mut ks = 1;
                while ks < 4 && units * ks < sms * 32 && chunks >= 32 * ks * 4 {
                    ks *= 2;
                }
                ks
            }
            s => s.next_power_of_two().min(4),
        };
        a.ks = ks as i32;
        let rows_norm = match (pair, a.norm) {
            (false, 0) => 0,
            (false, _) => 1,
            (true, 0) => return Err(Error::value(op, "the row-pair epilogues come with a norm")),
            (true, _) => 2,
        };
        if f32_out && pair {
            return Err(Error::value(op, "f32 output is for plain products"));
        }
        Ok(GemvPlan { a, rows_norm, f32_out })
    }

    /// The (lanes per key, query heads per block) of `attn_decode` for `shape`, when it serves it:
    /// 16-byte key rows split over a power of two of lanes (2..32) and a cache of at most
    /// [`ATTN_MAX_LEN`] keys.
    fn attn_plan(&self, shape: &AttnShape) -> Option<(usize, usize)> {
        let (h, kvh, d) = shape.heads;
        let bytes = d * self.dtype.size();
        if kvh == 0 || h == 0 || !h.is_multiple_of(kvh) || !bytes.is_multiple_of(16) || shape.max_len > ATTN_MAX_LEN || shape.batch == 0 || shape.batch > 65535 {
            return None;
        }
        let lk = bytes / 16;
        let g = (h / kvh).next_power_of_two().min(if lk == 32 { 2 } else { 4 });
        ATTN_VARIANTS.contains(&(lk, g)).then_some((lk, g))
    }

    /// Whether [`attn_decode`](Self::attn_decode) serves `shape` with q, the caches and o at these
    /// addresses (16-byte aligned).
    pub fn attn_fits(&self, shape: &AttnShape, ptrs: [u64; 4]) -> bool {
        self.attn_plan(shape).is_some() && ptrs.iter().all(|p| p.is_multiple_of(16))
    }

    /// Decode attention of one query per sequence in one launch: `q [batch, heads, head_dim]` over
    /// keys `0..kvlen[b]` (device i32, read on the device) of the caches `kc`, `vc` (laid out as
    /// `shape.cache_strides` say), into `o [batch, heads, head_dim]`. A cluster of four blocks per
    /// (sequence, kv head, head group) splits the keys and merges on the chip (see `attn_decode` in
    /// kernels.cu). The same values as the core's `flash_decode` up to the order of f32 sums.
    /// Before waiting for the previous kernel, the blocks ask L2 for their keys and values
    /// (`kv_prefetch`) and for `pf`'s ranges.
    #[allow(clippy::too_many_arguments)]
    pub fn attn_decode(&self, dev: &CudaDevice, shape: &AttnShape, q: u64, kc: u64, vc: u64, o: u64, kvlen: u64, pf: &Prefetch, kv_prefetch: bool) -> Result<()> {
        let op = "fused.attn_decode";
        let plan = self.attn_plan(shape).filter(|_| [q, kc, vc, o].iter().all(|p| p.is_multiple_of(16)));
        let Some((lk, gb)) = plan else {
            return Err(Error::value(op, format!("{shape:?} does not fit the one-kernel decode attention")));
        };
        let f = self.attn.iter().find(|(k, _)| *k == (lk, gb)).map(|(_, f)| *f).ok_or_else(|| Error::device(op, format!("kernel attn_l{lk}g{gb} missing")))?;
        let (h, kvh, _) = shape.heads;
        let hgroups = (h / kvh).div_ceil(gb);
        let (pfp, pfn) = pf_fields(op, pf)?;
        let a = AttnArgs {
            q,
            kc,
            vc,
            o,
            kvlen,
            pfp,
            pfn,
            cache_sb: shape.cache_strides.0,
            cache_sh: shape.cache_strides.1,
            h: h as i32,
            kvh: kvh as i32,
            hgroups: hgroups as i32,
            max_len: shape.max_len as i32,
            scale_log2: shape.scale * std::f32::consts::LOG2_E,
            kv_prefetch: kv_prefetch as i32,
        };
        let mut args = Args::new();
        args.push(a);
        self.go(dev, op, f, (ATTN_SPLITS, (kvh * hgroups) as u32, shape.batch as u32), (ATTN_THREADS, 1, 1), 0, &mut args)
    }
}

/// The prefetch ranges as kernel arguments (16-byte aligned multiples of 16: what
/// `cp.async.bulk.prefetch` takes).
fn pf_fields(op: &str, pf: &Prefetch) -> Result<([u64; PF_SEGS], [i64; PF_SEGS])> {
    let mut p = [0u64; PF_SEGS];
    let mut n = [0i64; PF_SEGS];
    for (i, &(a, b)) in pf.segs.iter().enumerate() {
        if !a.is_multiple_of(16) || !b.is_multiple_of(16) || b > i64::MAX as u64 {
            return Err(Error::value(op, format!("prefetch range {a:#x} + {b} is not 16-byte aligned")));
        }
        p[i] = a;
        n[i] = b as i64;
    }
    Ok((p, n))
}


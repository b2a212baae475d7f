//! The Q4_K decode GEMV of the fused engine with the small kernels around it folded in
//! (`quant_fold.cu`): RMSNorm on the input while it is coded to 8 bits, and the residual add, the
//! gated MLP or the rotary embedding + KV-cache write in the epilogue, so that a quantized decode
//! step runs as few kernels per block as the dense folded step.

use super::kernels::{GemvEpi, GemvNorm};
use magpie_core::backend::cuda::compile::{self, PREAMBLE};
use magpie_core::backend::cuda::device::{CudaDevice, Func};
use magpie_core::backend::cuda::launch::{launch, launch_pdl, Args};
use magpie_core::{DType, Error, Result};

const SRC: &str = include_str!("quant_fold.cu");

/// Warps per block (`QF_WARPS`) and blocks per SM of the kernel's persistent grid.
const WARPS: usize = 8;
const BLOCKS_PER_SM: usize = 2;
/// Shared memory a launch may take without opting in to more (x's codes + the norm's sums).
const MAX_SHARED: usize = 48 * 1024;

/// Decode rows one launch takes.
pub const FOLD_MAX_ROWS: usize = 4;

/// `QfArgs` of quant_fold.cu, field for field.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct QfArgs {
    w: u64,
    x: u64,
    nw: u64,
    bias: u64,
    out: u64,
    res: u64,
    kc: u64,
    vc: u64,
    pos: u64,
    cos: u64,
    sin: u64,
    cache_sb: i64,
    cache_sh: i64,
    n: i32,
    k: i32,
    units: i32,
    norm: i32,
    epi: i32,
    act: i32,
    h: i32,
    kvh: i32,
    d: i32,
    eps: f32,
}

/// The folded Q4_K decode GEMV for one storage dtype (bfloat16 or float16: the kernel codes its
/// input to 8 bits, as the core's Q4_K GEMV does for these dtypes).
///
/// ```no_run
/// use magpie_models::fused::QuantFold;
/// # fn main() -> magpie_core::Result<()> {
/// let dev = magpie_core::backend::cuda::device::device("example", 0)?;
/// let qf = QuantFold::new(&dev, magpie_core::DType::BF16)?;
/// assert!(qf.fits(1, 2048, 0x1000, 0x2000));
/// # Ok(()) }
/// ```
pub struct QuantFold {
    dtype: DType,
    f: [Func; FOLD_MAX_ROWS],
    /// The one-row kernel that codes x per lane (`fused_qfold1w`).
    f1w: Func,
    /// Launch with programmatic dependent launch (the first weight loads overlap the previous kernel).
    pub pdl: bool,
    /// One-row launches of `k <= 2048` code x per lane in registers, with no shared memory and no
    /// block barrier before the first product (false, the default: the block codes x into shared
    /// memory, as for other shapes). Same codes either way; the norm's sum of squares is added in
    /// another order. Slower on an NVIDIA H200 (every warp reads and codes the whole row:
    /// `examples/quant_fold_bench.rs`, benchmark/NOTES.md); kept for measurement.
    pub warp_coding: bool,
}

/// The largest K whose one-row launches may code x per lane (one 64-value piece per lane).
const WARP_CODING_MAX_K: usize = 2048;

impl QuantFold {
    /// Compiles (or loads from the kernel cache) the kernels for `dtype` on `dev`; an error for a
    /// dtype other than bfloat16 / float16.
    pub fn new(dev: &CudaDevice, dtype: DType) -> Result<QuantFold> {
        let t = match dtype {
            DType::BF16 => "bf16_t",
            DType::F16 => "half_t",
            d => return Err(Error::unsupported("fused.quant_fold", format!("the folded Q4_K GEMV takes bfloat16 or float16 activations, not {d}"))),
        };
        let suffix = format!("_{}_qfold", dtype.name());
        let src = format!("{PREAMBLE}\ntypedef {t} T;\n#define MP_SUFFIX {suffix}\n{SRC}");
        let mut names: Vec<String> = (1..=FOLD_MAX_ROWS).map(|m| format!("fused_qfold{m}{suffix}")).collect();
        names.push(format!("fused_qfold1w{suffix}"));
        let mut fs = compile::functions(dev, &format!("fused{suffix}"), &src, &names)?;
        let missing = || Error::device("fused.quant_fold", "kernels missing from the module");
        let f1w = fs.pop().ok_or_else(missing)?;
        let f: [Func; FOLD_MAX_ROWS] = fs.try_into().map_err(|_| missing())?;
        Ok(QuantFold { dtype, f, f1w, pdl: true, warp_coding: false })
    }

    /// The storage dtype the kernels were compiled for.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Whether a launch takes `m` rows of `k` values at `x` with the norm weight at `nw` (0: no
    /// norm): 1 to 4 rows, `k` a multiple of 256 (whole Q4_K blocks), 16-byte aligned rows, and
    /// x's codes within the shared memory of a block.
    pub fn fits(&self, m: usize, k: usize, x: u64, nw: u64) -> bool {
        (1..=FOLD_MAX_ROWS).contains(&m) && k > 0 && k.is_multiple_of(256) && k <= i32::MAX as usize && x.is_multiple_of(16) && nw.is_multiple_of(16) && shared(m, k) <= MAX_SHARED
    }

    /// `y [m, n] = norm(x) [m, k] · Wᵀ` for `m` decode rows, `W [n, k]` Q4_K blocks at `w` (rows
    /// of `k / 256` blocks of 144 bytes), with `norm` (RMSNorm only; None: x as given) applied on
    /// the fly and `epi` applied to the sums: `Store` (storage dtype, no argmax), `Residual`,
    /// `Gated` and `Qkv` as the dense `gemv_fused` (`Act` is not folded). Rows of x are `k` apart,
    /// of the outputs `n` apart (`Gated`: `n / 2`).
    ///
    /// # Safety
    /// Every address must be live device memory of `dev` holding what the epilogue reads and
    /// writes for `m` rows (as `Kernels::gemv_fused`), the weight `n * k / 256` Q4_K blocks, 16-byte
    /// aligned; outputs apart from x.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemv(&self, dev: &CudaDevice, m: usize, n: usize, k: usize, x: u64, w: u64, norm: Option<GemvNorm>, epi: GemvEpi) -> Result<()> {
        let op = "fused.quant_fold";
        let nw = norm.map_or(0, |nm| nm.w);
        if !self.fits(m, k, x, nw) || !w.is_multiple_of(16) || n == 0 || n > i32::MAX as usize {
            return Err(Error::value(op, format!("{m} rows of {k} (x at {x:#x}, W at {w:#x}) x {n} outputs do not fit the folded Q4_K GEMV")));
        }
        let mut a = QfArgs { w, x, n: n as i32, k: k as i32, ..QfArgs::default() };
        if let Some(nm) = norm {
            if !nm.rms || nm.b != 0 {
                return Err(Error::unsupported(op, "the folded Q4_K GEMV applies RMSNorm only"));
            }
            a.norm = 1;
            a.nw = nm.w;
            a.eps = nm.eps;
        }
        match epi {
            GemvEpi::Store { y, out, amax } => {
                if out != self.dtype || amax != 0 {
                    return Err(Error::unsupported(op, "the folded Q4_K GEMV stores the storage dtype, without the argmax"));
                }
                a.epi = 0;
                a.out = y;
                a.units = n.div_ceil(2) as i32;
            }
            GemvEpi::Residual { res, bias } => {
                a.epi = 1;
                a.res = res;
                a.bias = bias;
                a.units = n.div_ceil(2) as i32;
            }
            GemvEpi::Gated { out, bias, kind } => {
                if !n.is_multiple_of(2) {
                    return Err(Error::shape(op, format!("the gated epilogue takes a gate | up weight of an even row count, got {n}")));
                }
                a.epi = 3;
                a.out = out;
                a.bias = bias;
                a.act = kind as i32;
                a.units = (n / 2) as i32;
            }
            GemvEpi::Qkv { q, kc, vc, bias, pos, cos, sin, heads: (h, kvh, d), cache_strides } => {
                if d == 0 || !d.is_multiple_of(2) || (h + 2 * kvh) * d != n {
                    return Err(Error::shape(op, format!("q|k|v of {h} + 2 x {kvh} heads of {d} (an even head dim) do not make {n} rows")));
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
                (a.cache_sb, a.cache_sh) = cache_strides;
                a.units = (n / 2) as i32;
            }
            GemvEpi::Act { .. } => return Err(Error::unsupported(op, "the folded Q4_K GEMV has no plain activation epilogue")),
        }
        let sms = dev.sm_count.max(1) as usize;
        let blocks = (a.units as usize).div_ceil(WARPS).clamp(1, BLOCKS_PER_SM * sms);
        let mut args = Args::new();
        args.push(a);
        let (f, sh) = if self.warp_coding && m == 1 && k <= WARP_CODING_MAX_K { (self.f1w, 0) } else { (self.f[m - 1], shared(m, k) as u32) };
        let (grid, block) = ((blocks as u32, 1, 1), ((32 * WARPS) as u32, 1, 1));
        if self.pdl && dev.arch.0 >= 9 {
            launch_pdl(dev, op, f, grid, block, sh, &mut args)
        } else {
            launch(dev, op, f, grid, block, sh, &mut args)
        }
    }
}

/// Dynamic shared memory of a launch: `m * k / 64` records of 80 bytes, then 8 x 4 floats.
fn shared(m: usize, k: usize) -> usize {
    m * (k / 64) * 80 + WARPS * 4 * 4
}

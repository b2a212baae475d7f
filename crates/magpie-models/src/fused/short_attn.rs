//! Causal attention for short prefill passes (`short_attn.cu`): blocks of 16 queries of one head,
//! so a 128-token prompt of 12 heads runs as 96 blocks where the tensor-core flash kernel runs 24.

use magpie_core::backend::cuda::attention::{AttnOperand, Causal, FlashParams};
use magpie_core::backend::cuda::compile::{self, PREAMBLE};
use magpie_core::backend::cuda::device::{CudaDevice, Func};
use magpie_core::backend::cuda::launch::{launch, Args};
use magpie_core::{DType, Error, Result};

const SRC: &str = include_str!("short_attn.cu");

/// Queries per block (`SA_QT` in short_attn.cu).
const QT: usize = 16;

/// Bottom-right causal attention (query `i` sees keys `j <= i + kv_len - q_len`) for one storage
/// dtype and head dim (32, 64 or 128), compiled once: the fused engine's attention for prefill
/// passes of few keys. Same operands as the core's `flash_forward` (element strides per batch,
/// head and row); f32 math.
///
/// ```no_run
/// # fn main() -> magpie_core::Result<()> {
/// use magpie_core::backend::cuda::device;
/// use magpie_models::fused::ShortAttention;
/// let dev = device::device("example", 0)?;
/// let attn = ShortAttention::new(&dev, magpie_core::DType::F32, 64)?;
/// # let _ = attn; Ok(()) }
/// ```
pub struct ShortAttention {
    dtype: DType,
    head_dim: usize,
    f: Func,
}

impl std::fmt::Debug for ShortAttention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShortAttention({}, head dim {})", self.dtype, self.head_dim)
    }
}

impl ShortAttention {
    /// Whether a head dim has a kernel.
    pub fn supports_head_dim(head_dim: usize) -> bool {
        matches!(head_dim, 32 | 64 | 128)
    }

    /// Compiles the kernel for `dtype` (f32, bf16, f16) and `head_dim`.
    pub fn new(dev: &CudaDevice, dtype: DType, head_dim: usize) -> Result<ShortAttention> {
        let op = "fused.short_attention";
        let t = match dtype {
            DType::F32 => "float",
            DType::BF16 => "bf16_t",
            DType::F16 => "half_t",
            d => return Err(Error::unsupported(op, format!("{d} attention"))),
        };
        if !Self::supports_head_dim(head_dim) {
            return Err(Error::unsupported(op, format!("head dim {head_dim} (32, 64 or 128)")));
        }
        let name = format!("fused_short_attn_{}_d{head_dim}", dtype.name());
        let src = format!("{PREAMBLE}\ntypedef {t} T;\n#define SA_D {head_dim}\n#define SA_NAME {name}\n{SRC}");
        let f = compile::functions(dev, &name, &src, std::slice::from_ref(&name))?;
        let f = f.first().copied().ok_or_else(|| Error::device(op, "kernel missing"))?;
        Ok(ShortAttention { dtype, head_dim, f })
    }

    /// `o = softmax(scale q kᵀ, bottom-right causal) v` for `p` (its dtype and head dim those of
    /// this kernel, `causal` [`Causal::BottomRight`], `kv_len >= q_len`). Asynchronous.
    pub fn forward(&self, dev: &CudaDevice, p: &FlashParams, q: AttnOperand, k: AttnOperand, v: AttnOperand, o: AttnOperand) -> Result<()> {
        let op = "fused.short_attention";
        if p.dtype != self.dtype || p.head_dim != self.head_dim {
            return Err(Error::value(op, format!("a {} head-dim-{} kernel for {} head dim {}", self.dtype, self.head_dim, p.dtype, p.head_dim)));
        }
        if p.causal != Causal::BottomRight {
            return Err(Error::value(op, format!("only bottom-right causal attention, not {:?}", p.causal)));
        }
        if p.n_kv_heads == 0 || !p.n_heads.is_multiple_of(p.n_kv_heads) {
            return Err(Error::value(op, format!("{} heads over {} kv heads", p.n_heads, p.n_kv_heads)));
        }
        if (k.sb, k.sh, k.ss) != (v.sb, v.sh, v.ss) {
            return Err(Error::value(op, "keys and values must share their strides"));
        }
        if p.kv_len < p.q_len || p.kv_len > i32::MAX as usize || p.batch > 65535 || p.n_heads > 65535 {
            return Err(Error::value(op, format!("{} queries over {} keys, batch {}, {} heads", p.q_len, p.kv_len, p.batch, p.n_heads)));
        }
        if p.q_len == 0 || p.batch == 0 || p.n_heads == 0 {
            return Ok(());
        }
        let mut a = Args::new();
        a.push(q.ptr).push(q.sb).push(q.sh).push(q.ss);
        a.push(k.ptr).push(v.ptr).push(k.sb).push(k.sh).push(k.ss);
        a.push(o.ptr).push(o.sb).push(o.sh).push(o.ss);
        a.push(p.q_len as i32).push(p.kv_len as i32).push(p.n_heads as i32).push(p.n_kv_heads as i32).push(p.scale * std::f32::consts::LOG2_E);
        launch(dev, op, self.f, (p.q_len.div_ceil(QT) as u32, p.n_heads as u32, p.batch as u32), (128, 1, 1), 0, &mut a)
    }
}

//! The Hopper flash attention forward (host side of `kernels/attention_sm90.cu`): wgmma products
//! on 128-byte-swizzled shared-memory tiles, a producer warp filling a ring of K/V stages, consumer
//! warpgroups of 64 query rows that run unsynchronized. Head_dim 64, float16/bfloat16, scale > 0,
//! sm_90 devices only (the module is compiled for `sm_90a`, which no other GPU runs).
//! [`flash_forward`](super::attention::flash_forward) takes it as head_dim-64 variants 7 and up.

use super::attention::{set_smem, FlashParams, KParams};
use super::compile::{cubin_arch, PREAMBLE};
use super::device::{drv, CudaDevice, Func};
use super::elementwise::ctype;
use super::launch::{launch, Args};
use crate::{DType, Error, Result};
use cudarc::driver::result as dres;
use std::collections::HashMap;
use std::sync::Mutex;

const SOURCE: &str = concat!(include_str!("kernels/attention_common.cuh"), include_str!("kernels/attention_sm90.cu"));

/// The kernels, by variant: name, consumer warpgroups (64 query rows each), producer warps, K/V
/// stages. See the consumer loop's modes in the kernel source (`d`: DEFER, `o`: OVERLAP).
pub(super) const VARIANTS: [(&str, usize, usize, usize); 6] = [
    ("flash_sm90_d64_w2s2", 2, 1, 2),
    ("flash_sm90_d64_w2s2d", 2, 1, 2),
    ("flash_sm90_d64_w3s2", 3, 1, 2),
    ("flash_sm90_d64_w2ps2d", 2, 4, 2),
    ("flash_sm90_d64_w2ps2o", 2, 4, 2),
    ("flash_sm90_d64_w2ps3o", 2, 4, 3),
];

/// Keys per K/V tile (`S9_BN`).
const BN: usize = 128;

/// The kernels of one module, in [`VARIANTS`] order.
type Kernels = [Func; VARIANTS.len()];

/// The loaded kernels of each (device ordinal, dtype).
static FUNCS: Mutex<Option<HashMap<(usize, DType), Kernels>>> = Mutex::new(None);

/// True when the Hopper kernel can run `p` on `dev` (the caller has checked the operands'
/// 16-byte alignment): an sm_90 device, f16/bf16, head_dim 64, a positive scale (the softmax folds
/// the scale into the exponential and takes the row max of the unscaled scores).
pub(super) fn applies(dev: &CudaDevice, p: &FlashParams) -> bool {
    dev.arch == (9, 0) && matches!(p.dtype, DType::F16 | DType::BF16) && p.head_dim == 64 && p.scale > 0.0
}

/// Shared memory of a variant: Q, the K/V stages and the mbarriers, plus slack to align the
/// tiles to 1024 bytes (the swizzle atom).
fn smem_bytes(nwg: usize, stages: usize) -> usize {
    1024 + (64 * nwg * 64 + stages * 2 * BN * 64) * 2 + 8 * (1 + 2 * stages)
}

fn funcs(dev: &CudaDevice, dt: DType) -> Result<Kernels> {
    let op = "flash_attention";
    let key = (dev.ordinal, dt);
    let mut cache = FUNCS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(f) = cache.get(&key) {
        return Ok(*f);
    }
    let ct = ctype(dt).ok_or_else(|| Error::unsupported(op, format!("no CUDA kernel for dtype {}", dt.name())))?;
    let src = format!("{PREAMBLE}\n#define T {ct}\n{SOURCE}");
    let bin = cubin_arch(&format!("attention_sm90_{ct}"), &src, "sm_90a")?;
    dev.bind()?;
    // SAFETY: `bin` is a complete cubin image produced by NVRTC for sm_90a (the caller checked
    // that the device is sm_90); the module is never unloaded.
    let m = unsafe { dres::module::load_data(bin.as_ptr() as *const _) }.map_err(|e| drv(op, format!("loading the sm_90a kernels: {e}")))?;
    let mut out = Vec::with_capacity(VARIANTS.len());
    for (name, _, _, _) in VARIANTS {
        let cname = std::ffi::CString::new(name).map_err(|_| Error::value(op, "kernel name contains NUL"))?;
        // SAFETY: the module was just loaded and is never unloaded.
        out.push(Func(unsafe { dres::module::get_function(m, cname) }.map_err(|e| drv(name, format!("kernel not found in its module: {e}")))?));
    }
    let out: Kernels = out.try_into().map_err(|_| Error::value(op, "kernel count mismatch"))?;
    cache.insert(key, out);
    Ok(out)
}

/// Launches variant `v` (an index of [`VARIANTS`]) of the Hopper kernel for `p` with the kernel
/// parameters `kp` (built and checked by `flash_forward_lse`). Asynchronous on dev's stream.
pub(super) fn forward(dev: &CudaDevice, op: &str, p: &FlashParams, v: usize, kp: KParams) -> Result<()> {
    let (_, nwg, pw, stages) = VARIANTS[v.min(VARIANTS.len() - 1)];
    let f = funcs(dev, p.dtype)?[v.min(VARIANTS.len() - 1)];
    let smem = smem_bytes(nwg, stages);
    set_smem(op, f, smem)?;
    let mblocks = p.q_len.div_ceil(64 * nwg);
    let mut a = Args::new();
    a.push(kp);
    launch(dev, op, f, (mblocks as u32, p.n_heads as u32, p.batch as u32), ((32 * (4 * nwg + pw)) as u32, 1, 1), smem as u32, &mut a)
}

//! cuFFT on raw device buffers (cudarc's `cufft` bindings, loaded at run time like cuBLAS): plans
//! cached per (device, type, length, layout, batch) and bound to the device's stream, plus the
//! NVRTC helpers that normalize, conjugate and weight interleaved complex buffers.

use super::compile;
use super::device::{device, drv, CudaDevice, Func};
use super::launch::{self, Args};
use crate::{Error, Result};
use cudarc::cufft::{result as fres, sys as fsys};
use std::collections::HashMap;
use std::sync::Mutex;

const SRC: &str = include_str!("kernels/fft.cu");

/// The cuFFT transform kinds PyTorch uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// complex to complex
    C2C,
    /// real to one-sided complex
    R2C,
    /// one-sided complex to real
    C2R,
}

/// One batched 1-D transform: `batch` lines of `n` points, element `k` of line `b` at
/// `b * dist + k * stride` (in elements of the input / output type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lines {
    /// points per line (the signal length; for C2R the real output length)
    pub n: usize,
    /// number of lines
    pub batch: usize,
    /// element step within a line
    pub stride: usize,
    /// element step between lines (input side)
    pub idist: usize,
    /// element step between lines (output side)
    pub odist: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    ordinal: usize,
    kind: Kind,
    f64: bool,
    lines: Lines,
}

struct Plan(fsys::cufftHandle);

/// Plans are reused across calls; the cache is dropped whole when it reaches this size.
const MAX_PLANS: usize = 256;

static PLANS: Mutex<Option<HashMap<Key, Plan>>> = Mutex::new(None);

/// Whether libcufft can be loaded (cudarc panics on a missing library otherwise).
pub fn cufft_present() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: only tries to open the library.
    *P.get_or_init(|| std::panic::catch_unwind(|| unsafe { fsys::is_culib_present() }).unwrap_or(false))
}

fn ctype(kind: Kind, f64: bool) -> fsys::cufftType {
    use fsys::cufftType::*;
    match (kind, f64) {
        (Kind::C2C, false) => CUFFT_C2C,
        (Kind::C2C, true) => CUFFT_Z2Z,
        (Kind::R2C, false) => CUFFT_R2C,
        (Kind::R2C, true) => CUFFT_D2Z,
        (Kind::C2R, false) => CUFFT_C2R,
        (Kind::C2R, true) => CUFFT_Z2D,
    }
}

fn int(op: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::value(op, format!("{v} is too large for a cuFFT plan")))
}

fn make_plan(op: &str, dev: &CudaDevice, key: &Key) -> Result<Plan> {
    let l = key.lines;
    let h = std::panic::catch_unwind(fres::create).map_err(|_| Error::device(op, "loading cuFFT failed"))?.map_err(|e| drv(op, format!("cufftCreate: {e}")))?;
    let plan = Plan(h);
    let mut n = [int(op, l.n)?];
    // the embed arrays only need to be non-null for the strides to count; cuFFT reads their
    // first entry for rank 1 as the line's storage length, which the strides already imply
    let (isz, osz) = match key.kind {
        Kind::C2C => (l.n, l.n),
        Kind::R2C => (l.n, l.n / 2 + 1),
        Kind::C2R => (l.n / 2 + 1, l.n),
    };
    let mut inembed = [int(op, isz)?];
    let mut onembed = [int(op, osz)?];
    let (stride, idist, odist, batch) = (int(op, l.stride)?, int(op, l.idist)?, int(op, l.odist)?, int(op, l.batch)?);
    // SAFETY: a fresh plan handle; the arrays live across the call.
    unsafe {
        fres::make_plan_many(plan.0, 1, n.as_mut_ptr(), inembed.as_mut_ptr(), stride, idist, onembed.as_mut_ptr(), stride, odist, ctype(key.kind, key.f64), batch)
            .map_err(|e| drv(op, format!("cufftMakePlanMany: {e}")))?;
        fres::set_stream(plan.0, dev.cu_stream() as _).map_err(|e| drv(op, format!("cufftSetStream: {e}")))?;
    }
    Ok(plan)
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: each handle is destroyed once, here; a failure leaves nothing to recover
        let _ = unsafe { fres::destroy(self.0) };
    }
}

/// Executes one batched transform from `input` to `output` (device addresses; may be equal for
/// C2C). C2R overwrites its input, as cuFFT does. `inverse` picks the C2C direction.
#[allow(clippy::too_many_arguments)]
pub fn exec(op: &str, ordinal: usize, kind: Kind, f64: bool, lines: Lines, input: u64, output: u64, inverse: bool) -> Result<()> {
    if lines.n == 0 || lines.batch == 0 {
        return Ok(());
    }
    if !cufft_present() {
        return Err(Error::device(op, "cuFFT (libcufft) was not found; add the CUDA toolkit's lib64 to LD_LIBRARY_PATH"));
    }
    let dev = device(op, ordinal)?;
    dev.bind()?;
    let key = Key { ordinal, kind, f64, lines };
    let mut g = PLANS.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if !map.contains_key(&key) {
        if map.len() >= MAX_PLANS {
            map.clear();
        }
        let p = make_plan(op, &dev, &key)?;
        map.insert(key, p);
    }
    let h = map.get(&key).map(|p| p.0).ok_or_else(|| Error::device(op, "no cuFFT plan"))?;
    let dir = if inverse { 1 } else { -1 };
    // SAFETY: the plan matches the buffers' sizes (the caller allocated them for `lines`), and the
    // lock keeps other threads off this plan while it runs.
    let r = unsafe {
        match (kind, f64) {
            (Kind::C2C, false) => fres::exec_c2c(h, input as *mut _, output as *mut _, dir),
            (Kind::C2C, true) => fres::exec_z2z(h, input as *mut _, output as *mut _, dir),
            (Kind::R2C, false) => fres::exec_r2c(h, input as *mut _, output as *mut _),
            (Kind::R2C, true) => fres::exec_d2z(h, input as *mut _, output as *mut _),
            (Kind::C2R, false) => fres::exec_c2r(h, input as *mut _, output as *mut _),
            (Kind::C2R, true) => fres::exec_z2d(h, input as *mut _, output as *mut _),
        }
    };
    r.map_err(|e| drv(op, format!("cuFFT exec: {e}")))
}

fn helper(dev: &CudaDevice, name: &str, f64: bool) -> Result<Func> {
    let (t, sfx) = if f64 { ("double", "f64") } else { ("float", "f32") };
    let src = format!("{}\ntypedef {t} T;\n#define KNAME(x) fft_##x##_{sfx}\n{SRC}", compile::PREAMBLE);
    compile::function(dev, &format!("fft_{name}_{sfx}"), &src)
}

/// `z[i] *= scale` (then conjugated when `conj`) over `n` complex elements at `ptr`.
pub fn scale_conj(op: &str, ordinal: usize, f64: bool, ptr: u64, n: usize, scale: f64, conj: bool) -> Result<()> {
    if n == 0 || (scale == 1.0 && !conj) {
        return Ok(());
    }
    let dev = device(op, ordinal)?;
    let f = helper(&dev, "scale_conj", f64)?;
    let mut a = Args::new();
    a.push(ptr).push(n as i64).push(scale).push(conj as i32);
    launch::launch_1d(&dev, op, f, n, &mut a)
}

/// Multiplies positions `1..=count` along a dim of size `m` (elements `inner` apart) of the `n`
/// complex elements at `ptr` by `w`.
#[allow(clippy::too_many_arguments)]
pub fn weight(op: &str, ordinal: usize, f64: bool, ptr: u64, n: usize, m: usize, inner: usize, count: usize, w: f64) -> Result<()> {
    if n == 0 || count == 0 {
        return Ok(());
    }
    let dev = device(op, ordinal)?;
    let f = helper(&dev, "weight", f64)?;
    let mut a = Args::new();
    a.push(ptr).push(n as i64).push(m as i64).push(inner.max(1) as i64).push(count as i64).push(w);
    launch::launch_1d(&dev, op, f, n, &mut a)
}

//! Host side of kernels/rng.cu: uniform, normal, bernoulli and dropout on the device from the
//! default Philox generator. The numbers are the CPU generator's (same (seed, offset) blocks),
//! and the generator advances by the same count, so CPU and CUDA draws interleave as one stream.

use super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile};
use super::launch::{launch, Args};
use super::ops::{contiguous, empty};
use crate::dtype::DType;
use crate::ops::random::with_default_generator;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// True for the dtypes the RNG kernels write.
pub fn supported(d: DType) -> bool {
    super::elementwise::ctype(d).is_some()
}

/// An error naming `op` while a CUDA graph is captured on `cuda:ord`: the draw's (seed, offset)
/// would be frozen into the graph, so every replay would repeat the same numbers.
fn forbid_capture(op: &str, ord: usize) -> Result<()> {
    super::forbid_in_capture(op, crate::Device::Cuda(ord), "a random draw (its Philox seed and offset would be fixed in the graph)")
}

/// Takes `blocks` Philox blocks from the default generator: its (seed, offset) before.
fn take(blocks: u64) -> (u64, u64) {
    with_default_generator(|g| {
        let (s, o) = g.get_state();
        g.set_state((s, o + blocks));
        (s, o)
    })
}

fn gen(kernel: &'static str, ord: usize, shape: &[usize], dt: DType, a0: f64, a1: f64) -> Result<Tensor> {
    forbid_capture(kernel, ord)?;
    let out = empty(kernel, ord, dt, shape)?;
    let n = out.numel();
    // uniform(n) draws 2n words (n / 2 blocks); normal(n) draws ceil(n / 2) * 2 uniforms: same count
    let (seed, offset) = take(n.div_ceil(2) as u64);
    if n == 0 {
        return Ok(out);
    }
    let (p, dev) = elem_ptr(kernel, &out)?;
    let f = kfunc(&dev, KFile::Rng, dt, kernel)?;
    let mut a = Args::new();
    a.push(p).push(n as i64).push(seed).push(offset).push(a0).push(a1);
    launch(&dev, kernel, f, (grid_stride_blocks(&dev, n.div_ceil(2)), 1, 1), (256, 1, 1), 0, &mut a)?;
    Ok(out)
}

/// `lo + (hi - lo) * U[0, 1)` of `shape` on `cuda:ord`.
pub fn uniform(ord: usize, shape: &[usize], dt: DType, lo: f64, hi: f64) -> Result<Tensor> {
    gen("rng_uniform", ord, shape, dt, lo, hi)
}

/// `mean + std * N(0, 1)` of `shape` on `cuda:ord`.
pub fn normal(ord: usize, shape: &[usize], dt: DType, mean: f64, std: f64) -> Result<Tensor> {
    gen("rng_normal", ord, shape, dt, mean, std)
}

/// Elementwise `U < p` (1 or 0 in `dt`) of `shape` on `cuda:ord`, for a scalar `p`.
pub fn bernoulli_scalar(ord: usize, shape: &[usize], dt: DType, p: f64) -> Result<Tensor> {
    let op = "rng_bernoulli";
    forbid_capture("bernoulli", ord)?;
    let out = empty(op, ord, dt, shape)?;
    let n = out.numel();
    let (seed, offset) = take(n.div_ceil(2) as u64);
    if n == 0 {
        return Ok(out);
    }
    let (ptr, dev) = elem_ptr(op, &out)?;
    let f = kfunc(&dev, KFile::Rng, dt, op)?;
    let mut a = Args::new();
    a.push(ptr).push(n as i64).push(seed).push(offset).push(0u64).push(p);
    launch(&dev, op, f, (grid_stride_blocks(&dev, n), 1, 1), (256, 1, 1), 0, &mut a)?;
    Ok(out)
}

/// The random state of one dropout call, to replay its mask in the backward.
#[derive(Clone, Copy, Debug)]
pub struct DropoutState {
    pub seed: u64,
    pub offset: u64,
    pub p: f64,
}

/// Dropout of `x` (any layout; the result is contiguous): each element kept with probability
/// `1 - p` and scaled by `1 / (1 - p)`. A new state is drawn when `state` is None; passing the
/// state of the forward applies the same mask (the backward of dropout).
pub fn dropout(x: &Tensor, p: f64, state: Option<DropoutState>) -> Result<(Tensor, DropoutState)> {
    let op = "rng_dropout";
    let dt = x.dtype();
    let crate::Device::Cuda(ord) = x.device() else { return Err(Error::device("dropout", "expected a CUDA tensor")) };
    let x = if x.is_contiguous() { x.clone() } else { contiguous(x)? };
    let n = x.numel();
    let st = match state {
        Some(s) => s,
        None => {
            forbid_capture("dropout", ord)?;
            let (seed, offset) = take(n.div_ceil(2) as u64);
            DropoutState { seed, offset, p }
        }
    };
    let out = empty(op, ord, dt, x.shape())?;
    if n == 0 {
        return Ok((out, st));
    }
    let (xp, dev) = elem_ptr(op, &x)?;
    let f = kfunc(&dev, KFile::Rng, dt, op)?;
    let scale = if st.p >= 1.0 { 0.0 } else { 1.0 / (1.0 - st.p) };
    let mut a = Args::new();
    a.push(xp).push(elem_ptr(op, &out)?.0).push(n as i64).push(st.seed).push(st.offset).push(st.p).push(scale);
    launch(&dev, op, f, (grid_stride_blocks(&dev, n.div_ceil(2)), 1, 1), (256, 1, 1), 0, &mut a)?;
    Ok((out, st))
}

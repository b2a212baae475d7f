//! The CPU fallback's bookkeeping: the error CPU kernels return for CUDA tensors (which makes
//! the registry rerun the op on the CPU), and per-op counters of native and fallback calls.

use crate::Error;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The message of [`cpu_only`]; recognized by [`is_cpu_only_error`].
const CPU_ONLY: &str = "a CUDA tensor reached a CPU-only kernel: this op has no CUDA path yet (registry::call runs it on the CPU and moves the result back; as a Rust method, move the inputs with .to_device(Device::Cpu))";

/// The error a CPU kernel returns when it is handed a CUDA tensor.
pub(crate) fn cpu_only(op: &str) -> Error {
    Error::device(op, CPU_ONLY)
}

/// True for errors made by [`cpu_only`] (the op may be rerun on the CPU).
pub(crate) fn is_cpu_only_error(e: &Error) -> bool {
    matches!(e, Error::Device { msg, .. } if msg == CPU_ONLY)
}

static COUNTS: Mutex<BTreeMap<String, (u64, u64)>> = Mutex::new(BTreeMap::new());

/// Counts one registry call of `op` with CUDA tensors: natively or through the CPU fallback.
pub(crate) fn note_fallback(op: &str, fell_back: bool) {
    let mut m = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
    let e = m.entry(op.to_string()).or_default();
    if fell_back {
        e.1 += 1;
    } else {
        e.0 += 1;
    }
}

/// Per op (sorted by name): how many registry calls with CUDA tensors ran natively and how many
/// fell back to the CPU.
pub fn fallback_counts() -> Vec<(String, u64, u64)> {
    COUNTS.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.clone(), v.0, v.1)).collect()
}

/// Clears the counters of [`fallback_counts`].
pub fn reset_fallback_counts() {
    COUNTS.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Runs `f(x)`; when `x` is a CUDA tensor and `f` reaches a CPU-only kernel, reruns it on a CPU
/// copy of `x` (a differentiable move) and moves the result back. For Rust-level ops (autograd's
/// `sum_to_size`, ...) whose family has no CUDA kernel yet; it switches itself off once it has.
pub fn or_on_cpu(x: &crate::Tensor, f: impl Fn(&crate::Tensor) -> crate::Result<crate::Tensor>) -> crate::Result<crate::Tensor> {
    match f(x) {
        Err(e) if x.device().is_cuda() && is_cpu_only_error(&e) => {
            let dev = x.device();
            super::forbid_in_capture(e.op(), dev, "a CPU fallback (this op has no CUDA kernel)")?;
            f(&x.to_device(crate::Device::Cpu)?)?.to_device(dev)
        }
        r => r,
    }
}

/// `out` (computed on the host from downloaded values of a tensor on `dev`) moved to `dev`, and
/// counted as a fallback of `op` when `dev` is a GPU. For the internal host kernels of composite
/// ops (windows, taps, convolution slots) that read their inputs with `to_vec`, so that their
/// results stay on their inputs' device and their use shows up in [`fallback_counts`].
pub fn host_result(op: &str, out: crate::Tensor, dev: crate::Device) -> crate::Result<crate::Tensor> {
    if !dev.is_cuda() {
        return Ok(out);
    }
    super::forbid_in_capture(op, dev, "a CPU fallback (this op computes on the host)")?;
    note_fallback(op, true);
    let _ng = crate::autograd::no_grad();
    out.to_device(dev)
}

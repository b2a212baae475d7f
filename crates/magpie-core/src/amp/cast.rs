//! The op-side hooks. A public op in one of the lists starts with one of these: when autocast is
//! off (the common case) they cost one thread-local read and return `None`; otherwise they return
//! the op's inputs cast by its policy and a [`Suspend`] guard, and the op calls itself again with
//! them while the guard keeps autocast off (so its inner ops are not cast again, as PyTorch's
//! wrappers exclude the autocast dispatch key).

use super::lists::{decomposes_to_gemm, policy, Policy};
use super::state::{self, active_bits, DeviceKind, Suspend};
use crate::{DType, Error, Result, Tensor};

/// An op's inputs after autocast, and the guard to hold while the op runs on them.
pub(crate) struct Cast<T> {
    pub(crate) args: T,
    pub(crate) _off: Suspend,
}

/// The kind whose autocast applies to an op over `xs` (CUDA when any input is on a GPU, as
/// PyTorch's dispatch picks the CUDA autocast key) and what to do, if that kind autocasts now.
/// `None` as the policy: the op is in no list of that kind; it runs unchanged with autocast off
/// inside, since the ops hooked here are kernels in PyTorch (whose inner work autocast never sees)
/// even where they are compositions here.
fn applies<'a>(op: &str, xs: impl Iterator<Item = &'a Tensor>) -> Option<(DeviceKind, Option<Policy>)> {
    let mut kind = DeviceKind::Cpu;
    let (mut n, mut first, mut same) = (0, None, true);
    for t in xs {
        n += 1;
        if t.device().is_cuda() {
            kind = DeviceKind::Cuda;
        }
        same &= *first.get_or_insert(t.dtype()) == t.dtype();
    }
    if state::is_cpu_as_cuda() {
        kind = DeviceKind::Cuda;
    }
    if active_bits() & kind.bit() == 0 {
        return None;
    }
    // tensordot and multi_dot check that their operands agree before reaching the GEMM
    let gemm = n >= 2 && decomposes_to_gemm(op) && (same || op == "einsum");
    let p = policy(op, kind).or_else(|| gemm.then_some(Policy::LowerPrecision));
    Some((kind, p))
}

/// ATen's `is_eligible`: a floating tensor (not float64) on the autocast kind's device.
fn eligible(t: &Tensor, kind: DeviceKind) -> bool {
    on_kind(t, kind) && t.dtype().is_float() && t.dtype() != DType::F64
}

/// Whether `t` is on `kind`'s devices (host copies of a CUDA call count as CUDA tensors).
fn on_kind(t: &Tensor, kind: DeviceKind) -> bool {
    DeviceKind::of(t.device()) == kind || (kind == DeviceKind::Cuda && state::is_cpu_as_cuda())
}

fn lower(kind: DeviceKind) -> DType {
    let dev = match kind {
        DeviceKind::Cpu => crate::Device::Cpu,
        DeviceKind::Cuda => crate::Device::Cuda(0),
    };
    state::get_autocast_dtype(dev)
}

/// ATen's `cached_cast`: casts an eligible tensor; the lower-precision casts of float32 leaves
/// that require grad (not views) are cached for the rest of the outermost region.
fn cached_cast(to: DType, t: &Tensor, kind: DeviceKind) -> Result<Tensor> {
    if !eligible(t, kind) || t.dtype() == to {
        return Ok(t.clone());
    }
    let cacheable = to == lower(kind)
        && t.dtype() == DType::F32
        && t.requires_grad()
        && t.is_leaf()
        && t.base().is_none()
        && state::is_autocast_cache_enabled();
    if !cacheable {
        return t.to_dtype(to);
    }
    if let Some(c) = state::cache_get(t.id(), to) {
        return Ok(c);
    }
    let c = t.to_dtype(to)?;
    state::cache_put(t, to, &c);
    Ok(c)
}

/// Autocast's cast of a CUDA weight (a float32 leaf that requires grad: cached for the region)
/// or other tensor to `to`, as a lower-precision op's hook casts it.
#[cfg(feature = "cuda")]
pub(crate) fn cuda_cached_cast(to: DType, t: &Tensor) -> Result<Tensor> {
    cached_cast(to, t, DeviceKind::Cuda)
}

/// ATen's `promote_type`: float32 if any eligible input is float32, else the lower precision;
/// float64 inputs are ignored; another floating type is an error, as in PyTorch.
fn promote_type(op: &str, kind: DeviceKind, xs: &[Option<&Tensor>]) -> Result<DType> {
    let low = lower(kind);
    let mut cur = low;
    for t in xs.iter().flatten() {
        // ATen's is_autocast_eligible (float64 included, then skipped)
        if !on_kind(t, kind) || !t.dtype().is_float() {
            continue;
        }
        let next = t.dtype();
        if next == DType::F64 {
            continue;
        } else if cur == DType::F32 || next == DType::F32 {
            cur = DType::F32;
        } else if next != low {
            return Err(Error::dtype(op, format!("Unexpected floating ScalarType {next} under autocast to {low}")));
        }
    }
    Ok(cur)
}

fn target(op: &str, kind: DeviceKind, p: Policy, xs: &[Option<&Tensor>]) -> Result<Option<DType>> {
    Ok(match p {
        Policy::LowerPrecision => Some(lower(kind)),
        Policy::Fp32 => Some(DType::F32),
        Policy::Promote => Some(promote_type(op, kind, xs)?),
        Policy::Fp32SetOptDtype => None,
        Policy::Banned => {
            return Err(Error::value(
                op,
                "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast. Many models use a \
                 sigmoid layer right before the binary cross entropy layer. In this case, combine the two layers using \
                 binary_cross_entropy_with_logits (BCEWithLogitsLoss), which is safe to autocast.",
            ))
        }
    })
}

/// The hook of an op whose tensor inputs may be absent (a bias): `Some` when the inputs' kind autocasts.
#[inline]
pub(crate) fn optional(op: &'static str, xs: &[Option<&Tensor>]) -> Result<Option<Cast<Vec<Option<Tensor>>>>> {
    if active_bits() == 0 {
        return Ok(None);
    }
    let Some((kind, p)) = applies(op, xs.iter().flatten().copied()) else { return Ok(None) };
    let to = match p {
        Some(p) => target(op, kind, p, xs)?,
        None => None,
    };
    let mut args = Vec::with_capacity(xs.len());
    for t in xs {
        args.push(match (t, to) {
            (Some(t), Some(to)) => Some(cached_cast(to, t, kind)?),
            (t, _) => t.cloned(),
        });
    }
    Ok(Some(Cast { args, _off: Suspend::new(kind.bit()) }))
}

/// The hook of an op over tensors: `Some` when the inputs' kind autocasts.
#[inline]
pub(crate) fn tensors(op: &'static str, xs: &[&Tensor]) -> Result<Option<Cast<Vec<Tensor>>>> {
    if active_bits() == 0 {
        return Ok(None);
    }
    let opts: Vec<Option<&Tensor>> = xs.iter().map(|t| Some(*t)).collect();
    Ok(optional(op, &opts)?.map(|c| Cast { args: c.args.into_iter().flatten().collect(), _off: c._off }))
}

/// A reduction's input and `dtype` argument after autocast.
pub(crate) type OptDtypeCast = Cast<(Tensor, Option<DType>)>;

/// The hook of a reduction-like op with a `dtype` argument (softmax, sum, cumsum, ...): under
/// `Fp32SetOptDtype` the dtype becomes float32 when not given and `x` is eligible (the input is
/// not cast); under `Fp32` (CPU's `prod`) the input is cast instead.
#[inline]
pub(crate) fn opt_dtype(op: &'static str, x: &Tensor, dtype: Option<DType>) -> Result<Option<OptDtypeCast>> {
    if active_bits() == 0 {
        return Ok(None);
    }
    let Some((kind, p)) = applies(op, std::iter::once(x)) else { return Ok(None) };
    let args = match p {
        None => (x.clone(), dtype),
        Some(Policy::Fp32SetOptDtype) if eligible(x, kind) => (x.clone(), dtype.or(Some(DType::F32))),
        Some(Policy::Fp32SetOptDtype) => (x.clone(), dtype),
        Some(p) => match target(op, kind, p, &[Some(x)])? {
            Some(to) => (cached_cast(to, x, kind)?, dtype),
            None => (x.clone(), dtype),
        },
    };
    Ok(Some(Cast { args, _off: Suspend::new(kind.bit()) }))
}

impl Cast<Vec<Option<Tensor>>> {
    /// The cast of a tensor argument that was given (hooks pass the op's required tensors as `Some`).
    pub(crate) fn req(&self, i: usize) -> Result<&Tensor> {
        self.args.get(i).and_then(|t| t.as_ref()).ok_or_else(|| Error::value("autocast", format!("argument {i} is missing")))
    }
    /// The cast of an optional tensor argument.
    pub(crate) fn opt(&self, i: usize) -> Option<&Tensor> {
        self.args.get(i).and_then(|t| t.as_ref())
    }
}

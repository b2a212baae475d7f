//! Tensor-level CUDA paths: transfers, casts, copies, fills, and the elementwise families
//! (unary, binary, where) through the generic kernel. None of these records autograd; the
//! device-generic op code around them does (ops/convert.rs, ops/unary, ops/binary, ops/ternary).

use super::device::device;
use super::elementwise::{map, supported, Opnd};
use super::exprs;
use super::storage::CudaStorage;
use crate::dtype::DType;
use crate::element::Element;
use crate::layout::Layout;
use crate::ops::binary::{BinarySpec, Promote};
use crate::ops::unary::{IntMode, UnarySpec};
use crate::scalar::Scalar;
use crate::storage::{CpuStorage, Storage, StorageCell};
use crate::tensor::Tensor;
use crate::{Device, Error, Result};
use std::sync::Arc;

/// A new contiguous CUDA tensor with uninitialized elements.
pub fn empty(op: &str, ordinal: usize, dtype: DType, shape: &[usize]) -> Result<Tensor> {
    let dev = device(op, ordinal)?;
    let n = crate::shape::numel(shape);
    let st = CudaStorage::alloc(&dev, dtype, n)?;
    Ok(Tensor::from_parts(Arc::new(StorageCell::new(Storage::Cuda(st))), Layout::contiguous(shape), None))
}

/// The CUDA ordinal of a tensor (error for CPU tensors).
fn ordinal(op: &str, t: &Tensor) -> Result<usize> {
    match t.device() {
        Device::Cuda(n) => Ok(n),
        Device::Cpu => Err(Error::device(op, "expected a CUDA tensor")),
    }
}

/// A copy of `t` on `cuda:ordinal` (contiguous, same dtype). No autograd record.
pub fn to_cuda(t: &Tensor, ordinal: usize) -> Result<Tensor> {
    let host = if t.device().is_cuda() { to_cpu(t)? } else { t.clone() };
    let st = crate::with_dtype!(host.dtype(), T, {
        let v: Vec<T> = crate::backend::cpu::to_vec(&host)?;
        CudaStorage::upload(ordinal, &T::into_storage(v))?
    });
    Ok(Tensor::from_parts(Arc::new(StorageCell::new(Storage::Cuda(st))), Layout::contiguous(t.shape()), None))
}

/// A copy of `t` on `cuda:ordinal`. From a contiguous pinned tensor the copy is queued straight
/// from its page-locked memory and, with `non_blocking`, not waited for (the buffer keeps itself
/// alive and unwritten until the copy has run); anything else goes through [`to_cuda`].
pub fn to_cuda_with(t: &Tensor, ordinal: usize, non_blocking: bool) -> Result<Tensor> {
    if !t.device().is_cuda() && t.is_contiguous() {
        let g = t.storage().read();
        if let Storage::Cpu(CpuStorage::Pinned(p)) = &*g {
            let dev = device("to", ordinal)?;
            super::alloc::forbid_in_capture(&dev, "to", "a copy of host data to the GPU (copy into a static input tensor before replaying instead)")?;
            let st = CudaStorage::alloc(&dev, t.dtype(), t.numel())?;
            // SAFETY: `st` holds numel elements of the tensor's dtype.
            unsafe { p.copy_to_device("to", &dev, st.ptr(), t.storage_offset(), t.numel())? };
            drop(g);
            if !non_blocking {
                dev.synchronize()?;
            }
            return Ok(Tensor::from_parts(Arc::new(StorageCell::new(Storage::Cuda(st))), Layout::contiguous(t.shape()), None));
        }
    }
    to_cuda(t, ordinal)
}

/// A contiguous CPU copy of a CUDA tensor: with `non_blocking`, in pinned memory, queued without
/// waiting (host reads of it wait for the copy); else [`to_cpu`].
pub fn to_cpu_with(t: &Tensor, non_blocking: bool) -> Result<Tensor> {
    if !non_blocking || !t.device().is_cuda() {
        return to_cpu(t);
    }
    let c = if t.is_contiguous() { t.clone() } else { contiguous(t)? };
    let buf = {
        let g = c.storage().read();
        let Storage::Cuda(s) = &*g else { return to_cpu(t) };
        let dev = s.cuda_device().clone();
        super::alloc::forbid_in_capture(&dev, "to", "a host read of CUDA values (.to(\"cpu\"))")?;
        let src = s.ptr() + (c.storage_offset() * c.dtype().size()) as u64;
        // SAFETY: the tensor's elements are `numel` values of its dtype from `src`, inside its block.
        unsafe { super::pinned::PinnedBuf::from_device("to", &dev, src, c.dtype(), c.numel())? }
    };
    Tensor::from_cpu_storage(CpuStorage::Pinned(buf), t.shape())
}

/// A contiguous CPU copy of a CUDA tensor (waits for its device). No autograd record.
pub fn to_cpu(t: &Tensor) -> Result<Tensor> {
    let c = if t.is_contiguous() { t.clone() } else { contiguous(t)? };
    let st = {
        let g = c.storage().read();
        match &*g {
            Storage::Cuda(s) => s.download(c.storage_offset(), c.numel())?,
            Storage::Cpu(s) => s.clone(),
        }
    };
    Tensor::from_cpu_storage(st, t.shape())
}

/// A contiguous copy on the same device (same dtype). No autograd record.
pub fn contiguous(t: &Tensor) -> Result<Tensor> {
    let out = empty("contiguous", ordinal("contiguous", t)?, t.dtype(), t.shape())?;
    copy_into(&out, t)?;
    Ok(out)
}

/// `t` cast to `dtype` as a new contiguous tensor on its device. No autograd record.
pub fn cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    let out = empty("to", ordinal("to", t)?, dtype, t.shape())?;
    copy_into(&out, t)?;
    Ok(out)
}

/// Writes `src` (broadcast to `dst`'s shape, cast to its dtype) into the elements of `dst`
/// (any strided view). `src` may be on the CPU or another GPU. Reads happen before writes on the
/// stream, so an aliasing `src` sees its old values only when it does not overlap `dst`.
pub fn copy_into(dst: &Tensor, src: &Tensor) -> Result<()> {
    let op = "copy_";
    let dord = ordinal(op, dst)?;
    let src = match src.device() {
        Device::Cuda(n) if n == dord => src.clone(),
        _ => to_cuda(src, dord)?,
    };
    if supported(dst.dtype()) && supported(src.dtype()) {
        return map(op, "cast", "x", dst.dtype(), dst, &[Opnd { t: &src, load_as: dst.dtype() }]);
    }
    if dst.dtype() == src.dtype() {
        return copy_raw(dst, &src);
    }
    // complex and float8 casts: through the host
    let host = to_cpu(&src)?.to_dtype(dst.dtype())?;
    let dev = to_cuda(&host, dord)?;
    copy_raw(dst, &dev)
}

/// Copies elements of the same dtype by their bit patterns (dtypes without arithmetic kernels).
fn copy_raw(dst: &Tensor, src: &Tensor) -> Result<()> {
    let as_dt = match dst.dtype().size() {
        1 => DType::U8,
        2 => DType::I16,
        4 => DType::I32,
        8 => DType::I64,
        _ => {
            // 16-byte complex128: copy as pairs of i64 through a trailing dim of 2
            let d = reinterpret(dst, DType::I64, 2)?;
            let s = reinterpret(src, DType::I64, 2)?;
            return map("copy_", "raw", "x", DType::I64, &d, &[Opnd { t: &s, load_as: DType::I64 }]);
        }
    };
    let d = reinterpret(dst, as_dt, 1)?;
    let s = reinterpret(src, as_dt, 1)?;
    map("copy_", "raw", "x", as_dt, &d, &[Opnd { t: &s, load_as: as_dt }])
}

/// A view of `t`'s device memory as `k` elements of `dtype` per element of `t` (a trailing dim
/// of size `k` when `k > 1`), sharing the storage. Only for copies of bit patterns.
fn reinterpret(t: &Tensor, dtype: DType, k: usize) -> Result<Tensor> {
    let st = {
        let g = t.storage().read();
        match &*g {
            Storage::Cuda(c) => c.alias(dtype, c.len() * k)?,
            Storage::Cpu(_) => return Err(Error::device("copy_", "expected a CUDA tensor")),
        }
    };
    let mut shape = t.shape().to_vec();
    let mut strides: Vec<usize> = t.strides().iter().map(|s| s * k).collect();
    if k > 1 {
        shape.push(k);
        strides.push(1);
    }
    let layout = Layout { shape, strides, offset: t.storage_offset() * k };
    Ok(Tensor::from_parts(Arc::new(StorageCell::new(Storage::Cuda(st))), layout, None))
}

/// A new tensor of `shape` filled with `value` cast to `dtype`, on `cuda:ordinal`.
pub fn full(ordinal: usize, shape: &[usize], value: Scalar, dtype: DType) -> Result<Tensor> {
    let out = empty("full", ordinal, dtype, shape)?;
    fill(&out, value)?;
    Ok(out)
}

/// Writes `value` (cast to `dst`'s dtype) into every element of `dst`.
pub fn fill(dst: &Tensor, value: Scalar) -> Result<()> {
    let one = Tensor::full_on(&[], value, dst.dtype(), Device::Cpu)?;
    // during a CUDA-graph capture the host value cannot be uploaded (the captured copy would read
    // the freed host buffer at every replay): a memset node carries the bit pattern instead
    if let Device::Cuda(n) = dst.device() {
        let dev = device("fill", n)?;
        if super::alloc::is_capturing(&dev) && dst.is_contiguous() {
            if let Some(()) = memset_fill(&dev, dst, &one)? {
                return Ok(());
            }
        }
    }
    copy_into(dst, &one)
}

/// Fills contiguous `dst` with the element of the 0-d host tensor `one` (same dtype) by a
/// driver memset of its bit pattern: 1-, 2- and 4-byte elements, and 8-byte ones whose two
/// halves are equal (0 among them). None when the pattern does not fit a memset.
fn memset_fill(dev: &super::device::CudaDevice, dst: &Tensor, one: &Tensor) -> Result<Option<()>> {
    use cudarc::driver::sys;
    let n = dst.numel();
    if n == 0 {
        return Ok(Some(()));
    }
    let bytes: Vec<u8> = crate::with_dtype!(dst.dtype(), T, {
        let v: Vec<T> = crate::backend::cpu::to_vec(one)?;
        let size = std::mem::size_of::<T>();
        // SAFETY: reads the `size` bytes of one initialised element of a plain Copy type.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, size) }.to_vec()
    });
    let (ptr, _) = super::kern::elem_ptr("fill", dst)?;
    let stream = dev.cu_stream();
    dev.bind()?;
    // SAFETY: `ptr` addresses `n` contiguous elements of `dst`'s block on this device.
    let r = unsafe {
        match bytes.len() {
            1 => sys::cuMemsetD8Async(ptr, bytes[0], n, stream),
            2 => sys::cuMemsetD16Async(ptr, u16::from_le_bytes([bytes[0], bytes[1]]), n, stream),
            4 => sys::cuMemsetD32Async(ptr, u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]), n, stream),
            8 if bytes[..4] == bytes[4..] => sys::cuMemsetD32Async(ptr, u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]), 2 * n, stream),
            _ => return Ok(None),
        }
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(super::device::drv("fill", format!("{r:?}")));
    }
    Ok(Some(()))
}

/// A unary spec on a CUDA tensor; None when it has no CUDA kernel for this dtype (the caller
/// falls back to the CPU). Integer inputs of `IntMode::ToFloat` ops were promoted by the caller.
pub fn unary(spec: &UnarySpec, x: &Tensor) -> Result<Option<Tensor>> {
    let d = x.dtype();
    let Some(e) = exprs::unary(spec.kernel) else { return Ok(None) };
    if !supported(d) {
        return Ok(None);
    }
    let (expr, compute) = if d.is_integral() {
        match (spec.int, e.int) {
            (IntMode::Same(_), Some(ie)) if !d.is_bool() => (ie, DType::I64),
            _ => return Ok(None),
        }
    } else {
        (e.float, if d == DType::F64 { DType::F64 } else { DType::F32 })
    };
    let out = empty(spec.name, ordinal(spec.name, x)?, d, x.shape())?;
    map(spec.name, spec.kernel, expr, compute, &out, &[Opnd { t: x, load_as: compute }])?;
    Ok(Some(out))
}

/// A binary spec on two CUDA tensors computing in `compute` with result dtype `out_dt`; None
/// when there is no CUDA kernel for it (the caller falls back to the CPU).
pub fn binary(spec: &BinarySpec, a: &Tensor, b: &Tensor, compute: DType, out_dt: DType) -> Result<Option<Tensor>> {
    let Some(e) = exprs::binary(spec.kernel) else { return Ok(None) };
    if !supported(compute) || !supported(a.dtype()) || !supported(b.dtype()) {
        return Ok(None);
    }
    let (expr, load) = if compute.is_bool() && spec.promote != Promote::Bool && e.boolean.is_some() {
        (e.boolean, DType::Bool)
    } else if compute.is_integral() {
        (e.int, DType::I64)
    } else {
        (e.float, if compute == DType::F64 { DType::F64 } else { DType::F32 })
    };
    let Some(expr) = expr else { return Ok(None) };
    let shape = crate::shape::broadcast_shapes(spec.name, a.shape(), b.shape())?;
    let out = empty(spec.name, ordinal(spec.name, a)?, out_dt, &shape)?;
    map(spec.name, spec.kernel, expr, load, &out, &[Opnd { t: a, load_as: load }, Opnd { t: b, load_as: load }])?;
    Ok(Some(out))
}

/// `where(cond, a, b)` on CUDA tensors already broadcastable to `shape`, computing in `dtype`.
pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor, dtype: DType, shape: &[usize]) -> Result<Option<Tensor>> {
    if !supported(dtype) || !supported(a.dtype()) || !supported(b.dtype()) {
        return Ok(None);
    }
    let out = empty("where", ordinal("where", cond)?, dtype, shape)?;
    map(
        "where",
        "where",
        "x ? y : z",
        dtype,
        &out,
        &[Opnd { t: cond, load_as: DType::Bool }, Opnd { t: a, load_as: dtype }, Opnd { t: b, load_as: dtype }],
    )?;
    Ok(Some(out))
}

/// `arange`-like values computed on the host and uploaded (creation ops without their own kernel).
pub fn upload_new(host: &Tensor, ordinal: usize) -> Result<Tensor> {
    to_cuda(host, ordinal)
}

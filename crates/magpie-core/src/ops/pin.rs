//! Page-locked (pinned) host memory at the tensor level: `pin_memory`, `is_pinned`, and the
//! device copies that take `non_blocking` (`to_device_with`).

use crate::autograd;
use crate::backend::{cpu, cuda};
use crate::element::Element;
use crate::storage::{CpuStorage, Storage};
use crate::tensor::Tensor;
use crate::{Device, Error, Result};

impl Tensor {
    /// `tensor.pin_memory()`: a copy in page-locked host memory, which CUDA copies can read and
    /// write asynchronously (`to_device_with(dev, true)`); the tensor itself if already pinned.
    /// The copy is contiguous and, for floating-point tensors, differentiable (the gradient passes
    /// through, as in PyTorch). Pinned tensors are CPU tensors: every CPU op takes them.
    ///
    /// Without a usable GPU this is PyTorch's error (`Found no NVIDIA driver on your system...`).
    ///
    /// ```
    /// use magpie_core::{backend::cuda, Tensor};
    /// let x = Tensor::from_vec(vec![1f32, 2., 3.], &[3])?;
    /// match x.pin_memory() {
    ///     Ok(p) => assert!(p.is_pinned() && p.to_vec::<f32>()? == vec![1., 2., 3.]),
    ///     Err(e) => assert!(!cuda::is_available(), "{e}"),
    /// }
    /// assert!(!x.is_pinned());
    /// # Ok::<(), magpie_core::Error>(())
    /// ```
    pub fn pin_memory(&self) -> Result<Tensor> {
        let op = "pin_memory";
        let _prof = crate::profiler::op(op, &[self]);
        if let Device::Cuda(_) = self.device() {
            let name = crate::ops::binary::scalar_type_name(self.dtype());
            return Err(Error::value(op, format!("cannot pin 'torch.cuda.{name}Tensor' only dense CPU tensors can be pinned")));
        }
        if self.is_pinned() {
            return Ok(self.clone());
        }
        let buf = crate::with_dtype!(self.dtype(), T, { pinned_copy::<T>(self)? });
        let out = Tensor::from_cpu_storage(CpuStorage::Pinned(buf), self.shape())?;
        if self.dtype().is_float() || self.dtype().is_complex() {
            autograd::record("PinMemory", &[self], &[out.clone()], |_, g| Ok(vec![Some(g[0].clone())]));
        }
        Ok(out)
    }

    /// `tensor.is_pinned()`: true for a CPU tensor in page-locked memory (or a view of one).
    pub fn is_pinned(&self) -> bool {
        matches!(&*self.storage().read(), Storage::Cpu(c) if c.is_pinned())
    }

    /// `tensor.to(device, non_blocking=...)`: the same handle if already there, else a copy.
    /// With `non_blocking`, a copy from a pinned tensor to a GPU is queued on the device's stream
    /// and this returns at once (the pinned memory stays allocated, and host writes to it wait,
    /// until the copy has run), and a copy from a GPU to the CPU lands in pinned memory without
    /// waiting (host reads of the result wait for it). Pageable memory is copied as
    /// [`Tensor::to_device`] does. Without `non_blocking`, a copy from pinned memory is waited for.
    pub fn to_device_with(&self, device: Device, non_blocking: bool) -> Result<Tensor> {
        let _prof = crate::profiler::op("to", &[self]);
        if device == self.device() {
            return Ok(self.clone());
        }
        let out = match device {
            Device::Cuda(n) => cuda::ops::to_cuda_with(self, n, non_blocking)?,
            Device::Cpu => cuda::ops::to_cpu_with(self, non_blocking)?,
        };
        let src = self.device();
        if self.dtype().is_float() || self.dtype().is_complex() {
            autograd::record("ToCopy", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].to_device(src)?)]));
        }
        Ok(out)
    }
}

/// A pinned copy of `t`'s elements in row-major order (read straight from a contiguous storage).
fn pinned_copy<T: Element>(t: &Tensor) -> Result<cuda::PinnedBuf> {
    let op = "pin_memory";
    if t.is_contiguous() {
        let g = t.storage().read();
        if let Storage::Cpu(c) = &*g {
            let off = t.storage_offset();
            if let Some(src) = T::slice(c).and_then(|s| s.get(off..off + t.numel())) {
                return cuda::PinnedBuf::from_slice(op, src);
            }
        }
    }
    cuda::PinnedBuf::from_slice(op, &cpu::to_vec::<T>(t)?)
}

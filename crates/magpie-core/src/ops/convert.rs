//! Dtype conversion, copies and fills: `to_dtype`, `copy` (PyTorch's `clone`), `contiguous`,
//! `copy_`, `fill_`, `zero_`, reading values back (`to_vec`, `item`).

use crate::autograd::{self, is_grad_enabled};
use crate::backend::{cpu, cuda};
use crate::dtype::DType;
use crate::element::Element;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

impl Tensor {
    /// `tensor.to(dtype)`: a converted copy (the same handle if the dtype already matches).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        let _prof = crate::profiler::op("to", &[self]);
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = if self.device().is_cuda() {
            cuda::ops::cast(self, dtype)?
        } else {
            let st = crate::with_dtype!(dtype, T, { T::into_storage(cpu::to_vec::<T>(self)?) });
            Tensor::from_cpu_storage(st, self.shape())?
        };
        let src = self.dtype();
        if dtype.is_float() || dtype.is_complex() {
            autograd::record("ToCopy", &[self], &[out.clone()], move |_, g| Ok(vec![Some(g[0].to_dtype(src)?)]));
        }
        Ok(out)
    }
    /// `tensor.to(device)`: the same handle if already there, else a copy on `device` (see
    /// [`Tensor::to_device_with`] for `non_blocking`).
    pub fn to_device(&self, device: crate::Device) -> Result<Tensor> {
        self.to_device_with(device, false)
    }
    /// PyTorch's `tensor.clone()`: a contiguous copy of the data, differentiable.
    /// (Rust's `Clone` copies the handle, as assigning a tensor in Python does.)
    pub fn copy(&self) -> Result<Tensor> {
        let _prof = crate::profiler::op("clone", &[self]);
        let out = if self.device().is_cuda() {
            cuda::ops::contiguous(self)?
        } else {
            let st = crate::with_dtype!(self.dtype(), T, { T::into_storage(cpu::to_vec::<T>(self)?) });
            Tensor::from_cpu_storage(st, self.shape())?
        };
        autograd::record("Clone", &[self], &[out.clone()], |_, g| Ok(vec![Some(g[0].clone())]));
        Ok(out)
    }
    /// `tensor.contiguous()`: itself if already contiguous, else a contiguous copy.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            Ok(self.clone())
        } else {
            self.copy()
        }
    }
    /// The elements as a row-major `Vec<T>`, cast with PyTorch's rules (reads back to the host).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.device().is_cuda() {
            cuda::forbid_in_capture("to_vec", self.device(), "a host read of CUDA values")?;
            return cpu::to_vec(&cuda::ops::to_cpu(self)?);
        }
        cpu::to_vec(self)
    }
    /// `tensor.item()`: the value of a one-element tensor.
    pub fn item(&self) -> Result<Scalar> {
        if self.numel() != 1 {
            return Err(Error::value(
                "item",
                format!("a Tensor with {} elements cannot be converted to Scalar", self.numel()),
            ));
        }
        cuda::forbid_in_capture("item", self.device(), "a host read of a CUDA value (item())")?;
        let d = self.dtype();
        Ok(if d.is_bool() {
            Scalar::Bool(self.to_vec::<bool>()?[0])
        } else if d.is_int() {
            Scalar::Int(self.to_vec::<i64>()?[0])
        } else if d.is_complex() {
            Scalar::Complex(self.to_vec::<num_complex::Complex64>()?[0])
        } else {
            Scalar::Float(self.to_vec::<f64>()?[0])
        })
    }
    /// `tensor.tolist()` flattened: the values as f64 (row-major).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        self.to_vec()
    }

    /// Checks that an in-place write to this tensor is allowed (under autograd: not a leaf that
    /// requires grad, nor a view of one; never a tensor whose elements share memory).
    pub(crate) fn check_inplace(&self, op: &str) -> Result<()> {
        autograd::inplace::check(self, op)
    }

    /// An in-place op written as its out-of-place version `f` (the one path of every in-place op
    /// of the registry): checks the write like PyTorch's `check_inplace` (leaves, views of
    /// leaves, outputs of multi-output view functions), runs `f` on [`Tensor::inplace_src_with`]
    /// (a differentiable copy of this tensor when autograd records, PyTorch's `original_self`,
    /// so that the recorded op never saves data the write replaces), and writes the result back
    /// with PyTorch's cast rule, rebasing this tensor's history (or, for a view, its base's
    /// through `CopySlices`). `others` are the op's other tensor arguments.
    pub(crate) fn update_(&self, op: &str, others: &[&Tensor], f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
        let _prof = crate::profiler::op_named(|| op.to_string(), &[self]);
        self.check_inplace(op)?;
        let r = f(&self.inplace_src_with(others)?)?;
        crate::ops::binary::write_inplace(op, self, &r)
    }

    /// What an in-place op should compute from: under autograd, a differentiable copy of this
    /// tensor (PyTorch's `original_self`), so that the op's backward does not read the data the
    /// in-place write is about to replace; otherwise this tensor itself. `others` are the op's
    /// other tensor arguments: a copy is also needed when only one of them requires grad
    /// (`x.mul_(w)` saves `x` for `w`'s gradient).
    pub(crate) fn inplace_src_with(&self, others: &[&Tensor]) -> Result<Tensor> {
        if is_grad_enabled() && (self.requires_grad() || others.iter().any(|t| t.requires_grad())) {
            self.copy()
        } else {
            Ok(self.clone())
        }
    }

    /// Writes `value`'s data into this tensor's elements (through views) and, under autograd,
    /// makes `value`'s history this tensor's history (PyTorch's in-place rebase; for a view, its
    /// base gets a `CopySlices` node and the views regenerate their history from it).
    pub(crate) fn assign_(&self, op: &str, value: &Tensor) -> Result<Tensor> {
        if value.shape() != self.shape() {
            return Err(Error::shape(
                op,
                format!("output with shape {:?} doesn't match the broadcast shape {:?}", self.shape(), value.shape()),
            ));
        }
        autograd::inplace::write(op, self, value, || write_values(self, value))?;
        Ok(self.clone())
    }

    /// `tensor.copy_(src)`: copies `src` (broadcast to this shape, cast to this dtype) in place.
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        let b = src.broadcast_to(self.shape())?;
        if is_grad_enabled() && src.requires_grad() {
            // a node of its own for the copied value, so that this tensor's history is not `src`'s
            let v = b.to_dtype(self.dtype())?.copy()?;
            return self.assign_("copy_", &v);
        }
        self.assign_("copy_", &b)
    }
    /// `tensor.fill_(value)`.
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        let v = value.into();
        self.check_inplace("fill_")?;
        let t = Tensor::full_on(self.shape(), v, self.dtype(), self.device())?;
        self.assign_("fill_", &t)
    }
    /// `tensor.zero_()`.
    pub fn zero_(&self) -> Result<Tensor> {
        self.fill_(0i64)
    }
}

/// Copies the values of `src` (same shape) into `dst`'s elements, cast to `dst`'s dtype.
/// Reads `src` fully before taking the write lock, so `src` may alias `dst`.
fn write_values(dst: &Tensor, src: &Tensor) -> Result<()> {
    if dst.device().is_cuda() {
        // the kernels take the device pointer through a read lock: count the write here, as the
        // CPU path's write lock does, so that saved-tensor checks (and autocast's cast of an
        // activation, kept by version) see in-place changes of CUDA tensors
        drop(dst.storage().write());
        return cuda::ops::copy_into(dst, src);
    }
    if src.device().is_cuda() {
        return write_values(dst, &cuda::ops::to_cpu(src)?);
    }
    crate::with_dtype!(dst.dtype(), T, {
        let v: Vec<T> = cpu::to_vec(src)?;
        cpu::scatter_into(dst, &v)
    })
}

/// The CPU storage of a tensor, for kernels that need the raw typed buffer.
pub(crate) fn with_cpu<R>(t: &Tensor, f: impl FnOnce(&crate::storage::CpuStorage) -> R) -> Result<R> {
    let g = t.storage().read();
    match &*g {
        crate::storage::Storage::Cpu(c) => Ok(f(c)),
        crate::storage::Storage::Cuda(_) => Err(cuda::cpu_only("cpu kernel")),
    }
}

//! Creation ops: `zeros`, `ones`, `full`, `arange`, `linspace`, `logspace`, `eye`, `*_like`.

use crate::device::Device;
use crate::dtype::DType;
use crate::element::Element;
use crate::scalar::Scalar;
use crate::storage::CpuStorage;
use crate::tensor::Tensor;
use crate::{default_dtype, Error, Result};

fn on_device(op: &str, t: Tensor, device: Device) -> Result<Tensor> {
    match device {
        Device::Cpu => Ok(t),
        Device::Cuda(n) => {
            let _ = op;
            crate::backend::cuda::ops::upload_new(&t, n)
        }
    }
}

impl Tensor {
    /// `torch.zeros(shape, dtype=dtype, device=device)`.
    pub fn zeros_on(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        if let Device::Cuda(k) = device {
            return crate::backend::cuda::ops::full(k, shape, Scalar::Int(0), dtype);
        }
        let n = crate::shape::numel(shape);
        on_device("zeros", Tensor::from_cpu_storage(CpuStorage::zeros(dtype, n), shape)?, device)
    }
    /// `torch.zeros(shape)` in the default dtype on the CPU.
    pub fn zeros(shape: &[usize]) -> Result<Tensor> {
        Self::zeros_on(shape, default_dtype(), Device::Cpu)
    }
    /// `torch.full(shape, value, dtype=dtype, device=device)`.
    pub fn full_on(shape: &[usize], value: impl Into<Scalar>, dtype: DType, device: Device) -> Result<Tensor> {
        let v = value.into();
        if let Device::Cuda(k) = device {
            return crate::backend::cuda::ops::full(k, shape, v, dtype);
        }
        let n = crate::shape::numel(shape);
        let st = crate::with_dtype!(dtype, T, { T::into_storage(vec![scalar_as::<T>(v); n]) });
        on_device("full", Tensor::from_cpu_storage(st, shape)?, device)
    }
    /// `torch.full(shape, value)`; the dtype follows the value (bool, int64 or the default float).
    pub fn full(shape: &[usize], value: impl Into<Scalar>) -> Result<Tensor> {
        let v = value.into();
        let dtype = match v {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => default_dtype(),
            Scalar::Complex(_) => default_dtype().to_complex(),
        };
        Self::full_on(shape, v, dtype, Device::Cpu)
    }
    /// `torch.ones(shape, dtype=dtype, device=device)`.
    pub fn ones_on(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        Self::full_on(shape, 1i64, dtype, device)
    }
    /// `torch.ones(shape)` in the default dtype.
    pub fn ones(shape: &[usize]) -> Result<Tensor> {
        Self::ones_on(shape, default_dtype(), Device::Cpu)
    }
    /// `torch.zeros_like(t)`.
    pub fn zeros_like(&self) -> Result<Tensor> {
        Self::zeros_on(self.shape(), self.dtype(), self.device())
    }
    /// `torch.ones_like(t)`.
    pub fn ones_like(&self) -> Result<Tensor> {
        Self::ones_on(self.shape(), self.dtype(), self.device())
    }
    /// `torch.full_like(t, value)`.
    pub fn full_like(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        Self::full_on(self.shape(), value, self.dtype(), self.device())
    }
    /// A 0-d tensor holding `s` in `dtype` on `device`.
    pub fn scalar_tensor(s: impl Into<Scalar>, dtype: DType, device: Device) -> Result<Tensor> {
        Self::full_on(&[], s, dtype, device)
    }
    /// `torch.eye(n, m)`.
    pub fn eye_on(n: usize, m: usize, dtype: DType, device: Device) -> Result<Tensor> {
        let st = crate::with_dtype!(dtype, T, {
            let mut v = vec![T::default(); n * m];
            for i in 0..n.min(m) {
                v[i * m + i] = T::from_i64(1);
            }
            T::into_storage(v)
        });
        on_device("eye", Tensor::from_cpu_storage(st, &[n, m])?, device)
    }
    /// `torch.arange(start, end, step)`: int64 when all three are integers, else the default float dtype.
    pub fn arange(start: impl Into<Scalar>, end: impl Into<Scalar>, step: impl Into<Scalar>) -> Result<Tensor> {
        let (s, e, st) = (start.into(), end.into(), step.into());
        let dtype = if s.is_integral() && e.is_integral() && st.is_integral() { DType::I64 } else { default_dtype() };
        Self::arange_on(s, e, st, dtype, Device::Cpu)
    }
    /// `torch.arange(start, end, step, dtype=dtype, device=device)`.
    pub fn arange_on(start: Scalar, end: Scalar, step: Scalar, dtype: DType, device: Device) -> Result<Tensor> {
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        if st == 0.0 {
            return Err(Error::value("arange", "step must be nonzero"));
        }
        if !s.is_finite() || !e.is_finite() {
            return Err(Error::value("arange", format!("unsupported range: {s} -> {e}")));
        }
        if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
            return Err(Error::value("arange", "upper bound and lower bound inconsistent with step sign"));
        }
        let n = if start.is_integral() && end.is_integral() && step.is_integral() {
            let (s, e, st) = (start.to_i64(), end.to_i64(), step.to_i64());
            ((e - s) as f64 / st as f64).ceil() as usize
        } else {
            ((e - s) / st).ceil() as usize
        };
        let st_ = crate::with_dtype!(dtype, T, {
            let v: Vec<T> = if dtype.is_integral() {
                let (s, stp) = (start.to_i64(), step.to_i64());
                (0..n).map(|i| T::from_i64(s + stp * i as i64)).collect()
            } else {
                (0..n).map(|i| T::from_f64(s + st * i as f64)).collect()
            };
            T::into_storage(v)
        });
        on_device("arange", Tensor::from_cpu_storage(st_, &[n])?, device)
    }
    /// `torch.linspace(start, end, steps, dtype=dtype)`.
    pub fn linspace_on(start: f64, end: f64, steps: i64, dtype: DType, device: Device) -> Result<Tensor> {
        if steps < 0 {
            return Err(Error::value("linspace", "number of steps must be non-negative"));
        }
        let n = steps as usize;
        let step = if n > 1 { (end - start) / (n - 1) as f64 } else { 0.0 };
        let half = n / 2;
        // PyTorch fills the first half from the start and the second half from the end
        // (one step gives `start`).
        let vals: Vec<f64> = (0..n)
            .map(|i| if i < half || n == 1 { start + step * i as f64 } else { end - step * (n - 1 - i) as f64 })
            .collect();
        let st = crate::with_dtype!(dtype, T, { T::into_storage(vals.iter().map(|&v| T::from_f64(v)).collect()) });
        on_device("linspace", Tensor::from_cpu_storage(st, &[n])?, device)
    }
    /// `torch.logspace(start, end, steps, base, dtype=dtype)`.
    pub fn logspace_on(start: f64, end: f64, steps: i64, base: f64, dtype: DType, device: Device) -> Result<Tensor> {
        let lin = Self::linspace_on(start, end, steps, DType::F64, Device::Cpu)?;
        let v: Vec<f64> = crate::backend::cpu::to_vec(&lin)?;
        let st = crate::with_dtype!(dtype, T, { T::into_storage(v.iter().map(|&x| T::from_f64(base.powf(x))).collect()) });
        on_device("logspace", Tensor::from_cpu_storage(st, &[v.len()])?, device)
    }
}

/// Converts a scalar to an element with PyTorch's cast rules.
pub fn scalar_as<T: Element>(s: Scalar) -> T {
    match s {
        Scalar::Bool(b) => T::from_bool(b),
        Scalar::Int(i) => T::from_i64(i),
        Scalar::Float(f) => T::from_f64(f),
        Scalar::Complex(c) => T::from_c128(c),
    }
}

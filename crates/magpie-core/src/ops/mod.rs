//! The op surface, one file per family. Each op is a method on [`Tensor`] (or a free function
//! for creation ops) with PyTorch's name and semantics, records its backward rule, and is also
//! listed in the registry (`crate::registry`) under its PyTorch name.

pub(crate) mod acc;
pub mod activation;
pub mod binary;
pub mod chunk_cat;
pub mod complex_build;
pub mod conv;
pub mod convert;
pub mod counting;
pub mod cov;
pub mod creation;
pub mod difference;
pub mod fft;
pub mod frexp;
pub mod index;
pub mod index_math;
pub mod indexing;
pub mod linalg;
pub mod loss;
pub mod matmul;
pub mod nn;
pub mod norm;
pub mod pad;
pub mod pin;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod renorm;
pub mod resize;
pub mod scan;
mod scan_cuda;
pub mod segment_reduce;
pub mod shape_ops;
pub mod softmax;
pub mod sort;
mod sort_cuda;
pub mod special;
pub mod ternary;
pub mod trapezoid;
pub mod unary;
pub mod view;
pub mod window;

use crate::tensor::Tensor;
use crate::Result;

/// A tensor argument or a Python-style scalar (`a + b` or `a + 2`).
#[derive(Clone, Debug)]
pub enum Operand<'a> {
    Tensor(&'a Tensor),
    Scalar(crate::Scalar),
}

impl Tensor {
    /// The `dtype::Operand` this tensor is for type promotion (dim vs 0-d).
    pub(crate) fn promo(&self) -> crate::dtype::Operand {
        if self.ndim() == 0 {
            crate::dtype::Operand::ZeroDim(self.dtype())
        } else {
            crate::dtype::Operand::Dim(self.dtype())
        }
    }
}

/// The device an op over `ts` runs on, with PyTorch's exception that a 0-d CPU tensor may join
/// tensors on another device (it acts as a scalar); fails with a device error otherwise.
pub(crate) fn common_device(op: &str, ts: &[&Tensor]) -> Result<crate::Device> {
    let dev = ts.iter().map(|t| t.device()).find(|d| d.is_cuda());
    match dev {
        Some(d) => {
            let others: Vec<&Tensor> = ts.iter().copied().filter(|t| !(t.ndim() == 0 && t.device() == crate::Device::Cpu)).collect();
            if others.is_empty() {
                return Ok(d);
            }
            same_device(op, &others)
        }
        None => same_device(op, ts),
    }
}

/// `t`, moved to `dev` when it is a 0-d CPU tensor joining an op on another device (a
/// differentiable move, so its gradient comes back to the CPU).
pub(crate) fn scalar_to_device(t: &Tensor, dev: crate::Device) -> Result<Tensor> {
    if t.device() != dev && t.ndim() == 0 && t.device() == crate::Device::Cpu { t.to_device(dev) } else { Ok(t.clone()) }
}

/// Fails with a device error unless every tensor is on the same device.
pub(crate) fn same_device(op: &str, ts: &[&Tensor]) -> Result<crate::Device> {
    let d = ts.first().map(|t| t.device()).unwrap_or_default();
    for t in ts {
        if t.device() != d {
            return Err(crate::Error::device(
                op,
                format!("Expected all tensors to be on the same device, but found at least two devices, {d} and {}!", t.device()),
            ));
        }
    }
    Ok(d)
}

//! `Tensor.resize_` and `resize_as_`: the tensor's elements as a contiguous tensor of a new shape
//! over the same storage, which grows in place when it holds too few elements.

use crate::layout::{contiguous_strides, Layout};
use crate::tensor::Tensor;
use crate::{Error, Result};

impl Tensor {
    /// `tensor.resize_(sizes)`: a contiguous tensor of shape `sizes` over this tensor's storage,
    /// starting at its storage offset. When the storage holds too few elements it grows in place
    /// (every tensor sharing it sees the larger storage; old elements are kept, new ones are
    /// zero where PyTorch leaves them uninitialized). Shapes are values in this crate, so the
    /// resized tensor is returned and `self` keeps its shape (PyTorch changes `self` and returns it).
    ///
    /// ```
    /// use magpie_core::Tensor;
    /// let x = Tensor::arange(0.0, 6.0, 1.0)?;
    /// let y = x.resize_(&[2, 2])?;
    /// assert_eq!(y.shape(), &[2, 2]);
    /// assert_eq!(y.to_vec::<f32>()?, vec![0.0, 1.0, 2.0, 3.0]);
    /// assert!(x.resize_(&[-1]).is_err());
    /// # Ok::<(), magpie_core::Error>(())
    /// ```
    pub fn resize_(&self, sizes: &[i64]) -> Result<Tensor> {
        let op = "resize_";
        if self.requires_grad() {
            return Err(Error::value(op, "cannot resize variables that require grad"));
        }
        if let Some(&v) = sizes.iter().find(|&&v| v < 0) {
            return Err(Error::value(op, format!("Trying to create tensor with negative dimension {v}: {sizes:?}")));
        }
        let shape: Vec<usize> = sizes.iter().map(|&v| v as usize).collect();
        let numel = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).ok_or_else(|| Error::value(op, format!("resize_: the number of elements of {sizes:?} overflows")))?;
        let offset = self.storage_offset();
        let need = offset.checked_add(numel).ok_or_else(|| Error::value(op, format!("resize_: the number of elements of {sizes:?} overflows")))?;
        if numel > 0 && need > self.storage().read().len() {
            grow(self, need)?;
        }
        let strides = contiguous_strides(&shape);
        Ok(Tensor::from_parts(self.storage().clone(), Layout { shape, strides, offset }, None))
    }

    /// `tensor.resize_as_(other)`: [`Tensor::resize_`] to `other`'s shape.
    ///
    /// ```
    /// use magpie_core::Tensor;
    /// let x = Tensor::arange(0.0, 6.0, 1.0)?;
    /// let y = x.resize_as_(&Tensor::zeros(&[3, 2])?)?;
    /// assert_eq!(y.shape(), &[3, 2]);
    /// # Ok::<(), magpie_core::Error>(())
    /// ```
    pub fn resize_as_(&self, other: &Tensor) -> Result<Tensor> {
        let sizes: Vec<i64> = other.shape().iter().map(|&v| v as i64).collect();
        self.resize_(&sizes)
    }
}

/// Replaces `x`'s storage by one of `need` elements on the same device that starts with the old
/// elements (the rest zero): a copy, then a swap of the two storages inside their shared cells.
fn grow(x: &Tensor, need: usize) -> Result<()> {
    let _ng = crate::autograd::no_grad();
    let have = x.storage().read().len();
    let bigger = Tensor::zeros_on(&[need], x.dtype(), x.device())?;
    if have > 0 {
        let old = Tensor::from_parts(x.storage().clone(), Layout::contiguous(&[have]), None);
        bigger.narrow(0, 0, have as i64)?.copy_(&old)?;
    }
    let mut a = x.storage().write();
    let mut b = bigger.storage().write();
    std::mem::swap(&mut *a, &mut *b);
    Ok(())
}

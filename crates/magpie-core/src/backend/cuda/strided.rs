//! `dst += src` written through any strided view of a CUDA storage: the scatter half of view
//! gradients (`autograd::view::restride`, `ops::view`'s `unview`), which write a view-shaped
//! gradient into a zeroed base. Positions the view visits more than once (expands, overlapping
//! `as_strided`) accumulate, so the add is atomic: it reuses scatter.cu's `scatter_add_k` with a
//! single index 0 and the view's own strides as the output strides.

use super::index::{flag, iter, scatter_supported};
use super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile, KMAXD};
use super::launch::{launch, Args};
use super::ops::{cast, copy_into, full, to_cuda};
use crate::dtype::DType;
use crate::layout::Layout;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Device, Error, Result};

/// True when no two indices of `l` reach the same storage element (a sufficient test: sorted by
/// stride, each dim's stride exceeds the span of the dims inside it).
pub fn non_overlapping(l: &Layout) -> bool {
    let mut d: Vec<(usize, usize)> = l.shape.iter().zip(&l.strides).filter(|(&s, _)| s > 1).map(|(&s, &st)| (s, st)).collect();
    d.sort_by_key(|&(_, st)| st);
    let mut span = 0usize; // largest offset the inner dims reach
    for (s, st) in d {
        if st <= span {
            return false;
        }
        span += (s - 1) * st;
    }
    true
}

/// Adds `src` (broadcast to `dst`'s shape, cast to its dtype) into the elements of the CUDA view
/// `dst`, accumulating where `dst` visits a storage element twice. No autograd record.
pub fn add_into(dst: &Tensor, src: &Tensor) -> Result<()> {
    let op = "add_into_view";
    let Device::Cuda(ord) = dst.device() else { return Err(Error::device(op, "expected a CUDA tensor")) };
    if dst.numel() == 0 {
        return Ok(());
    }
    let dt = dst.dtype();
    let src = match src.device() {
        Device::Cuda(n) if n == ord => src.clone(),
        _ => to_cuda(src, ord)?,
    };
    let src = if src.dtype() != dt { cast(&src, dt)? } else { src };
    let src = {
        let _ng = crate::autograd::no_grad();
        src.broadcast_to(dst.shape())?
    };
    if scatter_supported(dt) && dst.ndim() <= KMAXD {
        let n = dst.ndim();
        let s_out: Vec<i64> = dst.strides().iter().map(|&s| s as i64).collect();
        let s_src: Vec<i64> = src.strides().iter().map(|&s| s as i64).collect();
        let Some(it) = iter(dst.shape(), &vec![0; n], &s_src, &s_out, 1, 0) else { return Err(Error::shape(op, "too many dims")) };
        // the index is the single 0 and the out-of-range flag is never set: nothing to read back
        let idx = full(ord, &[1], Scalar::Int(0), DType::I64)?;
        let fl = flag(ord)?;
        let total = dst.numel();
        let (optr, dev) = elem_ptr(op, dst)?;
        let f = kfunc(&dev, KFile::Scatter, dt, "scatter_add_k")?;
        let mut a = Args::new();
        a.push(optr).push(elem_ptr(op, &src)?.0).push(elem_ptr(op, &idx)?.0).push(it).push(total as i64).push(1.0f64).push(elem_ptr(op, &fl)?.0);
        return launch(&dev, op, f, (grid_stride_blocks(&dev, total), 1, 1), (256, 1, 1), 0, &mut a);
    }
    if non_overlapping(dst.layout()) {
        // each element written once: an elementwise add read through the view, written back into it
        let sum = {
            let _ng = crate::autograd::no_grad();
            dst.add(&src)?
        };
        return copy_into(dst, &sum);
    }
    Err(super::cpu_only(op))
}

#[cfg(test)]
mod tests {
    use super::non_overlapping;
    use crate::layout::Layout;

    #[test]
    fn overlap_test() {
        let l = |shape: &[usize], strides: &[usize]| Layout { shape: shape.to_vec(), strides: strides.to_vec(), offset: 0 };
        assert!(non_overlapping(&l(&[3, 4], &[4, 1])));
        assert!(non_overlapping(&l(&[4, 3], &[1, 4])));
        assert!(non_overlapping(&l(&[3], &[5])));
        assert!(non_overlapping(&l(&[1, 3], &[0, 1])));
        assert!(!non_overlapping(&l(&[2, 3], &[0, 1])));
        assert!(!non_overlapping(&l(&[3, 3], &[1, 1])));
        assert!(!non_overlapping(&l(&[2, 3], &[2, 1])));
    }
}

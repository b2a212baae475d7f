//! `torch._segment_reduce`: reduce consecutive segments of a tensor along an axis (given by
//! their lengths or offsets), composed from per-segment reductions so autograd comes with it.

use crate::tensor::Tensor;
use crate::{Error, Result};

/// The reductions `_segment_reduce` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentReduce {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

impl SegmentReduce {
    /// Parses PyTorch's `reduce` string.
    pub fn parse(s: &str) -> Result<SegmentReduce> {
        Ok(match s {
            "sum" => SegmentReduce::Sum,
            "mean" => SegmentReduce::Mean,
            "max" => SegmentReduce::Max,
            "min" => SegmentReduce::Min,
            "prod" => SegmentReduce::Prod,
            o => return Err(Error::value("_segment_reduce", format!("reduce argument must be either sum, prod, max, min or mean, got {o}"))),
        })
    }
}

/// `torch._segment_reduce(data, reduce, *, lengths=None, offsets=None, axis=0, initial=None)`
/// for 1-d `lengths` (or `offsets`, one longer than the number of segments): segment `i`
/// holds `lengths[i]` consecutive elements of `data` along `axis`. `initial` joins every
/// segment's reduction; an empty segment without it gives the reduction's identity (NaN for
/// the mean).
///
/// ```
/// use magpie_core::{ops::segment_reduce::{segment_reduce, SegmentReduce}, Tensor};
/// let d = Tensor::from_vec(vec![1f32, 5., 3., 2.], &[4])?;
/// let l = Tensor::from_vec(vec![1i64, 0, 3], &[3])?;
/// let s = segment_reduce(&d, SegmentReduce::Sum, &l, 0, None)?;
/// assert_eq!(s.to_vec::<f32>()?, vec![1., 0., 10.]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn segment_reduce(data: &Tensor, reduce: SegmentReduce, lengths: &Tensor, axis: i64, initial: Option<f64>) -> Result<Tensor> {
    const OP: &str = "_segment_reduce";
    if lengths.ndim() != 1 {
        return Err(Error::unsupported(OP, "lengths or offsets with more than one dimension"));
    }
    let ax = crate::shape::wrap_dim(OP, axis, data.ndim())?;
    let lens = lengths.to_dtype(crate::DType::I64)?.to_vec::<i64>()?;
    if lens.iter().any(|&l| l < 0) {
        return Err(Error::value(OP, "lengths contains negative value!"));
    }
    let total: i64 = lens.iter().sum();
    if total != data.shape()[ax] as i64 {
        return Err(Error::value(OP, "Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) when !unsafe."));
    }
    let mut kept = data.shape().to_vec();
    kept[ax] = 1;
    let (dt, dev) = (data.dtype(), data.device());
    let fill = |v: f64| -> Result<Tensor> { Tensor::full_on(&kept, v, dt, dev) };
    let init = match initial {
        Some(v) => Some(Tensor::scalar_tensor(v, dt, dev)?),
        None => None,
    };
    let mut outs = Vec::with_capacity(lens.len());
    let mut start = 0i64;
    for &len in &lens {
        let seg = data.narrow(ax as i64, start, len)?;
        start += len;
        let a = [ax as i64];
        let r = if len == 0 {
            match (initial, reduce) {
                (Some(v), _) => fill(v)?,
                (None, SegmentReduce::Sum) => fill(0.0)?,
                (None, SegmentReduce::Prod) => fill(1.0)?,
                (None, SegmentReduce::Mean) => fill(f64::NAN)?,
                (None, SegmentReduce::Max) => fill(f64::NEG_INFINITY)?,
                (None, SegmentReduce::Min) => fill(f64::INFINITY)?,
            }
        } else {
            match reduce {
                SegmentReduce::Sum => {
                    let s = seg.sum_dims(Some(&a), true, None)?;
                    match &init {
                        Some(i) => s.add(i)?,
                        None => s,
                    }
                }
                SegmentReduce::Mean => {
                    let s = seg.sum_dims(Some(&a), true, None)?;
                    let s = match &init {
                        Some(i) => s.add(i)?,
                        None => s,
                    };
                    s.div_scalar(len as f64)?
                }
                SegmentReduce::Prod => {
                    let s = seg.prod_dim(Some(ax as i64), true, None)?;
                    match &init {
                        Some(i) => s.mul(i)?,
                        None => s,
                    }
                }
                SegmentReduce::Max => {
                    let s = seg.amax(&a, true)?;
                    match &init {
                        Some(i) => s.maximum(i)?,
                        None => s,
                    }
                }
                SegmentReduce::Min => {
                    let s = seg.amin(&a, true)?;
                    match &init {
                        Some(i) => s.minimum(i)?,
                        None => s,
                    }
                }
            }
        };
        outs.push(r);
    }
    if outs.is_empty() {
        let mut shape = data.shape().to_vec();
        shape[ax] = 0;
        return Tensor::zeros_on(&shape, dt, dev);
    }
    crate::ops::shape_ops::cat(&outs, ax as i64)
}

/// Segment lengths from `offsets` (`lengths[i] = offsets[i + 1] - offsets[i]`).
pub fn lengths_from_offsets(offsets: &Tensor) -> Result<Tensor> {
    if offsets.ndim() != 1 || offsets.numel() == 0 {
        return Err(Error::unsupported("_segment_reduce", "offsets with more than one dimension"));
    }
    crate::ops::difference::diff(offsets, 1, 0, None, None)
}

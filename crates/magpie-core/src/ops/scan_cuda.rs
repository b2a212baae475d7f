//! The CUDA path of the scans (cumsum, cumprod, logcumsumexp, cummax, cummin): the tensor is
//! made contiguous (a few long lines along an inner dim are moved to the last dim first, so that
//! whole blocks scan them) and scanned by `backend::cuda::scan`. Sums, products and
//! log-sum-exps come back without autograd (their callers record it); cummax / cummin values
//! record the gradient of a gather by their indices, as the CPU path's do.

use crate::tensor::Tensor;
use crate::Result;

/// Which scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    Sum,
    Prod,
    LogSumExp,
    Max,
    Min,
}

/// The scan of `x` along `dim` (from the end when `reverse`) on the GPU: the values (x's dtype)
/// and, for `Max` / `Min`, the positions; None where `x` is not a CUDA tensor of a dtype the
/// kernels handle.
pub(crate) fn scan_lines(op: &str, x: &Tensor, dim: usize, kind: Scan, reverse: bool) -> Result<Option<(Tensor, Option<Tensor>)>> {
    #[cfg(feature = "cuda")]
    {
        imp::scan_lines(op, x, dim, kind, reverse)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (op, x, dim, kind, reverse);
        Ok(None)
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use super::Scan;
    use crate::backend::cuda::ops::empty;
    use crate::backend::cuda::scan::{scan, ScanOp};
    use crate::backend::cuda::sort::supported;
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Device, Result};

    /// Lines along an inner dim are moved to the last dim when there are fewer than this many
    /// of them and they are at least `MOVE_MIN_LEN` long: a thread per line walks its line
    /// serially, which leaves the GPU mostly idle below a few hundred thousand lines.
    const MOVE_MAX_LINES: usize = 1 << 16;
    const MOVE_MIN_LEN: usize = 256;

    pub(super) fn scan_lines(op: &str, x: &Tensor, dim: usize, kind: Scan, reverse: bool) -> Result<Option<(Tensor, Option<Tensor>)>> {
        let Device::Cuda(ord) = x.device() else { return Ok(None) };
        let dt = x.dtype();
        if !supported(dt) || (kind == Scan::LogSumExp && !dt.is_float()) {
            return Ok(None);
        }
        let sop = match kind {
            Scan::Sum => ScanOp::Sum,
            Scan::Prod => ScanOp::Prod,
            Scan::LogSumExp => ScanOp::LogSumExp,
            Scan::Max => ScanOp::Max,
            Scan::Min => ScanOp::Min,
        };
        let (vals, idx) = {
            let _ng = crate::autograd::no_grad();
            let x1 = if x.ndim() == 0 { x.detach().reshape(&[1])? } else { x.detach() };
            let nd = x1.ndim();
            let last = nd as i64 - 1;
            let s = x1.shape();
            let n = s[dim];
            let outer: usize = s[..dim].iter().product();
            let inner: usize = s[dim + 1..].iter().product();
            let moved = inner > 1 && outer * inner < MOVE_MAX_LINES && n >= MOVE_MIN_LEN;
            let xw = if moved { x1.movedim(&[dim as i64], &[last])?.contiguous()? } else { x1.contiguous()? };
            let (o, i) = if moved { (outer * inner, 1) } else { (outer, inner) };
            let out = empty(op, ord, dt, xw.shape())?;
            let pos = if sop.has_indices() { Some(empty(op, ord, DType::I64, xw.shape())?) } else { None };
            {
                let (xs, os) = (xw.storage().read(), out.storage().write());
                let ps = pos.as_ref().map(|p| p.storage().write());
                let pb = match (&ps, &pos) {
                    (Some(g), Some(p)) => Some((&**g, p.layout(), DType::I64)),
                    _ => None,
                };
                scan(op, (&xs, xw.layout(), dt), (&os, out.layout(), dt), pb, o, n, i, sop, reverse)?;
            }
            let back = |t: Tensor| -> Result<Tensor> {
                let t = if moved { t.movedim(&[last], &[dim as i64])?.contiguous()? } else { t };
                if x.ndim() == 0 { t.reshape(&[]) } else { Ok(t) }
            };
            (back(out)?, pos.map(back).transpose()?)
        };
        if let Some(i) = &idx {
            super::super::sort_cuda::record_gather(x, dim, &vals, i);
        }
        Ok(Some((vals, idx)))
    }
}

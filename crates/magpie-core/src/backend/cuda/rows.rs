//! Host side of kernels/rows.cu: the fixed-index row gather (`take_rows`), its deterministic
//! adjoint (`put_rows`, summing each destination's sources in the CPU path's order through an
//! inverse map built on the host, no float atomics) and sparse tap maps along one dim
//! (`apply_taps`). The index and weight arrays come from the host and are uploaded per call.
//! Without the `cuda` feature every entry answers `Ok(None)` (the caller computes on the host).

use crate::dtype::DType;
use crate::tensor::Tensor;
use crate::Result;

/// The inverse of a row index map, as compressed rows: destination `p` (of `rows * n_src`)
/// receives the flat sources `src[ptr[p]..ptr[p + 1]]`, ascending (the CPU loop's order).
///
/// ```
/// use magpie_core::backend::cuda::rows::inverse_map;
/// let (ptr, src) = inverse_map(1, 2, 3, &[2, 2]);
/// assert_eq!((ptr, src), (vec![0, 0, 0, 2], vec![0, 1]));
/// ```
pub fn inverse_map(rows: usize, per_row: usize, n_src: usize, idx: &[usize]) -> (Vec<i64>, Vec<i64>) {
    let n = rows * n_src;
    let mut ptr = vec![0i64; n + 1];
    for r in 0..rows {
        for &i in &idx[r * per_row..(r + 1) * per_row] {
            ptr[r * n_src + i + 1] += 1;
        }
    }
    for p in 0..n {
        ptr[p + 1] += ptr[p];
    }
    let mut fill: Vec<i64> = ptr[..n].to_vec();
    let mut src = vec![0i64; idx.len()];
    for r in 0..rows {
        for j in 0..per_row {
            let p = r * n_src + idx[r * per_row + j];
            src[fill[p] as usize] = (r * per_row + j) as i64;
            fill[p] += 1;
        }
    }
    (ptr, src)
}

/// True for the dtypes the row kernels are built for (float and integer, not complex).
pub fn supported(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8 | DType::Bool)
}

#[cfg(feature = "cuda")]
mod imp {
    use super::super::device::CudaDevice;
    use super::super::kern::{elem_ptr, grid_stride_blocks, kfunc, KFile};
    use super::super::launch::{launch, Args};
    use super::super::ops::{contiguous, empty, to_cuda};
    use super::*;
    use crate::Device;

    /// An index array of the host on `cuda:ord`.
    fn upload_i64(mut v: Vec<i64>, ord: usize) -> Result<Tensor> {
        // A kernel argument pointer must be valid even for an empty array.
        if v.is_empty() {
            v.push(0);
        }
        let n = v.len();
        to_cuda(&Tensor::from_vec(v, &[n])?, ord)
    }

    fn dense(t: &Tensor) -> Result<Tensor> {
        if t.is_contiguous() { Ok(t.clone()) } else { contiguous(t) }
    }

    fn run(dev: &CudaDevice, op: &str, dt: DType, kernel: &'static str, n: usize, a: &mut Args) -> Result<()> {
        let f = kfunc(dev, KFile::Rows, dt, kernel)?;
        launch(dev, op, f, (grid_stride_blocks(dev, n), 1, 1), (256, 1, 1), 0, a)
    }

    /// `out[r, j] = x[r, idx[r, j]]` on CUDA; `None` when `x` is not a CUDA tensor of a supported dtype.
    pub fn take_rows(x: &Tensor, per_row: usize, n_src: usize, idx: &[usize], out_shape: &[usize]) -> Result<Option<Tensor>> {
        let op = "gather";
        let Device::Cuda(ord) = x.device() else { return Ok(None) };
        if !supported(x.dtype()) {
            return Ok(None);
        }
        let out = empty(op, ord, x.dtype(), out_shape)?;
        if idx.is_empty() {
            return Ok(Some(out));
        }
        let x = dense(x)?;
        let ix = upload_i64(idx.iter().map(|&i| i as i64).collect(), ord)?;
        let (xp, dev) = elem_ptr(op, &x)?;
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &out)?.0).push(elem_ptr(op, &ix)?.0).push(per_row as i64).push(n_src as i64).push(idx.len() as i64);
        run(&dev, op, x.dtype(), "take_rows_k", idx.len(), &mut a)?;
        Ok(Some(out))
    }

    /// The adjoint of [`take_rows`] on CUDA (`assign`: the last source wins); `None` when `g` is
    /// not a CUDA tensor of a supported dtype.
    pub fn put_rows(g: &Tensor, rows: usize, per_row: usize, n_src: usize, idx: &[usize], out_shape: &[usize], assign: bool) -> Result<Option<Tensor>> {
        let op = "scatter_add";
        let Device::Cuda(ord) = g.device() else { return Ok(None) };
        if !supported(g.dtype()) {
            return Ok(None);
        }
        let out = empty(op, ord, g.dtype(), out_shape)?;
        let n = rows * n_src;
        if n == 0 {
            return Ok(Some(out));
        }
        let g = dense(g)?;
        let (ptr, src) = inverse_map(rows, per_row, n_src, idx);
        let (ptr, src) = (upload_i64(ptr, ord)?, upload_i64(src, ord)?);
        let (gp, dev) = elem_ptr(op, &g)?;
        let mut a = Args::new();
        a.push(gp).push(elem_ptr(op, &out)?.0).push(elem_ptr(op, &ptr)?.0).push(elem_ptr(op, &src)?.0).push(assign as i32).push(n as i64);
        run(&dev, op, g.dtype(), "put_rows_k", n, &mut a)?;
        Ok(Some(out))
    }

    /// The tap map (`ptr`/`idx`/`w`, `n_out` rows over `n_in`) along the middle dim of `x` viewed
    /// as `[outer, n_in, inner]`, on CUDA; `None` when `x` is not a floating CUDA tensor.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_taps(x: &Tensor, n_in: usize, inner: usize, ptr: &[usize], idx: &[usize], w: &[f64], out_shape: &[usize]) -> Result<Option<Tensor>> {
        let op = "resample";
        let Device::Cuda(ord) = x.device() else { return Ok(None) };
        if !matches!(x.dtype(), DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
            return Ok(None);
        }
        let out = empty(op, ord, x.dtype(), out_shape)?;
        let total = out.numel();
        if total == 0 {
            return Ok(Some(out));
        }
        let x = dense(x)?;
        let n_out = ptr.len() - 1;
        let pt = upload_i64(ptr.iter().map(|&i| i as i64).collect(), ord)?;
        let it = upload_i64(idx.iter().map(|&i| i as i64).collect(), ord)?;
        // Weights in the accumulation type, rounded as the CPU path rounds them.
        let wt = if x.dtype() == DType::F64 {
            to_cuda(&Tensor::from_vec(if w.is_empty() { vec![0.0] } else { w.to_vec() }, &[w.len().max(1)])?, ord)?
        } else {
            let v: Vec<f32> = if w.is_empty() { vec![0.0] } else { w.iter().map(|&v| v as f32).collect() };
            let n = v.len();
            to_cuda(&Tensor::from_vec(v, &[n])?, ord)?
        };
        let (xp, dev) = elem_ptr(op, &x)?;
        let mut a = Args::new();
        a.push(xp).push(elem_ptr(op, &out)?.0).push(elem_ptr(op, &pt)?.0).push(elem_ptr(op, &it)?.0).push(elem_ptr(op, &wt)?.0);
        a.push(n_in as i64).push(n_out as i64).push(inner as i64).push(total as i64);
        run(&dev, op, x.dtype(), "apply_taps_k", total, &mut a)?;
        Ok(Some(out))
    }
}

#[cfg(feature = "cuda")]
pub use imp::{apply_taps, put_rows, take_rows};

/// Without CUDA: never on a GPU.
#[cfg(not(feature = "cuda"))]
pub fn take_rows(_x: &Tensor, _per_row: usize, _n_src: usize, _idx: &[usize], _out_shape: &[usize]) -> Result<Option<Tensor>> {
    Ok(None)
}

/// Without CUDA: never on a GPU.
#[cfg(not(feature = "cuda"))]
pub fn put_rows(_g: &Tensor, _rows: usize, _per_row: usize, _n_src: usize, _idx: &[usize], _out_shape: &[usize], _assign: bool) -> Result<Option<Tensor>> {
    Ok(None)
}

/// Without CUDA: never on a GPU.
#[cfg(not(feature = "cuda"))]
pub fn apply_taps(_x: &Tensor, _n_in: usize, _inner: usize, _ptr: &[usize], _idx: &[usize], _w: &[f64], _out_shape: &[usize]) -> Result<Option<Tensor>> {
    Ok(None)
}

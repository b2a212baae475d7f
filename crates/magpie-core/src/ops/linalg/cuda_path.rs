//! The CUDA side of the linalg primitives: column-major device copies handed to cuSOLVER and
//! cuBLAS (`backend/cuda/linalg*.rs`), the results viewed back in row-major order. Each returns
//! plain tensors (no autograd record); the device-generic op code records the backward rules.
//! A row-major `[.., m, n]` buffer is the column-major `n×m` transpose, which several
//! factorizations use directly instead of copying.

#[cfg(feature = "cuda")]
mod imp {
    use crate::autograd;
    use crate::backend::cuda::device::CudaDevice;
    use crate::backend::cuda::kern::elem_ptr;
    use crate::backend::cuda::linalg::{self as sol, Real, SvdBufs};
    use crate::backend::cuda::linalg_perm::{self as perm, Dets};
    use crate::backend::cuda::linalg_trsm::trsm;
    use crate::backend::cuda::ops as cops;
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Device, Error, Result};
    use std::sync::Arc;

    fn ordinal(op: &str, t: &Tensor) -> Result<usize> {
        match t.device() {
            Device::Cuda(n) => Ok(n),
            Device::Cpu => Err(Error::device(op, "expected a CUDA tensor")),
        }
    }

    fn empty(op: &str, like: &Tensor, dt: DType, shape: &[usize]) -> Result<Tensor> {
        cops::empty(op, ordinal(op, like)?, dt, shape)
    }

    fn zeros(like: &Tensor, dt: DType, shape: &[usize]) -> Result<Tensor> {
        Tensor::zeros_on(shape, dt, like.device())
    }

    /// The device address of a contiguous tensor's first element and its device.
    fn ptr(op: &str, t: &Tensor) -> Result<(u64, Arc<CudaDevice>)> {
        if !t.is_contiguous() {
            return Err(Error::value(op, "internal: a cuSOLVER buffer must be contiguous"));
        }
        elem_ptr(op, t)
    }

    /// Batch shape, matrix count and the last two dims.
    fn dims(t: &Tensor) -> (Vec<usize>, usize, usize, usize) {
        let nd = t.ndim();
        let batch = t.shape()[..nd - 2].to_vec();
        let count = batch.iter().product();
        (batch, count, t.shape()[nd - 2], t.shape()[nd - 1])
    }

    fn with(batch: &[usize], extra: &[usize]) -> Vec<usize> {
        let mut s = batch.to_vec();
        s.extend_from_slice(extra);
        s
    }

    /// A column-major copy of the matrices of `a`: a row-major `[.., n, m]` tensor.
    fn colmajor(a: &Tensor) -> Result<Tensor> {
        cops::contiguous(&a.mt()?)
    }

    /// Host copy of an int32 `info` tensor (waits for the GPU, as PyTorch's checks do).
    pub fn infos_host(info: &Tensor) -> Result<Vec<i32>> {
        info.to_device(Device::Cpu)?.to_vec()
    }

    /// LU factors of `a` (`[.., m, n]`): the packed factors as a row-major view, int64 pivots
    /// (1-based, `[.., min(m, n)]`) and int32 infos (`[..]`).
    pub struct Lu {
        pub lu: Tensor,
        pub piv: Tensor,
        pub info: Tensor,
    }

    /// `getrf` on a column-major copy of `a`.
    pub fn lu(op: &str, a: &Tensor) -> Result<Lu> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let (batch, count, m, n) = dims(a);
        let c = colmajor(a)?;
        let piv = zeros(a, DType::I64, &with(&batch, &[m.min(n)]))?;
        let info = zeros(a, DType::I32, &batch)?;
        if c.numel() > 0 {
            let (cp, dev) = ptr(op, &c)?;
            sol::getrf(op, &dev, ty, cp, m, n, count, ptr(op, &piv)?.0, ptr(op, &info)?.0)?;
        }
        Ok(Lu { lu: c.mt()?, piv, info })
    }

    /// `A X = B` for square `a` (`[.., n, n]`) and `b` (`[.., n, r]`) of the same batch shape:
    /// `(X, info of the LU)`.
    pub fn solve(op: &str, a: &Tensor, b: &Tensor) -> Result<(Tensor, Tensor)> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let f = lu(op, a)?;
        let (_, count, n, r) = dims(b);
        let cb = colmajor(b)?;
        if cb.numel() > 0 {
            // the column-major factors are contiguous again after the view round trip
            let lc = f.lu.mt()?;
            let scratch = zeros(a, DType::I32, &[count.max(1)])?;
            let (bp, dev) = ptr(op, &cb)?;
            sol::getrs(op, &dev, ty, ptr(op, &lc)?.0, ptr(op, &f.piv)?.0, bp, n, r, count, false, ptr(op, &scratch)?.0)?;
        }
        Ok((cb.mt()?, f.info))
    }

    /// `T X = B` with the `upper` (else lower) triangle of square `t`, unit diagonal when `unit`;
    /// equal batch shapes.
    pub fn tri_solve(op: &str, t: &Tensor, b: &Tensor, upper: bool, unit: bool) -> Result<Tensor> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, t.dtype())?;
        let (_, count, n, r) = dims(b);
        let ct = colmajor(t)?;
        let cb = colmajor(b)?;
        if cb.numel() > 0 {
            let (bp, dev) = ptr(op, &cb)?;
            trsm(op, &dev, ty, ptr(op, &ct)?.0, bp, n, r, count, upper, unit)?;
        }
        cb.mt()
    }

    /// Cholesky `L` (lower, zeros above) of square `a` read from its lower triangle, and infos.
    pub fn cholesky(op: &str, a: &Tensor) -> Result<(Tensor, Tensor)> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let (batch, count, n, _) = dims(a);
        // the row-major buffer is Aᵀ column-major: its upper triangle is A's lower one, and the
        // upper factor U (Aᵀ = UᵀU) read back row-major is L = Uᵀ
        let c = cops::contiguous(a)?;
        let info = zeros(a, DType::I32, &batch)?;
        if c.numel() > 0 {
            let (cp, dev) = ptr(op, &c)?;
            sol::potrf(op, &dev, ty, cp, n, count, true, ptr(op, &info)?.0)?;
        }
        Ok((c.tril(0)?, info))
    }

    /// Householder QR of `a` (`[.., m, n]`): `Q` with `q_cols` columns and `R` with `q_cols` rows.
    pub fn qr(op: &str, a: &Tensor, q_cols: usize) -> Result<(Tensor, Tensor)> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let (batch, count, m, n) = dims(a);
        let k = m.min(n);
        let c = colmajor(a)?;
        let tau = zeros(a, a.dtype(), &with(&batch, &[k.max(1)]))?;
        let info = zeros(a, DType::I32, &with(&batch, &[1]))?;
        if c.numel() > 0 {
            let (cp, dev) = ptr(op, &c)?;
            sol::geqrf(op, &dev, ty, cp, m, n, count, ptr(op, &tau)?.0, ptr(op, &info)?.0)?;
        }
        // q_cols is k or m, so R's rows are the first rows of the factored matrix
        let r = cops::contiguous(&c.mt()?.narrow(-2, 0, q_cols as i64)?.triu(0)?)?;
        // Q's buffer: column-major m×q_cols with the k reflectors in its first columns
        let qb = zeros(a, a.dtype(), &with(&batch, &[q_cols, m]))?;
        let refl = k.min(q_cols);
        if refl > 0 {
            cops::copy_into(&qb.narrow(-2, 0, refl as i64)?, &c.narrow(-2, 0, refl as i64)?)?;
        }
        if qb.numel() > 0 {
            let (qp, dev) = ptr(op, &qb)?;
            sol::orgqr(op, &dev, ty, qp, m, q_cols, refl, count, ptr(op, &tau)?.0, k.max(1), ptr(op, &info)?.0)?;
        }
        Ok((qb.mt()?, r))
    }

    /// LAPACK's raw QR of `a` (`[.., m, n]`), as `torch.geqrf` returns it: R on and above the
    /// diagonal with the Householder vectors below it, and their scalars `tau` (`[.., min(m, n)]`).
    pub fn geqrf(op: &str, a: &Tensor) -> Result<(Tensor, Tensor)> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let (batch, count, m, n) = dims(a);
        let k = m.min(n);
        let c = colmajor(a)?;
        let tau = zeros(a, a.dtype(), &with(&batch, &[k.max(1)]))?;
        let info = zeros(a, DType::I32, &with(&batch, &[1]))?;
        if c.numel() > 0 {
            let (cp, dev) = ptr(op, &c)?;
            sol::geqrf(op, &dev, ty, cp, m, n, count, ptr(op, &tau)?.0, ptr(op, &info)?.0)?;
        }
        Ok((cops::contiguous(&c.mt()?)?, cops::contiguous(&tau.narrow(-1, 0, k as i64)?)?))
    }

    /// Eigenvalues (ascending, `[.., n]`) and eigenvectors (columns) of symmetric `a`, read from
    /// its `upper` (else lower) triangle.
    pub fn eigh(op: &str, a: &Tensor, upper: bool) -> Result<(Tensor, Tensor)> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let (batch, count, n, _) = dims(a);
        // row-major buffer = Aᵀ column-major: A's upper triangle is its lower one
        let c = cops::contiguous(a)?;
        let w = zeros(a, a.dtype(), &with(&batch, &[n]))?;
        let info = zeros(a, DType::I32, &with(&batch, &[1]))?;
        if c.numel() > 0 {
            let (cp, dev) = ptr(op, &c)?;
            sol::syevd(op, &dev, ty, cp, n, count, !upper, ptr(op, &w)?.0, ptr(op, &info)?.0)?;
        }
        Ok((w, c.mt()?))
    }

    /// `A = U diag(S) Vh` of `a` (`[.., m, n]`): thin factors, or square ones when `full`.
    pub fn svd(op: &str, a: &Tensor, full: bool) -> Result<(Tensor, Tensor, Tensor)> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let (batch, count, m, n) = dims(a);
        let k = m.min(n);
        let (uc, vc) = if full { (m, n) } else { (k, k) };
        let s = zeros(a, a.dtype(), &with(&batch, &[k]))?;
        if k == 0 {
            // nothing to factor: identities for the square factors, empty thin ones
            let u = Tensor::eye_on(m, uc, a.dtype(), a.device())?.broadcast_to(&with(&batch, &[m, uc]))?.contiguous()?;
            let vh = Tensor::eye_on(vc, n, a.dtype(), a.device())?.broadcast_to(&with(&batch, &[vc, n]))?.contiguous()?;
            return Ok((u, s, vh));
        }
        // gesvdj factors the row-major buffer, i.e. Aᵀ = U' S V'ᵀ (n×m): U = V', Vh = U'ᵀ
        let c = cops::contiguous(a)?;
        let up = empty(op, a, a.dtype(), &with(&batch, &[vc, n]))?; // U' column-major n×vc = Vh rows
        let vp = empty(op, a, a.dtype(), &with(&batch, &[uc, m]))?; // V' column-major m×uc = Uᵀ
        let info = zeros(a, DType::I32, &with(&batch, &[1]))?;
        let (cp, dev) = ptr(op, &c)?;
        let bufs = SvdBufs { a: cp, s: ptr(op, &s)?.0, u: ptr(op, &up)?.0, v: ptr(op, &vp)?.0, info: ptr(op, &info)?.0 };
        sol::gesvdj(op, &dev, ty, &bufs, n, m, count, !full)?;
        Ok((vp.mt()?, s, up))
    }

    /// The permutation matrices `[.., m, m]` (dtype `dt`) of int pivots `[.., k]`.
    pub fn pivots_to_perm(op: &str, piv: &Tensor, m: usize, dt: DType) -> Result<Tensor> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, dt)?;
        let nd = piv.ndim();
        let (batch, k) = (piv.shape()[..nd - 1].to_vec(), piv.shape()[nd - 1]);
        let count: usize = batch.iter().product();
        let p64 = cops::cast(piv, DType::I64)?;
        let out = empty(op, piv, dt, &with(&batch, &[m, m]))?;
        if out.numel() > 0 {
            let (pp, dev) = ptr(op, &out)?;
            perm::pivots_to_perm(op, &dev, ty, ptr(op, &p64)?.0, k, m, count, pp)?;
        }
        Ok(out)
    }

    /// `(det, sign, log|det|)` of square `a` through its LU factors.
    pub fn dets(op: &str, a: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let _ng = autograd::no_grad();
        let ty = Real::of(op, a.dtype())?;
        let (batch, count, n, _) = dims(a);
        let f = lu(op, a)?;
        let lc = f.lu.mt()?;
        let (det, sign, logabs) = (empty(op, a, a.dtype(), &batch)?, empty(op, a, a.dtype(), &batch)?, empty(op, a, a.dtype(), &batch)?);
        if count > 0 {
            let dev = ptr(op, &det)?.1;
            let out = Dets { det: ptr(op, &det)?.0, sign: ptr(op, &sign)?.0, logabs: ptr(op, &logabs)?.0 };
            let lp = if n == 0 { out.det } else { ptr(op, &lc)?.0 };
            let pp = if n == 0 { out.det } else { ptr(op, &f.piv)?.0 };
            perm::lu_dets(op, &dev, ty, lp, pp, n, count, &out)?;
        }
        Ok((det, sign, logabs))
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use crate::dtype::DType;
    use crate::tensor::Tensor;
    use crate::{Error, Result};

    fn off(op: &str) -> Error {
        Error::device(op, "torch-magpie was built without the `cuda` feature")
    }
    pub fn infos_host(_info: &Tensor) -> Result<Vec<i32>> {
        Err(off("linalg"))
    }
    pub struct Lu {
        pub lu: Tensor,
        pub piv: Tensor,
        pub info: Tensor,
    }
    pub fn lu(op: &str, _a: &Tensor) -> Result<Lu> {
        Err(off(op))
    }
    pub fn solve(op: &str, _a: &Tensor, _b: &Tensor) -> Result<(Tensor, Tensor)> {
        Err(off(op))
    }
    pub fn tri_solve(op: &str, _t: &Tensor, _b: &Tensor, _upper: bool, _unit: bool) -> Result<Tensor> {
        Err(off(op))
    }
    pub fn cholesky(op: &str, _a: &Tensor) -> Result<(Tensor, Tensor)> {
        Err(off(op))
    }
    pub fn geqrf(op: &str, _a: &Tensor) -> Result<(Tensor, Tensor)> {
        Err(off(op))
    }
    pub fn qr(op: &str, _a: &Tensor, _q_cols: usize) -> Result<(Tensor, Tensor)> {
        Err(off(op))
    }
    pub fn eigh(op: &str, _a: &Tensor, _upper: bool) -> Result<(Tensor, Tensor)> {
        Err(off(op))
    }
    pub fn svd(op: &str, _a: &Tensor, _full: bool) -> Result<(Tensor, Tensor, Tensor)> {
        Err(off(op))
    }
    pub fn pivots_to_perm(op: &str, _piv: &Tensor, _m: usize, _dt: DType) -> Result<Tensor> {
        Err(off(op))
    }
    pub fn dets(op: &str, _a: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        Err(off(op))
    }
}

pub use imp::*;

//! Linalg ops that are compositions of the primitives: `matrix_power`, `matrix_exp`, `vander`,
//! `tensorinv`, `tensorsolve`, `lstsq` (differentiable through their parts).

use super::decomp::pinv;
use super::solve::{inv, solve};
use super::util::{build, check_float, check_mats, square};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.linalg.matrix_power(A, n)`: repeated squaring; negative `n` inverts first.
pub fn matrix_power(a: &Tensor, n: i64) -> Result<Tensor> {
    let op = "linalg.matrix_power";
    if a.ndim() < 2 || a.shape()[a.ndim() - 1] != a.shape()[a.ndim() - 2] {
        return Err(Error::shape(op, format!("{op}: A must be batches of square matrices, got shape {:?}", a.shape())));
    }
    let k = a.shape()[a.ndim() - 1];
    if n == 0 {
        // A⁰ = I, still connected to A (a zero gradient, as PyTorch's result has a grad_fn)
        let id = Tensor::eye_on(k, k, a.dtype(), a.device())?;
        return a.mul_scalar(0)?.add(&id)?.to_dtype(a.dtype());
    }
    let base = if n < 0 { inv(a)? } else { a.clone() };
    let mut e = n.unsigned_abs();
    let mut result: Option<Tensor> = None;
    let mut p = base;
    loop {
        if e & 1 == 1 {
            result = Some(match result {
                None => p.clone(),
                Some(r) => r.matmul(&p)?,
            });
        }
        e >>= 1;
        if e == 0 {
            break;
        }
        p = p.matmul(&p)?;
    }
    result.ok_or_else(|| Error::value(op, "empty power"))
}

/// `torch.linalg.matrix_exp(A)`: scaling and squaring with a degree-18 Taylor polynomial,
/// all in matrix products (so the gradient is the product rule through them).
pub fn matrix_exp(a: &Tensor) -> Result<Tensor> {
    let op = "linalg.matrix_exp";
    check_mats(op, a, true)?;
    let n = a.shape()[a.ndim() - 1];
    // scale so that the largest 1-norm over the batch is below 1/2
    let norm = if a.device().is_cuda() {
        // the scaling count decides how many products run: read on the host, as PyTorch does
        let _ng = crate::autograd::no_grad();
        if a.numel() == 0 { 0.0 } else { a.abs()?.sum_dims(Some(&[-2]), false, None)?.amax(&[], false)?.item()?.to_f64() }
    } else {
        let m = square(op, a)?;
        let mut norm = 0.0f64;
        for i in 0..m.count() {
            let x = m.get(i);
            for c in 0..n {
                norm = norm.max((0..n).map(|r| x[r * n + c].abs()).sum());
            }
        }
        norm
    };
    let s = if norm > 0.5 { (norm / 0.5).log2().ceil() as i32 } else { 0 };
    // computed in f64 (18 Horner steps and the squarings lose too much in f32), rounded once
    let scaled = a.to_dtype(crate::DType::F64)?.mul_scalar(0.5f64.powi(s))?;
    let id = crate::Tensor::eye_on(n, n, crate::DType::F64, a.device())?.broadcast_to(a.shape())?;
    // Horner: I + X(I + X/2(I + X/3(...)))
    let mut acc = id.clone();
    for k in (1..=18).rev() {
        acc = id.add(&scaled.matmul(&acc)?.div_scalar(k as f64)?)?;
    }
    for _ in 0..s {
        acc = acc.matmul(&acc)?;
    }
    acc.to_dtype(a.dtype())
}

/// `torch.linalg.vander(x, N=None)`: columns `x⁰, x¹, …, x^{N−1}` along a new last dim.
pub fn vander(x: &Tensor, n: Option<i64>) -> Result<Tensor> {
    let op = "linalg.vander";
    if x.dtype().is_bool() {
        return Err(Error::dtype(op, "linalg.vander supports floating point, complex, and integer tensors, but got Bool"));
    }
    let x = if x.ndim() == 0 { x.unsqueeze(0)? } else { x.clone() };
    let len = x.shape()[x.ndim() - 1];
    let n = n.unwrap_or(len as i64);
    if n <= 1 {
        return Err(Error::value(op, "N must be greater than 1."));
    }
    let n = n as usize;
    let xe = x.unsqueeze(-1)?;
    let mut out: Option<Tensor> = None;
    let mut pw = xe.ones_like()?;
    for k in 0..n {
        if k > 0 {
            pw = pw.mul(&xe)?;
        }
        let mut onehot = vec![0i64; n];
        onehot[k] = 1;
        let e = Tensor::from_vec(onehot, &[n])?.to_device(x.device())?.to_dtype(x.dtype())?;
        let term = pw.mul(&e)?;
        out = Some(match out {
            None => term,
            Some(o) => o.add(&term)?,
        });
    }
    match out {
        Some(o) => Ok(o),
        None => {
            let mut s = x.shape().to_vec();
            s.push(0);
            Tensor::zeros_on(&s, x.dtype(), x.device())
        }
    }
}

/// `torch.linalg.tensorinv(A, ind=2)`.
pub fn tensorinv(a: &Tensor, ind: i64) -> Result<Tensor> {
    let op = "linalg.tensorinv";
    if ind <= 0 || ind as usize > a.ndim() {
        return Err(Error::value(op, format!("Expected a strictly positive integer for 'ind', but got {ind}")));
    }
    let ind = ind as usize;
    let (lead, rest) = (&a.shape()[..ind], &a.shape()[ind..]);
    let (p, q): (usize, usize) = (lead.iter().product(), rest.iter().product());
    if p != q {
        return Err(Error::shape(op, format!("Expected self to satisfy the requirement prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {q} != {p}")));
    }
    let i = inv(&a.reshape(&[p as i64, q as i64])?)?;
    let shape: Vec<i64> = rest.iter().chain(lead).map(|&s| s as i64).collect();
    i.reshape(&shape)
}

/// `torch.linalg.tensorsolve(A, B, dims=None)`.
pub fn tensorsolve(a: &Tensor, b: &Tensor, dims: Option<&[i64]>) -> Result<Tensor> {
    let op = "linalg.tensorsolve";
    let a = match dims {
        Some(d) if !d.is_empty() => {
            let dst: Vec<i64> = (0..d.len()).map(|i| (a.ndim() - d.len() + i) as i64).collect();
            a.movedim(d, &dst)?
        }
        _ => a.clone(),
    };
    let bn = b.numel();
    let nd_b = b.ndim();
    if a.ndim() < nd_b {
        return Err(Error::shape(op, format!("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), got shapes {:?} and {:?}", a.shape(), b.shape())));
    }
    let rest: Vec<usize> = a.shape()[nd_b..].to_vec();
    let rn: usize = rest.iter().product();
    if rn != bn {
        return Err(Error::shape(op, format!("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got {rn} != {bn}")));
    }
    let x = solve(&a.reshape(&[bn as i64, rn as i64])?, &b.reshape(&[bn as i64])?, true)?;
    let shape: Vec<i64> = rest.iter().map(|&s| s as i64).collect();
    x.reshape(&shape)
}

/// `torch.linalg.lstsq(A, B, rcond=None, driver=None)`: `(solution, residuals, rank,
/// singular_values)`. The solution is `A⁺ B` (the least-squares, minimum-norm solution);
/// residuals are returned for tall full-rank problems as LAPACK's `gels` does.
pub fn lstsq(a: &Tensor, b: &Tensor, driver: Option<&str>) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let op = "linalg.lstsq";
    check_float(op, a)?;
    if a.ndim() < 2 {
        return Err(Error::shape(op, format!("{op}: input must have at least 2 dimensions.")));
    }
    if b.ndim() < 1 {
        return Err(Error::shape(op, format!("{op}: other must have at least 1 dimension.")));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(op, format!("{op}: Expected input and other to have the same dtype, but got {} and {}", a.dtype().name(), b.dtype().name())));
    }
    if let Some(d) = driver {
        if !matches!(d, "gels" | "gelsy" | "gelsd" | "gelss") {
            return Err(Error::value(op, format!("{op}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")));
        }
    }
    let vector = b.ndim() == a.ndim() - 1;
    let bm = if vector { b.unsqueeze(-1)? } else { b.clone() };
    let (m, n) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
    if bm.shape()[bm.ndim() - 2] != m {
        return Err(Error::shape(op, format!("{op}: input.size(-2) should match other.size(-2), got {m} and {}", bm.shape()[bm.ndim() - 2])));
    }
    let x = pinv(a, None, None, false)?.matmul(&bm)?;
    let dt = a.dtype();
    let residuals = if m > n && driver.unwrap_or("gelsy") != "gelsy" && super::decomp::matrix_rank(a, None, None, false)?.to_vec::<i64>()?.iter().all(|&r| r as usize == n) {
        let r = a.matmul(&x)?.sub(&bm)?;
        r.mul(&r)?.sum_dims(Some(&[-2]), false, None)?
    } else {
        // empty, but connected to A like PyTorch's (so it takes a gradient of zeros)
        a.reshape(&[-1])?.narrow(0, 0, 0)?
    };
    let x = if vector { x.squeeze_dims(&[-1])? } else { x };
    let rank = Tensor::from_vec(Vec::<i64>::new(), &[0])?.to_device(a.device())?;
    let sv = build(vec![], &[0], dt)?.to_device(a.device())?;
    Ok((x, residuals, rank, sv))
}

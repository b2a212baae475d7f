//! Norms: `linalg.vector_norm` (a primitive with PyTorch's subgradients at zero),
//! `linalg.matrix_norm`, `linalg.norm`, `torch.norm`, and `linalg.cond`.

use super::decomp::svdvals;
use super::util::{abs, build, check_float, sign_const};
use crate::autograd;
use crate::dtype::DType;
use crate::ops::binary::where_cond;
use crate::ops::reduce::{reduce_dims, reduced_shape, reduce_rows};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `torch.linalg.vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None)`.
pub fn vector_norm(x: &Tensor, ord: f64, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> Result<Tensor> {
    let _prof = crate::profiler::op("linalg_vector_norm", &[x]);
    if let Some(c) = crate::amp::opt_dtype("linalg_vector_norm", x, dtype)? {
        return vector_norm(&c.args.0, ord, dims, keepdim, c.args.1);
    }
    let op = "linalg.vector_norm";
    let x = match dtype {
        Some(d) if d != x.dtype() => {
            if !(x.dtype().is_float() || x.dtype().is_complex()) {
                check_float(op, x)?;
            }
            x.to_dtype(d)?
        }
        _ => x.clone(),
    };
    // bfloat16 / float16: in float32, rounded once (as PyTorch's CPU and CUDA kernels)
    if matches!(x.dtype(), DType::BF16 | DType::F16) {
        return vector_norm(&x.to_dtype(DType::F32)?, ord, dims, keepdim, None)?.to_dtype(x.dtype());
    }
    check_float(op, &x)?;
    let d = reduce_dims(op, &x, dims)?;
    if x.numel() == 0 && ord < 0.0 || (x.numel() == 0 && ord.is_infinite() && d.iter().any(|&i| x.shape()[i] == 0)) {
        return Err(Error::value(op, format!("{op} cannot compute the {ord} norm on an empty tensor because the operation does not have an identity")));
    }
    let out = if x.device().is_cuda() {
        norm_on_device(&x, ord, &d, keepdim)?
    } else {
        let shape = reduced_shape(x.shape(), &d, keepdim);
        let (v, _) = reduce_rows::<f64, f64>(&x, &d, |r| norm_of(r, ord))?;
        build(v, &shape, x.dtype())?
    };
    let (dims_c, nd) = (d.clone(), x.ndim());
    let sx = autograd::Saved::new("vector_norm", &x);
    autograd::record("LinalgVectorNorm", &[&x], &[out.clone()], move |ctx, g| {
        let x = sx.get()?;
        let mut n = ctx.output(0)?;
        let mut g = g[0].clone();
        if !keepdim {
            for &dd in &dims_c {
                if nd > 0 {
                    n = n.unsqueeze(dd as i64)?;
                    g = g.unsqueeze(dd as i64)?;
                }
            }
        }
        Ok(vec![Some(norm_backward(&x, &n, &g, ord)?)])
    });
    Ok(out)
}

/// The value of [`vector_norm`] over `dims` as tensor ops on `x`'s device (no history): the same
/// cases as [`norm_of`].
pub(crate) fn norm_on_device(x: &Tensor, ord: f64, dims: &[usize], keepdim: bool) -> Result<Tensor> {
    let _ng = autograd::no_grad();
    let d: Vec<i64> = dims.iter().map(|&i| i as i64).collect();
    let sum = |t: Tensor| t.sum_dims(Some(&d), keepdim, None);
    if ord == 2.0 {
        sum(x.mul(x)?)?.sqrt()
    } else if ord == f64::INFINITY {
        x.abs()?.amax(&d, keepdim)
    } else if ord == f64::NEG_INFINITY {
        x.abs()?.amin(&d, keepdim)
    } else if ord == 0.0 {
        sum(x.ne_scalar(0.0)?.to_dtype(x.dtype())?)
    } else if ord == 1.0 {
        sum(x.abs()?)
    } else {
        sum(x.abs()?.pow_scalar(ord)?)?.pow_scalar(1.0 / ord)
    }
}

fn norm_of(r: &[f64], ord: f64) -> f64 {
    if ord == 2.0 {
        r.iter().map(|v| v * v).sum::<f64>().sqrt()
    } else if ord == f64::INFINITY {
        r.iter().fold(0.0f64, |a, v| if v.is_nan() || a.is_nan() { f64::NAN } else { a.max(v.abs()) })
    } else if ord == f64::NEG_INFINITY {
        r.iter().fold(f64::INFINITY, |a, v| if v.is_nan() || a.is_nan() { f64::NAN } else { a.min(v.abs()) })
    } else if ord == 0.0 {
        r.iter().filter(|&&v| v != 0.0).count() as f64
    } else if ord == 1.0 {
        r.iter().map(|v| v.abs()).sum()
    } else {
        r.iter().map(|v| v.abs().powf(ord)).sum::<f64>().powf(1.0 / ord)
    }
}

/// The gradient of a vector norm (`n` and `g` already keep the reduced dims), 0 where the norm is 0.
fn norm_backward(x: &Tensor, n: &Tensor, g: &Tensor, ord: f64) -> Result<Tensor> {
    let zero = x.zeros_like()?;
    if ord == 0.0 {
        return Ok(zero);
    }
    let sgn = {
        let _ng = autograd::no_grad();
        sign_const(x)?
    };
    if ord.is_infinite() {
        // split the gradient evenly among the elements that attain the max (or min)
        let ax = abs(x)?;
        let hit = ax.eq(&n.broadcast_to(x.shape())?)?.to_dtype(x.dtype())?;
        let count = hit.sum_to_size(n.shape())?;
        return sgn.mul(&hit)?.div(&count)?.mul(g);
    }
    let nz = n.eq_scalar(0.0)?.broadcast_to(x.shape())?;
    let scaled = if ord == 1.0 {
        sgn
    } else if ord == 2.0 {
        x.div(n)?
    } else {
        // sgn(x) |x|^(p−1) / n^(p−1)
        let ax = abs(x)?;
        let num = sgn.mul(&ax.pow_scalar(ord - 1.0)?)?;
        let num = where_cond(&x.eq_scalar(0.0)?, &zero, &num)?;
        num.div(&n.pow_scalar(ord - 1.0)?)?
    };
    where_cond(&nz, &zero, &scaled.mul(g)?)
}

/// `torch.linalg.matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False)`; `ord` is a number or
/// one of `"fro"`, `"nuc"`.
pub fn matrix_norm(a: &Tensor, ord: &NormOrd, dim: (i64, i64), keepdim: bool) -> Result<Tensor> {
    let op = "linalg.matrix_norm";
    if matches!(a.dtype(), DType::BF16 | DType::F16) {
        // the singular-value norms need an SVD, which takes no low-precision dtype (as PyTorch)
        if matches!(ord, NormOrd::Nuc | NormOrd::Num(2.0) | NormOrd::Num(-2.0)) {
            return Err(Error::dtype(op, format!("{op}: Low precision dtypes not supported. Got {}", if a.dtype() == DType::BF16 { "BFloat16" } else { "Half" })));
        }
        return matrix_norm(&a.to_dtype(DType::F32)?, ord, dim, keepdim)?.to_dtype(a.dtype());
    }
    check_float(op, a)?;
    if a.ndim() < 2 {
        return Err(Error::shape(op, format!("{op}: The input tensor A must have at least 2 dimensions.")));
    }
    let d0 = crate::shape::wrap_dim(op, dim.0, a.ndim())?;
    let d1 = crate::shape::wrap_dim(op, dim.1, a.ndim())?;
    if d0 == d1 {
        return Err(Error::value(op, format!("{op}: dims must be different. Got ({}, {})", dim.0, dim.1)));
    }
    let dims = [d0 as i64, d1 as i64];
    let out = match ord {
        NormOrd::Fro => vector_norm(a, 2.0, Some(&dims), keepdim, None)?,
        NormOrd::Nuc | NormOrd::Num(2.0) | NormOrd::Num(-2.0) => {
            // singular values: move the two dims last
            let moved = a.movedim(&dims, &[-2, -1])?;
            let s = svdvals(&moved)?;
            let r = match ord {
                NormOrd::Nuc => s.sum_dims(Some(&[-1]), false, None)?,
                NormOrd::Num(p) if *p > 0.0 => vector_norm(&s, f64::INFINITY, Some(&[-1]), false, None)?,
                _ => vector_norm(&s, f64::NEG_INFINITY, Some(&[-1]), false, None)?,
            };
            if keepdim {
                let (lo, hi) = if d0 < d1 { (d0, d1) } else { (d1, d0) };
                r.unsqueeze(lo as i64)?.unsqueeze(hi as i64)?
            } else {
                r
            }
        }
        NormOrd::Num(p) if p.abs() == 1.0 || p.is_infinite() => {
            // 1: max over columns of the column sums of |A|; inf: max over rows of row sums
            let (sum_dim, max_dim) = if p.abs() == 1.0 { (d0, d1) } else { (d1, d0) };
            let s = abs(a)?.sum_dims(Some(&[sum_dim as i64]), true, None)?;
            let inf = if *p > 0.0 { f64::INFINITY } else { f64::NEG_INFINITY };
            let r = vector_norm(&s, inf, Some(&[max_dim as i64]), true, None)?;
            if keepdim {
                r
            } else {
                let (lo, hi) = if d0 < d1 { (d0, d1) } else { (d1, d0) };
                r.squeeze_dims(&[hi as i64])?.squeeze_dims(&[lo as i64])?
            }
        }
        NormOrd::Num(p) => return Err(Error::value(op, format!("{op}: Order {p} not supported."))),
    };
    Ok(out)
}

/// A norm order: a number, `"fro"` or `"nuc"`.
#[derive(Clone, Debug, PartialEq)]
pub enum NormOrd {
    Num(f64),
    Fro,
    Nuc,
}

/// `torch.linalg.norm(A, ord=None, dim=None, keepdim=False)`.
pub fn linalg_norm(a: &Tensor, ord: Option<NormOrd>, dim: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    let op = "linalg.norm";
    match (ord, dim) {
        (None, None) => {
            let flat = a.flatten(0, -1)?;
            let r = vector_norm(&flat, 2.0, None, false, None)?;
            if keepdim {
                let ones: Vec<i64> = vec![1; a.ndim()];
                r.reshape(&ones)
            } else {
                Ok(r)
            }
        }
        (None, Some(d)) => vector_norm(a, 2.0, Some(d), keepdim, None),
        (Some(o), None) => match a.ndim() {
            1 => match o {
                NormOrd::Num(p) => vector_norm(a, p, None, keepdim, None),
                _ => Err(Error::value(op, format!("{op}: ord={o:?} is not supported for vectors"))),
            },
            2 => matrix_norm(a, &o, (-2, -1), keepdim),
            n => Err(Error::shape(op, format!("{op}: If dim is not specified but ord is, the input must be 1D or 2D. Got {n}D."))),
        },
        (Some(o), Some(d)) => match d.len() {
            1 => match o {
                NormOrd::Num(p) => vector_norm(a, p, Some(d), keepdim, None),
                _ => Err(Error::value(op, format!("{op}: ord={o:?} is not supported for vectors"))),
            },
            2 => matrix_norm(a, &o, (d[0], d[1]), keepdim),
            n => Err(Error::value(op, format!("{op}: If dim is specified, it must be of length 1 or 2. Got {n}"))),
        },
    }
}

/// `torch.norm(input, p='fro', dim=None, keepdim=False)`: the older interface.
pub fn torch_norm(a: &Tensor, p: NormOrd, dim: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
    match p {
        NormOrd::Fro => match dim {
            Some(d) if d.len() == 2 => matrix_norm(a, &NormOrd::Fro, (d[0], d[1]), keepdim),
            _ => vector_norm(a, 2.0, dim, keepdim, None),
        },
        NormOrd::Nuc => {
            let d = dim.unwrap_or(&[-2, -1]);
            if d.len() != 2 {
                return Err(Error::value("norm", "nuclear norm requires two dims"));
            }
            matrix_norm(a, &NormOrd::Nuc, (d[0], d[1]), keepdim)
        }
        NormOrd::Num(p) => vector_norm(a, p, dim, keepdim, None),
    }
}

/// `torch.linalg.cond(A, p=None)`: `σ_max / σ_min` for `p` in {None, 2, −2}, else
/// `‖A‖_p ‖A⁻¹‖_p`.
pub fn cond(a: &Tensor, p: Option<NormOrd>) -> Result<Tensor> {
    match p {
        None | Some(NormOrd::Num(2.0)) | Some(NormOrd::Num(-2.0)) => {
            let s = svdvals(a)?;
            let (hi, lo) = (vector_norm(&s, f64::INFINITY, Some(&[-1]), false, None)?, vector_norm(&s, f64::NEG_INFINITY, Some(&[-1]), false, None)?);
            if matches!(p, Some(NormOrd::Num(x)) if x < 0.0) {
                lo.div(&hi)
            } else {
                hi.div(&lo)
            }
        }
        Some(o) => {
            let inv = super::solve::inv(a)?;
            matrix_norm(a, &o, (-2, -1), false)?.mul(&matrix_norm(&inv, &o, (-2, -1), false)?)
        }
    }
}

//! Registry entries for `torch.linalg` decompositions, solves, inverses and norms.

use super::super::{Args, Registry, Value};
use crate::ops::linalg::{self as la, NormOrd};
use crate::tensor::Tensor;
use crate::{Error, Result};

const KW: usize = usize::MAX;

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

fn list(v: Vec<Tensor>) -> Result<Value> {
    Ok(Value::from(v))
}

/// The `info` output of an `_ex` op, on the device of the op's input.
fn info(v: Vec<i32>, batch: &[usize], dev: crate::Device) -> Result<Tensor> {
    Tensor::from_vec(v, batch)?.to_device(dev)
}

fn batch_of(x: &Tensor) -> Vec<usize> {
    x.shape()[..x.ndim().saturating_sub(2)].to_vec()
}

/// A norm order argument: a number, `"fro"` or `"nuc"`.
fn ord_of(v: Option<Value>, op: &str) -> Result<Option<NormOrd>> {
    Ok(match v {
        None | Some(Value::None) => None,
        Some(Value::Str(s)) if s == "fro" => Some(NormOrd::Fro),
        Some(Value::Str(s)) if s == "nuc" => Some(NormOrd::Nuc),
        Some(v) => match v.as_scalar() {
            Some(s) => Some(NormOrd::Num(s.to_f64())),
            None => return Err(Error::value(op, format!("{op}: invalid norm order {v:?}"))),
        },
    })
}

/// An optional float that may come as a 0-d tensor (`rtol=torch.tensor(...)`).
fn opt_tol(a: &mut Args, i: usize, name: &str) -> Result<Option<f64>> {
    match a.get_some(i, name) {
        None => Ok(None),
        Some(Value::Tensor(x)) => Ok(Some(x.item()?.to_f64())),
        Some(v) => v.as_scalar().map(|s| Some(s.to_f64())).ok_or_else(|| Error::value(a.op(), format!("{name} must be a number"))),
    }
}

fn opt_dims(a: &mut Args, i: usize, name: &str) -> Result<Option<Vec<i64>>> {
    a.opt_ints(i, name)
}

/// `inv_ex` / `solve_ex` style: run `f`, or on a singular input return NaNs and the LU info.
fn with_info(op: &str, a: &Tensor, check: bool, f: impl FnOnce() -> Result<Tensor>, nan_shape: &[usize]) -> Result<(Tensor, Tensor)> {
    let (infos, batch) = la::lu_infos(a, op)?;
    let bad = infos.iter().any(|&i| i != 0);
    if bad && check {
        return Err(Error::value(op, format!("{op}: The diagonal element {} is zero, the inversion could not be completed because the input matrix is singular.", infos.iter().find(|&&i| i != 0).copied().unwrap_or(0))));
    }
    let x = if bad { Tensor::full_on(nan_shape, f64::NAN, a.dtype(), a.device())? } else { f()? };
    Ok((x, info(infos, &batch, a.device())?))
}

/// The `driver=` keyword of the SVDs: accepted for CUDA inputs (every driver runs cuSOLVER's
/// Jacobi SVD here), refused for CPU ones with PyTorch's message.
fn svd_driver(a: &mut Args, op: &str, x: &Tensor) -> Result<()> {
    match a.opt_str(KW, "driver")? {
        None => Ok(()),
        Some(_) if !x.device().is_cuda() => Err(Error::value(op, format!("torch.{op}: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."))),
        Some(d) if matches!(d.as_str(), "gesvd" | "gesvdj" | "gesvda") => Ok(()),
        Some(d) => Err(Error::value(op, format!("torch.{op}: driver must be one of 'gesvd', 'gesvdj', 'gesvda' or None, but got {d}"))),
    }
}

/// Registers the `torch.linalg` ops.
pub(crate) fn register(r: &mut Registry) {
    r.add_all(&["linalg.det", "det"], |a| t(la::det(&a.tensor(0, "A")?)?));
    r.add("logdet", |a| t(la::logdet(&a.tensor(0, "input")?)?));
    r.add_all(&["linalg.slogdet", "slogdet"], |a| {
        let (s, l) = la::slogdet(&a.tensor(0, "A")?)?;
        list(vec![s, l])
    });
    r.add_all(&["linalg.inv", "inverse"], |a| t(la::inv(&a.tensor(0, "A")?)?));
    r.add("linalg.inv_ex", |a| {
        let x = a.tensor(0, "A")?;
        let check = a.bool_or(KW, "check_errors", false)?;
        let (i, inf) = with_info("linalg.inv_ex", &x, check, || la::inv(&x), x.shape())?;
        list(vec![i, inf])
    });
    r.add("linalg.solve", |a| {
        let x = a.tensor(0, "A")?;
        let b = a.tensor(1, "B")?;
        let left = a.bool_or(KW, "left", true)?;
        t(la::solve(&x, &b, left)?)
    });
    r.add("linalg.solve_ex", |a| {
        let x = a.tensor(0, "A")?;
        let b = a.tensor(1, "B")?;
        let left = a.bool_or(KW, "left", true)?;
        let check = a.bool_or(KW, "check_errors", false)?;
        let (s, inf) = with_info("linalg.solve_ex", &x, check, || la::solve(&x, &b, left), b.shape())?;
        list(vec![s, inf])
    });
    r.add("linalg.solve_triangular", |a| {
        let x = a.tensor(0, "A")?;
        let b = a.tensor(1, "B")?;
        let upper = match a.get_some(KW, "upper") {
            Some(Value::Bool(u)) => u,
            _ => return Err(Error::value("linalg.solve_triangular", "missing required keyword argument 'upper'")),
        };
        let left = a.bool_or(KW, "left", true)?;
        let unit = a.bool_or(KW, "unitriangular", false)?;
        t(la::solve_triangular(&x, &b, upper, left, unit)?)
    });
    r.add("triangular_solve", |a| {
        let b = a.tensor(0, "input")?;
        let x = a.tensor(1, "A")?;
        let upper = a.bool_or(2, "upper", true)?;
        let trans = a.bool_or(3, "transpose", false)?;
        let unit = a.bool_or(4, "unitriangular", false)?;
        let (coef, up) = if trans { (x.mt()?, !upper) } else { (x.clone(), upper) };
        let s = la::solve_triangular(&coef, &b, up, true, unit)?;
        list(vec![s, x.copy()?])
    });
    r.add_all(&["linalg.cholesky", "cholesky"], |a| {
        let x = a.tensor(0, "A")?;
        let upper = a.bool_or(if a.op() == "cholesky" { 1 } else { KW }, "upper", false)?;
        t(la::cholesky(&x, upper)?)
    });
    r.add("linalg.cholesky_ex", |a| {
        let x = a.tensor(0, "A")?;
        let upper = a.bool_or(KW, "upper", false)?;
        let check = a.bool_or(KW, "check_errors", false)?;
        let (l, infos) = la::cholesky_ex(&x, upper)?;
        if check && infos.iter().any(|&i| i != 0) {
            return Err(Error::value("linalg.cholesky_ex", "linalg.cholesky_ex: The factorization could not be completed because the input is not positive-definite."));
        }
        list(vec![l, info(infos, &batch_of(&x), x.device())?])
    });
    r.add("cholesky_solve", |a| {
        let b = a.tensor(0, "input")?;
        let l = a.tensor(1, "input2")?;
        let upper = a.bool_or(2, "upper", false)?;
        t(la::cholesky_solve(&b, &l, upper)?)
    });
    r.add("cholesky_inverse", |a| {
        let l = a.tensor(0, "input")?;
        let upper = a.bool_or(1, "upper", false)?;
        t(la::cholesky_inverse(&l, upper)?)
    });
    r.add("linalg.lu", |a| {
        let x = a.tensor(0, "A")?;
        if !a.bool_or(KW, "pivot", true)? {
            return Err(Error::unsupported("linalg.lu", "pivot=False"));
        }
        let (p, l, u, _, _) = la::lu_full(&x)?;
        list(vec![p, l, u])
    });
    r.add_all(&["linalg.lu_factor", "linalg.lu_factor_ex"], |a| {
        let x = a.tensor(0, "A")?;
        if !a.bool_or(KW, "pivot", true)? {
            return Err(Error::unsupported(a.op(), "pivot=False"));
        }
        let ex = a.op() == "linalg.lu_factor_ex";
        let check = if ex { a.bool_or(KW, "check_errors", false)? } else { false };
        let (lu, piv, infos) = la::lu_factor_ex(&x)?;
        if check && infos.iter().any(|&i| i != 0) {
            return Err(Error::value(a.op(), "linalg.lu_factor_ex: the factorization found a zero pivot (singular matrix)"));
        }
        if ex {
            list(vec![lu, piv, info(infos, &batch_of(&x), x.device())?])
        } else {
            list(vec![lu, piv])
        }
    });
    r.add("lu", |a| {
        let x = a.tensor(0, "A")?;
        if !a.bool_or(1, "pivot", true)? {
            return Err(Error::unsupported("lu", "pivot=False"));
        }
        let infos_wanted = a.bool_or(2, "get_infos", false)?;
        let (lu, piv, infos) = la::lu_factor_ex(&x)?;
        if infos_wanted {
            list(vec![lu, piv, info(infos, &batch_of(&x), x.device())?])
        } else {
            list(vec![lu, piv])
        }
    });
    r.add("linalg.lu_solve", |a| {
        let lu = a.tensor(0, "LU")?;
        let piv = a.tensor(1, "pivots")?;
        let b = a.tensor(2, "B")?;
        let left = a.bool_or(KW, "left", true)?;
        let adjoint = a.bool_or(KW, "adjoint", false)?;
        t(la::lu_solve(&lu, &piv, &b, left, adjoint)?)
    });
    r.add("lu_solve", |a| {
        let b = a.tensor(0, "input")?;
        let lu = a.tensor(1, "LU_data")?;
        let piv = a.tensor(2, "LU_pivots")?;
        t(la::lu_solve(&lu, &piv, &b, true, false)?)
    });
    r.add("lu_unpack", |a| {
        let lu = a.tensor(0, "LU_data")?;
        let piv = a.tensor(1, "LU_pivots")?;
        if !a.bool_or(2, "unpack_data", true)? || !a.bool_or(3, "unpack_pivots", true)? {
            return Err(Error::unsupported("lu_unpack", "unpack_data=False or unpack_pivots=False"));
        }
        let (p, l, u) = la::lu_unpack(&lu, &piv)?;
        list(vec![p, l, u])
    });
    r.add("linalg.qr", |a| {
        let x = a.tensor(0, "A")?;
        let mode = a.opt_str(1, "mode")?.unwrap_or_else(|| "reduced".into());
        let (q, rr) = la::qr(&x, &mode)?;
        list(vec![q, rr])
    });
    r.add("qr", |a| {
        let x = a.tensor(0, "input")?;
        let some = a.bool_or(1, "some", true)?;
        let (q, rr) = la::qr(&x, if some { "reduced" } else { "complete" })?;
        list(vec![q, rr])
    });
    r.add("linalg.eigh", |a| {
        let x = a.tensor(0, "A")?;
        let uplo = a.opt_str(1, "UPLO")?.unwrap_or_else(|| "L".into());
        let (w, v) = la::eigh(&x, &uplo)?;
        list(vec![w, v])
    });
    r.add("linalg.eigvalsh", |a| {
        let x = a.tensor(0, "A")?;
        let uplo = a.opt_str(1, "UPLO")?.unwrap_or_else(|| "L".into());
        t(la::eigh(&x, &uplo)?.0)
    });
    r.add("linalg.svd", |a| {
        let x = a.tensor(0, "A")?;
        let full = a.bool_or(1, "full_matrices", true)?;
        svd_driver(a, "linalg.svd", &x)?;
        let (u, s, vh) = la::svd(&x, full)?;
        list(vec![u, s, vh])
    });
    r.add("svd", |a| {
        let x = a.tensor(0, "input")?;
        let some = a.bool_or(1, "some", true)?;
        if !a.bool_or(2, "compute_uv", true)? {
            return Err(Error::unsupported("svd", "compute_uv=False"));
        }
        let (u, s, vh) = la::svd(&x, !some)?;
        list(vec![u, s, vh.mt()?])
    });
    r.add("linalg.svdvals", |a| {
        let x = a.tensor(0, "A")?;
        svd_driver(a, "linalg.svdvals", &x)?;
        t(la::svdvals(&x)?)
    });
    r.add("linalg.pinv", |a| {
        let x = a.tensor(0, "A")?;
        let atol = opt_tol(a, KW, "atol")?;
        let rtol = opt_tol(a, KW, "rtol")?;
        let herm = a.bool_or(KW, "hermitian", false)?;
        t(la::pinv(&x, atol, rtol, herm)?)
    });
    r.add("pinverse", |a| {
        let x = a.tensor(0, "input")?;
        let rcond = a.float_or(1, "rcond", 1e-15)?;
        t(la::pinv(&x, None, Some(rcond), false)?)
    });
    r.add("linalg.matrix_rank", |a| {
        let x = a.tensor(0, "A")?;
        let atol = opt_tol(a, KW, "atol")?;
        let rtol = opt_tol(a, KW, "rtol")?;
        let herm = a.bool_or(KW, "hermitian", false)?;
        t(la::matrix_rank(&x, atol, rtol, herm)?)
    });
    r.add("linalg.vector_norm", |a| {
        let x = a.tensor(0, "x")?;
        let ord = a.opt_float(1, "ord")?.unwrap_or(2.0);
        let dims = opt_dims(a, 2, "dim")?;
        let keep = a.bool_or(3, "keepdim", false)?;
        let dt = a.opt_dtype(KW, "dtype")?;
        t(la::vector_norm(&x, ord, dims.as_deref(), keep, dt)?)
    });
    r.add("linalg.matrix_norm", |a| {
        let x = a.tensor(0, "A")?;
        let ord = ord_of(a.get(1, "ord"), "linalg.matrix_norm")?.unwrap_or(NormOrd::Fro);
        let dims = opt_dims(a, 2, "dim")?.unwrap_or(vec![-2, -1]);
        let keep = a.bool_or(3, "keepdim", false)?;
        if dims.len() != 2 {
            return Err(Error::value("linalg.matrix_norm", "linalg.matrix_norm: dim must be a 2-tuple"));
        }
        t(la::matrix_norm(&x, &ord, (dims[0], dims[1]), keep)?)
    });
    r.add("linalg.norm", |a| {
        let x = a.tensor(0, "A")?;
        let ord = ord_of(a.get(1, "ord"), "linalg.norm")?;
        let dims = opt_dims(a, 2, "dim")?;
        let keep = a.bool_or(3, "keepdim", false)?;
        t(la::linalg_norm(&x, ord, dims.as_deref(), keep)?)
    });
    r.add("norm", |a| {
        let x = a.tensor(0, "input")?;
        let p = ord_of(a.get(1, "p"), "norm")?.unwrap_or(NormOrd::Fro);
        let dims = opt_dims(a, 2, "dim")?;
        let keep = a.bool_or(3, "keepdim", false)?;
        t(la::torch_norm(&x, p, dims.as_deref(), keep)?)
    });
    r.add("linalg.cond", |a| {
        let x = a.tensor(0, "A")?;
        let p = ord_of(a.get(1, "p"), "linalg.cond")?;
        t(la::cond(&x, p)?)
    });
    r.add_all(&["linalg.matrix_power", "matrix_power"], |a| {
        let x = a.tensor(0, "A")?;
        t(la::matrix_power(&x, a.int(1, "n")?)?)
    });
    r.add_all(&["matrix_exp", "linalg.matrix_exp"], |a| t(la::matrix_exp(&a.tensor(0, "A")?)?));
    r.add_all(&["linalg.householder_product", "orgqr"], |a| {
        let x = a.tensor(0, "A")?;
        t(la::householder_product(&x, &a.tensor(1, "tau")?)?)
    });
    r.add("linalg.vander", |a| {
        let x = a.tensor(0, "x")?;
        let n = a.opt_int(KW, "N")?;
        t(la::vander(&x, n)?)
    });
    r.add("linalg.tensorinv", |a| {
        let x = a.tensor(0, "A")?;
        t(la::tensorinv(&x, a.int_or(1, "ind", 2)?)?)
    });
    r.add("linalg.tensorsolve", |a| {
        let x = a.tensor(0, "A")?;
        let b = a.tensor(1, "B")?;
        let dims = opt_dims(a, 2, "dims")?;
        t(la::tensorsolve(&x, &b, dims.as_deref())?)
    });
    r.add("geqrf", |a| {
        let (x, tau) = la::geqrf(&a.tensor(0, "input")?)?;
        list(vec![x, tau])
    });
    r.add("ormqr", |a| {
        let x = a.tensor(0, "input")?;
        let tau = a.tensor(1, "input2")?;
        let c = a.tensor(2, "input3")?;
        let left = a.bool_or(3, "left", true)?;
        let tr = a.bool_or(4, "transpose", false)?;
        t(la::ormqr(&x, &tau, &c, left, tr)?)
    });
    r.add("linalg.matrix_sqrth", |a| t(la::matrix_sqrth(&a.tensor(0, "A")?)?));
    r.add("linalg.polar", |a| {
        let (u, h) = la::polar(&a.tensor(0, "A")?)?;
        list(vec![u, h])
    });
    r.add_all(&["linalg.ldl_factor", "linalg.ldl_factor_ex"], |a| {
        let x = a.tensor(0, "A")?;
        // real inputs: hermitian=True and False are the same factorization
        a.bool_or(KW, "hermitian", false)?;
        if a.op() == "linalg.ldl_factor" {
            let (ld, piv) = la::ldl_factor(&x)?;
            return list(vec![ld, piv]);
        }
        a.bool_or(KW, "check_errors", false)?;
        let (ld, piv, info) = la::ldl_factor_ex(&x)?;
        list(vec![ld, piv, info])
    });
    r.add("linalg.ldl_solve", |a| {
        let ld = a.tensor(0, "LD")?;
        let piv = a.tensor(1, "pivots")?;
        let b = a.tensor(2, "B")?;
        a.bool_or(KW, "hermitian", false)?;
        t(la::ldl_solve(&ld, &piv, &b)?)
    });
    r.add("linalg.lstsq", |a| {
        let x = a.tensor(0, "A")?;
        let b = a.tensor(1, "B")?;
        if a.opt_float(2, "rcond")?.is_some() {
            return Err(Error::unsupported("linalg.lstsq", "rcond"));
        }
        let driver = a.opt_str(KW, "driver")?;
        let (s, res, rank, sv) = la::lstsq(&x, &b, driver.as_deref())?;
        list(vec![s, res, rank, sv])
    });
}

//! Registry entries for the matmul family and `torch.linalg`.

mod decomp;

use super::{Args, Registry, Value};
use crate::ops::matmul;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use crate::{Error, Result};

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// `beta` and `alpha` keywords of the `add*` ops (keyword-only in PyTorch).
fn beta_alpha(a: &mut Args) -> Result<(Scalar, Scalar)> {
    let beta = a.opt_scalar(usize::MAX, "beta")?.unwrap_or(Scalar::Int(1));
    let alpha = a.opt_scalar(usize::MAX, "alpha")?.unwrap_or(Scalar::Int(1));
    Ok((beta, alpha))
}

/// Registers the matmul family.
fn register_matmul(r: &mut Registry) {
    r.add("matmul", |a| {
        let x = a.tensor(0, "input")?;
        t(x.matmul(&a.tensor(1, "other")?)?)
    });
    r.add("__rmatmul__", |a| {
        let x = a.tensor(0, "input")?;
        t(a.tensor(1, "other")?.matmul(&x)?)
    });
    r.add("mm", |a| {
        let x = a.tensor(0, "input")?;
        t(x.mm(&a.tensor(1, "mat2")?)?)
    });
    r.add("bmm", |a| {
        let x = a.tensor(0, "input")?;
        t(x.bmm(&a.tensor(1, "mat2")?)?)
    });
    r.add("mv", |a| {
        let x = a.tensor(0, "input")?;
        t(x.mv(&a.tensor(1, "vec")?)?)
    });
    r.add("dot", |a| {
        let x = a.tensor(0, "input")?;
        t(x.dot(&a.tensor(1, "tensor")?)?)
    });
    r.add("vdot", |a| {
        let x = a.tensor(0, "input")?;
        t(x.vdot(&a.tensor(1, "other")?)?)
    });
    r.add("inner", |a| {
        let x = a.tensor(0, "input")?;
        t(x.inner(&a.tensor(1, "other")?)?)
    });
    r.add_all(&["outer", "ger"], |a| {
        let x = a.tensor(0, "input")?;
        t(x.outer(&a.tensor(1, "vec2")?)?)
    });
    r.add("addmm", |a| {
        let x = a.tensor(0, "input")?;
        let (m1, m2) = (a.tensor(1, "mat1")?, a.tensor(2, "mat2")?);
        let (beta, alpha) = beta_alpha(a)?;
        t(x.addmm(&m1, &m2, beta, alpha)?)
    });
    r.add("addmv", |a| {
        let x = a.tensor(0, "input")?;
        let (m, v) = (a.tensor(1, "mat")?, a.tensor(2, "vec")?);
        let (beta, alpha) = beta_alpha(a)?;
        t(x.addmv(&m, &v, beta, alpha)?)
    });
    r.add("addbmm", |a| {
        let x = a.tensor(0, "input")?;
        let (b1, b2) = (a.tensor(1, "batch1")?, a.tensor(2, "batch2")?);
        let (beta, alpha) = beta_alpha(a)?;
        t(x.addbmm(&b1, &b2, beta, alpha)?)
    });
    r.add("baddbmm", |a| {
        let x = a.tensor(0, "input")?;
        let (b1, b2) = (a.tensor(1, "batch1")?, a.tensor(2, "batch2")?);
        let (beta, alpha) = beta_alpha(a)?;
        t(x.baddbmm(&b1, &b2, beta, alpha)?)
    });
    r.add("addr", |a| {
        let x = a.tensor(0, "input")?;
        let (v1, v2) = (a.tensor(1, "vec1")?, a.tensor(2, "vec2")?);
        let (beta, alpha) = beta_alpha(a)?;
        t(x.addr(&v1, &v2, beta, alpha)?)
    });
    r.add("trace", |a| t(a.tensor(0, "input")?.trace()?));
    r.add("kron", |a| {
        let x = a.tensor(0, "input")?;
        t(x.kron(&a.tensor(1, "other")?)?)
    });
    r.add("cross", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        let d = a.opt_int(2, "dim")?;
        t(matmul::cross_impl("cross", &x, &y, d)?)
    });
    r.add("linalg.cross", |a| {
        let x = a.tensor(0, "input")?;
        let y = a.tensor(1, "other")?;
        let d = a.int_or(2, "dim", -1)?;
        t(matmul::cross_impl("linalg.cross", &x, &y, Some(d))?)
    });
    r.add("linalg.vecdot", |a| {
        let x = a.tensor(0, "x")?;
        let y = a.tensor(1, "y")?;
        let d = a.int_or(2, "dim", -1)?;
        t(matmul::vecdot(&x, &y, d)?)
    });
    r.add("linalg.diagonal", |a| {
        let x = a.tensor(0, "A")?;
        let off = a.int_or(usize::MAX, "offset", 0)?;
        let d1 = a.int_or(usize::MAX, "dim1", -2)?;
        let d2 = a.int_or(usize::MAX, "dim2", -1)?;
        t(x.diagonal(off, d1, d2)?)
    });
    r.add_all(&["linalg.multi_dot", "chain_matmul"], |a| {
        let ts = if a.op() == "chain_matmul" && a.n_pos() > 1 {
            a.rest(0).into_iter().map(|v| v.into_tensor()).collect::<Result<Vec<_>>>()?
        } else {
            a.tensors(0, "tensors")?
        };
        t(matmul::multi_dot(&ts)?)
    });
    r.add("tensordot", |a| {
        let x = a.tensor(0, "a")?;
        let y = a.tensor(1, "b")?;
        let (da, db) = match a.get_some(2, "dims") {
            None => tensordot_n(&x, 2)?,
            Some(Value::Int(n)) => tensordot_n(&x, n)?,
            Some(Value::List(l)) if l.len() == 2 => (dims_of(&l[0])?, dims_of(&l[1])?),
            Some(Value::Tensor(d)) if d.ndim() == 0 => tensordot_n(&x, d.item()?.to_i64())?,
            Some(v) => return Err(Error::value("tensordot", format!("tensordot expects dims to be an int or a pair of lists, got {}", v.kind()))),
        };
        t(matmul::tensordot(&x, &y, &da, &db)?)
    });
    r.add("einsum", |a| {
        // torch.einsum(equation, *operands) or, as OpInfo calls it, einsum(operands, equation).
        let (eq, ts) = match a.get(0, "equation") {
            Some(Value::Str(s)) => {
                let rest = a.rest(1);
                let ts = if rest.len() == 1 {
                    match &rest[0] {
                        Value::List(l) => l.iter().cloned().map(Value::into_tensor).collect::<Result<Vec<_>>>()?,
                        v => vec![v.clone().into_tensor()?],
                    }
                } else {
                    rest.into_iter().map(Value::into_tensor).collect::<Result<Vec<_>>>()?
                };
                (s, ts)
            }
            Some(Value::List(l)) => {
                let ts = l.into_iter().map(Value::into_tensor).collect::<Result<Vec<_>>>()?;
                match a.get(1, "equation") {
                    Some(Value::Str(s)) => (s, ts),
                    _ => return Err(Error::value("einsum", "einsum(): expected an equation string")),
                }
            }
            _ => return Err(Error::value("einsum", "einsum(): expected an equation string")),
        };
        t(matmul::einsum(&eq, &ts)?)
    });
}

/// `dims = n`: the last `n` dims of `a` with the first `n` of `b`.
fn tensordot_n(a: &Tensor, n: i64) -> Result<(Vec<i64>, Vec<i64>)> {
    if n < 0 {
        return Err(Error::value("tensordot", format!("tensordot expects dims >= 0, but got dims={n}")));
    }
    if n as usize > a.ndim() {
        return Err(Error::value("tensordot", format!("tensordot expects dims < ndim_a or ndim_b, but got dims={n}")));
    }
    let na = a.ndim() as i64;
    Ok(((na - n..na).collect(), (0..n).collect()))
}

fn dims_of(v: &Value) -> Result<Vec<i64>> {
    match v {
        Value::Int(i) => Ok(vec![*i]),
        Value::List(l) => l
            .iter()
            .map(|x| match x {
                Value::Int(i) => Ok(*i),
                o => Err(Error::value("tensordot", format!("dims must be ints, got {}", o.kind()))),
            })
            .collect(),
        Value::Tensor(t) => t.to_vec::<i64>(),
        o => Err(Error::value("tensordot", format!("dims must be lists of ints, got {}", o.kind()))),
    }
}

/// Registers this family's ops.
pub(crate) fn register(r: &mut Registry) {
    register_matmul(r);
    decomp::register(r);
}

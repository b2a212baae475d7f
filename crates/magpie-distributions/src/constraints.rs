//! `torch.distributions.constraints`: the sets parameters and samples must lie in.

use std::fmt;

use magpie_core::{Result, Tensor};

use crate::util::fmt_value;

/// A bound of a constraint: a number, or a tensor broadcast against the checked value
/// (`Uniform`'s support is `Interval(low, high)` with tensor bounds).
#[derive(Clone, Debug)]
pub enum Bound {
    /// A fixed number.
    Num(f64),
    /// A tensor bound.
    Tensor(Tensor),
}

impl Bound {
    fn cmp(&self, v: &Tensor, op: fn(&Tensor, &Tensor) -> Result<Tensor>, op_s: fn(&Tensor, f64) -> Result<Tensor>) -> Result<Tensor> {
        match self {
            Bound::Num(b) => op_s(v, *b),
            Bound::Tensor(b) => op(v, b),
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Num(b) => write!(f, "{b:?}"),
            Bound::Tensor(t) => write!(f, "{}", fmt_value(t)),
        }
    }
}

/// One of PyTorch's constraints. `check` returns a bool tensor over the batch (event
/// dimensions reduced), as `Constraint.check` does.
#[derive(Clone, Debug)]
pub enum Constraint {
    /// `constraints.real`: not NaN (infinities allowed).
    Real,
    /// `constraints.greater_than(b)`.
    GreaterThan(Bound),
    /// `constraints.greater_than_eq(b)` (`nonnegative` is `GreaterThanEq(0)`).
    GreaterThanEq(Bound),
    /// `constraints.less_than(b)`.
    LessThan(Bound),
    /// `constraints.interval(a, b)`: closed.
    Interval(Bound, Bound),
    /// `constraints.half_open_interval(a, b)`: `[a, b)`.
    HalfOpenInterval(Bound, Bound),
    /// `constraints.boolean`: 0 or 1.
    Boolean,
    /// `constraints.integer_interval(a, b)`.
    IntegerInterval(Bound, Bound),
    /// `constraints.integer_greater_than(b)` (`nonnegative_integer` is `b = 0`).
    IntegerGreaterThan(Bound),
    /// `constraints.simplex`: nonnegative, last dimension sums to 1.
    Simplex,
    /// `constraints.one_hot`.
    OneHot,
    /// `constraints.positive_definite`: symmetric with a Cholesky factor.
    PositiveDefinite,
    /// `constraints.lower_cholesky`: lower triangular with a positive diagonal.
    LowerCholesky,
    /// `constraints.independent(c, n)`: `c` on each element, all over the rightmost `n` dims.
    Independent(Box<Constraint>, usize),
}

/// `constraints.positive`.
pub fn positive() -> Constraint {
    Constraint::GreaterThan(Bound::Num(0.0))
}
/// `constraints.nonnegative`.
pub fn nonnegative() -> Constraint {
    Constraint::GreaterThanEq(Bound::Num(0.0))
}
/// `constraints.unit_interval`.
pub fn unit_interval() -> Constraint {
    Constraint::Interval(Bound::Num(0.0), Bound::Num(1.0))
}
/// `constraints.real_vector`.
pub fn real_vector() -> Constraint {
    Constraint::Independent(Box::new(Constraint::Real), 1)
}
/// `constraints.nonnegative_integer`.
pub fn nonnegative_integer() -> Constraint {
    Constraint::IntegerGreaterThan(Bound::Num(0.0))
}

fn is_integer(v: &Tensor) -> Result<Tensor> {
    v.eq(&v.floor()?)
}

impl Constraint {
    /// How many rightmost dimensions one point of the set spans.
    pub fn event_dim(&self) -> usize {
        match self {
            Constraint::Simplex | Constraint::OneHot => 1,
            Constraint::PositiveDefinite | Constraint::LowerCholesky => 2,
            Constraint::Independent(c, n) => c.event_dim() + n,
            _ => 0,
        }
    }

    /// True for the integer-valued sets.
    pub fn is_discrete(&self) -> bool {
        match self {
            Constraint::Boolean | Constraint::IntegerInterval(..) | Constraint::IntegerGreaterThan(_) | Constraint::OneHot => true,
            Constraint::Independent(c, _) => c.is_discrete(),
            _ => false,
        }
    }

    /// Elementwise membership, reduced over the event dimensions (a bool tensor).
    pub fn check(&self, v: &Tensor) -> Result<Tensor> {
        let ge = |v: &Tensor, b: &Bound| b.cmp(v, Tensor::ge, |v, s| v.ge_scalar(s));
        let gt = |v: &Tensor, b: &Bound| b.cmp(v, Tensor::gt, |v, s| v.gt_scalar(s));
        let le = |v: &Tensor, b: &Bound| b.cmp(v, Tensor::le, |v, s| v.le_scalar(s));
        let lt = |v: &Tensor, b: &Bound| b.cmp(v, Tensor::lt, |v, s| v.lt_scalar(s));
        match self {
            Constraint::Real => v.eq(v),
            Constraint::GreaterThan(b) => gt(v, b),
            Constraint::GreaterThanEq(b) => ge(v, b),
            Constraint::LessThan(b) => lt(v, b),
            Constraint::Interval(a, b) => ge(v, a)?.logical_and(&le(v, b)?),
            Constraint::HalfOpenInterval(a, b) => ge(v, a)?.logical_and(&lt(v, b)?),
            Constraint::Boolean => v.eq_scalar(0.0)?.logical_or(&v.eq_scalar(1.0)?),
            Constraint::IntegerInterval(a, b) => is_integer(v)?.logical_and(&ge(v, a)?)?.logical_and(&le(v, b)?),
            Constraint::IntegerGreaterThan(b) => is_integer(v)?.logical_and(&ge(v, b)?),
            Constraint::Simplex => {
                let nonneg = v.ge_scalar(0.0)?.all_dims(Some(&[-1]), false)?;
                let close = v.sum_dims(Some(&[-1]), false, None)?.sub_scalar(1.0)?.abs()?.lt_scalar(1e-6)?;
                nonneg.logical_and(&close)
            }
            Constraint::OneHot => {
                let bin = v.eq_scalar(0.0)?.logical_or(&v.eq_scalar(1.0)?)?.all_dims(Some(&[-1]), false)?;
                bin.logical_and(&v.sum_dims(Some(&[-1]), false, None)?.eq_scalar(1.0)?)
            }
            Constraint::LowerCholesky => {
                let lower = v.tril(0)?.eq(v)?.all_dims(Some(&[-2, -1]), false)?;
                lower.logical_and(&v.diagonal(0, -2, -1)?.gt_scalar(0.0)?.all_dims(Some(&[-1]), false)?)
            }
            Constraint::PositiveDefinite => {
                let sym = v.sub(&v.transpose(-2, -1)?)?.abs()?.le_scalar(1e-6)?.all_dims(Some(&[-2, -1]), false)?;
                let (_, info) = magpie_core::ops::linalg::cholesky_ex(v, false)?;
                let ok: Vec<bool> = info.iter().map(|&k| k == 0).collect();
                let ok = Tensor::from_vec(ok, sym.shape())?.to_device(v.device())?;
                sym.logical_and(&ok)
            }
            Constraint::Independent(c, n) => {
                let mut r = c.check(v)?;
                if *n > 0 {
                    let dims: Vec<i64> = (1..=*n as i64).rev().map(|i| -i).collect();
                    if r.ndim() < *n {
                        return Err(magpie_core::Error::shape(
                            "constraints.independent",
                            format!("Expected value.dim() >= {} but got {}", n, r.ndim()),
                        ));
                    }
                    r = r.all_dims(Some(&dims[..]), false)?;
                }
                Ok(r)
            }
        }
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Constraint::Real => write!(f, "Real()"),
            Constraint::GreaterThan(b) => write!(f, "GreaterThan(lower_bound={b})"),
            Constraint::GreaterThanEq(b) => write!(f, "GreaterThanEq(lower_bound={b})"),
            Constraint::LessThan(b) => write!(f, "LessThan(upper_bound={b})"),
            Constraint::Interval(a, b) => write!(f, "Interval(lower_bound={a}, upper_bound={b})"),
            Constraint::HalfOpenInterval(a, b) => write!(f, "HalfOpenInterval(lower_bound={a}, upper_bound={b})"),
            Constraint::Boolean => write!(f, "Boolean()"),
            Constraint::IntegerInterval(a, b) => write!(f, "IntegerInterval(lower_bound={}, upper_bound={})", int_bound(a), int_bound(b)),
            Constraint::IntegerGreaterThan(b) => write!(f, "IntegerGreaterThan(lower_bound={})", int_bound(b)),
            Constraint::Simplex => write!(f, "Simplex()"),
            Constraint::OneHot => write!(f, "OneHot()"),
            Constraint::PositiveDefinite => write!(f, "PositiveDefinite()"),
            Constraint::LowerCholesky => write!(f, "LowerCholesky()"),
            Constraint::Independent(c, n) => write!(f, "IndependentConstraint({c}, {n})"),
        }
    }
}

// PyTorch writes integer bounds given as Python ints without a decimal point.
fn int_bound(b: &Bound) -> String {
    match b {
        Bound::Num(x) if x.fract() == 0.0 => format!("{}", *x as i64),
        b => b.to_string(),
    }
}

//! Registry entries for the unary op family: elementwise math, rounding, predicates,
//! `torch.special` functions and the `nn.functional` activations, with their in-place forms.

use super::args::TensorOrScalar;
use super::{Args, Registry, Value};
use crate::dtype::result_type;
use crate::ops::special::{orthogonal_polynomial, Polynomial};
use crate::tensor::Tensor;
use crate::{Error, Result};

type UnaryFn = fn(&Tensor) -> Result<Tensor>;

/// Ops that take just `input`, by every name they are reachable under. Each also gets the
/// in-place form `name_` (except the bool-valued and view ops).
const SIMPLE: &[(&[&str], UnaryFn, bool)] = &[
    (&["abs", "absolute"], Tensor::abs, true),
    (&["acos", "arccos"], Tensor::acos, true),
    (&["acosh", "arccosh"], Tensor::acosh, true),
    (&["asin", "arcsin"], Tensor::asin, true),
    (&["asinh", "arcsinh"], Tensor::asinh, true),
    (&["atan", "arctan"], Tensor::atan, true),
    (&["atanh", "arctanh"], Tensor::atanh, true),
    (&["ceil"], Tensor::ceil, true),
    (&["floor"], Tensor::floor, true),
    (&["trunc", "fix"], Tensor::trunc, true),
    (&["frac"], Tensor::frac, true),
    (&["sign"], Tensor::sign, true),
    (&["sgn"], Tensor::sgn, true),
    (&["sin"], Tensor::sin, true),
    (&["sinh"], Tensor::sinh, true),
    (&["sinc", "special.sinc"], Tensor::sinc, true),
    (&["cos"], Tensor::cos, true),
    (&["cosh"], Tensor::cosh, true),
    (&["tan"], Tensor::tan, true),
    (&["tanh", "nn.functional.tanh"], Tensor::tanh, true),
    (&["exp", "special.exp"], Tensor::exp, true),
    (&["exp2", "special.exp2"], Tensor::exp2, true),
    (&["expm1", "special.expm1"], Tensor::expm1, true),
    (&["log"], Tensor::log, true),
    (&["log10"], Tensor::log10, true),
    (&["log2"], Tensor::log2, true),
    (&["log1p", "special.log1p"], Tensor::log1p, true),
    (&["sqrt"], Tensor::sqrt, true),
    (&["rsqrt"], Tensor::rsqrt, true),
    (&["square"], Tensor::square, true),
    (&["reciprocal"], Tensor::reciprocal, true),
    (&["neg", "negative"], Tensor::neg, true),
    (&["positive"], Tensor::positive, false),
    (&["sigmoid", "special.expit", "nn.functional.sigmoid"], Tensor::sigmoid, true),
    (&["erf", "special.erf"], Tensor::erf, true),
    (&["erfc", "special.erfc"], Tensor::erfc, true),
    (&["erfinv", "special.erfinv"], Tensor::erfinv, true),
    (&["lgamma", "special.gammaln"], Tensor::lgamma, true),
    (&["digamma", "special.digamma", "special.psi"], Tensor::digamma, true),
    (&["i0", "special.i0", "special.modified_bessel_i0"], Tensor::i0, true),
    (&["deg2rad"], Tensor::deg2rad, true),
    (&["rad2deg"], Tensor::rad2deg, true),
    (&["angle"], Tensor::angle, false),
    (&["real"], Tensor::real, false),
    (&["conj"], Tensor::conj, false),
    (&["conj_physical"], Tensor::conj_physical, true),
    (&["resolve_conj"], Tensor::resolve_conj, false),
    (&["resolve_neg"], Tensor::resolve_neg, false),
    (&["isnan"], Tensor::isnan, false),
    (&["isinf"], Tensor::isinf, false),
    (&["isposinf"], Tensor::isposinf, false),
    (&["isneginf"], Tensor::isneginf, false),
    (&["isfinite"], Tensor::isfinite, false),
    (&["isreal"], Tensor::isreal, false),
    (&["signbit"], Tensor::signbit, false),
    (&["bitwise_not"], Tensor::bitwise_not, true),
    (&["logical_not"], Tensor::logical_not, true),
    (&["special.i0e"], Tensor::special_i0e, false),
    (&["special.i1", "special.modified_bessel_i1"], Tensor::special_i1, false),
    (&["special.i1e"], Tensor::special_i1e, false),
    (&["special.ndtr"], Tensor::special_ndtr, false),
    (&["special.ndtri"], Tensor::special_ndtri, false),
    (&["special.log_ndtr"], Tensor::special_log_ndtr, false),
    (&["special.erfcx"], Tensor::special_erfcx, false),
    (&["special.entr"], Tensor::special_entr, false),
    (&["special.airy_ai"], Tensor::special_airy_ai, false),
    (&["special.bessel_j0"], Tensor::special_bessel_j0, false),
    (&["special.bessel_j1"], Tensor::special_bessel_j1, false),
    (&["special.bessel_y0"], Tensor::special_bessel_y0, false),
    (&["special.bessel_y1"], Tensor::special_bessel_y1, false),
    (&["special.modified_bessel_k0"], Tensor::special_modified_bessel_k0, false),
    (&["special.modified_bessel_k1"], Tensor::special_modified_bessel_k1, false),
    (&["special.scaled_modified_bessel_k0"], Tensor::special_scaled_modified_bessel_k0, false),
    (&["special.scaled_modified_bessel_k1"], Tensor::special_scaled_modified_bessel_k1, false),
    (&["special.spherical_bessel_j0"], Tensor::special_spherical_bessel_j0, false),
    (&["nn.functional.tanhshrink"], Tensor::tanhshrink, false),
    (&["nn.functional.softsign"], Tensor::softsign, false),
    (&["nn.functional.logsigmoid"], Tensor::logsigmoid, false),
    (&["relu"], Tensor::relu, true),
    (&["selu"], Tensor::selu, true),
];

/// Looks up a simple op by name.
fn simple_fn(name: &str) -> Option<UnaryFn> {
    SIMPLE.iter().find(|(names, _, _)| names.contains(&name)).map(|(_, f, _)| *f)
}

fn t(v: Tensor) -> Result<Value> {
    Ok(Value::Tensor(v))
}

/// `op(input)` for the ops of [`SIMPLE`].
fn simple(a: &mut Args) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let f = simple_fn(a.op()).ok_or_else(|| Error::unsupported(a.op(), "no such op"))?;
    t(f(&x)?)
}

/// `input.op_()` for the ops of [`SIMPLE`].
fn simple_inplace(a: &mut Args) -> Result<Value> {
    let x = a.tensor(0, "input")?;
    let name = a.op().to_string();
    let base = name.trim_end_matches('_');
    let f = simple_fn(base).ok_or_else(|| Error::unsupported(&name, "no such op"))?;
    a.inplace(&x, f)
}

/// An activation with an `inplace` flag: `f(x)`, written into `x` when `inplace=True`
/// (through [`Args::inplace`], like every in-place op).
fn maybe_inplace(a: &mut Args, pos: usize, x: &Tensor, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Value> {
    if a.bool_or(pos, "inplace", false)? {
        a.inplace(x, f)
    } else {
        t(f(x)?)
    }
}

/// `special.<polynomial>(input, n)`: each a tensor or a number, not both numbers.
fn polynomial(a: &mut Args, kind: Polynomial) -> Result<Value> {
    let x = a.tensor_or_scalar(0, "input")?;
    let n = a.tensor_or_scalar(1, "n")?;
    let promo = |v: &TensorOrScalar| match v {
        TensorOrScalar::Tensor(t) => t.promo(),
        TensorOrScalar::Scalar(s) => crate::dtype::Operand::Scalar(s.dtype()),
    };
    let dt = result_type(&[promo(&x), promo(&n)])?;
    let as_tensor = |v: TensorOrScalar| -> Result<Tensor> {
        match v {
            TensorOrScalar::Tensor(t) => Ok(t),
            TensorOrScalar::Scalar(s) => Tensor::scalar_tensor(s, dt, crate::Device::Cpu),
        }
    };
    if matches!((&x, &n), (TensorOrScalar::Scalar(_), TensorOrScalar::Scalar(_))) {
        return Err(Error::value(a.op(), "expected at least one of input and n to be a Tensor, got two numbers"));
    }
    t(orthogonal_polynomial(kind, &as_tensor(x)?, &as_tensor(n)?)?)
}

/// Registers this family's ops.
pub(crate) fn register(r: &mut Registry) {
    for (names, _, has_inplace) in SIMPLE {
        r.add_all(names, simple);
        if *has_inplace {
            for n in names.iter().filter(|n| !n.contains('.')) {
                // leaked once at start-up: the registry keys are &'static str
                let ip: &'static str = Box::leak(format!("{n}_").into_boxed_str());
                r.add(ip, simple_inplace);
            }
        }
    }
    r.add_all(&["round", "special.round"], |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int_or(1, "decimals", 0)?;
        t(x.round_decimals(d)?)
    });
    r.add("round_", |a| {
        let x = a.tensor(0, "input")?;
        let d = a.int_or(1, "decimals", 0)?;
        a.inplace(&x, |x| x.round_decimals(d))
    });
    r.add_all(&["logit", "special.logit"], |a| {
        let x = a.tensor(0, "input")?;
        let eps = a.opt_float(1, "eps")?;
        t(x.logit(eps)?)
    });
    r.add_all(&["polygamma", "special.polygamma"], |a| {
        let n = a.int(0, "n")?;
        let x = a.tensor(1, "input")?;
        t(x.polygamma(n)?)
    });
    r.add_all(&["mvlgamma", "special.multigammaln"], |a| {
        let x = a.tensor(0, "input")?;
        let p = a.int(1, "p")?;
        t(x.mvlgamma(p)?)
    });
    r.add("nan_to_num", |a| {
        let x = a.tensor(0, "input")?;
        let nan = a.opt_float(1, "nan")?;
        let posinf = a.opt_float(2, "posinf")?;
        let neginf = a.opt_float(3, "neginf")?;
        t(x.nan_to_num(nan, posinf, neginf)?)
    });
    register_activations(r);
    register_polynomials(r);
}

fn register_activations(r: &mut Registry) {
    r.add("nn.functional.relu", |a| {
        let x = a.tensor(0, "input")?;
        maybe_inplace(a, 1, &x, |x| x.relu())
    });
    r.add("nn.functional.relu6", |a| {
        let x = a.tensor(0, "input")?;
        maybe_inplace(a, 1, &x, |x| x.relu6())
    });
    r.add_all(&["nn.functional.hardtanh", "hardtanh"], |a| {
        let x = a.tensor(0, "input")?;
        let lo = a.float_or(1, "min_val", -1.0)?;
        let hi = a.float_or(2, "max_val", 1.0)?;
        maybe_inplace(a, 3, &x, |x| x.hardtanh(lo, hi))
    });
    r.add_all(&["nn.functional.elu", "elu"], |a| {
        let x = a.tensor(0, "input")?;
        let alpha = a.float_or(1, "alpha", 1.0)?;
        maybe_inplace(a, 2, &x, |x| x.elu(alpha))
    });
    r.add("nn.functional.selu", |a| {
        let x = a.tensor(0, "input")?;
        maybe_inplace(a, 1, &x, |x| x.selu())
    });
    r.add_all(&["nn.functional.celu", "celu"], |a| {
        let x = a.tensor(0, "input")?;
        let alpha = a.float_or(1, "alpha", 1.0)?;
        maybe_inplace(a, 2, &x, |x| x.celu(alpha))
    });
    r.add_all(&["nn.functional.leaky_relu", "leaky_relu"], |a| {
        let x = a.tensor(0, "input")?;
        let s = a.float_or(1, "negative_slope", 0.01)?;
        maybe_inplace(a, 2, &x, |x| x.leaky_relu(s))
    });
    r.add("nn.functional.hardswish", |a| {
        let x = a.tensor(0, "input")?;
        maybe_inplace(a, 1, &x, |x| x.hardswish())
    });
    r.add("nn.functional.hardsigmoid", |a| {
        let x = a.tensor(0, "input")?;
        maybe_inplace(a, 1, &x, |x| x.hardsigmoid())
    });
    r.add_all(&["nn.functional.hardshrink", "hardshrink"], |a| {
        let x = a.tensor(0, "input")?;
        t(x.hardshrink(a.float_or(1, "lambd", 0.5)?)?)
    });
    r.add("nn.functional.softshrink", |a| {
        let x = a.tensor(0, "input")?;
        t(x.softshrink(a.float_or(1, "lambd", 0.5)?)?)
    });
    r.add_all(&["nn.functional.threshold", "threshold"], |a| {
        let x = a.tensor(0, "input")?;
        let th = a.float(1, "threshold")?;
        let v = a.float(2, "value")?;
        maybe_inplace(a, 3, &x, |x| x.threshold(th, v))
    });
    r.add("nn.functional.softplus", |a| {
        let x = a.tensor(0, "input")?;
        let beta = a.float_or(1, "beta", 1.0)?;
        let th = a.float_or(2, "threshold", 20.0)?;
        t(x.softplus(beta, th)?)
    });
    r.add("nn.functional.silu", |a| {
        let x = a.tensor(0, "input")?;
        maybe_inplace(a, 1, &x, |x| x.silu())
    });
    r.add("nn.functional.mish", |a| {
        let x = a.tensor(0, "input")?;
        maybe_inplace(a, 1, &x, |x| x.mish())
    });
    r.add("nn.functional.gelu", |a| {
        let x = a.tensor(0, "input")?;
        let ap = a.opt_str(1, "approximate")?.unwrap_or_else(|| "none".to_string());
        t(x.gelu(&ap)?)
    });
    r.add("nn.functional.glu", |a| {
        let x = a.tensor(0, "input")?;
        t(x.glu(a.int_or(1, "dim", -1)?)?)
    });
    r.add_all(&["nn.functional.prelu", "prelu"], |a| {
        let x = a.tensor(0, "input")?;
        let w = a.tensor(1, "weight")?;
        t(x.prelu(&w)?)
    });
    r.add_all(&["nn.functional.rrelu", "rrelu"], |a| {
        let x = a.tensor(0, "input")?;
        let lo = a.float_or(1, "lower", 1.0 / 8.0)?;
        let hi = a.float_or(2, "upper", 1.0 / 3.0)?;
        let training = a.bool_or(3, "training", false)?;
        maybe_inplace(a, 4, &x, |x| x.rrelu(lo, hi, training))
    });
}

fn register_polynomials(r: &mut Registry) {
    r.add("special.chebyshev_polynomial_t", |a| polynomial(a, Polynomial::ChebyshevT));
    r.add("special.chebyshev_polynomial_u", |a| polynomial(a, Polynomial::ChebyshevU));
    r.add("special.chebyshev_polynomial_v", |a| polynomial(a, Polynomial::ChebyshevV));
    r.add("special.chebyshev_polynomial_w", |a| polynomial(a, Polynomial::ChebyshevW));
    r.add("special.shifted_chebyshev_polynomial_t", |a| polynomial(a, Polynomial::ShiftedChebyshevT));
    r.add("special.shifted_chebyshev_polynomial_u", |a| polynomial(a, Polynomial::ShiftedChebyshevU));
    r.add("special.shifted_chebyshev_polynomial_v", |a| polynomial(a, Polynomial::ShiftedChebyshevV));
    r.add("special.shifted_chebyshev_polynomial_w", |a| polynomial(a, Polynomial::ShiftedChebyshevW));
    r.add("special.hermite_polynomial_h", |a| polynomial(a, Polynomial::HermiteH));
    r.add("special.hermite_polynomial_he", |a| polynomial(a, Polynomial::HermiteHe));
    r.add("special.laguerre_polynomial_l", |a| polynomial(a, Polynomial::LaguerreL));
    r.add("special.legendre_polynomial_p", |a| polynomial(a, Polynomial::LegendreP));
}

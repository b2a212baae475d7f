//! `torch.special` functions and the special functions that are also plain torch ops
//! (`erf`, `lgamma`, `digamma`, `polygamma`, `mvlgamma`, `i0`): unary specs over the scalar
//! implementations in the submodules (computed in f64, rounded once for f32), with gradients.

pub mod bessel;
pub mod erf;
pub mod gamma;
pub mod polynomial;

use crate::backend::cpu;
use crate::dtype::result_type;
use crate::ops::unary::{map_float, record_unary, unary, unary_spec, via64, IntMode};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::f64::consts::PI;

/// 2 / sqrt(pi).
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

fn entr(x: f64) -> f64 {
    if x.is_nan() {
        x
    } else if x > 0.0 {
        -x * x.ln()
    } else if x == 0.0 {
        0.0
    } else {
        f64::NEG_INFINITY
    }
}

/// `where(x == 0, at0, v)`: fills the removable singularity of `f(x)/x`-type gradients.
fn at_zero(x: &Tensor, v: &Tensor, at0: f64) -> Result<Tensor> {
    x.eq_scalar(0.0)?.where_(&v.full_like(at0)?, v)
}

/// `x` with its zeros replaced by ones: the divisor inside [`at_zero`], so that the unused branch
/// has finite derivatives too (otherwise `0 * NaN` poisons second-order gradients at 0).
fn nonzero(x: &Tensor) -> Result<Tensor> {
    x.eq_scalar(0.0)?.where_(&x.full_like(1.0)?, x)
}

/// `exp(-x^2)`.
fn gauss(x: &Tensor) -> Result<Tensor> {
    x.mul(x)?.neg_raw()?.exp()
}

unary_spec!(ERF, "erf", |x| via64(erf::erf, x), erf::erf, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&gauss(x)?.mul_scalar(TWO_OVER_SQRT_PI)?)));
unary_spec!(ERFC, "erfc", |x| via64(erf::erfc, x), erf::erfc, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&gauss(x)?.mul_scalar(-TWO_OVER_SQRT_PI)?)));
unary_spec!(ERFINV, "erfinv", |x| via64(erf::erfinv, x), erf::erfinv, IntMode::ToFloat, None,
    Some(|_, y, g| g.mul(&y.mul(y)?.exp()?.mul_scalar(PI.sqrt() / 2.0)?)));
unary_spec!(ERFCX, "special_erfcx", |x| via64(erf::erfcx, x), erf::erfcx, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&x.mul(y)?.mul_scalar(2.0)?.add_scalar(-TWO_OVER_SQRT_PI)?)));
unary_spec!(NDTR, "special_ndtr", |x| via64(erf::ndtr, x), erf::ndtr, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.mul(x)?.mul_scalar(-0.5)?.exp()?.mul_scalar(1.0 / (2.0 * PI).sqrt())?)));
unary_spec!(NDTRI, "special_ndtri", |x| via64(erf::ndtri, x), erf::ndtri, IntMode::ToFloat, None,
    Some(|_, y, g| g.mul(&y.mul(y)?.mul_scalar(0.5)?.exp()?.mul_scalar((2.0 * PI).sqrt())?)));
unary_spec!(LOG_NDTR, "special_log_ndtr", erf::log_ndtr_f32, erf::log_ndtr, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&y.add(&x.mul(x)?.mul_scalar(0.5)?)?.neg_raw()?.exp()?.mul_scalar(1.0 / (2.0 * PI).sqrt())?)));
unary_spec!(LGAMMA, "lgamma", |x| via64(gamma::lgamma, x), gamma::lgamma, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.digamma()?)));
unary_spec!(DIGAMMA, "digamma", gamma::digamma_f32, gamma::digamma, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.polygamma(1)?)));
unary_spec!(TRIGAMMA, "polygamma", gamma::trigamma_f32, |x| gamma::polygamma(1, x), IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.polygamma(2)?)));
unary_spec!(ENTR, "special_entr", |x| via64(entr, x), entr, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.log()?.add_scalar(1.0)?.neg_raw()?)));
unary_spec!(I0, "i0", |x| via64(bessel::i0, x), bessel::i0, IntMode::ToFloat, None, Some(|x, _, g| g.mul(&x.special_i1()?)));
unary_spec!(I0E, "special_i0e", |x| via64(bessel::i0e, x), bessel::i0e, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&x.special_i1e()?.sub(&x.sign()?.mul(y)?)?)));
unary_spec!(I1, "special_i1", |x| via64(bessel::i1, x), bessel::i1, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&at_zero(x, &x.i0()?.sub(&y.div(&nonzero(x)?)?)?, 0.5)?)));
unary_spec!(I1E, "special_i1e", |x| via64(bessel::i1e, x), bessel::i1e, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&at_zero(x, &x.special_i0e()?.sub(&y.mul(&x.sign()?.add(&nonzero(x)?.reciprocal()?)?)?)?, 0.5)?)));
unary_spec!(K0, "special_modified_bessel_k0", |x| via64(bessel::k0, x), bessel::k0, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.special_modified_bessel_k1()?)?.neg_raw()));
unary_spec!(K1, "special_modified_bessel_k1", |x| via64(bessel::k1, x), bessel::k1, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&x.special_modified_bessel_k0()?.add(&y.div(x)?)?)?.neg_raw()));
unary_spec!(K0E, "special_scaled_modified_bessel_k0", |x| via64(bessel::k0e, x), bessel::k0e, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&y.sub(&x.special_scaled_modified_bessel_k1()?)?)));
unary_spec!(K1E, "special_scaled_modified_bessel_k1", |x| via64(bessel::k1e, x), bessel::k1e, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&y.sub(&x.special_scaled_modified_bessel_k0()?)?.sub(&y.div(x)?)?)));
unary_spec!(J0, "special_bessel_j0", |x| via64(bessel::j0, x), bessel::j0, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.special_bessel_j1()?)?.neg_raw()));
unary_spec!(J1, "special_bessel_j1", |x| via64(bessel::j1, x), bessel::j1, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&at_zero(x, &x.special_bessel_j0()?.sub(&y.div(&nonzero(x)?)?)?, 0.5)?)));
unary_spec!(Y0, "special_bessel_y0", |x| via64(bessel::y0, x), bessel::y0, IntMode::ToFloat, None,
    Some(|x, _, g| g.mul(&x.special_bessel_y1()?)?.neg_raw()));
unary_spec!(Y1, "special_bessel_y1", |x| via64(bessel::y1, x), bessel::y1, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&x.special_bessel_y0()?.sub(&y.div(x)?)?)));
unary_spec!(SPH_J0, "special_spherical_bessel_j0", |x| via64(bessel::spherical_j0, x), bessel::spherical_j0, IntMode::ToFloat, None,
    Some(|x, y, g| g.mul(&at_zero(x, &x.cos()?.sub(y)?.div(&nonzero(x)?)?, 0.0)?)));
unary_spec!(AIRY_AI, "special_airy_ai", |x| via64(bessel::airy_ai, x), bessel::airy_ai, IntMode::ToFloat, None, None);

crate::ops::unary::unary_methods!(
    erf => ERF, erfc => ERFC, erfinv => ERFINV, lgamma => LGAMMA, digamma => DIGAMMA, i0 => I0,
    special_erfcx => ERFCX, special_ndtr => NDTR, special_ndtri => NDTRI, special_log_ndtr => LOG_NDTR,
    special_entr => ENTR, special_i0e => I0E, special_i1 => I1, special_i1e => I1E,
    special_modified_bessel_k0 => K0, special_modified_bessel_k1 => K1,
    special_scaled_modified_bessel_k0 => K0E, special_scaled_modified_bessel_k1 => K1E,
    special_bessel_j0 => J0, special_bessel_j1 => J1, special_bessel_y0 => Y0, special_bessel_y1 => Y1,
    special_spherical_bessel_j0 => SPH_J0, special_airy_ai => AIRY_AI,
);

impl Tensor {
    /// `torch.polygamma(n, x)`: the n-th derivative of digamma.
    pub fn polygamma(&self, n: i64) -> Result<Tensor> {
        if n < 0 {
            return Err(Error::value("polygamma", "polygamma(n, x) does not support negative n."));
        }
        if n == 0 {
            return self.digamma();
        }
        if n == 1 {
            return unary(&TRIGAMMA, self);
        }
        // on CUDA: the zeta series per element in double (kernels/special_fns.cu)
        let expr = format!("(C)mp_polygamma({}, (double)x)", crate::ops::unary::cuda_expr::ilit(n));
        let out = match crate::ops::unary::cuda_expr::unary("polygamma", self, crate::ops::unary::cuda_expr::Out::Float, &expr, None, None)? {
            Some(out) => out,
            None => map_float("polygamma", self, move |v| gamma::polygamma(n, v))?,
        };
        record_unary("polygamma", self, &out, move |x, _, g| g.mul(&x.polygamma(n + 1)?));
        Ok(out)
    }
    /// `torch.mvlgamma(x, p)`: the multivariate log-gamma function; every element must exceed `(p - 1) / 2`.
    pub fn mvlgamma(&self, p: i64) -> Result<Tensor> {
        if p < 1 {
            return Err(Error::value("mvlgamma", "p has to be greater than or equal to 1"));
        }
        let lim = (p as f64 - 1.0) / 2.0;
        let out = if self.device().is_cuda() {
            mvlgamma_on_device(self, p, lim)?
        } else {
            let xs: Vec<f64> = cpu::to_vec(self)?;
            if xs.iter().any(|&v| v <= lim) {
                return Err(Error::value("mvlgamma", "All elements must be greater than (p-1)/2"));
            }
            map_float("mvlgamma", self, move |v| gamma::mvlgamma(v, p))?
        };
        record_unary("mvlgamma", self, &out, move |x, _, g| {
            let mut s = x.digamma()?;
            for i in 1..p {
                s = s.add(&x.add_scalar(-(i as f64) / 2.0)?.digamma()?)?;
            }
            g.mul(&s)
        });
        Ok(out)
    }
    /// `torch.special.modified_bessel_i0` (the same function as `i0`).
    pub fn special_modified_bessel_i0(&self) -> Result<Tensor> {
        unary(&I0, self)
    }
    /// `torch.special.modified_bessel_i1` (the same function as `special.i1`).
    pub fn special_modified_bessel_i1(&self) -> Result<Tensor> {
        unary(&I1, self)
    }
}

/// `mvlgamma` as PyTorch composes it, on `x`'s device (no history): the check reads back one
/// bool, then `sum_i lgamma(x - i/2) + p(p-1)/4 ln(pi)` with the elementwise kernels.
fn mvlgamma_on_device(x: &Tensor, p: i64, lim: f64) -> Result<Tensor> {
    let _ng = crate::autograd::no_grad();
    let x = if x.dtype().is_float() { x.detach() } else { x.to_dtype(crate::default_dtype())? };
    let bad = x.le_scalar(lim)?.any_dims(None, false)?.to_vec::<bool>()?;
    if bad.first().copied().unwrap_or(false) {
        return Err(Error::value("mvlgamma", "All elements must be greater than (p-1)/2"));
    }
    let pf = p as f64;
    let mut s = x.lgamma()?;
    for i in 1..p {
        s = s.add(&x.add_scalar(-(i as f64) / 2.0)?.lgamma()?)?;
    }
    s.add_scalar(pf * (pf - 1.0) / 4.0 * PI.ln())
}

/// The orthogonal polynomial families of `torch.special`, by their op name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polynomial {
    ChebyshevT,
    ChebyshevU,
    ChebyshevV,
    ChebyshevW,
    ShiftedChebyshevT,
    ShiftedChebyshevU,
    ShiftedChebyshevV,
    ShiftedChebyshevW,
    HermiteH,
    HermiteHe,
    LaguerreL,
    LegendreP,
}

impl Polynomial {
    /// The family's number in `mp_orth_poly` (kernels/special_fns.cu) and whether `x` is shifted
    /// to `2x - 1` first.
    fn device_code(self) -> (u8, bool) {
        match self {
            Polynomial::ChebyshevT => (0, false),
            Polynomial::ChebyshevU => (1, false),
            Polynomial::ChebyshevV => (2, false),
            Polynomial::ChebyshevW => (3, false),
            Polynomial::ShiftedChebyshevT => (0, true),
            Polynomial::ShiftedChebyshevU => (1, true),
            Polynomial::ShiftedChebyshevV => (2, true),
            Polynomial::ShiftedChebyshevW => (3, true),
            Polynomial::HermiteH => (4, false),
            Polynomial::HermiteHe => (5, false),
            Polynomial::LaguerreL => (6, false),
            Polynomial::LegendreP => (7, false),
        }
    }
    /// The scalar function `P_n(x)`.
    pub fn eval(self, x: f64, n: i64) -> f64 {
        use polynomial::*;
        match self {
            Polynomial::ChebyshevT => chebyshev_t(x, n),
            Polynomial::ChebyshevU => chebyshev_u(x, n),
            Polynomial::ChebyshevV => chebyshev_v(x, n),
            Polynomial::ChebyshevW => chebyshev_w(x, n),
            Polynomial::ShiftedChebyshevT => chebyshev_t(2.0 * x - 1.0, n),
            Polynomial::ShiftedChebyshevU => chebyshev_u(2.0 * x - 1.0, n),
            Polynomial::ShiftedChebyshevV => chebyshev_v(2.0 * x - 1.0, n),
            Polynomial::ShiftedChebyshevW => chebyshev_w(2.0 * x - 1.0, n),
            Polynomial::HermiteH => hermite_h(x, n),
            Polynomial::HermiteHe => hermite_he(x, n),
            Polynomial::LaguerreL => laguerre_l(x, n),
            Polynomial::LegendreP => legendre_p(x, n),
        }
    }
}

/// `torch.special.<family>_polynomial_<kind>(x, n)`: broadcasts `x` and `n` (n truncated to an
/// integer); the result has their promoted dtype, integers promoted to the default float dtype.
/// Not differentiable (as in PyTorch).
pub fn orthogonal_polynomial(kind: Polynomial, x: &Tensor, n: &Tensor) -> Result<Tensor> {
    let dt = result_type(&[x.promo(), n.promo()])?;
    let dt = if dt.is_integral() { crate::default_dtype() } else { dt };
    if dt.is_complex() {
        return Err(Error::dtype("special_polynomial", format!("not implemented for '{}'", dt.name())));
    }
    // on CUDA: the same recurrences per element in double (kernels/special_fns.cu)
    let (code, shifted) = kind.device_code();
    let xe = if shifted { "(2.0 * x - 1.0)" } else { "x" };
    if let Some(out) = crate::ops::unary::cuda_expr::binary_f64("special_polynomial", x, n, dt, &format!("mp_orth_poly({code}, {xe}, y)"))? {
        return Ok(out);
    }
    let nf = n.to_dtype(crate::dtype::DType::F64)?;
    let out = cpu::map_binary::<f64, f64, f64>("special_polynomial", x, &nf, move |a, b| {
        if b.is_nan() {
            return f64::NAN;
        }
        kind.eval(a, b as i64)
    })?;
    out.to_dtype(dt)
}

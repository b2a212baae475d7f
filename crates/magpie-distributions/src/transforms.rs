//! `torch.distributions.transforms`: invertible maps with log-Jacobians (Exp, Affine, Sigmoid,
//! Tanh, Power, Abs, Compose).

use std::f64::consts::LN_2;
use std::sync::Arc;

use magpie_core::{Error, Result, Tensor};

use crate::constraints::{positive, unit_interval, Bound, Constraint};
use crate::util::{eps, sum_rightmost, tiny};

/// An invertible (or, for `Abs`, non-injective) map between constraint sets.
pub trait Transform: Send + Sync {
    /// The class name (`ExpTransform`).
    fn name(&self) -> String;
    /// `t(x)`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
    /// `t.inv(y)`.
    fn inverse(&self, y: &Tensor) -> Result<Tensor>;
    /// `log |d y / d x|`, summed over the transform's event dimensions.
    fn log_abs_det_jacobian(&self, x: &Tensor, y: &Tensor) -> Result<Tensor>;
    /// `domain`.
    fn domain(&self) -> Constraint;
    /// `codomain`.
    fn codomain(&self) -> Constraint;
    /// `sign` of the derivative (+1 or -1, elementwise for `Affine`), for monotone transforms.
    fn sign(&self, like: &Tensor) -> Result<Tensor> {
        let _ = like;
        Err(Error::unsupported("Transform.sign", format!("{} has no sign", self.name())))
    }
    /// Equality as PyTorch's `__eq__` (type and parameters), through a key.
    fn key(&self) -> Result<String> {
        Ok(self.name())
    }
}

/// `ExpTransform`: `y = exp(x)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExpTransform;

impl Transform for ExpTransform {
    fn name(&self) -> String {
        "ExpTransform".into()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.exp()
    }
    fn inverse(&self, y: &Tensor) -> Result<Tensor> {
        y.log()
    }
    fn log_abs_det_jacobian(&self, x: &Tensor, _y: &Tensor) -> Result<Tensor> {
        Ok(x.clone())
    }
    fn domain(&self) -> Constraint {
        Constraint::Real
    }
    fn codomain(&self) -> Constraint {
        positive()
    }
    fn sign(&self, like: &Tensor) -> Result<Tensor> {
        crate::util::scalar_like(like, 1.0)
    }
}

/// `AffineTransform(loc, scale, event_dim=0)`: `y = loc + scale * x`.
#[derive(Clone)]
pub struct AffineTransform {
    /// Shift.
    pub loc: Tensor,
    /// Scale.
    pub scale: Tensor,
    /// Event dimensions the Jacobian sums over.
    pub event_dim: usize,
}

impl AffineTransform {
    /// `AffineTransform(loc, scale, event_dim)`.
    pub fn new(loc: &Tensor, scale: &Tensor, event_dim: usize) -> AffineTransform {
        AffineTransform { loc: loc.clone(), scale: scale.clone(), event_dim }
    }
}

fn real_dims(n: usize) -> Constraint {
    if n == 0 {
        Constraint::Real
    } else {
        Constraint::Independent(Box::new(Constraint::Real), n)
    }
}

impl Transform for AffineTransform {
    fn name(&self) -> String {
        "AffineTransform".into()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.loc.add(&self.scale.mul(x)?)
    }
    fn inverse(&self, y: &Tensor) -> Result<Tensor> {
        y.sub(&self.loc)?.div(&self.scale)
    }
    fn log_abs_det_jacobian(&self, x: &Tensor, _y: &Tensor) -> Result<Tensor> {
        let r = self.scale.abs()?.log()?;
        let shape = magpie_core::ops::shape_ops::broadcast_shapes(&[r.shape().to_vec(), x.shape().to_vec()])?;
        let r = crate::util::expand_to(&r, &shape)?;
        sum_rightmost(&r, self.event_dim)
    }
    fn domain(&self) -> Constraint {
        real_dims(self.event_dim)
    }
    fn codomain(&self) -> Constraint {
        real_dims(self.event_dim)
    }
    fn sign(&self, _like: &Tensor) -> Result<Tensor> {
        self.scale.sign()
    }
    fn key(&self) -> Result<String> {
        Ok(format!("Affine({:?},{:?},{:?},{:?},{})", self.loc.shape(), self.loc.to_f64_vec()?, self.scale.shape(), self.scale.to_f64_vec()?, self.event_dim))
    }
}

/// `SigmoidTransform`: `y = 1 / (1 + exp(-x))`, kept inside `[tiny, 1 - eps]`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SigmoidTransform;

impl Transform for SigmoidTransform {
    fn name(&self) -> String {
        "SigmoidTransform".into()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let d = x.dtype();
        x.sigmoid()?.clamp(Some(tiny(d)), Some(1.0 - eps(d)))
    }
    fn inverse(&self, y: &Tensor) -> Result<Tensor> {
        let d = y.dtype();
        let y = y.clamp(Some(tiny(d)), Some(1.0 - eps(d)))?;
        y.log()?.sub(&y.neg()?.log1p()?)
    }
    fn log_abs_det_jacobian(&self, x: &Tensor, _y: &Tensor) -> Result<Tensor> {
        x.neg()?.softplus(1.0, 20.0)?.neg()?.sub(&x.softplus(1.0, 20.0)?)
    }
    fn domain(&self) -> Constraint {
        Constraint::Real
    }
    fn codomain(&self) -> Constraint {
        unit_interval()
    }
    fn sign(&self, like: &Tensor) -> Result<Tensor> {
        crate::util::scalar_like(like, 1.0)
    }
}

/// `TanhTransform`: `y = tanh(x)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TanhTransform;

impl Transform for TanhTransform {
    fn name(&self) -> String {
        "TanhTransform".into()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.tanh()
    }
    fn inverse(&self, y: &Tensor) -> Result<Tensor> {
        y.atanh()
    }
    fn log_abs_det_jacobian(&self, x: &Tensor, _y: &Tensor) -> Result<Tensor> {
        // log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), stable for large |x|
        x.neg()?.sub(&x.mul_scalar(-2.0)?.softplus(1.0, 20.0)?)?.add_scalar(LN_2)?.mul_scalar(2.0)
    }
    fn domain(&self) -> Constraint {
        Constraint::Real
    }
    fn codomain(&self) -> Constraint {
        Constraint::Interval(Bound::Num(-1.0), Bound::Num(1.0))
    }
    fn sign(&self, like: &Tensor) -> Result<Tensor> {
        crate::util::scalar_like(like, 1.0)
    }
}

/// `PowerTransform(exponent)`: `y = x^exponent` on the positive reals.
#[derive(Clone)]
pub struct PowerTransform {
    /// The exponent.
    pub exponent: Tensor,
}

impl Transform for PowerTransform {
    fn name(&self) -> String {
        "PowerTransform".into()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.pow(&self.exponent)
    }
    fn inverse(&self, y: &Tensor) -> Result<Tensor> {
        y.pow(&self.exponent.reciprocal()?)
    }
    fn log_abs_det_jacobian(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        self.exponent.mul(y)?.div(x)?.abs()?.log()
    }
    fn domain(&self) -> Constraint {
        positive()
    }
    fn codomain(&self) -> Constraint {
        positive()
    }
    fn sign(&self, _like: &Tensor) -> Result<Tensor> {
        self.exponent.sign()
    }
    fn key(&self) -> Result<String> {
        Ok(format!("Power({:?})", self.exponent.to_f64_vec()?))
    }
}

/// `AbsTransform`: `y = |x|` (its inverse is the identity; it has no Jacobian).
#[derive(Clone, Copy, Debug, Default)]
pub struct AbsTransform;

impl Transform for AbsTransform {
    fn name(&self) -> String {
        "AbsTransform".into()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.abs()
    }
    fn inverse(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.clone())
    }
    fn log_abs_det_jacobian(&self, _x: &Tensor, _y: &Tensor) -> Result<Tensor> {
        Err(Error::unsupported("AbsTransform.log_abs_det_jacobian", "AbsTransform is not bijective"))
    }
    fn domain(&self) -> Constraint {
        Constraint::Real
    }
    fn codomain(&self) -> Constraint {
        crate::constraints::nonnegative()
    }
}

/// `ComposeTransform(parts)`: the parts applied in order.
#[derive(Clone)]
pub struct ComposeTransform {
    /// The parts, first applied first.
    pub parts: Vec<Arc<dyn Transform>>,
}

impl ComposeTransform {
    /// Composes `parts`.
    pub fn new(parts: Vec<Arc<dyn Transform>>) -> ComposeTransform {
        ComposeTransform { parts }
    }
    /// The largest event dimension among the parts (every part here keeps shapes).
    pub fn event_dim(&self) -> usize {
        self.parts.iter().map(|p| p.domain().event_dim()).max().unwrap_or(0)
    }
}

impl Transform for ComposeTransform {
    fn name(&self) -> String {
        "ComposeTransform".into()
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.parts.iter().try_fold(x.clone(), |x, p| p.forward(&x))
    }
    fn inverse(&self, y: &Tensor) -> Result<Tensor> {
        self.parts.iter().rev().try_fold(y.clone(), |y, p| p.inverse(&y))
    }
    fn log_abs_det_jacobian(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        if self.parts.is_empty() {
            return x.zeros_like();
        }
        let mut xs = vec![x.clone()];
        for p in &self.parts[..self.parts.len() - 1] {
            let next = p.forward(&xs[xs.len() - 1])?;
            xs.push(next);
        }
        xs.push(y.clone());
        let ed = self.event_dim();
        let mut total: Option<Tensor> = None;
        for (i, p) in self.parts.iter().enumerate() {
            let t = sum_rightmost(&p.log_abs_det_jacobian(&xs[i], &xs[i + 1])?, ed - p.domain().event_dim())?;
            total = Some(match total {
                None => t,
                Some(a) => a.add(&t)?,
            });
        }
        total.ok_or_else(|| Error::value("ComposeTransform", "no parts"))
    }
    fn domain(&self) -> Constraint {
        self.parts.first().map(|p| p.domain()).unwrap_or(Constraint::Real)
    }
    fn codomain(&self) -> Constraint {
        self.parts.last().map(|p| p.codomain()).unwrap_or(Constraint::Real)
    }
    fn sign(&self, like: &Tensor) -> Result<Tensor> {
        self.parts.iter().try_fold(crate::util::scalar_like(like, 1.0)?, |s, p| s.mul(&p.sign(like)?))
    }
    fn key(&self) -> Result<String> {
        let ks: Result<Vec<String>> = self.parts.iter().map(|p| p.key()).collect();
        Ok(format!("Compose[{}]", ks?.join(",")))
    }
}

//! The `Distribution` trait (`torch.distributions.Distribution`) and argument validation.

use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use magpie_core::{autograd, Error, Result, Tensor};

use crate::constraints::Constraint;
use crate::util::{extended, fmt_value, tuple};

static DEFAULT_VALIDATE: AtomicBool = AtomicBool::new(true);

/// `Distribution.set_default_validate_args(value)`: whether new distributions check their
/// parameters and the values given to `log_prob`/`cdf` (on by default, as in PyTorch).
pub fn set_default_validate_args(value: bool) {
    DEFAULT_VALIDATE.store(value, Ordering::Relaxed);
}

thread_local! {
    static SCOPED: Cell<Option<bool>> = const { Cell::new(None) };
}

/// The `validate_args` a distribution constructed now gets: the innermost
/// [`validate_args`] scope of this thread, else the process-wide default.
pub fn default_validate_args() -> bool {
    SCOPED.with(|c| c.get()).unwrap_or_else(|| DEFAULT_VALIDATE.load(Ordering::Relaxed))
}

/// Restores the previous [`validate_args`] scope when dropped.
pub struct ValidateArgsGuard(Option<bool>);

impl Drop for ValidateArgsGuard {
    fn drop(&mut self) {
        SCOPED.with(|c| c.set(self.0));
    }
}

/// PyTorch's per-instance `validate_args=value`: distributions constructed on this thread while
/// the guard lives validate (or not) by `value`, and keep that choice afterwards.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_distributions::{distribution::validate_args, Normal};
/// let d = {
///     let _v = validate_args(false);
///     Normal::new(&Tensor::scalar(0f64), &Tensor::scalar(-1f64))   // not checked
/// };
/// assert!(d.is_ok());
/// assert!(Normal::new(&Tensor::scalar(0f64), &Tensor::scalar(-1f64)).is_err());
/// ```
pub fn validate_args(value: bool) -> ValidateArgsGuard {
    ValidateArgsGuard(SCOPED.with(|c| c.replace(Some(value))))
}

/// `torch.Size([2, 3])` as PyTorch prints it.
pub fn size_str(shape: &[usize]) -> String {
    format!("torch.Size([{}])", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

/// A probability distribution with batch and event shapes, as `torch.distributions.Distribution`.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_distributions::{Distribution, Normal};
/// let d = Normal::new(&Tensor::from_vec(vec![0f64, 1.], &[2])?, &Tensor::scalar(2f64))?;
/// assert_eq!(d.batch_shape(), &[2]);
/// let x = d.sample(&[5])?;                       // [5, 2]
/// assert_eq!(x.shape(), &[5, 2]);
/// let lp = d.log_prob(&x)?;
/// assert_eq!(lp.shape(), &[5, 2]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub trait Distribution: Any + Send + Sync {
    /// The class name (`"Normal"`), used in errors and the KL registry's messages.
    fn name(&self) -> String;
    /// The parameters as `repr` lists them (name, tensor).
    fn params(&self) -> Vec<(&'static str, Tensor)>;
    /// `batch_shape`.
    fn batch_shape(&self) -> &[usize];
    /// `event_shape`.
    fn event_shape(&self) -> &[usize] {
        &[]
    }
    /// `self` as `Any`, for downcasting (the KL registry).
    fn as_any(&self) -> &dyn Any;
    /// Whether this instance validates its arguments.
    fn validates(&self) -> bool;
    /// A boxed copy (parameters are shared tensors).
    fn clone_box(&self) -> Box<dyn Distribution>;
    /// `support`: the set samples lie in.
    fn support(&self) -> Result<Constraint>;
    /// `has_rsample`.
    fn has_rsample(&self) -> bool {
        false
    }
    /// `sample(sample_shape)`: a sample without history.
    fn sample(&self, sample_shape: &[usize]) -> Result<Tensor> {
        let _g = autograd::no_grad();
        Ok(self.rsample(sample_shape)?.detach())
    }
    /// `rsample(sample_shape)`: a reparameterized sample (differentiable in the parameters).
    fn rsample(&self, _sample_shape: &[usize]) -> Result<Tensor> {
        Err(Error::unsupported("rsample", format!("{} does not implement rsample", self.name())))
    }
    /// `log_prob(value)`.
    fn log_prob(&self, value: &Tensor) -> Result<Tensor>;
    /// `cdf(value)`.
    fn cdf(&self, _value: &Tensor) -> Result<Tensor> {
        Err(Error::unsupported("cdf", format!("{} does not implement cdf", self.name())))
    }
    /// `icdf(value)`.
    fn icdf(&self, _value: &Tensor) -> Result<Tensor> {
        Err(Error::unsupported("icdf", format!("{} does not implement icdf", self.name())))
    }
    /// `entropy()`.
    fn entropy(&self) -> Result<Tensor> {
        Err(Error::unsupported("entropy", format!("{} does not implement entropy", self.name())))
    }
    /// `mean`.
    fn mean(&self) -> Result<Tensor> {
        Err(Error::unsupported("mean", format!("{} does not implement mean", self.name())))
    }
    /// `mode`.
    fn mode(&self) -> Result<Tensor> {
        Err(Error::unsupported("mode", format!("{} does not implement mode", self.name())))
    }
    /// `variance`.
    fn variance(&self) -> Result<Tensor> {
        Err(Error::unsupported("variance", format!("{} does not implement variance", self.name())))
    }
    /// `stddev`: the square root of the variance.
    fn stddev(&self) -> Result<Tensor> {
        self.variance()?.sqrt()
    }
    /// `expand(batch_shape)`: the same distribution with parameters expanded (views).
    fn expand(&self, batch_shape: &[usize]) -> Result<Box<dyn Distribution>>;

    /// `_extended_shape(sample_shape)`: `sample_shape + batch_shape + event_shape`.
    fn extended_shape(&self, sample_shape: &[usize]) -> Vec<usize> {
        extended(sample_shape, self.batch_shape(), self.event_shape())
    }

    /// `repr(d)`: `Normal(loc: 0.0, scale: torch.Size([2]))`.
    fn repr(&self) -> String {
        let args: Vec<String> = self
            .params()
            .iter()
            .map(|(n, t)| if t.numel() == 1 { format!("{n}: {}", fmt_value(t)) } else { format!("{n}: {}", size_str(t.shape())) })
            .collect();
        format!("{}({})", self.name(), args.join(", "))
    }

    /// `_validate_sample(value)`: shape against batch and event shapes, then the support.
    fn validate_sample(&self, value: &Tensor) -> Result<()> {
        let op = self.name();
        let (vs, ev) = (value.shape(), self.event_shape());
        if vs.len() < ev.len() || &vs[vs.len() - ev.len()..] != ev {
            return Err(Error::value(op, format!("The right-most size of value must match event_shape: {} vs {}.", size_str(vs), size_str(ev))));
        }
        let expected = extended(&[], self.batch_shape(), ev);
        for (i, j) in vs.iter().rev().zip(expected.iter().rev()) {
            if *i != 1 && *j != 1 && i != j {
                return Err(Error::value(op, format!("Value is not broadcastable with batch_shape+event_shape: {} vs {}.", size_str(vs), size_str(&expected))));
            }
        }
        let support = self.support()?;
        let ok = support.check(value)?;
        if !all_true(&ok)? {
            return Err(Error::value(
                op,
                format!(
                    "Expected value argument (Tensor of shape {}) to be within the support ({support}) of the distribution {}, but found invalid values:\n{}",
                    tuple(vs),
                    self.repr(),
                    fmt_value(value)
                ),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for dyn Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.repr())
    }
}

impl Clone for Box<dyn Distribution> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// True when every element of a bool tensor is true (no elements: true).
pub fn all_true(b: &Tensor) -> Result<bool> {
    Ok(b.to_f64_vec()?.iter().all(|&x| x != 0.0))
}

/// Checks each parameter against its constraint with PyTorch's message; `d` gives the repr.
pub fn check_params(d: &dyn Distribution, params: &[(&str, &Tensor, Constraint)]) -> Result<()> {
    if !d.validates() {
        return Ok(());
    }
    for (name, t, c) in params {
        let ok = c.check(t)?;
        if !all_true(&ok)? {
            return Err(Error::value(
                d.name(),
                format!(
                    "Expected parameter {name} (Tensor of shape {}) of distribution {} to satisfy the constraint {c}, but found invalid values:\n{}",
                    tuple(t.shape()),
                    d.repr(),
                    fmt_value(t)
                ),
            ));
        }
    }
    Ok(())
}

/// Validates `value` when `d` validates (the first step of `log_prob`/`cdf`).
pub fn maybe_validate(d: &dyn Distribution, value: &Tensor) -> Result<()> {
    if d.validates() {
        d.validate_sample(value)?;
    }
    Ok(())
}

/// The batch shape after `expand`: `batch_shape` must be a broadcast of the current one.
pub fn check_expand(d: &dyn Distribution, batch_shape: &[usize]) -> Result<()> {
    let cur = d.batch_shape();
    let ok = batch_shape.len() >= cur.len()
        && cur.iter().rev().zip(batch_shape.iter().rev()).all(|(c, n)| *c == 1 || c == n);
    if !ok {
        return Err(Error::shape(
            "expand",
            format!("The expanded size of the tensor must match the existing size: {} vs {} in {}.expand", size_str(batch_shape), size_str(cur), d.name()),
        ));
    }
    Ok(())
}

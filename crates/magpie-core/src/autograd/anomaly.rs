//! Anomaly mode (`torch.autograd.detect_anomaly`): during backward, a node whose rule produced a
//! NaN or infinite gradient is an error naming the forward op, instead of a silently poisoned `.grad`.

use crate::tensor::Tensor;
use crate::{Error, Result};
use std::cell::Cell;

thread_local! {
    static ANOMALY: Cell<bool> = const { Cell::new(false) };
}

/// True while anomaly detection is on for this thread.
pub fn is_anomaly_enabled() -> bool {
    ANOMALY.with(|a| a.get())
}

/// Restores the previous anomaly mode when dropped.
#[must_use = "anomaly mode is restored when the guard is dropped"]
pub struct AnomalyGuard {
    prev: bool,
}

impl Drop for AnomalyGuard {
    fn drop(&mut self) {
        ANOMALY.with(|a| a.set(self.prev));
    }
}

/// `with torch.autograd.detect_anomaly():` for this thread, until the guard drops.
///
/// ```
/// use magpie_core::{autograd, Tensor};
/// let x = Tensor::from_vec(vec![0f64, 1.], &[2])?.with_requires_grad()?;
/// let _anomaly = autograd::detect_anomaly();
/// let y = x.sqrt()?.sum()?; // d sqrt(x)/dx = inf at 0
/// let err = y.backward().unwrap_err();
/// assert!(err.to_string().contains("SqrtBackward0"));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn detect_anomaly() -> AnomalyGuard {
    set_detect_anomaly(true)
}

/// `torch.autograd.set_detect_anomaly(flag)` as a guard.
pub fn set_detect_anomaly(flag: bool) -> AnomalyGuard {
    AnomalyGuard { prev: ANOMALY.with(|a| a.replace(flag)) }
}

/// Fails if any gradient a node returned holds NaN or infinity.
pub(crate) fn check(node_name: &str, grads: &[Option<Tensor>]) -> Result<()> {
    for (i, g) in grads.iter().enumerate() {
        let Some(g) = g else { continue };
        if !(g.dtype().is_float() || g.dtype().is_complex()) {
            continue;
        }
        let bad = if g.dtype().is_complex() {
            g.to_vec::<num_complex::Complex64>()?.iter().find(|v| !v.re.is_finite() || !v.im.is_finite()).map(|v| !v.re.is_nan() && !v.im.is_nan())
        } else {
            g.to_vec::<f64>()?.iter().find(|v| !v.is_finite()).map(|v| !v.is_nan())
        };
        if let Some(is_inf) = bad {
            let what = if is_inf { "inf" } else { "nan" };
            return Err(Error::autograd(
                node_name,
                format!("Function '{node_name}' returned {what} values in its {i}th output (anomaly mode)"),
            ));
        }
    }
    Ok(())
}

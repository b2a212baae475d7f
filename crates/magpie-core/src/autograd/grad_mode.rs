//! Thread-local grad mode: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`.

use std::cell::Cell;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True when ops record history for autograd on this thread.
pub fn is_grad_enabled() -> bool {
    ENABLED.with(|e| e.get())
}

/// Restores the previous grad mode when dropped.
#[must_use = "grad mode is restored when the guard is dropped"]
pub struct GradModeGuard {
    prev: bool,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        ENABLED.with(|e| e.set(self.prev));
    }
}

/// `torch.set_grad_enabled(flag)` as a guard.
pub fn set_grad_enabled(flag: bool) -> GradModeGuard {
    let prev = ENABLED.with(|e| e.replace(flag));
    GradModeGuard { prev }
}

/// `with torch.no_grad():` — ops inside record no history.
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

/// `with torch.enable_grad():` — record history even inside `no_grad`.
pub fn enable_grad() -> GradModeGuard {
    set_grad_enabled(true)
}

/// `with torch.inference_mode():` — like `no_grad` here (no separate inference tensors yet).
pub fn inference_mode() -> GradModeGuard {
    set_grad_enabled(false)
}

//! Autograd through handles: requires_grad, backward, gradients, detach, and a thread-local
//! no-grad scope (`with torch.no_grad():` as a begin/end pair).

use crate::error::{arg, guard};
use crate::handles;
use crate::ptr::out;
use crate::tensor::give;
use magpie_core::autograd::{no_grad, GradModeGuard};
use std::cell::RefCell;

thread_local! {
    static NO_GRAD: RefCell<Vec<GradModeGuard>> = const { RefCell::new(Vec::new()) };
}

/// Sets `requires_grad` on a leaf tensor (floating or complex dtypes).
#[no_mangle]
pub extern "C" fn magpie_set_requires_grad(t: i64, flag: i32) -> i32 {
    guard("magpie_set_requires_grad", || {
        handles::tensor(t)?.requires_grad_(flag != 0)?;
        Ok(())
    })
}

/// Whether the tensor requires gradients (1) or not (0).
///
/// # Safety
/// `out` points to an `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_requires_grad(t: i64, out_flag: *mut i32) -> i32 {
    guard("magpie_requires_grad", || {
        *out(out_flag, "out")? = handles::tensor(t)?.requires_grad() as i32;
        Ok(())
    })
}

/// `loss.backward()` for a one-element tensor: gradients accumulate into the leaves' `grad`.
#[no_mangle]
pub extern "C" fn magpie_backward(t: i64) -> i32 {
    guard("magpie_backward", || {
        handles::tensor(t)?.backward()?;
        Ok(())
    })
}

/// The tensor's `grad` as a new handle, or 0 in `out` when it has none.
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_grad(t: i64, out_h: *mut i64) -> i32 {
    guard("magpie_grad", || {
        let o = out(out_h, "out")?;
        match handles::tensor(t)?.grad() {
            Some(g) => give(g, o),
            None => *o = 0,
        }
        Ok(())
    })
}

/// Drops the tensor's gradient (`t.grad = None`).
#[no_mangle]
pub extern "C" fn magpie_clear_grad(t: i64) -> i32 {
    guard("magpie_clear_grad", || {
        handles::tensor(t)?.set_grad(None);
        Ok(())
    })
}

/// `t.detach()`: the same data, cut from the graph.
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_detach(t: i64, out_h: *mut i64) -> i32 {
    guard("magpie_detach", || {
        let o = out(out_h, "out")?;
        give(handles::tensor(t)?.detach(), o);
        Ok(())
    })
}

/// Enters a no-grad scope on this thread (scopes nest); end it with `magpie_no_grad_end`.
#[no_mangle]
pub extern "C" fn magpie_no_grad_begin() -> i32 {
    guard("magpie_no_grad_begin", || {
        NO_GRAD.with(|s| s.borrow_mut().push(no_grad()));
        Ok(())
    })
}

/// Leaves the innermost no-grad scope of this thread.
#[no_mangle]
pub extern "C" fn magpie_no_grad_end() -> i32 {
    guard("magpie_no_grad_end", || NO_GRAD.with(|s| s.borrow_mut().pop().map(drop).ok_or_else(|| arg("no no-grad scope is open on this thread"))))
}

//! Status codes, the thread-local last error, and the guard every `extern "C"` function runs its
//! body in: no panic crosses the boundary, every failure is a status plus a message.

use magpie_core::Error;
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Success.
pub const MAGPIE_OK: i32 = 0;
/// The operation failed (bad shapes, dtypes, values, files...): see `magpie_last_error()`.
pub const MAGPIE_ERR_OP: i32 = 1;
/// A bad argument at the boundary: a null pointer, a wrong length, an unknown code, a stale,
/// released or wrong-kind handle.
pub const MAGPIE_ERR_ARG: i32 = 2;
/// An internal error (a bug in torch-magpie, caught before it crossed the boundary).
pub const MAGPIE_ERR_INTERNAL: i32 = 3;

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// An error at the boundary: its status code and message.
pub struct FfiError {
    pub code: i32,
    pub msg: String,
}

impl From<Error> for FfiError {
    fn from(e: Error) -> Self {
        FfiError { code: MAGPIE_ERR_OP, msg: e.to_string() }
    }
}

/// A [`MAGPIE_ERR_ARG`] error.
pub fn arg(msg: impl Into<String>) -> FfiError {
    FfiError { code: MAGPIE_ERR_ARG, msg: msg.into() }
}

pub type FfiResult<T> = std::result::Result<T, FfiError>;

fn set_last(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Runs `f` for the C function `name`: its status, with the message (prefixed by `name`) kept for
/// `magpie_last_error`. A panic becomes [`MAGPIE_ERR_INTERNAL`].
pub fn guard(name: &str, f: impl FnOnce() -> FfiResult<()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            set_last("");
            MAGPIE_OK
        }
        Ok(Err(e)) => {
            set_last(&format!("{name}: {}", e.msg));
            e.code
        }
        Err(p) => {
            let what = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
            set_last(&format!("{name}: internal error: {what}"));
            MAGPIE_ERR_INTERNAL
        }
    }
}

/// The message of the last failed call on this thread ("" after a success). The pointer stays
/// valid until the next `magpie_*` call on the same thread.
#[no_mangle]
pub extern "C" fn magpie_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

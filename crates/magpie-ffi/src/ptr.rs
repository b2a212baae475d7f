//! Checked views of the raw pointers C passes in: null, length and UTF-8 checks in one place.

use crate::error::{arg, FfiResult};
use std::ffi::{c_char, CStr};

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that outlives the call.
pub unsafe fn cstr<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(arg(format!("{what} is a null pointer")));
    }
    CStr::from_ptr(p).to_str().map_err(|_| arg(format!("{what} is not valid UTF-8")))
}

/// An out-parameter.
///
/// # Safety
/// `p` is null or points to writable memory for one `T`.
pub unsafe fn out<'a, T>(p: *mut T, what: &str) -> FfiResult<&'a mut T> {
    p.as_mut().ok_or_else(|| arg(format!("{what} is a null pointer")))
}

/// `n` elements at `p` (null is allowed when `n` is 0).
///
/// # Safety
/// `p` is null or points to `n` readable `T`s.
pub unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> FfiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(arg(format!("{what} is a null pointer but its length is {n}")));
    }
    Ok(std::slice::from_raw_parts(p, n))
}

/// `n` writable elements at `p` (null is allowed when `n` is 0).
///
/// # Safety
/// `p` is null or points to `n` writable `T`s.
pub unsafe fn slice_mut<'a, T>(p: *mut T, n: usize, what: &str) -> FfiResult<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(arg(format!("{what} is a null pointer but its length is {n}")));
    }
    Ok(std::slice::from_raw_parts_mut(p, n))
}

/// Writes `s` and a NUL into `buf` (capacity `cap`); `len` gets `s.len()` either way, so a caller
/// with too small a buffer learns the size it needs.
///
/// # Safety
/// `buf` is null or points to `cap` writable bytes; `len` is null or writable.
pub unsafe fn write_str(s: &str, buf: *mut c_char, cap: usize, len: *mut usize, what: &str) -> FfiResult<()> {
    if let Some(l) = len.as_mut() {
        *l = s.len();
    }
    if buf.is_null() {
        return Ok(());
    }
    if cap < s.len() + 1 {
        return Err(arg(format!("{what} holds {cap} bytes but {} are needed", s.len() + 1)));
    }
    let dst = slice_mut(buf as *mut u8, cap, what)?;
    dst[..s.len()].copy_from_slice(s.as_bytes());
    dst[s.len()] = 0;
    Ok(())
}

/// A JSON object argument (`{"lr": 0.1}`); NULL or an empty string is an empty object.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub unsafe fn json_object(p: *const c_char, what: &str) -> FfiResult<serde_json::Map<String, serde_json::Value>> {
    if p.is_null() {
        return Ok(serde_json::Map::new());
    }
    let s = cstr(p, what)?;
    if s.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_str::<serde_json::Value>(s).map_err(|e| arg(format!("{what} is not JSON: {e}")))? {
        serde_json::Value::Object(m) => Ok(m),
        v => Err(arg(format!("{what} must be a JSON object, got {v}"))),
    }
}

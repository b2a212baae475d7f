//! Helpers shared by the C ABI tests: check a status, make tensors from and read them to host f32.

#![allow(dead_code)]

use magpie_ffi::tensor::{magpie_tensor_from_data, magpie_tensor_nbytes, magpie_tensor_to_host};
use magpie_ffi::{magpie_last_error, MAGPIE_OK};
use std::ffi::CStr;

/// Asserts `rc` is MAGPIE_OK, showing the last error otherwise.
pub fn ok(rc: i32) {
    assert_eq!(rc, MAGPIE_OK, "{}", unsafe { CStr::from_ptr(magpie_last_error()) }.to_string_lossy());
}

/// A CPU float32 tensor handle of `shape` from `v`.
pub fn tensor(v: &[f32], shape: &[i64]) -> i64 {
    let mut h = 0;
    ok(unsafe { magpie_tensor_from_data(v.as_ptr().cast(), v.len() * 4, 8, shape.as_ptr(), shape.len(), -1, &mut h) });
    h
}

/// A float32 tensor's values.
pub fn values(h: i64) -> Vec<f32> {
    let mut n = 0;
    ok(unsafe { magpie_tensor_nbytes(h, &mut n) });
    let mut v = vec![0f32; n / 4];
    ok(unsafe { magpie_tensor_to_host(h, v.as_mut_ptr().cast(), n) });
    v
}

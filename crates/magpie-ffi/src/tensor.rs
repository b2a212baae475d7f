//! Tensors across the boundary: made from host buffers, copied back, queried, moved, released;
//! and the typed shortcuts hot loops need (`add`, `sub`, `mul`, `matmul`, `sum`, `mean`).

use crate::codes;
use crate::error::{arg, guard, FfiResult};
use crate::handles::{self, Object};
use crate::ptr::{out, slice, slice_mut};
use magpie_core::{Device, Tensor};
use magpie_io::safetensors::{tensor_from_le_bytes, tensor_to_le_bytes};
use std::ffi::c_void;

fn new_handle(t: Tensor) -> i64 {
    handles::insert(Object::Tensor(t))
}

/// Registers `t` and writes its handle to `out_h`.
pub(crate) fn give(t: Tensor, out_h: &mut i64) {
    *out_h = new_handle(t);
}

/// A tensor of `dtype` and `shape` (`ndim` sizes) from `nbytes` bytes at `data` (C order, native
/// little-endian), on `device` (-1 CPU, n CUDA n). `nbytes` must equal the element count times the
/// element size. The data is copied.
///
/// # Safety
/// `data` points to `nbytes` readable bytes, `shape` to `ndim` sizes, `out` to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_from_data(data: *const c_void, nbytes: usize, dtype: i32, shape: *const i64, ndim: usize, device: i32, out_h: *mut i64) -> i32 {
    guard("magpie_tensor_from_data", || {
        let out_h = out(out_h, "out")?;
        let dt = codes::dtype(dtype)?;
        let dev = codes::device(device)?;
        let dims = slice(shape, ndim, "shape")?;
        let mut sizes = Vec::with_capacity(dims.len());
        let mut numel: usize = 1;
        for &d in dims {
            let d = usize::try_from(d).map_err(|_| arg(format!("shape {dims:?} has a negative size")))?;
            numel = numel.checked_mul(d).ok_or_else(|| arg(format!("shape {dims:?} is too large")))?;
            sizes.push(d);
        }
        let want = numel.checked_mul(dt.size()).ok_or_else(|| arg(format!("shape {dims:?} is too large")))?;
        if want != nbytes {
            return Err(arg(format!("shape {dims:?} of {dt} needs {want} bytes but {nbytes} were given")));
        }
        let bytes = slice(data as *const u8, nbytes, "data")?;
        let t = tensor_from_le_bytes(dt, bytes, &sizes)?.to_device(dev)?;
        give(t, out_h);
        Ok(())
    })
}

/// Copies the tensor's elements (C order, its own dtype) into `buf`, which holds `nbytes` bytes:
/// exactly the element count times the element size (`magpie_tensor_nbytes`).
///
/// # Safety
/// `buf` points to `nbytes` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_to_host(t: i64, buf: *mut c_void, nbytes: usize) -> i32 {
    guard("magpie_tensor_to_host", || {
        let t = handles::tensor(t)?;
        let need = t.numel() * t.dtype().size();
        if need != nbytes {
            return Err(arg(format!("the tensor holds {need} bytes but the buffer is {nbytes}")));
        }
        let bytes = tensor_to_le_bytes(&t.detach().to_device(Device::Cpu)?.contiguous()?)?;
        slice_mut(buf as *mut u8, nbytes, "buf")?.copy_from_slice(&bytes);
        Ok(())
    })
}

/// Bytes `magpie_tensor_to_host` needs.
///
/// # Safety
/// `out` points to a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_nbytes(t: i64, out_n: *mut usize) -> i32 {
    guard("magpie_tensor_nbytes", || {
        let t = handles::tensor(t)?;
        *out(out_n, "out")? = t.numel() * t.dtype().size();
        Ok(())
    })
}

/// Number of dimensions.
///
/// # Safety
/// `out` points to a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_ndim(t: i64, out_n: *mut usize) -> i32 {
    guard("magpie_tensor_ndim", || {
        *out(out_n, "out")? = handles::tensor(t)?.ndim();
        Ok(())
    })
}

fn write_dims(v: &[i64], dst: *mut i64, cap: usize) -> FfiResult<()> {
    if cap < v.len() {
        return Err(arg(format!("the output holds {cap} values but the tensor has {} dimensions", v.len())));
    }
    // SAFETY: the caller promised `cap` writable values at `dst`.
    unsafe { slice_mut(dst, v.len(), "out")? }.copy_from_slice(v);
    Ok(())
}

/// The sizes, into `out` (room for `cap` values, at least `ndim`).
///
/// # Safety
/// `out` points to `cap` writable `int64_t`s.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_shape(t: i64, out_dims: *mut i64, cap: usize) -> i32 {
    guard("magpie_tensor_shape", || {
        let t = handles::tensor(t)?;
        write_dims(&t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(), out_dims, cap)
    })
}

/// The strides in elements, into `out` (room for `cap` values, at least `ndim`).
///
/// # Safety
/// `out` points to `cap` writable `int64_t`s.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_strides(t: i64, out_dims: *mut i64, cap: usize) -> i32 {
    guard("magpie_tensor_strides", || {
        let t = handles::tensor(t)?;
        write_dims(&t.strides().iter().map(|&d| d as i64).collect::<Vec<_>>(), out_dims, cap)
    })
}

/// The dtype code.
///
/// # Safety
/// `out` points to an `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_dtype(t: i64, out_c: *mut i32) -> i32 {
    guard("magpie_tensor_dtype", || {
        *out(out_c, "out")? = codes::dtype_code(handles::tensor(t)?.dtype());
        Ok(())
    })
}

/// The device code (-1 CPU, n CUDA n).
///
/// # Safety
/// `out` points to an `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_device(t: i64, out_c: *mut i32) -> i32 {
    guard("magpie_tensor_device", || {
        *out(out_c, "out")? = codes::device_code(handles::tensor(t)?.device());
        Ok(())
    })
}

/// The value of a one-element tensor as a double (a loss, a count).
///
/// # Safety
/// `out` points to a `double`.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_item(t: i64, out_v: *mut f64) -> i32 {
    guard("magpie_tensor_item", || {
        let t = handles::tensor(t)?;
        if t.numel() != 1 {
            return Err(arg(format!("item() needs a tensor of one element, this one has {}", t.numel())));
        }
        *out(out_v, "out")? = t.detach().item()?.to_f64();
        Ok(())
    })
}

/// A copy on `device` in `dtype` (`tensor.to(device, dtype)`); the same storage when nothing changes.
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_tensor_to(t: i64, device: i32, dtype: i32, out_h: *mut i64) -> i32 {
    guard("magpie_tensor_to", || {
        let out_h = out(out_h, "out")?;
        let t = handles::tensor(t)?;
        let r = t.to_dtype(codes::dtype(dtype)?)?.to_device(codes::device(device)?)?;
        give(r, out_h);
        Ok(())
    })
}

/// How many handles of this process are live (made and not yet released): 0 once a program has
/// released everything it made, which is how the examples check they leak nothing.
///
/// # Safety
/// `out` points to a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_live_handles(out_n: *mut usize) -> i32 {
    guard("magpie_live_handles", || {
        *out(out_n, "out")? = handles::live();
        Ok(())
    })
}

/// Adds a reference to any handle: each reference is dropped by one `magpie_release`.
#[no_mangle]
pub extern "C" fn magpie_retain(h: i64) -> i32 {
    guard("magpie_retain", || handles::retain(h))
}

/// Drops a reference to any handle (tensor, model, optimizer); the last one frees the object and
/// makes the handle stale: using or releasing it again is an error, never a crash.
#[no_mangle]
pub extern "C" fn magpie_release(h: i64) -> i32 {
    guard("magpie_release", || handles::release(h))
}

fn binary(name: &str, a: i64, b: i64, out_h: *mut i64, f: fn(&Tensor, &Tensor) -> magpie_core::Result<Tensor>) -> i32 {
    guard(name, || {
        // SAFETY: the caller's promise, passed through from the exported function
        let out_h = unsafe { out(out_h, "out")? };
        let r = f(&handles::tensor(a)?, &handles::tensor(b)?)?;
        give(r, out_h);
        Ok(())
    })
}

fn unary(name: &str, t: i64, out_h: *mut i64, f: fn(&Tensor) -> magpie_core::Result<Tensor>) -> i32 {
    guard(name, || {
        // SAFETY: as above
        let out_h = unsafe { out(out_h, "out")? };
        let r = f(&handles::tensor(t)?)?;
        give(r, out_h);
        Ok(())
    })
}

/// `a + b` (broadcasting, type promotion).
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_add(a: i64, b: i64, out_h: *mut i64) -> i32 {
    binary("magpie_add", a, b, out_h, Tensor::add)
}

/// `a - b`.
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_sub(a: i64, b: i64, out_h: *mut i64) -> i32 {
    binary("magpie_sub", a, b, out_h, Tensor::sub)
}

/// `a * b` (elementwise).
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_mul(a: i64, b: i64, out_h: *mut i64) -> i32 {
    binary("magpie_mul", a, b, out_h, Tensor::mul)
}

/// `a @ b` (`torch.matmul`).
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_matmul(a: i64, b: i64, out_h: *mut i64) -> i32 {
    binary("magpie_matmul", a, b, out_h, Tensor::matmul)
}

/// The sum of every element (a 0-d tensor).
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_sum(t: i64, out_h: *mut i64) -> i32 {
    unary("magpie_sum", t, out_h, Tensor::sum)
}

/// The mean of every element (a 0-d tensor).
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_mean(t: i64, out_h: *mut i64) -> i32 {
    unary("magpie_mean", t, out_h, Tensor::mean)
}

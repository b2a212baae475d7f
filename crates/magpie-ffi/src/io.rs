//! Checkpoints: tensors saved to and loaded from safetensors files by name.

use crate::error::{arg, guard};
use crate::handles::{self, Object};
use crate::ptr::{cstr, slice, slice_mut, write_str};
use magpie_core::Device;
use std::ffi::c_char;

/// Saves the `n` tensors of `tensors` under the `n` names of `names` to the safetensors file
/// `path` (written atomically).
///
/// # Safety
/// `path` is NUL-terminated; `names` points to `n` NUL-terminated strings, `tensors` to `n` handles.
#[no_mangle]
pub unsafe extern "C" fn magpie_save_safetensors(path: *const c_char, names: *const *const c_char, tensors: *const i64, n: usize) -> i32 {
    guard("magpie_save_safetensors", || {
        let path = cstr(path, "path")?;
        let names = slice(names, n, "names")?;
        let hs = slice(tensors, n, "tensors")?;
        let mut items = Vec::with_capacity(n);
        for (i, (&p, &h)) in names.iter().zip(hs).enumerate() {
            let name = cstr(p, &format!("names[{i}]"))?.to_string();
            let t = handles::tensor(h)?.detach().to_device(Device::Cpu)?.contiguous()?;
            items.push((name, t));
        }
        magpie_io::safetensors::save(&items, None, path)?;
        Ok(())
    })
}

/// Loads every tensor of the safetensors file `path` (CPU tensors): their handles go to
/// `out_tensors` (room for `cap`; `n_out` gets the count) and their names, as a JSON list in the
/// same order, to `names_json` (room for `json_cap` bytes with the NUL; `json_len` gets the length;
/// NULL when not wanted). Nothing is made when a buffer is too small.
///
/// # Safety
/// Pointers are null or valid for the lengths given.
#[no_mangle]
pub unsafe extern "C" fn magpie_load_safetensors(path: *const c_char, out_tensors: *mut i64, cap: usize, n_out: *mut usize, names_json: *mut c_char, json_cap: usize, json_len: *mut usize) -> i32 {
    guard("magpie_load_safetensors", || {
        let path = cstr(path, "path")?;
        let loaded = magpie_io::safetensors::load(path)?;
        let names: Vec<&str> = loaded.tensors.iter().map(|(n, _)| n.as_str()).collect();
        let js = serde_json::to_string(&names).map_err(|e| arg(e.to_string()))?;
        if let Some(n) = n_out.as_mut() {
            *n = loaded.tensors.len();
        }
        if loaded.tensors.len() > cap {
            return Err(arg(format!("the file holds {} tensors but out_tensors holds {cap}", loaded.tensors.len())));
        }
        if !names_json.is_null() && json_cap < js.len() + 1 {
            write_str(&js, std::ptr::null_mut(), 0, json_len, "names_json")?;
            return Err(arg(format!("names_json holds {json_cap} bytes but {} are needed", js.len() + 1)));
        }
        write_str(&js, names_json, json_cap, json_len, "names_json")?;
        let dst = slice_mut(out_tensors, loaded.tensors.len(), "out_tensors")?;
        for (d, (_, t)) in dst.iter_mut().zip(loaded.tensors) {
            *d = handles::insert(Object::Tensor(t));
        }
        Ok(())
    })
}

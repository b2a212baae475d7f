//! Any registry op by its PyTorch name, with arguments as JSON: the one generic entry point
//! (`magpie_call`), through the same table the conformance runner uses.
//!
//! Arguments: `{"args": [...], "kwargs": {...}}` (either may be left out). Numbers, booleans,
//! strings, `null` and lists are themselves (an integer literal is an int, anything with a point
//! or exponent a float); `{"tensor": i}` is the i-th handle of the `tensors` array;
//! `{"dtype": "float32"}`, `{"device": "cuda:0"}`, `{"complex": [re, im]}`,
//! `{"slice": [start, stop, step]}` (nulls allowed), `{"ellipsis": true}` and
//! `{"memory_format": "contiguous_format"}` are the other argument kinds. Results come back the
//! same way: tensors as `{"tensor": k}`, the k-th handle written to `out_tensors`.

use crate::error::{arg, guard, FfiResult};
use crate::handles::{self, Object};
use crate::ptr::{cstr, slice, slice_mut, write_str};
use magpie_core::registry::{self, Value};
use magpie_core::{DType, Device, Tensor};
use serde_json::{json, Map, Value as Json};
use std::ffi::c_char;

fn to_value(j: &Json, tensors: &[Tensor]) -> FfiResult<Value> {
    Ok(match j {
        Json::Null => Value::None,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) if !n.to_string().contains(['.', 'e', 'E']) => Value::Int(i),
            _ => Value::Float(n.as_f64().ok_or_else(|| arg(format!("{n} is not a number")))?),
        },
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(a) => Value::List(a.iter().map(|x| to_value(x, tensors)).collect::<FfiResult<_>>()?),
        Json::Object(o) => object(o, tensors)?,
    })
}

fn object(o: &Map<String, Json>, tensors: &[Tensor]) -> FfiResult<Value> {
    let (k, v) = match o.iter().next() {
        Some(kv) if o.len() == 1 => kv,
        _ => return Err(arg(format!("an argument object must have exactly one key (tensor, dtype, device, complex, slice, ellipsis, memory_format), got {}", Json::Object(o.clone())))),
    };
    let opt_int = |x: &Json| -> FfiResult<Option<i64>> {
        match x {
            Json::Null => Ok(None),
            _ => x.as_i64().map(Some).ok_or_else(|| arg(format!("slice bounds must be integers or null, got {x}"))),
        }
    };
    Ok(match k.as_str() {
        "tensor" => {
            let i = v.as_u64().ok_or_else(|| arg(format!("{{\"tensor\": i}} needs an index, got {v}")))? as usize;
            Value::Tensor(tensors.get(i).cloned().ok_or_else(|| arg(format!("tensor index {i} is out of range for {} tensors", tensors.len())))?)
        }
        "dtype" => Value::DType(DType::parse(v.as_str().ok_or_else(|| arg("dtype must be a string"))?)?),
        "device" => Value::Device(Device::parse(v.as_str().ok_or_else(|| arg("device must be a string"))?)?),
        "complex" => match v.as_array().map(|a| a.iter().map(|x| x.as_f64()).collect::<Option<Vec<_>>>()) {
            Some(Some(p)) if p.len() == 2 => Value::Complex(num_complex(p[0], p[1])),
            _ => return Err(arg("complex must be [re, im]")),
        },
        "slice" => match v.as_array() {
            Some(a) if a.len() == 3 => Value::Slice(opt_int(&a[0])?, opt_int(&a[1])?, opt_int(&a[2])?),
            _ => return Err(arg("slice must be [start, stop, step]")),
        },
        "ellipsis" => Value::Ellipsis,
        "memory_format" => Value::MemoryFormat(v.as_str().ok_or_else(|| arg("memory_format must be a string"))?.to_string()),
        other => return Err(arg(format!("unknown argument kind '{other}'"))),
    })
}

fn num_complex(re: f64, im: f64) -> num_complex::Complex64 {
    num_complex::Complex64::new(re, im)
}

/// The result as JSON, with each tensor appended to `out` and named by its index.
fn from_value(v: Value, out: &mut Vec<Tensor>) -> Json {
    match v {
        Value::None => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::Float(f) => json!(f),
        Value::Complex(c) => json!({"complex": [c.re, c.im]}),
        Value::Str(s) => json!(s),
        Value::DType(d) => json!({"dtype": d.to_string().trim_start_matches("torch.")}),
        Value::Device(d) => json!({"device": format!("{d}")}),
        Value::Tensor(t) => {
            out.push(t);
            json!({"tensor": out.len() - 1})
        }
        Value::List(l) => Json::Array(l.into_iter().map(|x| from_value(x, out)).collect()),
        Value::Slice(a, b, c) => json!({"slice": [a, b, c]}),
        Value::Ellipsis => json!({"ellipsis": true}),
        Value::MemoryFormat(m) => json!({"memory_format": m}),
    }
}

/// Calls the registry op `op` (its PyTorch name, e.g. `"add"`, `"nn.functional.cross_entropy"`)
/// with `args_json` (see above; NULL or "" for no arguments) over the `n_tensors` handles of
/// `tensors`. The result's tensors become new handles in `out_tensors` (room for `out_cap`;
/// `n_out` gets their count) and the result's shape goes to `out_json` as JSON (room for
/// `json_cap` bytes with the NUL; `json_len` gets its length; NULL when not wanted). When a
/// buffer is too small the call fails with MAGPIE_ERR_ARG before any handle is made, and the
/// counts say what is needed; the op has then run once (give room enough for in-place ops).
///
/// # Safety
/// Pointers are null or valid for the lengths given.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn magpie_call(
    op: *const c_char,
    args_json: *const c_char,
    tensors: *const i64,
    n_tensors: usize,
    out_tensors: *mut i64,
    out_cap: usize,
    n_out: *mut usize,
    out_json: *mut c_char,
    json_cap: usize,
    json_len: *mut usize,
) -> i32 {
    guard("magpie_call", || {
        let op = cstr(op, "op")?;
        let spec: Json = if args_json.is_null() { Json::Null } else {
            let s = cstr(args_json, "args_json")?;
            if s.trim().is_empty() { Json::Null } else { serde_json::from_str(s).map_err(|e| arg(format!("args_json is not JSON: {e}")))? }
        };
        let ts = slice(tensors, n_tensors, "tensors")?.iter().map(|&h| handles::tensor(h)).collect::<FfiResult<Vec<_>>>()?;
        let (args, kwargs) = match &spec {
            Json::Null => (Vec::new(), Vec::new()),
            Json::Object(o) => {
                for k in o.keys() {
                    if k != "args" && k != "kwargs" {
                        return Err(arg(format!("args_json has an unknown key '{k}' (args, kwargs)")));
                    }
                }
                let args = match o.get("args") {
                    None | Some(Json::Null) => Vec::new(),
                    Some(Json::Array(a)) => a.iter().map(|x| to_value(x, &ts)).collect::<FfiResult<Vec<_>>>()?,
                    Some(_) => return Err(arg("\"args\" must be a list")),
                };
                let kwargs = match o.get("kwargs") {
                    None | Some(Json::Null) => Vec::new(),
                    Some(Json::Object(k)) => k.iter().map(|(n, x)| Ok((n.clone(), to_value(x, &ts)?))).collect::<FfiResult<Vec<_>>>()?,
                    Some(_) => return Err(arg("\"kwargs\" must be an object")),
                };
                (args, kwargs)
            }
            _ => return Err(arg("args_json must be an object {\"args\": [...], \"kwargs\": {...}}")),
        };
        let result = registry::call(op, args, kwargs)?;
        let mut made = Vec::new();
        let shape = from_value(result, &mut made).to_string();
        if let Some(n) = n_out.as_mut() {
            *n = made.len();
        }
        if made.len() > out_cap {
            return Err(arg(format!("the result has {} tensors but out_tensors holds {out_cap}", made.len())));
        }
        if !out_json.is_null() && json_cap < shape.len() + 1 {
            write_str(&shape, std::ptr::null_mut(), 0, json_len, "out_json")?;
            return Err(arg(format!("out_json holds {json_cap} bytes but the result needs {}", shape.len() + 1)));
        }
        write_str(&shape, out_json, json_cap, json_len, "out_json")?;
        let dst = slice_mut(out_tensors, made.len(), "out_tensors")?;
        for (d, t) in dst.iter_mut().zip(made) {
            *d = handles::insert(Object::Tensor(t));
        }
        Ok(())
    })
}

//! `nn` layers by name from C: made with PyTorch's constructor arguments as JSON, then forward,
//! parameters (to train them with an optimizer) and train/eval.

use crate::error::{arg, guard, FfiResult};
use crate::handles::{self, Object};
use crate::ptr::{cstr, json_object, out, slice_mut};
use crate::tensor::give;
use magpie_nn::{BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, ConvOptions, ConvPadding, Dropout, Embedding, LayerNorm, Linear, Module, ModuleExt, RMSNorm, ReLU, SiLU, Sigmoid, Tanh, GELU};
use serde_json::{Map, Value};
use std::ffi::c_char;

fn uint(o: &Map<String, Value>, k: &str, default: Option<usize>) -> FfiResult<usize> {
    match o.get(k) {
        None => default.ok_or_else(|| arg(format!("argument '{k}' is required"))),
        Some(v) => v.as_u64().map(|x| x as usize).ok_or_else(|| arg(format!("argument '{k}' must be a non-negative integer, got {v}"))),
    }
}

fn float(o: &Map<String, Value>, k: &str, default: f64) -> FfiResult<f64> {
    match o.get(k) {
        None => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| arg(format!("argument '{k}' must be a number, got {v}"))),
    }
}

fn boolean(o: &Map<String, Value>, k: &str, default: bool) -> FfiResult<bool> {
    match o.get(k) {
        None => Ok(default),
        Some(v) => v.as_bool().ok_or_else(|| arg(format!("argument '{k}' must be true or false, got {v}"))),
    }
}

/// An int or a list of ints (`kernel_size=3` or `(3, 3)`).
fn ints(o: &Map<String, Value>, k: &str, default: Option<Vec<usize>>) -> FfiResult<Vec<usize>> {
    match o.get(k) {
        None => default.ok_or_else(|| arg(format!("argument '{k}' is required"))),
        Some(Value::Number(n)) => n.as_u64().map(|x| vec![x as usize]).ok_or_else(|| arg(format!("argument '{k}' must be a non-negative integer"))),
        Some(Value::Array(a)) => a.iter().map(|x| x.as_u64().map(|x| x as usize)).collect::<Option<Vec<_>>>().ok_or_else(|| arg(format!("argument '{k}' must be a list of non-negative integers"))),
        Some(v) => Err(arg(format!("argument '{k}' must be an integer or a list, got {v}"))),
    }
}

fn keys(o: &Map<String, Value>, allowed: &[&str], name: &str) -> FfiResult<()> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(arg(format!("{name} takes no argument '{k}' (it takes {})", allowed.join(", ")))),
        None => Ok(()),
    }
}

fn conv_options(o: &Map<String, Value>) -> FfiResult<ConvOptions> {
    let d = ConvOptions::default();
    let padding = match o.get("padding") {
        Some(Value::String(s)) if s == "same" => ConvPadding::Same,
        Some(Value::String(s)) if s == "valid" => ConvPadding::Valid,
        _ => ConvPadding::Explicit(ints(o, "padding", Some(vec![0]))?),
    };
    Ok(ConvOptions { stride: ints(o, "stride", Some(d.stride))?, padding, dilation: ints(o, "dilation", Some(d.dilation))?, groups: uint(o, "groups", Some(1))?, bias: boolean(o, "bias", true)?, ..d })
}

fn build(name: &str, o: &Map<String, Value>) -> FfiResult<Box<dyn Module>> {
    let m: Box<dyn Module> = match name {
        "linear" => {
            keys(o, &["in_features", "out_features", "bias"], name)?;
            Box::new(Linear::new(uint(o, "in_features", None)?, uint(o, "out_features", None)?, boolean(o, "bias", true)?)?)
        }
        "embedding" => {
            keys(o, &["num_embeddings", "embedding_dim", "padding_idx"], name)?;
            let pad = o.get("padding_idx").and_then(|v| v.as_i64());
            Box::new(Embedding::new(uint(o, "num_embeddings", None)?, uint(o, "embedding_dim", None)?, pad)?)
        }
        "layer_norm" => {
            keys(o, &["normalized_shape", "eps", "elementwise_affine", "bias"], name)?;
            Box::new(LayerNorm::new(&ints(o, "normalized_shape", None)?, float(o, "eps", 1e-5)?, boolean(o, "elementwise_affine", true)?, boolean(o, "bias", true)?)?)
        }
        "rms_norm" => {
            keys(o, &["normalized_shape", "eps", "elementwise_affine"], name)?;
            let eps = o.get("eps").and_then(|v| v.as_f64());
            Box::new(RMSNorm::new(&ints(o, "normalized_shape", None)?, eps, boolean(o, "elementwise_affine", true)?)?)
        }
        "conv1d" | "conv2d" => {
            keys(o, &["in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias"], name)?;
            let (i, oc, k) = (uint(o, "in_channels", None)?, uint(o, "out_channels", None)?, ints(o, "kernel_size", None)?);
            if name == "conv1d" {
                Box::new(Conv1d::new(i, oc, &k, conv_options(o)?)?)
            } else {
                Box::new(Conv2d::new(i, oc, &k, conv_options(o)?)?)
            }
        }
        "batch_norm1d" | "batch_norm2d" => {
            keys(o, &["num_features", "eps", "momentum", "affine", "track_running_stats"], name)?;
            let (n, eps, mom) = (uint(o, "num_features", None)?, float(o, "eps", 1e-5)?, Some(float(o, "momentum", 0.1)?));
            let (affine, track) = (boolean(o, "affine", true)?, boolean(o, "track_running_stats", true)?);
            if name == "batch_norm1d" {
                Box::new(BatchNorm1d::new(n, eps, mom, affine, track)?)
            } else {
                Box::new(BatchNorm2d::new(n, eps, mom, affine, track)?)
            }
        }
        "dropout" => {
            keys(o, &["p"], name)?;
            Box::new(Dropout::new(float(o, "p", 0.5)?)?)
        }
        "relu" | "silu" | "tanh" | "sigmoid" => {
            keys(o, &[], name)?;
            match name {
                "relu" => Box::new(ReLU),
                "silu" => Box::new(SiLU),
                "tanh" => Box::new(Tanh),
                _ => Box::new(Sigmoid),
            }
        }
        "gelu" => {
            keys(o, &["approximate"], name)?;
            let a = o.get("approximate").and_then(|v| v.as_str()).unwrap_or("none");
            if a != "none" && a != "tanh" {
                return Err(arg(format!("gelu's approximate must be \"none\" or \"tanh\", got {a:?}")));
            }
            Box::new(GELU::new(a))
        }
        other => return Err(arg(format!("unknown module '{other}' (linear, embedding, layer_norm, rms_norm, conv1d, conv2d, batch_norm1d, batch_norm2d, dropout, relu, gelu, silu, tanh, sigmoid)"))),
    };
    Ok(m)
}

/// A new layer `name` (`linear`, `embedding`, `layer_norm`, `rms_norm`, `conv1d`, `conv2d`,
/// `batch_norm1d`, `batch_norm2d`, `dropout`, `relu`, `gelu`, `silu`, `tanh`, `sigmoid`) with
/// PyTorch's constructor arguments as JSON (`{"in_features": 4, "out_features": 2}`), initialised
/// as PyTorch initialises it, in training mode, on the CPU in float32.
///
/// # Safety
/// `name` is NUL-terminated, `args_json` NUL-terminated or NULL, `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_module_new(name: *const c_char, args_json: *const c_char, out_h: *mut i64) -> i32 {
    guard("magpie_module_new", || {
        let o = out(out_h, "out")?;
        let name = cstr(name, "name")?.to_ascii_lowercase();
        let map = json_object(args_json, "args_json")?;
        *o = handles::insert(Object::Module(build(&name, &map)?));
        Ok(())
    })
}

/// `module(x)`.
///
/// # Safety
/// `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_module_forward(module: i64, x: i64, out_h: *mut i64) -> i32 {
    guard("magpie_module_forward", || {
        let o = out(out_h, "out")?;
        let x = handles::tensor(x)?;
        let y = handles::with_module(module, |m| Ok(m.forward(&x)?))?;
        give(y, o);
        Ok(())
    })
}

/// The module's parameters as tensor handles (its own tensors), in `named_parameters()` order.
///
/// # Safety
/// `out` points to `cap` `int64_t`s; `n_out` to a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_module_parameters(module: i64, out_h: *mut i64, cap: usize, n_out: *mut usize) -> i32 {
    guard("magpie_module_parameters", || {
        let n = out(n_out, "n_out")?;
        let params = handles::with_module(module, |m| Ok(m.parameters()))?;
        *n = params.len();
        if params.len() > cap {
            return Err(arg(format!("the module has {} parameters but out holds {cap}", params.len())));
        }
        for (d, p) in slice_mut(out_h, params.len(), "out")?.iter_mut().zip(params) {
            *d = handles::insert(Object::Tensor(p));
        }
        Ok(())
    })
}

/// Training mode (1) or evaluation mode (0): `module.train(flag)`.
#[no_mangle]
pub extern "C" fn magpie_module_train(module: i64, flag: i32) -> i32 {
    guard("magpie_module_train", || {
        handles::with_module(module, |m| {
            m.train(flag != 0);
            Ok(())
        })
    })
}

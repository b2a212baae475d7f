//! Optimizers by name with hyperparameters as JSON: `sgd`, `adam`, `adamw`.

use crate::error::{arg, guard, FfiResult};
use crate::handles::{self, Object};
use crate::ptr::{cstr, slice};
use magpie_optim::{Adam, AdamConfig, AdamW, Optimizer, Sgd, SgdConfig};
use serde_json::{Map, Value};
use std::ffi::c_char;

fn num(o: &Map<String, Value>, k: &str, default: f64) -> FfiResult<f64> {
    match o.get(k) {
        None => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| arg(format!("hyperparameter '{k}' must be a number, got {v}"))),
    }
}

fn flag(o: &Map<String, Value>, k: &str) -> FfiResult<bool> {
    match o.get(k) {
        None => Ok(false),
        Some(v) => v.as_bool().ok_or_else(|| arg(format!("hyperparameter '{k}' must be true or false, got {v}"))),
    }
}

fn check_keys(o: &Map<String, Value>, allowed: &[&str], name: &str) -> FfiResult<()> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(arg(format!("{name} has no hyperparameter '{k}' (it takes {})", allowed.join(", ")))),
        None => Ok(()),
    }
}

fn adam_config(o: &Map<String, Value>, base: AdamConfig, name: &str) -> FfiResult<AdamConfig> {
    check_keys(o, &["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"], name)?;
    let betas = match o.get("betas") {
        None => base.betas,
        Some(v) => match v.as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect::<Vec<_>>()) {
            Some(b) if b.len() == 2 => (b[0], b[1]),
            _ => return Err(arg(format!("betas must be [beta1, beta2], got {v}"))),
        },
    };
    Ok(AdamConfig {
        lr: num(o, "lr", base.lr)?,
        betas,
        eps: num(o, "eps", base.eps)?,
        weight_decay: num(o, "weight_decay", base.weight_decay)?,
        amsgrad: flag(o, "amsgrad")?,
        maximize: flag(o, "maximize")?,
    })
}

/// A new optimizer `name` (`sgd`, `adam`, `adamw`; PyTorch's defaults) over the `n_params` tensor
/// handles of `params`, with hyperparameters from `hyper_json` (`{"lr": 0.01, "momentum": 0.9}`;
/// NULL or "" for the defaults; an unknown key is an error).
///
/// # Safety
/// `name` and `hyper_json` are NUL-terminated (or `hyper_json` NULL); `params` points to
/// `n_params` handles; `out` to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_optimizer_new(name: *const c_char, params: *const i64, n_params: usize, hyper_json: *const c_char, out_h: *mut i64) -> i32 {
    guard("magpie_optimizer_new", || {
        let o = crate::ptr::out(out_h, "out")?;
        let name = cstr(name, "name")?;
        let ps = slice(params, n_params, "params")?.iter().map(|&h| handles::tensor(h)).collect::<FfiResult<Vec<_>>>()?;
        let hyper = if hyper_json.is_null() { String::new() } else { cstr(hyper_json, "hyper_json")?.to_string() };
        let map = if hyper.trim().is_empty() {
            Map::new()
        } else {
            match serde_json::from_str::<Value>(&hyper).map_err(|e| arg(format!("hyper_json is not JSON: {e}")))? {
                Value::Object(m) => m,
                v => return Err(arg(format!("hyper_json must be an object, got {v}"))),
            }
        };
        let opt: Box<dyn Optimizer + Send> = match name.to_ascii_lowercase().as_str() {
            "sgd" => {
                check_keys(&map, &["lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"], "sgd")?;
                let d = SgdConfig::default();
                let cfg = SgdConfig {
                    lr: num(&map, "lr", d.lr)?,
                    momentum: num(&map, "momentum", d.momentum)?,
                    dampening: num(&map, "dampening", d.dampening)?,
                    weight_decay: num(&map, "weight_decay", d.weight_decay)?,
                    nesterov: flag(&map, "nesterov")?,
                    maximize: flag(&map, "maximize")?,
                };
                Box::new(Sgd::new(ps, cfg)?)
            }
            "adam" => Box::new(Adam::new(ps, adam_config(&map, AdamConfig::default(), "adam")?)?),
            "adamw" => Box::new(AdamW::new(ps, adam_config(&map, AdamConfig::adamw(), "adamw")?)?),
            other => return Err(arg(format!("unknown optimizer '{other}' (sgd, adam, adamw)"))),
        };
        *o = handles::insert(Object::Optimizer(opt));
        Ok(())
    })
}

/// One update of every parameter that has a gradient.
#[no_mangle]
pub extern "C" fn magpie_optimizer_step(opt: i64) -> i32 {
    guard("magpie_optimizer_step", || handles::with_optimizer(opt, |o| Ok(o.step()?)))
}

/// Drops every parameter's gradient (`zero_grad(set_to_none=True)`).
#[no_mangle]
pub extern "C" fn magpie_optimizer_zero_grad(opt: i64) -> i32 {
    guard("magpie_optimizer_zero_grad", || {
        handles::with_optimizer(opt, |o| {
            o.zero_grad();
            Ok(())
        })
    })
}

/// Sets the learning rate of every parameter group (what a scheduler does each step).
#[no_mangle]
pub extern "C" fn magpie_optimizer_set_lr(opt: i64, lr: f64) -> i32 {
    guard("magpie_optimizer_set_lr", || {
        if !(lr >= 0.0 && lr.is_finite()) {
            return Err(arg(format!("invalid learning rate {lr}")));
        }
        handles::with_optimizer(opt, |o| {
            for i in 0..o.num_groups() {
                o.set_lr(i, lr);
            }
            Ok(())
        })
    })
}

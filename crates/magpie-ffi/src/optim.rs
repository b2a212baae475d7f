//! Optimizers by name with hyperparameters as JSON: `sgd`, `adam`, `adamw`.

use crate::error::{arg, guard, FfiResult};
use crate::handles::{self, Object};
use crate::ptr::{cstr, json_object, slice};
use magpie_optim::scheduler::{AnnealStrategy, ConstantLr, CosineAnnealingLr, CosineAnnealingWarmRestarts, CyclicLr, CyclicMode, ExponentialLr, LinearLr, LrScheduler, MultiStepLr, OneCycleLr, PolynomialLr, StepLr};
use magpie_optim::{Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adam, AdamConfig, AdamW, Adamax, AdamaxConfig, Asgd, AsgdConfig, NAdam, NAdamConfig, Optimizer, RAdam, RAdamConfig, RmsProp, RmsPropConfig, Rprop, RpropConfig, Sgd, SgdConfig, SparseAdam, SparseAdamConfig};
use std::collections::BTreeMap;
use serde_json::{Map, Value};
use std::ffi::c_char;

fn num(o: &Map<String, Value>, k: &str, default: f64) -> FfiResult<f64> {
    match o.get(k) {
        None => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| arg(format!("hyperparameter '{k}' must be a number, got {v}"))),
    }
}

fn flag(o: &Map<String, Value>, k: &str) -> FfiResult<bool> {
    flag_or(o, k, false)
}

fn flag_or(o: &Map<String, Value>, k: &str, default: bool) -> FfiResult<bool> {
    match o.get(k) {
        None => Ok(default),
        Some(v) => v.as_bool().ok_or_else(|| arg(format!("hyperparameter '{k}' must be true or false, got {v}"))),
    }
}

fn check_keys(o: &Map<String, Value>, allowed: &[&str], name: &str) -> FfiResult<()> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(arg(format!("{name} has no hyperparameter '{k}' (it takes {})", allowed.join(", ")))),
        None => Ok(()),
    }
}

fn pair(o: &Map<String, Value>, k: &str, default: (f64, f64)) -> FfiResult<(f64, f64)> {
    match o.get(k) {
        None => Ok(default),
        Some(v) => match v.as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect::<Vec<_>>()) {
            Some(b) if b.len() == 2 => Ok((b[0], b[1])),
            _ => Err(arg(format!("{k} must be a pair of numbers, got {v}"))),
        },
    }
}

fn adam_config(o: &Map<String, Value>, base: AdamConfig, name: &str) -> FfiResult<AdamConfig> {
    check_keys(o, &["lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"], name)?;
    let betas = pair(o, "betas", base.betas)?;
    Ok(AdamConfig {
        lr: num(o, "lr", base.lr)?,
        betas,
        eps: num(o, "eps", base.eps)?,
        weight_decay: num(o, "weight_decay", base.weight_decay)?,
        amsgrad: flag(o, "amsgrad")?,
        maximize: flag(o, "maximize")?,
    })
}

/// A new optimizer `name` (`sgd`, `adam`, `adamw`, `adamax`, `nadam`, `radam`, `adagrad`,
/// `adadelta`, `rmsprop`, `rprop`, `asgd`; PyTorch's defaults and keyword names) over the `n_params` tensor
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
        let map = json_object(hyper_json, "hyper_json")?;
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
            n => other_optimizer(n, ps, &map)?,
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

fn int(o: &Map<String, Value>, k: &str, default: Option<i64>) -> FfiResult<i64> {
    match o.get(k) {
        None => default.ok_or_else(|| arg(format!("hyperparameter '{k}' is required"))),
        Some(v) => v.as_i64().ok_or_else(|| arg(format!("hyperparameter '{k}' must be an integer, got {v}"))),
    }
}

/// A learning-rate scheduler `name` over the optimizer `opt`, with PyTorch's arguments as JSON:
/// `step_lr` (step_size, gamma), `multi_step_lr` (milestones, gamma), `exponential_lr` (gamma),
/// `cosine_annealing_lr` (T_max, eta_min), `linear_lr` (start_factor, end_factor, total_iters),
/// `constant_lr` (factor, total_iters), `polynomial_lr` (total_iters, power),
/// `cosine_annealing_warm_restarts` (T_0, T_mult, eta_min), `one_cycle_lr` (max_lr, total_steps,
/// pct_start, anneal_strategy, ...), `cyclic_lr` (base_lr, max_lr, step_size_up, mode, ...). Like PyTorch's
/// constructors it sets the optimizer's initial learning rates.
///
/// # Safety
/// `name` is NUL-terminated, `hyper_json` NUL-terminated or NULL, `out` points to an `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn magpie_scheduler_new(name: *const c_char, opt: i64, hyper_json: *const c_char, out_h: *mut i64) -> i32 {
    guard("magpie_scheduler_new", || {
        let o = crate::ptr::out(out_h, "out")?;
        let name = cstr(name, "name")?.to_ascii_lowercase();
        let m = json_object(hyper_json, "hyper_json")?;
        let sched = handles::with_optimizer(opt, |op| -> FfiResult<Box<dyn LrScheduler + Send>> {
            let op: &mut dyn Optimizer = op;
            Ok(match name.as_str() {
                "step_lr" => {
                    check_keys(&m, &["step_size", "gamma"], &name)?;
                    Box::new(StepLr::new(op, int(&m, "step_size", None)?, num(&m, "gamma", 0.1)?)?) as Box<dyn LrScheduler + Send>
                }
                "multi_step_lr" => {
                    check_keys(&m, &["milestones", "gamma"], &name)?;
                    let ms = m.get("milestones").and_then(|v| v.as_array()).and_then(|a| a.iter().map(|x| x.as_i64()).collect::<Option<Vec<_>>>()).ok_or_else(|| arg("milestones must be a list of integers"))?;
                    Box::new(MultiStepLr::new(op, &ms, num(&m, "gamma", 0.1)?)?) as Box<dyn LrScheduler + Send>
                }
                "exponential_lr" => {
                    check_keys(&m, &["gamma"], &name)?;
                    Box::new(ExponentialLr::new(op, num(&m, "gamma", f64::NAN)?)?) as Box<dyn LrScheduler + Send>
                }
                "cosine_annealing_lr" => {
                    check_keys(&m, &["T_max", "eta_min"], &name)?;
                    Box::new(CosineAnnealingLr::new(op, int(&m, "T_max", None)?, num(&m, "eta_min", 0.0)?)?) as Box<dyn LrScheduler + Send>
                }
                "linear_lr" => {
                    check_keys(&m, &["start_factor", "end_factor", "total_iters"], &name)?;
                    Box::new(LinearLr::new(op, num(&m, "start_factor", 1.0 / 3.0)?, num(&m, "end_factor", 1.0)?, int(&m, "total_iters", Some(5))?)?) as Box<dyn LrScheduler + Send>
                }
                "constant_lr" => {
                    check_keys(&m, &["factor", "total_iters"], &name)?;
                    Box::new(ConstantLr::new(op, num(&m, "factor", 1.0 / 3.0)?, int(&m, "total_iters", Some(5))?)?) as Box<dyn LrScheduler + Send>
                }
                "polynomial_lr" => {
                    check_keys(&m, &["total_iters", "power"], &name)?;
                    Box::new(PolynomialLr::new(op, int(&m, "total_iters", Some(5))?, num(&m, "power", 1.0)?)?) as Box<dyn LrScheduler + Send>
                }
                "cosine_annealing_warm_restarts" => {
                    check_keys(&m, &["T_0", "T_mult", "eta_min"], &name)?;
                    Box::new(CosineAnnealingWarmRestarts::new(op, int(&m, "T_0", None)?, int(&m, "T_mult", Some(1))?, num(&m, "eta_min", 0.0)?)?) as Box<dyn LrScheduler + Send>
                }
                "one_cycle_lr" => {
                    check_keys(&m, &["max_lr", "total_steps", "pct_start", "anneal_strategy", "cycle_momentum", "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase"], &name)?;
                    let anneal = match m.get("anneal_strategy").and_then(|v| v.as_str()).unwrap_or("cos") {
                        "cos" => AnnealStrategy::Cos,
                        "linear" => AnnealStrategy::Linear,
                        o => return Err(arg(format!("anneal_strategy must be \"cos\" or \"linear\", got {o:?}"))),
                    };
                    Box::new(OneCycleLr::new(
                        op,
                        num(&m, "max_lr", f64::NAN)?,
                        int(&m, "total_steps", None)?,
                        num(&m, "pct_start", 0.3)?,
                        anneal,
                        flag_or(&m, "cycle_momentum", true)?,
                        num(&m, "base_momentum", 0.85)?,
                        num(&m, "max_momentum", 0.95)?,
                        num(&m, "div_factor", 25.0)?,
                        num(&m, "final_div_factor", 1e4)?,
                        flag(&m, "three_phase")?,
                    )?) as Box<dyn LrScheduler + Send>
                }
                "cyclic_lr" => {
                    check_keys(&m, &["base_lr", "max_lr", "step_size_up", "step_size_down", "mode", "gamma", "cycle_momentum", "base_momentum", "max_momentum"], &name)?;
                    let mode = match m.get("mode").and_then(|v| v.as_str()).unwrap_or("triangular") {
                        "triangular" => CyclicMode::Triangular,
                        "triangular2" => CyclicMode::Triangular2,
                        "exp_range" => CyclicMode::ExpRange,
                        o => return Err(arg(format!("mode must be triangular, triangular2 or exp_range, got {o:?}"))),
                    };
                    let down = match m.get("step_size_down") {
                        None | Some(Value::Null) => None,
                        Some(_) => Some(int(&m, "step_size_down", None)?),
                    };
                    Box::new(CyclicLr::new(
                        op,
                        num(&m, "base_lr", f64::NAN)?,
                        num(&m, "max_lr", f64::NAN)?,
                        int(&m, "step_size_up", Some(2000))?,
                        down,
                        mode,
                        num(&m, "gamma", 1.0)?,
                        flag_or(&m, "cycle_momentum", true)?,
                        num(&m, "base_momentum", 0.8)?,
                        num(&m, "max_momentum", 0.9)?,
                    )?) as Box<dyn LrScheduler + Send>
                }
                other => return Err(arg(format!("unknown scheduler '{other}' (step_lr, multi_step_lr, exponential_lr, cosine_annealing_lr, cosine_annealing_warm_restarts, linear_lr, constant_lr, polynomial_lr, one_cycle_lr, cyclic_lr)"))),
            })
        })?;
        *o = handles::insert(Object::Scheduler(sched));
        Ok(())
    })
}

/// `scheduler.step()`: advances one epoch and sets the learning rates of `opt` (the optimizer the
/// scheduler was made for).
#[no_mangle]
pub extern "C" fn magpie_scheduler_step(sched: i64, opt: i64) -> i32 {
    guard("magpie_scheduler_step", || {
        if sched == opt {
            return Err(arg("the scheduler and the optimizer are the same handle"));
        }
        handles::with_scheduler(sched, |s| handles::with_optimizer(opt, |o| Ok(s.step(o)?)))
    })
}

/// The learning rate of the optimizer's first parameter group.
///
/// # Safety
/// `out` points to a `double`.
#[no_mangle]
pub unsafe extern "C" fn magpie_optimizer_get_lr(opt: i64, out_lr: *mut f64) -> i32 {
    guard("magpie_optimizer_get_lr", || {
        let o = crate::ptr::out(out_lr, "out")?;
        *o = handles::with_optimizer(opt, |op| Ok(op.lr(0)))?;
        Ok(())
    })
}

/// Writes the optimizer's state (moments, steps, groups) to the safetensors file `path`: the
/// tensors, with the groups' hyperparameters as JSON metadata (`optimizer`).
///
/// # Safety
/// `path` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn magpie_optimizer_save(opt: i64, path: *const c_char) -> i32 {
    guard("magpie_optimizer_save", || {
        let path = cstr(path, "path")?;
        let (tensors, json) = handles::with_optimizer(opt, |o| Ok(o.state_dict()?))?;
        let host = tensors.into_iter().map(|(n, t)| Ok((n, t.to_device(magpie_core::Device::Cpu)?.contiguous()?))).collect::<magpie_core::Result<Vec<_>>>()?;
        let mut meta = BTreeMap::new();
        meta.insert("optimizer".to_string(), json);
        magpie_io::safetensors::save(&host, Some(&meta), path)?;
        Ok(())
    })
}

/// Loads a state written by `magpie_optimizer_save` into an optimizer over the same parameters.
///
/// # Safety
/// `path` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn magpie_optimizer_load(opt: i64, path: *const c_char) -> i32 {
    guard("magpie_optimizer_load", || {
        let path = cstr(path, "path")?;
        let f = magpie_io::safetensors::load(path)?;
        let json = f.metadata.get("optimizer").ok_or_else(|| arg(format!("{path} holds no optimizer state (no 'optimizer' metadata)")))?.clone();
        handles::with_optimizer(opt, |o| Ok(o.load_state_dict(&f.tensors, &json)?))
    })
}

/// The optimizers beyond SGD and Adam(W), each from its defaults with the given keys replaced.
fn other_optimizer(name: &str, ps: Vec<magpie_core::Tensor>, m: &Map<String, Value>) -> FfiResult<Box<dyn Optimizer + Send>> {
    Ok(match name {
        "adamax" => {
            check_keys(m, &["lr", "betas", "eps", "weight_decay", "maximize"], name)?;
            let d = AdamaxConfig::default();
            let c = AdamaxConfig { lr: num(m, "lr", d.lr)?, betas: pair(m, "betas", d.betas)?, eps: num(m, "eps", d.eps)?, weight_decay: num(m, "weight_decay", d.weight_decay)?, maximize: flag(m, "maximize")? };
            Box::new(Adamax::new(ps, c)?)
        }
        "nadam" => {
            check_keys(m, &["lr", "betas", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay", "maximize"], name)?;
            let d = NAdamConfig::default();
            let c = NAdamConfig {
                lr: num(m, "lr", d.lr)?,
                betas: pair(m, "betas", d.betas)?,
                eps: num(m, "eps", d.eps)?,
                weight_decay: num(m, "weight_decay", d.weight_decay)?,
                momentum_decay: num(m, "momentum_decay", d.momentum_decay)?,
                decoupled_weight_decay: flag_or(m, "decoupled_weight_decay", d.decoupled_weight_decay)?,
                maximize: flag(m, "maximize")?,
            };
            Box::new(NAdam::new(ps, c)?)
        }
        "radam" => {
            check_keys(m, &["lr", "betas", "eps", "weight_decay", "decoupled_weight_decay", "maximize"], name)?;
            let d = RAdamConfig::default();
            let c = RAdamConfig {
                lr: num(m, "lr", d.lr)?,
                betas: pair(m, "betas", d.betas)?,
                eps: num(m, "eps", d.eps)?,
                weight_decay: num(m, "weight_decay", d.weight_decay)?,
                decoupled_weight_decay: flag_or(m, "decoupled_weight_decay", d.decoupled_weight_decay)?,
                maximize: flag(m, "maximize")?,
            };
            Box::new(RAdam::new(ps, c)?)
        }
        "adagrad" => {
            check_keys(m, &["lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps", "maximize"], name)?;
            let d = AdagradConfig::default();
            let c = AdagradConfig {
                lr: num(m, "lr", d.lr)?,
                lr_decay: num(m, "lr_decay", d.lr_decay)?,
                weight_decay: num(m, "weight_decay", d.weight_decay)?,
                initial_accumulator_value: num(m, "initial_accumulator_value", d.initial_accumulator_value)?,
                eps: num(m, "eps", d.eps)?,
                maximize: flag(m, "maximize")?,
            };
            Box::new(Adagrad::new(ps, c)?)
        }
        "adadelta" => {
            check_keys(m, &["lr", "rho", "eps", "weight_decay", "maximize"], name)?;
            let d = AdadeltaConfig::default();
            let c = AdadeltaConfig { lr: num(m, "lr", d.lr)?, rho: num(m, "rho", d.rho)?, eps: num(m, "eps", d.eps)?, weight_decay: num(m, "weight_decay", d.weight_decay)?, maximize: flag(m, "maximize")? };
            Box::new(Adadelta::new(ps, c)?)
        }
        "rmsprop" => {
            check_keys(m, &["lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize"], name)?;
            let d = RmsPropConfig::default();
            let c = RmsPropConfig {
                lr: num(m, "lr", d.lr)?,
                alpha: num(m, "alpha", d.alpha)?,
                eps: num(m, "eps", d.eps)?,
                weight_decay: num(m, "weight_decay", d.weight_decay)?,
                momentum: num(m, "momentum", d.momentum)?,
                centered: flag(m, "centered")?,
                maximize: flag(m, "maximize")?,
            };
            Box::new(RmsProp::new(ps, c)?)
        }
        "rprop" => {
            check_keys(m, &["lr", "etas", "step_sizes", "maximize"], name)?;
            let d = RpropConfig::default();
            let c = RpropConfig { lr: num(m, "lr", d.lr)?, etas: pair(m, "etas", d.etas)?, step_sizes: pair(m, "step_sizes", d.step_sizes)?, maximize: flag(m, "maximize")? };
            Box::new(Rprop::new(ps, c)?)
        }
        "asgd" => {
            check_keys(m, &["lr", "lambd", "alpha", "t0", "weight_decay", "maximize"], name)?;
            let d = AsgdConfig::default();
            let c = AsgdConfig { lr: num(m, "lr", d.lr)?, lambd: num(m, "lambd", d.lambd)?, alpha: num(m, "alpha", d.alpha)?, t0: num(m, "t0", d.t0)?, weight_decay: num(m, "weight_decay", d.weight_decay)?, maximize: flag(m, "maximize")? };
            Box::new(Asgd::new(ps, c)?)
        }
        // real SparseAdam: C-made graphs give dense gradients, so its step is PyTorch's error
        // ("SparseAdam does not support dense gradients, ...") unless no parameter has a gradient
        "sparse_adam" | "sparseadam" => {
            check_keys(m, &["lr", "betas", "eps", "maximize"], name)?;
            let d = SparseAdamConfig::default();
            let c = SparseAdamConfig { lr: num(m, "lr", d.lr)?, betas: pair(m, "betas", d.betas)?, eps: num(m, "eps", d.eps)?, maximize: flag(m, "maximize")? };
            Box::new(SparseAdam::new(ps, c)?)
        }
        other => {
            return Err(arg(format!(
                "unknown optimizer '{other}' (sgd, adam, adamw, adamax, nadam, radam, adagrad, adadelta, rmsprop, rprop, asgd, sparse_adam; LBFGS needs a closure, which the C ABI has not)"
            )))
        }
    })
}

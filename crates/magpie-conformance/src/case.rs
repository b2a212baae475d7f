//! Runs one case: builds the call, runs it, compares the value and the gradient.

use crate::adapt::adapt;
use crate::compare::compare;
use crate::load::Loader;
use crate::manifest::{Case, Tol};
use magpie_core::registry::Value;
use magpie_core::{autograd, Device, Error, Tensor};
use serde::{Deserialize, Serialize};

/// The outcome of one part of a case.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    Unsupported,
    Errored,
    Crashed,
}

/// One case's record, as `--json` writes it.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct CaseResult {
    pub id: String,
    pub op: String,
    pub value: Status,
    pub grad: Option<Status>,
    pub message: String,
    /// True for error cases (PyTorch raised); `value` then says whether we returned an error.
    #[serde(default)]
    pub error_case: bool,
    /// True when the case's data itself is malformed (a missing key, an unknown value form).
    #[serde(default)]
    pub bad_data: bool,
}

fn status_of(e: &Error) -> Status {
    if e.is_unsupported() {
        Status::Unsupported
    } else {
        Status::Errored
    }
}

const DEFAULT_TOL: Tol = Tol { rtol: 1.3e-6, atol: 1e-5 };

/// Moves every tensor in a value to `device`.
fn to_device(v: Value, device: Device) -> Result<Value, Error> {
    to_device_memo(v, device, &mut Vec::new())
}

/// [`to_device`] that moves one tensor handle once: a case naming the same tensor twice (an
/// `out=` that is also the input) gets one tensor on the device too, aliasing as on the CPU.
fn to_device_memo(v: Value, device: Device, memo: &mut Vec<(magpie_core::Tensor, magpie_core::Tensor)>) -> Result<Value, Error> {
    Ok(match v {
        Value::Tensor(t) => {
            if let Some((_, m)) = memo.iter().find(|(c, _)| c.is_same(&t)) {
                return Ok(Value::Tensor(m.clone()));
            }
            let m = t.to_device(device)?;
            memo.push((t, m.clone()));
            Value::Tensor(m)
        }
        Value::List(l) => Value::List(l.into_iter().map(|x| to_device_memo(x, device, memo)).collect::<Result<_, _>>()?),
        v => v,
    })
}

/// Runs one case on `device`.
pub fn run_case(case: &Case, loader: &mut Loader, device: Device) -> CaseResult {
    let mut r = CaseResult {
        id: case.id.clone(),
        op: case.full_op(),
        value: Status::Failed,
        grad: case.grad.as_ref().map(|_| Status::Failed),
        message: String::new(),
        error_case: case.is_error_case(),
        bad_data: false,
    };
    loader.start_case();
    // convert the call's arguments
    let conv = (|| -> Result<(Value, Vec<Value>, Vec<(String, Value)>), String> {
        let input = loader.value(&case.input)?;
        let args = case.args.iter().map(|a| loader.value(a)).collect::<Result<Vec<_>, _>>()?;
        let mut kwargs = Vec::new();
        for (k, v) in &case.kwargs {
            kwargs.push((k.clone(), loader.value(v)?));
        }
        Ok((input, args, kwargs))
    })();
    let (input, args, kwargs) = match conv {
        Ok(x) => x,
        Err(e) => {
            r.value = Status::Errored;
            r.grad = r.grad.map(|_| Status::Errored);
            r.message = format!("malformed case data: {e}");
            r.bad_data = true;
            return r;
        }
    };
    // mark the inputs gradients are taken for
    let mut wrt: Vec<Tensor> = Vec::new();
    let mut grad_setup: Result<(), Status> = Ok(());
    if let Some(g) = &case.grad {
        for k in &g.wrt {
            match loader.tensor(k) {
                Ok(t) => {
                    if t.requires_grad_(true).is_err() {
                        grad_setup = Err(Status::Unsupported);
                    }
                    wrt.push(t);
                }
                Err(e) => {
                    r.message = format!("malformed case data: {e}");
                    r.bad_data = true;
                    r.value = Status::Errored;
                    r.grad = Some(Status::Errored);
                    return r;
                }
            }
        }
    }
    let moved = (|| -> Result<_, Error> {
        let mut memo = Vec::new();
        let input = to_device_memo(input, device, &mut memo)?;
        let args = args.into_iter().map(|a| to_device_memo(a, device, &mut memo)).collect::<Result<Vec<_>, _>>()?;
        let kwargs = kwargs.into_iter().map(|(k, v)| Ok((k, to_device_memo(v, device, &mut memo)?))).collect::<Result<Vec<_>, Error>>()?;
        Ok((input, args, kwargs))
    })();
    let (input, args, kwargs) = match moved {
        Ok(x) => x,
        Err(e) => {
            r.value = status_of(&e);
            r.grad = r.grad.map(|_| r.value);
            r.message = e.to_string();
            return r;
        }
    };
    let mut call = adapt(case, input, args, kwargs);
    if call.clone_input {
        if let Some(Value::Tensor(x)) = call.args.first() {
            match x.copy() {
                Ok(c) => call.args[0] = Value::Tensor(c),
                Err(e) => {
                    r.value = status_of(&e);
                    r.message = e.to_string();
                    return r;
                }
            }
        }
    }
    let out = crate::adapt::invoke(call);

    if let Some(kind) = &case.expect_error {
        match out {
            Ok(_) => {
                r.value = Status::Failed;
                r.message = format!("returned a value; PyTorch raised {kind}: {}", case.error_regex.as_deref().unwrap_or(""));
            }
            Err(e) => {
                r.value = if e.is_unsupported() { Status::Unsupported } else { Status::Passed };
                r.message = e.to_string();
            }
        }
        return r;
    }
    let out = match out {
        Ok(v) => v,
        Err(e) => {
            r.value = status_of(&e);
            r.grad = r.grad.map(|_| r.value);
            r.message = e.to_string();
            return r;
        }
    };
    let tol = case.tol.unwrap_or(DEFAULT_TOL);
    let expected = match case.output.as_ref().map(|o| loader.value(o)) {
        Some(Ok(v)) => v,
        Some(Err(e)) => {
            r.value = Status::Errored;
            r.bad_data = true;
            r.message = format!("malformed case data: {e}");
            return r;
        }
        None => Value::None,
    };
    let host = match to_device(out.clone(), Device::Cpu) {
        Ok(v) => v,
        Err(e) => {
            r.value = Status::Errored;
            r.message = e.to_string();
            return r;
        }
    };
    match compare(&host, &expected, tol, case.nondeterministic, "output") {
        Ok(()) => r.value = Status::Passed,
        Err(m) => {
            r.value = Status::Failed;
            r.message = m;
        }
    }
    if let (Some(g), Ok(())) = (&case.grad, grad_setup) {
        // the low-precision sets carry their own gradient tolerance (FORMAT.md, "Low-precision sets")
        let gtol = case.grad_tol.unwrap_or(tol);
        let (st, msg) = check_grad(g, &out, &wrt, loader, gtol, device);
        r.grad = Some(st);
        if !msg.is_empty() {
            if !r.message.is_empty() {
                r.message.push_str("; ");
            }
            r.message.push_str(&format!("grad: {msg}"));
        }
    } else if let (Some(_), Err(st)) = (&case.grad, grad_setup) {
        r.grad = Some(st);
    }
    r
}

fn flatten_tensors(v: &Value, out: &mut Vec<Tensor>) {
    match v {
        Value::Tensor(t) => out.push(t.clone()),
        Value::List(l) => l.iter().for_each(|x| flatten_tensors(x, out)),
        _ => {}
    }
}

fn check_grad(
    g: &crate::manifest::GradSpec,
    out: &Value,
    wrt: &[Tensor],
    loader: &mut Loader,
    tol: Tol,
    device: Device,
) -> (Status, String) {
    let mut outs = Vec::new();
    flatten_tensors(out, &mut outs);
    let diff: Vec<Tensor> = outs.into_iter().filter(|t| t.dtype().is_float() || t.dtype().is_complex()).collect();
    let with_grad: Vec<Tensor> = diff.iter().filter(|t| t.requires_grad()).cloned().collect();
    if with_grad.len() != g.output_grads.len() {
        if with_grad.len() < g.output_grads.len() {
            return (Status::Unsupported, format!("{} of {} outputs have no grad_fn", g.output_grads.len() - with_grad.len(), g.output_grads.len()));
        }
        return (Status::Failed, format!("{} differentiable outputs, PyTorch has {}", with_grad.len(), g.output_grads.len()));
    }
    let mut gouts = Vec::new();
    for j in &g.output_grads {
        match loader.value(j).map(|v| to_device(v, device)) {
            Ok(Ok(Value::Tensor(t))) => gouts.push(t),
            Ok(Ok(v)) => return (Status::Errored, format!("output grad is a {}", v.kind())),
            Ok(Err(e)) => return (status_of(&e), e.to_string()),
            Err(e) => return (Status::Errored, format!("malformed case data: {e}")),
        }
    }
    let grads = match autograd::grad(&with_grad, wrt, &gouts, false, false, true) {
        Ok(g) => g,
        Err(e) => return (status_of(&e), e.to_string()),
    };
    for (i, (ours, exp)) in grads.iter().zip(&g.expected).enumerate() {
        let exp = match loader.value(exp) {
            Ok(v) => v,
            Err(e) => return (Status::Errored, format!("malformed case data: {e}")),
        };
        match (ours, &exp) {
            (None, Value::None) => {}
            (Some(t), Value::None) => {
                // PyTorch says no gradient flows; an all-zero gradient means the same.
                let zero = t.to_vec::<f64>().map(|v| v.iter().all(|x| *x == 0.0)).unwrap_or(false);
                if !zero {
                    return (Status::Failed, format!("input {i}: a nonzero gradient where PyTorch has none"));
                }
            }
            (None, Value::Tensor(e)) => {
                let zero = e.to_vec::<f64>().map(|v| v.iter().all(|x| *x == 0.0)).unwrap_or(false);
                if !zero {
                    return (Status::Failed, format!("input {i}: no gradient, PyTorch has one"));
                }
            }
            (None, e) => return (Status::Errored, format!("input {i}: expected gradient is a {}", e.kind())),
            (Some(t), e) => {
                if let Err(m) = compare(&Value::Tensor(t.clone()), e, tol, false, &format!("grad[{i}]")) {
                    return (Status::Failed, m);
                }
            }
        }
    }
    (Status::Passed, String::new())
}

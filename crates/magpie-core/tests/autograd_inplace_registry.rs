//! In-place ops called through the registry under autograd (`sin_`, `add_`, `relu(inplace=True)`,
//! `__iadd__`, ...): on non-leaf tensors, with broadcasting and into views, they give PyTorch's
//! gradients; on leaves, views of leaves and outputs of multi-output view functions (`split`,
//! `chunk`, `unbind`, `split_with_sizes`) they raise PyTorch's errors. The programs and PyTorch's
//! results come from fixtures/make_autograd_inplace_registry.py.

use magpie_core::autograd;
use magpie_core::registry::{self, Value};
use magpie_core::Tensor;
use serde_json::Value as Json;
use std::collections::HashMap;

fn fixture() -> Json {
    serde_json::from_str(include_str!("fixtures/autograd_inplace_registry.json")).expect("fixture parses")
}

fn tensor(v: &Json) -> Tensor {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap() as usize).collect();
    let data = v["data"].as_array().unwrap();
    if data.first().is_some_and(|d| d.is_boolean()) {
        let b: Vec<bool> = data.iter().map(|s| s.as_bool().unwrap()).collect();
        return Tensor::from_vec(b, &shape).unwrap();
    }
    let d: Vec<f64> = data.iter().map(|s| s.as_f64().unwrap()).collect();
    Tensor::from_vec(d, &shape).unwrap()
}

/// A JSON argument as a registry value; "$name" is an earlier result.
fn arg(v: &Json, env: &HashMap<String, Value>) -> Value {
    match v {
        Json::Null => Value::None,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) if n.is_i64() => Value::Int(n.as_i64().unwrap()),
        Json::Number(n) => Value::Float(n.as_f64().unwrap()),
        Json::String(s) if s.starts_with('$') => env.get(&s[1..]).unwrap_or_else(|| panic!("no value {s}")).clone(),
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(a) => Value::List(a.iter().map(|x| arg(x, env)).collect()),
        Json::Object(_) => panic!("unexpected argument {v}"),
    }
}

/// Runs a scenario's program: the leaves (name, tensor) and the last step's result.
fn run(s: &Json) -> magpie_core::Result<(Vec<(String, Tensor)>, Tensor)> {
    let constants: Vec<&str> = s["constants"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    let mut env = HashMap::new();
    let mut leaves = Vec::new();
    for (k, v) in s["inputs"].as_object().unwrap() {
        let t = tensor(v);
        if !constants.contains(&k.as_str()) {
            t.requires_grad_(true)?;
            leaves.push((k.clone(), t.clone()));
        }
        env.insert(k.clone(), Value::Tensor(t));
    }
    let mut last = Value::None;
    for step in s["steps"].as_array().unwrap() {
        let op = step[1].as_str().unwrap();
        let args: Vec<Value> = step[2].as_array().unwrap().iter().map(|a| arg(a, &env)).collect();
        let kwargs: Vec<(String, Value)> = step[3].as_object().unwrap().iter().map(|(k, v)| (k.clone(), arg(v, &env))).collect();
        last = match (op, &args[..]) {
            // indexing the list a multi-output op returned
            ("__getitem__", [Value::List(l), Value::Int(i)]) => l[*i as usize].clone(),
            _ => registry::call(op, args, kwargs)?,
        };
        if let Some(name) = step[0].as_str() {
            env.insert(name.to_string(), last.clone());
        }
    }
    match last {
        Value::Tensor(t) => Ok((leaves, t)),
        v => panic!("the program ended with {}", v.kind()),
    }
}

/// Checks one scenario; returns what differs from PyTorch.
fn check(s: &Json) -> Option<String> {
    if let Some(want) = s["error"].as_str() {
        // the first sentence (before any tensor description) must match
        let key = want.split(": [").next().unwrap().split(". Hint").next().unwrap();
        let got = match run(s) {
            Err(e) => Err(("forward", e)),
            Ok((leaves, loss)) => {
                let wrt: Vec<Tensor> = leaves.into_iter().map(|(_, t)| t).collect();
                autograd::grad(&[loss], &wrt, &[], false, false, true).map_err(|e| ("backward", e))
            }
        };
        match got {
            Ok(_) => return Some("no error".into()),
            Err((stage, e)) if !e.to_string().contains(key) || s["error_at"] != stage => {
                return Some(format!("error at {stage}: {e}; PyTorch (at {}) gives {want:?}", s["error_at"]));
            }
            Err(_) => {}
        }
        return None;
    }
    let (leaves, loss) = match run(s) {
        Ok(r) => r,
        Err(e) => return Some(format!("forward: {e}")),
    };
    let rtol = s["rtol"].as_f64().unwrap();
    let l = loss.to_vec::<f64>().unwrap()[0];
    let want_loss = s["loss"].as_f64().unwrap();
    if (l - want_loss).abs() > 1e-9 * (1.0 + want_loss.abs()) {
        return Some(format!("loss {l}, PyTorch gives {want_loss}"));
    }
    let wrt: Vec<Tensor> = leaves.iter().map(|(_, t)| t.clone()).collect();
    let grads = match autograd::grad(&[loss], &wrt, &[], false, false, true) {
        Ok(g) => g,
        Err(e) => return Some(format!("backward: {e}")),
    };
    for ((k, _), g) in leaves.iter().zip(grads) {
        let want = &s["grads"][k];
        match (g, want.is_null()) {
            (None, true) => {}
            (Some(g), false) => {
                let w = tensor(want);
                if g.shape() != w.shape() {
                    return Some(format!("grad of {k}: shape {:?}, PyTorch {:?}", g.shape(), w.shape()));
                }
                let (gv, wv) = (g.to_vec::<f64>().unwrap(), w.to_vec::<f64>().unwrap());
                if gv.iter().zip(&wv).any(|(a, b)| (a - b).abs() > 1e-10 + rtol * b.abs()) {
                    return Some(format!("grad of {k}: {gv:?}, PyTorch {wv:?}"));
                }
            }
            (g, _) => return Some(format!("grad of {k} is {g:?}, PyTorch gives {want}")),
        }
    }
    None
}

/// Runs every scenario whose name starts with one of `prefixes`; fails listing each mismatch.
fn check_all(prefixes: &[&str]) {
    let f = fixture();
    let mut failures = Vec::new();
    let mut n = 0;
    for (name, s) in f["scenarios"].as_object().unwrap() {
        if prefixes.iter().any(|p| name.starts_with(p)) {
            n += 1;
            if let Some(why) = check(s) {
                failures.push(format!("{name}: {why}"));
            }
        }
    }
    assert!(n > 0, "no scenario starts with {prefixes:?}");
    assert!(failures.is_empty(), "{} of {n} scenarios differ from PyTorch:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn unary_in_place_on_non_leaves() {
    check_all(&["unary_", "round_", "act_"]);
}

#[test]
fn binary_in_place_on_non_leaves_with_broadcasting() {
    check_all(&["binary_", "scalar_", "operator_", "ternary_", "masked_fill_", "other_"]);
}

#[test]
fn in_place_into_views_of_non_leaves() {
    check_all(&["view_"]);
}

#[test]
fn errors_like_pytorch() {
    check_all(&["err_"]);
}

#[test]
fn multi_output_views_out_of_place_and_untracked_writes() {
    check_all(&["multi_output_"]);
}

#[test]
fn multi_output_views_may_be_written_without_grad_mode() -> magpie_core::Result<()> {
    let a = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[4])?.requires_grad_(true)?;
    let x = a.mul_scalar(1.0)?;
    let pieces = x.split(2, 0)?;
    assert_eq!(pieces[0].grad_fn().unwrap().name(), "SplitBackward0");
    assert_eq!(x.unbind(0)?[0].grad_fn().unwrap().name(), "UnbindBackward0");
    {
        let _g = autograd::no_grad();
        pieces[1].mul_scalar_(10.0)?;
    }
    assert_eq!(x.to_vec::<f64>()?, vec![1.0, 2.0, 30.0, 40.0]);
    // the pieces' gradients flow back through one Split node
    let l = pieces[0].mul(&pieces[0])?.sum()?;
    let g = autograd::grad(&[l], &[a], &[], false, false, false)?;
    assert_eq!(g[0].as_ref().unwrap().to_vec::<f64>()?, vec![2.0, 4.0, 0.0, 0.0]);
    Ok(())
}

#[test]
fn python_in_place_operators_write_into_self() -> magpie_core::Result<()> {
    let y = Tensor::from_vec(vec![3i64, 5], &[2])?;
    for (op, want) in [("__iand__", [1i64, 4]), ("__ior__", [3, 7]), ("__ixor__", [2, 3]), ("__ilshift__", [8, 192]), ("__irshift__", [0, 0])] {
        let x = Tensor::from_vec(vec![1i64, 6], &[2])?;
        let r = registry::call(op, vec![Value::Tensor(x.clone()), Value::Tensor(y.clone())], vec![])?;
        let Value::Tensor(r) = r else { panic!("{op}: not a tensor") };
        assert_eq!(r.to_vec::<i64>()?, want, "{op}");
        assert_eq!(x.to_vec::<i64>()?, want, "{op} writes into self");
    }
    Ok(())
}

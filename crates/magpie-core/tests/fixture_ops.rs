//! Ops checked against PyTorch's float64 values and gradients (fixtures/make_fixture_ops.py writes
//! the JSON): compact linalg factorizations (geqrf, ormqr, ldl), linalg.polar / matrix_sqrth, the
//! torch.masked statistics, antialiased resampling, attention with its log-sum-exp, max_pool2d's
//! backward, 3-d grid sampling, stft and native_dropout_backward; each is called by name through the registry, as users of
//! the C ABI and the conformance runner call it. Plus the errors PyTorch raises for bad calls.

use magpie_core::autograd;
use magpie_core::registry::{self, Value};
use magpie_core::{DType, Tensor};
use serde_json::Value as Json;

fn fixture() -> Json {
    serde_json::from_str(include_str!("fixtures/fixture_ops.json")).expect("fixture parses")
}

/// A number, or "nan" / "inf" / "-inf" (JSON has no non-finite numbers).
fn float(x: &Json) -> f64 {
    match x.as_str() {
        Some("nan") => f64::NAN,
        Some("inf") => f64::INFINITY,
        Some("-inf") => f64::NEG_INFINITY,
        _ => x.as_f64().unwrap(),
    }
}

fn tensor(v: &Json) -> Tensor {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap() as usize).collect();
    let data = v["data"].as_array().unwrap();
    match v["dtype"].as_str().unwrap() {
        "int64" | "int32" => {
            let t = Tensor::from_vec(data.iter().map(|x| x.as_i64().unwrap()).collect::<Vec<i64>>(), &shape).unwrap();
            if v["dtype"] == "int32" { t.to_dtype(DType::I32).unwrap() } else { t }
        }
        "bool" => Tensor::from_vec(data.iter().map(|x| x.as_bool().unwrap() as i64).collect::<Vec<i64>>(), &shape).unwrap().to_dtype(DType::Bool).unwrap(),
        "float64" => Tensor::from_vec(data.iter().map(float).collect::<Vec<f64>>(), &shape).unwrap(),
        "float32" => Tensor::from_vec(data.iter().map(float).collect::<Vec<f64>>(), &shape).unwrap().to_dtype(DType::F32).unwrap(),
        d => panic!("fixture dtype {d}"),
    }
}

fn value(v: &Json) -> Value {
    match v {
        Json::Null => Value::None,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) if n.is_i64() => Value::Int(n.as_i64().unwrap()),
        Json::Number(n) => Value::Float(n.as_f64().unwrap()),
        Json::String(s) if matches!(s.as_str(), "nan" | "inf" | "-inf") => Value::Float(float(v)),
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(a) => Value::List(a.iter().map(value).collect()),
        Json::Object(o) if o.contains_key("shape") => Value::Tensor(tensor(v)),
        other => panic!("fixture value {other}"),
    }
}

fn outputs(v: Value) -> Vec<Tensor> {
    match v {
        Value::Tensor(t) => vec![t],
        Value::List(l) => l.into_iter().flat_map(outputs).collect(),
        other => panic!("non-tensor output {}", other.kind()),
    }
}

fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    // float32 results (integer inputs) may differ from PyTorch's by the last bits
    let rtol = if want.dtype() == DType::F32 { 1e-6 } else { 1e-8 };
    let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 + rtol * b.abs();
        assert!(ok, "{what}: element {i} is {a}, PyTorch gives {b}");
    }
}

/// Runs every fixture case whose op is in `ops`.
fn run(ops: &[&str]) {
    let f = fixture();
    let mut n = 0;
    for c in f["cases"].as_array().unwrap() {
        let op = c["op"].as_str().unwrap();
        if !ops.contains(&op) {
            continue;
        }
        n += 1;
        let name = c["name"].as_str().unwrap();
        let grads = c.get("grads").and_then(|g| g.as_object());
        let args: Vec<Value> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, a)| match value(a) {
                Value::Tensor(t) if grads.is_some_and(|g| g.contains_key(&i.to_string())) => Value::Tensor(t.requires_grad_(true).unwrap()),
                v => v,
            })
            .collect();
        let kwargs: Vec<(String, Value)> = c["kwargs"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), value(v))).collect();
        let out = outputs(registry::call(op, args.clone(), kwargs).unwrap_or_else(|e| panic!("{name}: {e}")));
        let want: Vec<Tensor> = c["outputs"].as_array().unwrap().iter().map(tensor).collect();
        assert_eq!(out.len(), want.len(), "{name}: number of outputs");
        for (i, (o, w)) in out.iter().zip(&want).enumerate() {
            assert_close(&format!("{name}: output {i}"), o, w);
        }
        let Some(grads) = grads else { continue };
        let diff: Vec<Tensor> = out.iter().filter(|o| o.dtype() == DType::F64 && o.requires_grad()).cloned().collect();
        let ws: Vec<Tensor> = c["weights"].as_array().unwrap().iter().map(tensor).collect();
        assert_eq!(diff.len(), ws.len(), "{name}: differentiable outputs");
        let wrt: Vec<Tensor> = grads.keys().map(|k| match &args[k.parse::<usize>().unwrap()] {
            Value::Tensor(t) => t.clone(),
            _ => panic!("{name}: grad of a non-tensor"),
        }).collect();
        let got = autograd::grad(&diff, &wrt, &ws, false, false, true).unwrap_or_else(|e| panic!("{name}: {e}"));
        for ((k, want), g) in grads.iter().zip(got) {
            match (g, want.is_null()) {
                (Some(g), false) => assert_close(&format!("{name}: grad of arg {k}"), &g, &tensor(want)),
                (None, false) => assert!(tensor(want).to_vec::<f64>().unwrap().iter().all(|v| *v == 0.0), "{name}: no grad of arg {k}, PyTorch has one"),
                (Some(g), true) => assert!(g.to_vec::<f64>().unwrap().iter().all(|v| *v == 0.0), "{name}: a grad of arg {k}, PyTorch has none"),
                (None, true) => {}
            }
        }
    }
    assert!(n > 0, "no fixture cases for {ops:?}");
}

fn err(op: &str, args: Vec<Value>, kwargs: Vec<(&str, Value)>, needle: &str) {
    let kw = kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    match registry::call(op, args, kw) {
        Ok(_) => panic!("{op}: returned a value, PyTorch raises ({needle})"),
        Err(e) => {
            assert!(!e.is_unsupported(), "{op}: {e}");
            assert!(e.to_string().contains(needle), "{op}: {e} does not say {needle:?}");
        }
    }
}

fn t(shape: &[usize]) -> Value {
    let n = shape.iter().product::<usize>();
    Value::Tensor(Tensor::from_vec((0..n).map(|i| (i as f64 * 0.37).sin()).collect::<Vec<f64>>(), shape).unwrap())
}

#[test]
fn compact_qr() {
    run(&["geqrf", "ormqr"]);
    err("geqrf", vec![t(&[3])], vec![], "at least 2 dimensions");
    err("ormqr", vec![t(&[4, 2]), t(&[3]), t(&[4, 4])], vec![], "tau.shape[-1]");
    err("ormqr", vec![t(&[4, 2]), t(&[2]), t(&[3, 4])], vec![], "other.shape[-2]");
}

#[test]
fn ldl() {
    run(&["linalg.ldl_factor", "linalg.ldl_solve"]);
    err("linalg.ldl_factor", vec![t(&[3, 4])], vec![], "square");
    let z = Value::Tensor(Tensor::zeros_on(&[3, 3], DType::F64, magpie_core::Device::Cpu).unwrap());
    err("linalg.ldl_factor", vec![z.clone()], vec![], "singular");
    let info = outputs(registry::call("linalg.ldl_factor_ex", vec![z], vec![]).unwrap());
    assert_eq!(info[2].to_vec::<i32>().unwrap(), vec![1], "ldl_factor_ex reports the zero pivot in info");
    let piv = Value::Tensor(Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap());
    err("linalg.ldl_solve", vec![t(&[3, 3]), piv, t(&[4, 2])], vec![], "Incompatible matrix sizes");
}

#[test]
fn spectral() {
    run(&["linalg.polar", "linalg.matrix_sqrth"]);
    err("linalg.polar", vec![t(&[2, 3])], vec![], "at least as many rows as columns");
    err("linalg.matrix_sqrth", vec![t(&[2, 3])], vec![], "square");
}

#[test]
fn masked_stats() {
    run(&["masked.var", "masked.std", "masked.normalize", "masked.logaddexp", "masked.argmax", "masked.argmin", "masked.logsumexp"]);
    err("masked.var", vec![t(&[3, 4]), Value::Int(1), Value::Bool(true)], vec![("correction", Value::Int(1))], "Only one of unbiased and correction");
}

#[test]
fn antialias() {
    run(&["_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa"]);
    err("_upsample_bilinear2d_aa", vec![t(&[2, 3, 4]), Value::List(vec![Value::Int(2), Value::Int(2)]), Value::Bool(false), Value::None], vec![], "4D");
    let x = t(&[1, 2, 6, 6]);
    let size = Value::List(vec![Value::Int(3), Value::Int(4)]);
    let a = outputs(registry::call("nn.functional.interpolate", vec![x.clone(), size.clone()], vec![("mode".into(), Value::Str("bilinear".into())), ("antialias".into(), Value::Bool(true))]).unwrap());
    let b = outputs(registry::call("_upsample_bilinear2d_aa", vec![x, size, Value::Bool(false), Value::None], vec![]).unwrap());
    assert_close("interpolate(antialias=True)", &a[0], &b[0]);
    err("nn.functional.interpolate", vec![t(&[1, 2, 6]), Value::Int(3)], vec![("mode", Value::Str("linear".into())), ("antialias", Value::Bool(true))], "Anti-alias");
}

#[test]
fn attention_lse() {
    run(&["_scaled_dot_product_flash_attention_for_cpu"]);
    err("_scaled_dot_product_flash_attention_for_cpu", vec![t(&[2, 3, 4]), t(&[2, 3, 4]), t(&[2, 3, 4])], vec![], "4 dims");
}

#[test]
fn max_pool2d_backward() {
    run(&["max_pool2d_with_indices_backward"]);
    let idx = Value::Tensor(Tensor::from_vec(vec![0i64; 4], &[1, 1, 2, 2]).unwrap());
    let k = Value::List(vec![Value::Int(2)]);
    err("max_pool2d_with_indices_backward", vec![t(&[1, 1, 3, 3]), t(&[1, 1, 4, 4]), k, Value::List(vec![]), Value::Int(0), Value::Int(1), Value::Bool(false), idx], vec![], "expected grad_output");
}

#[test]
fn stft_and_dropout_backward() {
    run(&["stft", "native_dropout_backward"]);
    err("stft", vec![t(&[20]), Value::Int(4)], vec![], "return_complex");
    err("stft", vec![t(&[20]), Value::Int(40)], vec![("center", Value::Bool(false)), ("return_complex", Value::Bool(false))], "n_fft");
    err("native_dropout_backward", vec![t(&[3]), t(&[3]), Value::Float(2.0)], vec![], "Bool");
}

#[test]
fn grid_sampler_3d() {
    run(&["grid_sampler_3d"]);
    err("grid_sampler_3d", vec![t(&[1, 1, 2, 2, 2]), t(&[1, 1, 1, 1, 2]), Value::Int(0), Value::Int(0), Value::Bool(false)], vec![], "last dim 3");
}

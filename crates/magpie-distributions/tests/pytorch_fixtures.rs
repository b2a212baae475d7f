//! Values and gradients against PyTorch (tests/fixtures/make_dist_fixtures.py): log_prob,
//! entropy, mean, variance, cdf, icdf and KL of every distribution in float64 and float32,
//! `_standard_gamma_grad` / `_dirichlet_grad`, and PyTorch's validation messages.

mod common;

use common::*;
use magpie_core::{autograd, DType, Tensor};
use magpie_distributions::*;
use serde_json::Value;

fn check_grads(what: &str, out: &Tensor, leaves: &[(String, Tensor)], expected: &Value, rtol: f64, atol: f64) {
    let exp = expected.as_object().unwrap();
    assert_eq!(exp.len(), leaves.len(), "{what}: parameters with gradients");
    if leaves.is_empty() {
        return;
    }
    let inputs: Vec<Tensor> = leaves.iter().map(|(_, t)| t.clone()).collect();
    let gs = autograd::grad(&[out.sum().unwrap()], &inputs, &[], true, false, true).unwrap_or_else(|e| panic!("{what}: backward: {e}"));
    for ((name, t), g) in leaves.iter().zip(gs) {
        let g = g.unwrap_or_else(|| t.zeros_like().unwrap());
        assert_close(&format!("{what} d/d {name}"), &g, &exp[name], rtol, atol);
    }
}

fn dtype_of(name: &str) -> DType {
    if name == "float64" {
        DType::F64
    } else {
        DType::F32
    }
}

#[test]
fn distributions_match_pytorch() {
    let fx = load();
    let mut checked = 0;
    for dname in ["float64", "float32"] {
        let dtype = dtype_of(dname);
        let (rtol, atol) = tolerances(dtype);
        // gradients pass through more ops: a looser bound in float32
        let (grtol, gatol) = if dtype == DType::F64 { (1e-7, 1e-9) } else { (1e-3, 1e-4) };
        for case in fx[dname]["cases"].as_array().unwrap() {
            let name = format!("{dname} {}", case["name"].as_str().unwrap());
            let mut leaves = Vec::new();
            let d = build(&case["spec"], dtype, "", &mut leaves).unwrap_or_else(|e| panic!("{name}: {e}"));
            let value = tensor(&case["value"], dtype);
            let lp = d.log_prob(&value).unwrap_or_else(|e| panic!("{name}: log_prob: {e}"));
            assert_close(&format!("{name} log_prob"), &lp, &case["log_prob"], rtol, atol);
            check_grads(&format!("{name} log_prob"), &lp, &leaves, &case["grad_log_prob"], grtol, gatol);
            if case.get("entropy").is_some() {
                let h = d.entropy().unwrap_or_else(|e| panic!("{name}: entropy: {e}"));
                assert_close(&format!("{name} entropy"), &h, &case["entropy"], rtol, atol);
                check_grads(&format!("{name} entropy"), &h, &leaves, &case["grad_entropy"], grtol, gatol);
            }
            for (key, f) in [("mean", d.mean()), ("variance", d.variance())] {
                match (case.get(key), f) {
                    (Some(exp), Ok(t)) => assert_close(&format!("{name} {key}"), &t, exp, rtol, atol),
                    (Some(_), Err(e)) => panic!("{name}: {key}: {e}"),
                    (None, _) => {}
                }
            }
            if let Some(exp) = case.get("cdf") {
                let c = d.cdf(&value).unwrap_or_else(|e| panic!("{name}: cdf: {e}"));
                assert_close(&format!("{name} cdf"), &c, exp, rtol, atol);
                if let Some(g) = case.get("grad_cdf") {
                    check_grads(&format!("{name} cdf"), &c, &leaves, g, grtol, gatol);
                }
            }
            if let Some(exp) = case.get("icdf") {
                let q = tensor(&case["icdf_q"], dtype);
                let x = d.icdf(&q).unwrap_or_else(|e| panic!("{name}: icdf: {e}"));
                assert_close(&format!("{name} icdf"), &x, exp, rtol, atol);
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * 36);
}

#[test]
fn kl_divergences_match_pytorch() {
    let fx = load();
    for dname in ["float64", "float32"] {
        let dtype = dtype_of(dname);
        let (rtol, atol) = tolerances(dtype);
        let (grtol, gatol) = if dtype == DType::F64 { (1e-7, 1e-9) } else { (1e-3, 1e-4) };
        for case in fx[dname]["kl"].as_array().unwrap() {
            let name = format!("{dname} KL({} || {})", case["p"]["type"].as_str().unwrap(), case["q"]["type"].as_str().unwrap());
            let mut leaves = Vec::new();
            let p = build(&case["p"], dtype, "p.", &mut leaves).unwrap();
            let q = build(&case["q"], dtype, "q.", &mut leaves).unwrap();
            let kl = kl_divergence(p.as_ref(), q.as_ref()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_close(&name, &kl, &case["kl"], rtol, atol);
            // PyTorch's gradients with infinite entries masked to 0
            let finite = kl.isinf().unwrap().where_(&kl.zeros_like().unwrap(), &kl).unwrap();
            if finite.requires_grad() {
                check_grads(&name, &finite, &leaves, &case["grads"], grtol, gatol);
            } else {
                for (n, _) in &leaves {
                    assert!(data(&case["grads"][n]).iter().all(|&g| g == 0.0), "{name}: PyTorch has a gradient for {n}");
                }
            }
        }
    }
}

#[test]
fn standard_gamma_grad_matches_pytorch() {
    let fx = load();
    let g = &fx["standard_gamma_grad"];
    let ours = standard_gamma_grad(&tensor(&g["alpha"], DType::F64), &tensor(&g["x"], DType::F64)).unwrap();
    assert_close("_standard_gamma_grad", &ours, &g["grad"], 1e-10, 1e-12);
    let d = &fx["dirichlet_grad"];
    let ours = dirichlet_grad(&tensor(&d["x"], DType::F64), &tensor(&d["alpha"], DType::F64), &tensor(&d["total"], DType::F64)).unwrap();
    assert_close("_dirichlet_grad", &ours, &d["grad"], 1e-10, 1e-12);
}

#[test]
fn validation_errors_match_pytorch() {
    let fx = load();
    for case in fx["errors"].as_array().unwrap() {
        let expected = case["error"].as_str().unwrap();
        let mut leaves = Vec::new();
        let err = match build(&case["spec"], DType::F64, "", &mut leaves) {
            Err(e) => e,
            Ok(d) => {
                let v = tensor(&case["value"], DType::F64);
                match d.log_prob(&v) {
                    Err(e) => e,
                    Ok(_) => panic!("no error; PyTorch: {expected}"),
                }
            }
        };
        let msg = match &err {
            magpie_core::Error::Value { msg, .. } => msg.clone(),
            other => panic!("wrong kind of error {other}; PyTorch: {expected}"),
        };
        // the message up to the offending values (tensor printing is checked elsewhere)
        let cut = |s: &str| s.split(":\n").next().unwrap_or(s).to_string();
        assert_eq!(cut(&msg), cut(expected));
    }
}

//! SparseAdam on Embedding(sparse=True) against PyTorch (tests/fixtures/sparse_adam.json, written by
//! make_sparse_adam.py): five steps with repeated rows, rows untouched for some steps and one never
//! touched, float32 and float64, maximize and a padding row; the final moments and step count. A dense
//! gradient is PyTorch's error; configuration errors use its messages.

use magpie_core::{DType, Tensor};
use magpie_nn::{Embedding, Module};
use magpie_optim::{Optimizer, SparseAdam, SparseAdamConfig};
use serde_json::Value;

fn fixture() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sparse_adam.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}[{i}]: {a} vs PyTorch {b}");
    }
}

#[test]
fn sparse_adam_matches_pytorch_over_steps() {
    let fx = fixture();
    for c in fx["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let dtype = if c["dtype"] == "float32" { DType::F32 } else { DType::F64 };
        let tol = if dtype == DType::F32 { 2e-6 } else { 1e-12 };
        let w = Tensor::from_vec(f64s(&c["init"]), &[6, 3]).unwrap().to_dtype(dtype).unwrap().with_requires_grad().unwrap();
        let emb = Embedding::from_weight(w, c["padding_idx"].as_i64()).unwrap().with_sparse(true);
        let cfg = &c["config"];
        let d = SparseAdamConfig::default();
        let betas = cfg.get("betas").map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap())).unwrap_or(d.betas);
        let config = SparseAdamConfig {
            lr: cfg["lr"].as_f64().unwrap(),
            betas,
            eps: cfg.get("eps").and_then(|e| e.as_f64()).unwrap_or(d.eps),
            maximize: cfg.get("maximize").and_then(|e| e.as_bool()).unwrap_or(false),
        };
        let mut opt = SparseAdam::new(vec![emb.weight.clone()], config).unwrap();
        let untouched_before: Vec<f64> = emb.weight.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()[15..18].to_vec();
        for (k, st) in c["steps"].as_array().unwrap().iter().enumerate() {
            let idx: Vec<i64> = st["idx"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
            let n = idx.len();
            let coef = Tensor::from_vec(f64s(&st["C"]), &[n, 3]).unwrap().to_dtype(dtype).unwrap();
            opt.zero_grad();
            emb.forward(&Tensor::from_vec(idx, &[n]).unwrap()).unwrap().mul(&coef).unwrap().sum().unwrap().backward().unwrap();
            assert!(emb.weight.grad().is_none(), "{name}: the gradient is sparse");
            opt.step().unwrap();
            let got: Vec<f64> = emb.weight.to_dtype(DType::F64).unwrap().to_vec().unwrap();
            close(&format!("{name} step {k}: weight"), &got, &f64s(&st["weight"]), tol);
        }
        // row 5 was never looked up: neither moved nor given moments
        let got: Vec<f64> = emb.weight.to_dtype(DType::F64).unwrap().to_vec().unwrap();
        assert_eq!(&got[15..18], untouched_before.as_slice(), "{name}: untouched row");
        let (tensors, json) = opt.state_dict().unwrap();
        let get = |k: &str| -> Vec<f64> { tensors.iter().find(|(n, _)| n == &format!("state.0.{k}")).unwrap().1.to_dtype(DType::F64).unwrap().to_vec().unwrap() };
        close(&format!("{name}: exp_avg"), &get("exp_avg"), &f64s(&c["exp_avg"]), tol);
        close(&format!("{name}: exp_avg_sq"), &get("exp_avg_sq"), &f64s(&c["exp_avg_sq"]), tol);
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["state"]["0"]["step"].as_f64().unwrap(), c["step"].as_f64().unwrap(), "{name}: step count");
    }
}

#[test]
fn dense_gradient_is_pytorchs_error() {
    let w = Tensor::from_vec(vec![1f32, 2., 3.], &[3]).unwrap().with_requires_grad().unwrap();
    let mut opt = SparseAdam::new(vec![w.clone()], SparseAdamConfig::default()).unwrap();
    w.mul(&w).unwrap().sum().unwrap().backward().unwrap();
    let e = opt.step().unwrap_err().to_string();
    assert!(e.contains("SparseAdam does not support dense gradients, please consider Adam instead"), "{e}");
    // a dense Embedding feeds a dense gradient: the same error
    let emb = Embedding::new(4, 2, None).unwrap();
    let mut opt = SparseAdam::new(vec![emb.weight.clone()], SparseAdamConfig::default()).unwrap();
    emb.forward(&Tensor::from_vec(vec![1i64], &[1]).unwrap()).unwrap().sum().unwrap().backward().unwrap();
    assert!(opt.step().is_err());
}

#[test]
fn config_errors_are_pytorchs() {
    let p = || vec![Tensor::zeros(&[2]).unwrap().with_requires_grad().unwrap()];
    let d = SparseAdamConfig::default();
    let err = |c: SparseAdamConfig| SparseAdam::new(p(), c).err().unwrap().to_string();
    assert!(err(SparseAdamConfig { lr: -1.0, ..d.clone() }).contains("Invalid learning rate: -1"));
    assert!(err(SparseAdamConfig { eps: -1.0, ..d.clone() }).contains("Invalid epsilon value: -1"));
    assert!(err(SparseAdamConfig { betas: (1.0, 0.9), ..d.clone() }).contains("Invalid beta parameter at index 0: 1"));
    assert!(err(SparseAdamConfig { betas: (0.9, 1.0), ..d }).contains("Invalid beta parameter at index 1: 1"));
}

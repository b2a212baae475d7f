//! Shared by the tests: fixture tensors, building a distribution from a fixture spec, comparisons.

#![allow(dead_code)]

use std::sync::Arc;

use magpie_core::{DType, Result, Tensor};
use magpie_distributions::*;
use serde_json::Value;

pub fn load() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dist_fixtures.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture file")).expect("fixture json")
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        v => v.as_f64().expect("number"),
    }
}

pub fn shape(v: &Value) -> Vec<usize> {
    v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

pub fn data(v: &Value) -> Vec<f64> {
    v["data"].as_array().unwrap().iter().map(num).collect()
}

pub fn tensor(v: &Value, dtype: DType) -> Tensor {
    Tensor::from_vec(data(v), &shape(v)).unwrap().to_dtype(dtype).unwrap()
}

/// Builds the distribution of a fixture spec; leaf parameters that PyTorch differentiated are
/// pushed on `leaves` under the fixture's names (`base.loc`, ...).
pub fn build(spec: &Value, dtype: DType, prefix: &str, leaves: &mut Vec<(String, Tensor)>) -> Result<Box<dyn Distribution>> {
    let grad: Vec<String> = spec["grad"].as_array().map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect()).unwrap_or_default();
    let mut params = std::collections::HashMap::new();
    if let Some(ps) = spec["params"].as_object() {
        for (k, v) in ps {
            let mut t = tensor(v, dtype);
            if grad.contains(k) {
                t = t.with_requires_grad()?;
                leaves.push((format!("{prefix}{k}"), t.clone()));
            }
            params.insert(k.clone(), t);
        }
    }
    let p = |k: &str| params.get(k).cloned();
    let need = |k: &str| params.get(k).cloned().expect(k);
    let ty = spec["type"].as_str().unwrap();
    Ok(match ty {
        "Normal" => Box::new(Normal::new(&need("loc"), &need("scale"))?),
        "Laplace" => Box::new(Laplace::new(&need("loc"), &need("scale"))?),
        "Uniform" => Box::new(Uniform::new(&need("low"), &need("high"))?),
        "Exponential" => Box::new(Exponential::new(&need("rate"))?),
        "Gamma" => Box::new(Gamma::new(&need("concentration"), &need("rate"))?),
        "Beta" => Box::new(Beta::new(&need("concentration1"), &need("concentration0"))?),
        "Dirichlet" => Box::new(Dirichlet::new(&need("concentration"))?),
        "StudentT" => Box::new(StudentT::new(&need("df"), &need("loc"), &need("scale"))?),
        "Poisson" => Box::new(Poisson::new(&need("rate"))?),
        "Binomial" => Box::new(Binomial::new(&need("total_count"), p("probs").as_ref(), p("logits").as_ref())?),
        "Bernoulli" => Box::new(Bernoulli::new(p("probs").as_ref(), p("logits").as_ref())?),
        "Categorical" => Box::new(Categorical::new(p("probs").as_ref(), p("logits").as_ref())?),
        "OneHotCategorical" => Box::new(OneHotCategorical::new(p("probs").as_ref(), p("logits").as_ref())?),
        "LogNormal" => Box::new(LogNormal::new(&need("loc"), &need("scale"))?),
        "MultivariateNormal" => Box::new(MultivariateNormal::new(
            &need("loc"),
            p("covariance_matrix").as_ref(),
            p("precision_matrix").as_ref(),
            p("scale_tril").as_ref(),
        )?),
        "Independent" => {
            let base = build(&spec["base"], dtype, &format!("{prefix}base."), leaves)?;
            Box::new(Independent::new(base, spec["ndims"].as_u64().unwrap() as usize)?)
        }
        "MixtureSameFamily" => {
            let mix = build(&spec["mixture"], dtype, &format!("{prefix}mixture."), leaves)?;
            let mix = mix.as_any().downcast_ref::<Categorical>().unwrap().clone();
            let comp = build(&spec["component"], dtype, &format!("{prefix}component."), leaves)?;
            Box::new(MixtureSameFamily::new(mix, comp)?)
        }
        "TransformedDistribution" => {
            let base = build(&spec["base"], dtype, &format!("{prefix}base."), leaves)?;
            let mut ts: Vec<Arc<dyn Transform>> = Vec::new();
            for t in spec["transforms"].as_array().unwrap() {
                ts.push(match t["type"].as_str().unwrap() {
                    "Exp" => Arc::new(ExpTransform),
                    "Sigmoid" => Arc::new(SigmoidTransform),
                    "Tanh" => Arc::new(TanhTransform),
                    "Affine" => Arc::new(AffineTransform::new(&tensor(&t["loc"], dtype), &tensor(&t["scale"], dtype), t["event_dim"].as_u64().unwrap() as usize)),
                    "Power" => Arc::new(PowerTransform { exponent: tensor(&t["exponent"], dtype) }),
                    other => panic!("transform {other}"),
                });
            }
            Box::new(TransformedDistribution::new(base, ts)?)
        }
        other => panic!("distribution {other}"),
    })
}

/// Elementwise closeness with NaN = NaN and equal infinities; panics with the context.
pub fn assert_close(what: &str, ours: &Tensor, theirs: &Value, rtol: f64, atol: f64) {
    let s = shape(theirs);
    assert_eq!(ours.shape(), &s[..], "{what}: shape");
    let a = ours.to_f64_vec().unwrap();
    let b = data(theirs);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let ok = if y.is_nan() {
            x.is_nan()
        } else if y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        };
        assert!(ok, "{what}: element {i}: ours {x}, PyTorch {y}\n ours {a:?}\n torch {b:?}");
    }
}

pub fn tolerances(dtype: DType) -> (f64, f64) {
    if dtype == DType::F64 {
        (1e-8, 1e-10)
    } else {
        (2e-4, 2e-5)
    }
}

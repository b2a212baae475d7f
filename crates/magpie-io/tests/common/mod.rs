//! Tensors shared by the safetensors tests and the fixture writer.

use magpie_core::{DType, Tensor};

/// The tensors `make_fixtures.py` writes, built the same way on our side.
pub fn fixture_tensors() -> Vec<(String, Tensor)> {
    let base: Vec<f64> = vec![-1.5, 0.0, 0.25, 2.0, 3.75, -7.0];
    let mut v = Vec::new();
    for (name, d) in [
        ("f32", DType::F32),
        ("f64", DType::F64),
        ("f16", DType::F16),
        ("bf16", DType::BF16),
        ("i64", DType::I64),
        ("i32", DType::I32),
        ("i16", DType::I16),
        ("i8", DType::I8),
        ("u8", DType::U8),
        ("bool", DType::Bool),
        ("f8e4m3", DType::F8E4M3),
        ("f8e5m2", DType::F8E5M2),
    ] {
        let t = Tensor::from_vec(base.clone(), &[2, 3]).unwrap().to_dtype(d).unwrap();
        v.push((name.to_string(), t));
    }
    v.push(("empty".to_string(), Tensor::zeros(&[0, 4]).unwrap()));
    v.push(("scalar".to_string(), Tensor::scalar(42.0f32)));
    v
}


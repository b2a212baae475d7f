//! Turns manifest JSON values into registry `Value`s, reading tensors from `cases.safetensors`.

use magpie_core::registry::Value;
use magpie_core::{DType, Tensor};
use safetensors::{Dtype as StDtype, SafeTensors};
use serde_json::Value as Json;
use std::collections::HashMap;

/// The tensors of one folder, and a cache so one key gives one tensor per case (aliasing).
pub struct Loader<'a> {
    st: SafeTensors<'a>,
    case_tensors: HashMap<String, Tensor>,
}

impl<'a> Loader<'a> {
    /// Parses a safetensors buffer.
    pub fn new(bytes: &'a [u8]) -> Result<Self, String> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| format!("malformed cases.safetensors: {e}"))?;
        Ok(Loader { st, case_tensors: HashMap::new() })
    }
    /// Forgets the previous case's tensors (each case gets fresh copies; in-place ops mutate them).
    pub fn start_case(&mut self) {
        self.case_tensors.clear();
    }
    /// The tensor stored under `key`, the same handle for repeated keys within a case.
    pub fn tensor(&mut self, key: &str) -> Result<Tensor, String> {
        if let Some(t) = self.case_tensors.get(key) {
            return Ok(t.clone());
        }
        let view = self.st.tensor(key).map_err(|_| format!("tensor key '{key}' is missing from cases.safetensors"))?;
        let shape = view.shape().to_vec();
        let data = view.data();
        let t = decode(view.dtype(), data, &shape).map_err(|e| format!("tensor '{key}': {e}"))?;
        self.case_tensors.insert(key.to_string(), t.clone());
        Ok(t)
    }
    /// Converts a manifest VALUE.
    pub fn value(&mut self, j: &Json) -> Result<Value, String> {
        Ok(match j {
            Json::Null => Value::None,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else {
                    Value::Float(n.as_f64().ok_or_else(|| format!("unreadable number {n}"))?)
                }
            }
            Json::String(s) => Value::Str(s.clone()),
            Json::Array(a) => Value::List(a.iter().map(|x| self.value(x)).collect::<Result<_, _>>()?),
            Json::Object(o) => {
                if let Some(Json::String(k)) = o.get("tensor") {
                    Value::Tensor(self.tensor(k)?)
                } else if let Some(Json::String(f)) = o.get("float") {
                    Value::Float(match f.as_str() {
                        "nan" => f64::NAN,
                        "inf" => f64::INFINITY,
                        "-inf" => f64::NEG_INFINITY,
                        other => return Err(format!("unknown float literal '{other}'")),
                    })
                } else if let Some(Json::String(d)) = o.get("dtype") {
                    Value::DType(DType::parse(d).map_err(|e| e.to_string())?)
                } else if let Some(Json::Array(s)) = o.get("slice") {
                    let g = |i: usize| s.get(i).and_then(|v| v.as_i64());
                    Value::Slice(g(0), g(1), g(2))
                } else if o.contains_key("ellipsis") {
                    Value::Ellipsis
                } else if let Some(Json::String(m)) = o.get("memory_format") {
                    Value::MemoryFormat(m.clone())
                } else {
                    return Err(format!("unknown value form {j}"));
                }
            }
        })
    }
}

fn decode(dt: StDtype, data: &[u8], shape: &[usize]) -> Result<Tensor, String> {
    fn conv<T: magpie_core::Element, const N: usize>(data: &[u8], f: fn([u8; N]) -> T, shape: &[usize]) -> Result<Tensor, String> {
        if data.len() % N != 0 {
            return Err("byte length is not a multiple of the element size".into());
        }
        let v: Vec<T> = data.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect();
        Tensor::from_vec(v, shape).map_err(|e| e.to_string())
    }
    match dt {
        StDtype::F32 => conv(data, f32::from_le_bytes, shape),
        StDtype::F64 => conv(data, f64::from_le_bytes, shape),
        StDtype::I64 => conv(data, i64::from_le_bytes, shape),
        StDtype::I32 => conv(data, i32::from_le_bytes, shape),
        StDtype::I16 => conv(data, i16::from_le_bytes, shape),
        StDtype::I8 => conv(data, |b: [u8; 1]| b[0] as i8, shape),
        StDtype::U8 => conv(data, |b: [u8; 1]| b[0], shape),
        StDtype::BOOL => conv(data, |b: [u8; 1]| b[0] != 0, shape),
        StDtype::F16 => conv(data, |b: [u8; 2]| magpie_core::half::f16::from_le_bytes(b), shape),
        StDtype::BF16 => conv(data, |b: [u8; 2]| magpie_core::half::bf16::from_le_bytes(b), shape),
        other => Err(format!("unsupported safetensors dtype {other:?}")),
    }
}

//! The writer: GGUF v3 files with metadata of every value type and tensors given as f32 data
//! (stored as F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or Q4_K) or as already-encoded
//! blocks of any supported type, each tensor's data aligned to `general.alignment` (default 32) as
//! gguf-py's `GGUFWriter` lays it out.

use super::cursor::err;
use super::quant;
use super::read::{DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS};
use super::types::GgmlType;
use super::value::{Value, ValueType};
use magpie_core::{DType, Result, Tensor};
use std::collections::HashSet;
use std::path::Path;

struct PendingTensor {
    name: String,
    ne: Vec<u64>,
    ty: GgmlType,
    data: Vec<u8>,
}

/// Collects metadata and tensors, then writes them as one GGUF v3 file.
///
/// ```
/// use magpie_core::Tensor;
/// use magpie_io::gguf::{GgmlType, GgufFile, GgufWriter};
/// let mut w = GgufWriter::new();
/// w.add("general.architecture", "llama")?;
/// w.add_tensor("w", &Tensor::from_vec(vec![0.5f32; 64], &[2, 32])?, GgmlType::Q8_0)?;
/// let f = GgufFile::from_bytes(w.to_bytes()?)?;
/// assert_eq!(f.get("general.architecture").and_then(|v| v.as_str()), Some("llama"));
/// assert_eq!(f.tensor_f32("w")?.shape(), &[2, 32]);
/// # Ok::<(), magpie_core::Error>(())
/// ```
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

fn check_value(key: &str, v: &Value, depth: usize) -> Result<()> {
    if let Value::Array(a) = v {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(err(format!("key '{key}': arrays nested deeper than {MAX_ARRAY_DEPTH} levels")));
        }
        for item in &a.items {
            if item.value_type() != a.elem_type {
                return Err(err(format!(
                    "key '{key}': array of {} holds a {}",
                    a.elem_type,
                    item.value_type()
                )));
            }
            check_value(key, item, depth + 1)?;
        }
    }
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_bits().to_le_bytes()),
        Value::Bool(x) => out.push(*x as u8),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => {
            out.extend_from_slice(&a.elem_type.tag().to_le_bytes());
            out.extend_from_slice(&(a.items.len() as u64).to_le_bytes());
            for item in &a.items {
                put_value(out, item);
            }
        }
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_bits().to_le_bytes()),
    }
}

fn pad_to(out: &mut Vec<u8>, alignment: u64) {
    let a = alignment as usize;
    out.resize(out.len().div_ceil(a) * a, 0);
}

impl GgufWriter {
    /// An empty writer.
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    /// Adds a metadata key (keys must be unique; `general.alignment` must be a UINT32 power of
    /// two; array items must have the array's element type).
    pub fn add(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Result<()> {
        let key = key.into();
        let value = value.into();
        if self.metadata.iter().any(|(k, _)| *k == key) {
            return Err(err(format!("duplicate key '{key}'")));
        }
        if key == "general.alignment" {
            match value {
                Value::U32(a) if a.is_power_of_two() => {}
                _ => return Err(err(format!("general.alignment must be a UINT32 power of two, got {value:?}"))),
            }
        }
        check_value(&key, &value, 0)?;
        self.metadata.push((key, value));
        Ok(())
    }

    fn alignment(&self) -> u64 {
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) => *a as u64,
            _ => DEFAULT_ALIGNMENT,
        }
    }

    /// Adds a tensor from its values, stored as `ty` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
    /// Q5_1 or Q4_K). The shape
    /// is row-major (the file's `ne` is it reversed); a 0-d tensor is written with ne = [1].
    pub fn add_tensor(&mut self, name: impl Into<String>, t: &Tensor, ty: GgmlType) -> Result<()> {
        let name = name.into();
        let mut ne: Vec<u64> = t.shape().iter().rev().map(|&n| n as u64).collect();
        if ne.is_empty() {
            ne.push(1);
        }
        let x = t.to_dtype(DType::F32)?.to_vec::<f32>()?;
        if !ne[0].is_multiple_of(ty.block_size() as u64) {
            return Err(err(format!(
                "tensor '{name}': row length {} is not a multiple of the {ty} block size {}",
                ne[0],
                ty.block_size()
            )));
        }
        let data = quant::quantize(ty, &x).map_err(|e| err(format!("tensor '{name}': {e}")))?;
        self.add_raw(name, ty, &ne, data)
    }

    /// Adds a tensor as already-encoded blocks of `ty` with ggml dimensions `ne` (fastest
    /// first); `data` must be exactly the bytes that shape takes.
    pub fn add_raw(&mut self, name: impl Into<String>, ty: GgmlType, ne: &[u64], data: Vec<u8>) -> Result<()> {
        let name = name.into();
        if ne.is_empty() || ne.len() > MAX_DIMS {
            return Err(err(format!("tensor '{name}' has {} dimensions; must be 1..={MAX_DIMS}", ne.len())));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(err(format!("duplicate tensor name '{name}'")));
        }
        if !ne[0].is_multiple_of(ty.block_size() as u64) {
            return Err(err(format!(
                "tensor '{name}': row length {} is not a multiple of the {ty} block size {}",
                ne[0],
                ty.block_size()
            )));
        }
        let n = ne.iter().try_fold(1u64, |a, &x| a.checked_mul(x));
        let need = n.and_then(|n| ty.bytes_for(n));
        if need != Some(data.len() as u64) {
            return Err(err(format!("tensor '{name}': shape {ne:?} of {ty} needs {need:?} bytes, got {}", data.len())));
        }
        self.tensors.push(PendingTensor { name, ne: ne.to_vec(), ty, data });
        Ok(())
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let alignment = self.alignment();
        let mut names = HashSet::new();
        for t in &self.tensors {
            if !names.insert(t.name.as_str()) {
                return Err(err(format!("duplicate tensor name '{}'", t.name)));
            }
        }
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend_from_slice(&v.value_type().tag().to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
            for &n in &t.ne {
                out.extend_from_slice(&n.to_le_bytes());
            }
            out.extend_from_slice(&t.ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset += (t.data.len() as u64).div_ceil(alignment) * alignment;
        }
        pad_to(&mut out, alignment);
        for t in &self.tensors {
            out.extend_from_slice(&t.data);
            pad_to(&mut out, alignment);
        }
        Ok(out)
    }

    /// Writes the file to `path` atomically (temp file, fsync, rename).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::atomic::write_atomic(path.as_ref(), &self.to_bytes()?)
    }
}

/// An array value of `elem_type` built from items convertible to [`Value`]
/// (`array_of(ValueType::F32, [0.5f32, 1.0])`).
pub fn array_of<T: Into<Value>>(elem_type: ValueType, items: impl IntoIterator<Item = T>) -> Value {
    Value::array(elem_type, items.into_iter().map(Into::into).collect())
}

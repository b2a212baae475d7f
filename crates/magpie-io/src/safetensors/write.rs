//! The writer: header entries in the given order, data aligned as the Python package does
//! (header padded with spaces to a multiple of 8 bytes).

use super::dtype;
use magpie_core::{Error, Result, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

/// Serializes named tensors (and optional metadata) to safetensors bytes.
pub fn serialize(tensors: &[(String, Tensor)], metadata: Option<&BTreeMap<String, String>>) -> Result<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    let mut header = serde_json::Map::new();
    if let Some(m) = metadata {
        header.insert("__metadata__".into(), serde_json::to_value(m).map_err(|e| Error::io("save", e.to_string()))?);
    }
    let mut blobs = Vec::with_capacity(tensors.len());
    let mut pos = 0usize;
    for (name, t) in tensors {
        if name == "__metadata__" || !seen.insert(name.as_str()) {
            return Err(Error::io("save", format!("duplicate or reserved tensor name '{name}'")));
        }
        let bytes = dtype::encode(t)?;
        let entry = serde_json::json!({
            "dtype": dtype::name(t.dtype())?,
            "shape": t.shape(),
            "data_offsets": [pos, pos + bytes.len()],
        });
        pos += bytes.len();
        header.insert(name.clone(), entry);
        blobs.push(bytes);
    }
    // serde_json::Map keeps keys sorted; offsets follow the given order, which the reader accepts.
    let mut h = serde_json::to_string(&header).map_err(|e| Error::io("save", e.to_string()))?;
    while (8 + h.len()) % 8 != 0 {
        h.push(' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + pos);
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for b in blobs {
        out.extend_from_slice(&b);
    }
    Ok(out)
}

/// Saves named tensors to `path` atomically (temp file, fsync, rename).
pub fn save(tensors: &[(String, Tensor)], metadata: Option<&BTreeMap<String, String>>, path: impl AsRef<Path>) -> Result<()> {
    let bytes = serialize(tensors, metadata)?;
    crate::atomic::write_atomic(path.as_ref(), &bytes)
}

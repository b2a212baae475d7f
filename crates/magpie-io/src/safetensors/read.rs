//! The validating reader. Checks, in order: the length prefix, the header's size and JSON,
//! each entry (known dtype, shape, offsets, byte size without overflow), duplicate names, and
//! that the entries tile the data area exactly (no gap, overlap or trailing bytes).

use super::dtype;
use crate::mapped::{self, FileMap, Owner};
use magpie_core::storage::StableBytes;
use magpie_core::{DType, Error, Result, Tensor};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A loaded file: tensors in file order and the optional `__metadata__` strings.
#[derive(Debug)]
pub struct Loaded {
    pub tensors: Vec<(String, Tensor)>,
    pub metadata: BTreeMap<String, String>,
}

impl Loaded {
    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

/// The largest header we accept (the Python package's limit).
const MAX_HEADER: u64 = 100 * 1024 * 1024;

fn err(msg: impl Into<String>) -> Error {
    Error::io("safetensors", msg)
}

/// A JSON object read with its keys in order, duplicates kept (so they can be rejected).
struct Entries(Vec<(String, Json)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Entries, A::Error> {
                let mut v = Vec::new();
                while let Some((k, val)) = m.next_entry::<String, Json>()? {
                    v.push((k, val));
                }
                Ok(Entries(v))
            }
        }
        d.deserialize_map(V)
    }
}

struct Entry {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    begin: usize,
    end: usize,
}

fn parse_entry(name: &str, v: &Json) -> Result<Entry> {
    let o = v.as_object().ok_or_else(|| err(format!("entry '{name}' is not an object")))?;
    for k in o.keys() {
        if !matches!(k.as_str(), "dtype" | "shape" | "data_offsets") {
            return Err(err(format!("entry '{name}' has an unknown field '{k}'")));
        }
    }
    let dt = o.get("dtype").and_then(|d| d.as_str()).ok_or_else(|| err(format!("entry '{name}' has no dtype")))?;
    let dtype = dtype::parse(dt).map_err(|e| err(format!("entry '{name}': {}", e.to_string().trim_start_matches("[safetensors] "))))?;
    let shape = o
        .get("shape")
        .and_then(|s| s.as_array())
        .ok_or_else(|| err(format!("entry '{name}' has no shape list")))?
        .iter()
        .map(|x| x.as_u64().and_then(|u| usize::try_from(u).ok()))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| err(format!("entry '{name}' has a shape that is not a list of non-negative integers")))?;
    let offs = o
        .get("data_offsets")
        .and_then(|s| s.as_array())
        .filter(|a| a.len() == 2)
        .ok_or_else(|| err(format!("entry '{name}' needs data_offsets [begin, end]")))?;
    let off = |i: usize| offs[i].as_u64().and_then(|u| usize::try_from(u).ok());
    let (begin, end) = match (off(0), off(1)) {
        (Some(b), Some(e)) => (b, e),
        _ => return Err(err(format!("entry '{name}' has data_offsets that are not non-negative integers"))),
    };
    if begin > end {
        return Err(err(format!("entry '{name}' has data_offsets [{begin}, {end}] with begin after end")));
    }
    let nbytes = shape
        .iter()
        .try_fold(dtype.size(), |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| err(format!("entry '{name}': shape {shape:?} overflows the size computation")))?;
    if nbytes != end - begin {
        return Err(err(format!(
            "entry '{name}': shape {shape:?} of {} needs {nbytes} bytes but data_offsets span {}",
            dtype.name(),
            end - begin
        )));
    }
    Ok(Entry { name: name.to_string(), dtype, shape, begin, end })
}

/// A validated header: the entries in file order, the metadata, and where the data area starts.
struct Header {
    entries: Vec<Entry>,
    metadata: BTreeMap<String, String>,
    data_start: usize,
}

/// Parses and validates the header of a safetensors buffer against the buffer's length.
fn parse_header(bytes: &[u8]) -> Result<Header> {
    if bytes.len() < 8 {
        return Err(err(format!("file is {} bytes, too short for the 8-byte header length", bytes.len())));
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&bytes[..8]);
    let hlen = u64::from_le_bytes(n);
    if hlen > MAX_HEADER {
        return Err(err(format!("header length {hlen} is larger than the {MAX_HEADER}-byte limit")));
    }
    let hlen = hlen as usize;
    if 8 + hlen > bytes.len() {
        return Err(err(format!("header length {hlen} goes past the end of the file ({} bytes)", bytes.len())));
    }
    let header = std::str::from_utf8(&bytes[8..8 + hlen]).map_err(|_| err("header is not valid UTF-8"))?;
    let Entries(entries) =
        serde_json::from_str::<Entries>(header).map_err(|e| err(format!("header is not a JSON object: {e}")))?;
    let data_len = bytes.len() - 8 - hlen;
    let mut metadata = BTreeMap::new();
    let mut list: Vec<Entry> = Vec::with_capacity(entries.len());
    let mut names = std::collections::HashSet::new();
    for (k, v) in &entries {
        if !names.insert(k.as_str()) {
            return Err(err(format!("duplicate tensor name '{k}'")));
        }
        if k == "__metadata__" {
            let o = v.as_object().ok_or_else(|| err("__metadata__ is not an object"))?;
            for (mk, mv) in o {
                let s = mv.as_str().ok_or_else(|| err(format!("__metadata__ value of '{mk}' is not a string")))?;
                metadata.insert(mk.clone(), s.to_string());
            }
            continue;
        }
        list.push(parse_entry(k, v)?);
    }
    // the entries must tile the data area exactly
    let mut order: Vec<&Entry> = list.iter().collect();
    order.sort_by_key(|e| (e.begin, e.end));
    let mut pos = 0usize;
    for e in &order {
        if e.begin != pos {
            return Err(err(if e.begin < pos {
                format!("entry '{}' at bytes [{}, {}] overlaps the previous entry (which ends at {pos})", e.name, e.begin, e.end)
            } else {
                format!("gap before entry '{}': bytes [{pos}, {}] belong to no tensor", e.name, e.begin)
            }));
        }
        pos = e.end;
    }
    if pos != data_len {
        return Err(err(if pos > data_len {
            format!("the entries need {pos} data bytes but the file has {data_len} (truncated?)")
        } else {
            format!("{} trailing bytes after the last tensor", data_len - pos)
        }));
    }
    Ok(Header { entries: list, metadata, data_start: 8 + hlen })
}

/// Entry `e` of the file whose bytes are `bytes` (header validated against them): borrowed from
/// `owner` (the same bytes, mapped) where the dtype allows, else decoded into a copy.
fn decode_entry(e: &Entry, bytes: &[u8], data_start: usize, owner: &Owner) -> Result<Tensor> {
    let (b, end) = (data_start + e.begin, data_start + e.end);
    let decode = |x: &[u8]| dtype::decode(e.dtype, x, &e.shape).map_err(|x| err(format!("entry '{}': {}", e.name, x)));
    mapped::tensor_at(owner, b, &bytes[b..end], e.dtype, &e.shape, decode)
}

/// Parses a whole safetensors buffer (the tensors own copies of their data).
pub fn deserialize(bytes: &[u8]) -> Result<Loaded> {
    let h = parse_header(bytes)?;
    let tensors = h.entries.iter().map(|e| Ok((e.name.clone(), decode_entry(e, bytes, h.data_start, &None)?))).collect::<Result<Vec<_>>>()?;
    Ok(Loaded { tensors, metadata: h.metadata })
}

/// A safetensors file mapped into memory with its header validated. Tensors come on request,
/// borrowing the mapped bytes (no copy, nothing read until used; the first write to one copies
/// its storage, so the file never changes), as safetensors' `safe_open(...).get_tensor` gives
/// storages over the map. `bool` tensors and misaligned entries are copied (bools checked).
pub struct MappedFile {
    map: Option<Arc<FileMap>>,
    header: Header,
    index: std::collections::HashMap<String, usize>,
    path: std::path::PathBuf,
}

impl MappedFile {
    /// Maps `path` and validates its header (every entry's dtype, shape and byte range).
    pub fn open(path: impl AsRef<Path>) -> Result<MappedFile> {
        let path = path.as_ref();
        let map = mapped::map_file(path, "load")?;
        let header = parse_header(map.as_ref().map_or(&[][..], |m| m.bytes())).map_err(|e| Error::io("load", format!("{}: {e}", path.display())))?;
        let index = header.entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        Ok(MappedFile { map, header, index, path: path.to_path_buf() })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tensor names in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.header.entries.iter().map(|e| e.name.as_str())
    }

    /// The `__metadata__` strings.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.header.metadata
    }

    /// Dtype and shape of `name`, without decoding it.
    pub fn info(&self, name: &str) -> Option<(DType, &[usize])> {
        self.index.get(name).map(|&i| (self.header.entries[i].dtype, self.header.entries[i].shape.as_slice()))
    }

    /// The tensor `name`: a CPU tensor over the mapped bytes (copied for `bool` or a misaligned entry).
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let i = *self.index.get(name).ok_or_else(|| err(format!("{}: no tensor named '{name}'", self.path.display())))?;
        self.entry(i)
    }

    fn entry(&self, i: usize) -> Result<Tensor> {
        let owner: Owner = self.map.clone().map(|m| m as Arc<dyn StableBytes>);
        let bytes = self.map.as_ref().map_or(&[][..], |m| m.bytes());
        decode_entry(&self.header.entries[i], bytes, self.header.data_start, &owner)
    }
}

/// Loads a safetensors file: the header validated, the tensors over the memory-mapped file (no
/// copy; see [`MappedFile`]), as Python's `safetensors.torch.load_file`.
pub fn load(path: impl AsRef<Path>) -> Result<Loaded> {
    let path = path.as_ref();
    let f = MappedFile::open(path)?;
    let tensors = (0..f.header.entries.len())
        .map(|i| Ok((f.header.entries[i].name.clone(), f.entry(i).map_err(|e| Error::io("load", format!("{}: {e}", path.display())))?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Loaded { tensors, metadata: f.header.metadata })
}

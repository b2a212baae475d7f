//! The validating reader: header (magic, version, counts), metadata, tensor infos and the data
//! section, each length, count, type, shape and offset checked against the bytes that remain
//! before it is used or anything sized by it is allocated. Follows the rules of llama.cpp's
//! `gguf_init_from_file`.

use super::cursor::{err, Cursor};
use super::types::GgmlType;
use super::value::{Array, Value, ValueType};
use magpie_core::{Error, Result, Tensor};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The four bytes every GGUF file starts with.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// The data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The most dimensions a tensor may have (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// The deepest nesting of arrays inside arrays we read (llama.cpp reads none; gguf-py any).
pub const MAX_ARRAY_DEPTH: usize = 16;

/// The smallest tensor info: name length (8), n_dims (4), one dimension (8), type (4), offset (8).
const MIN_TENSOR_INFO: u64 = 32;
/// The smallest key/value pair: key length (8), value type (4), a one-byte value.
const MIN_KV: u64 = 13;

/// One tensor's entry in the header.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// The tensor's name (unique in the file).
    pub name: String,
    /// ggml's `ne`: the number of elements per dimension, fastest-varying first.
    pub ne: Vec<u64>,
    /// How the elements are stored.
    pub ggml_type: GgmlType,
    /// Offset of the first byte from the start of the data section (a multiple of the alignment).
    pub offset: u64,
    /// Bytes the tensor takes.
    pub nbytes: u64,
}

impl TensorInfo {
    /// The number of elements.
    pub fn n_elements(&self) -> u64 {
        self.ne.iter().product()
    }

    /// The shape in row-major (numpy / PyTorch) order: `ne` reversed.
    pub fn shape(&self) -> Vec<usize> {
        self.ne.iter().rev().map(|&n| n as usize).collect()
    }
}

/// A parsed and validated header: everything before the tensor data.
#[derive(Clone, Debug)]
pub struct Header {
    /// The format version (2 or 3).
    pub version: u32,
    /// Metadata key/value pairs in file order (keys are unique).
    pub metadata: Vec<(String, Value)>,
    /// Tensor infos in file order (names are unique; data ranges in bounds and disjoint).
    pub tensors: Vec<TensorInfo>,
    /// The data alignment (`general.alignment` or 32).
    pub alignment: u64,
    /// Offset of the data section from the start of the file.
    pub data_offset: u64,
}

impl Header {
    /// The metadata value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

fn read_value(c: &mut Cursor, ty: ValueType, depth: usize, key: &str) -> Result<Value> {
    let w = || format!("the value of '{key}'");
    Ok(match ty {
        ValueType::U8 => Value::U8(c.u8(&w)?),
        ValueType::I8 => Value::I8(c.u8(&w)? as i8),
        ValueType::U16 => Value::U16(c.u16(&w)?),
        ValueType::I16 => Value::I16(c.u16(&w)? as i16),
        ValueType::U32 => Value::U32(c.u32(&w)?),
        ValueType::I32 => Value::I32(c.u32(&w)? as i32),
        ValueType::F32 => Value::F32(f32::from_bits(c.u32(&w)?)),
        ValueType::U64 => Value::U64(c.u64(&w)?),
        ValueType::I64 => Value::I64(c.u64(&w)? as i64),
        ValueType::F64 => Value::F64(f64::from_bits(c.u64(&w)?)),
        ValueType::Bool => {
            let b = c.u8(&w)?;
            if b > 1 {
                return Err(err(format!("key '{key}': bool value {b} is neither 0 nor 1")));
            }
            Value::Bool(b == 1)
        }
        ValueType::String => Value::String(c.string(&w)?),
        ValueType::Array => {
            if depth >= MAX_ARRAY_DEPTH {
                return Err(err(format!("key '{key}': arrays nested deeper than {MAX_ARRAY_DEPTH} levels")));
            }
            let tag = c.u32(&|| format!("the array element type of '{key}'"))?;
            let elem = ValueType::from_tag(tag).ok_or_else(|| {
                err(format!("key '{key}': array element type {tag} is not a GGUF value type (valid: 0..=12)"))
            })?;
            let n = c.u64(&|| format!("the array length of '{key}'"))?;
            let need = n.checked_mul(elem.min_size() as u64).ok_or_else(|| {
                err(format!("key '{key}': array of {n} {elem} elements: its byte size overflows 64 bits"))
            })?;
            if need > c.remaining() as u64 {
                return Err(err(format!(
                    "key '{key}': array of {n} {elem} elements needs at least {need} bytes, only {} left in the file",
                    c.remaining()
                )));
            }
            // n <= remaining bytes here, so this allocation is bounded by the file size
            let mut items = Vec::with_capacity(n as usize);
            for _ in 0..n {
                items.push(read_value(c, elem, depth + 1, key)?);
            }
            Value::Array(Array { elem_type: elem, items })
        }
    })
}

fn read_tensor_info(c: &mut Cursor, i: u64) -> Result<TensorInfo> {
    let name = c.string(&|| format!("the name of tensor {i}"))?;
    let n_dims = c.u32(&|| format!("n_dims of tensor '{name}'"))?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        return Err(err(format!("tensor '{name}' has n_dims = {n_dims}; must be 1..={MAX_DIMS} (GGML_MAX_DIMS)")));
    }
    let mut ne = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        let v = c.u64(&|| format!("ne[{d}] of tensor '{name}'"))?;
        if v > i64::MAX as u64 {
            return Err(err(format!("tensor '{name}' has a negative dimension ne[{d}] = {}", v as i64)));
        }
        ne.push(v);
    }
    let tag = c.u32(&|| format!("the ggml type of tensor '{name}'"))?;
    let ggml_type = GgmlType::from_id(tag).map_err(|e| match e {
        Error::Io { msg, .. } => err(format!("tensor '{name}': {msg}")),
        other => other,
    })?;
    let offset = c.u64(&|| format!("the data offset of tensor '{name}'"))?;
    let n = ne.iter().try_fold(1u64, |a, &x| a.checked_mul(x)).filter(|&n| n <= i64::MAX as u64).ok_or_else(|| {
        err(format!("tensor '{name}': shape {ne:?} has more than 2^63 elements"))
    })?;
    let bs = ggml_type.block_size() as u64;
    if ne[0] % bs != 0 {
        return Err(err(format!(
            "tensor '{name}': row length ne[0] = {} is not a multiple of the {ggml_type} block size {bs}",
            ne[0]
        )));
    }
    let nbytes = ggml_type
        .bytes_for(n)
        .ok_or_else(|| err(format!("tensor '{name}': byte size of {n} {ggml_type} elements overflows 64 bits")))?;
    Ok(TensorInfo { name, ne, ggml_type, offset, nbytes })
}

/// Parses and validates the header of a GGUF file held in `bytes` (the whole file), including
/// that every tensor's data lies inside `bytes`.
pub fn parse_header(bytes: &[u8]) -> Result<Header> {
    let mut c = Cursor::new(bytes);
    let magic = c.take(4, &|| "the magic".into())?;
    if magic != MAGIC {
        return Err(err(format!("invalid magic {:?} (expected \"GGUF\")", String::from_utf8_lossy(magic))));
    }
    let version = c.u32(&|| "the version".into())?;
    if version != 2 && version != 3 {
        let hint = if matches!(version.swap_bytes(), 2 | 3) {
            " (a big-endian file? only little-endian files are read)"
        } else if version == 1 {
            " (version 1 is obsolete)"
        } else {
            ""
        };
        return Err(err(format!("unsupported version {version}: only versions 2 and 3 are read{hint}")));
    }
    let n_tensors = c.u64(&|| "the tensor count".into())?;
    let n_kv = c.u64(&|| "the metadata key/value count".into())?;
    let min = n_tensors
        .checked_mul(MIN_TENSOR_INFO)
        .and_then(|a| n_kv.checked_mul(MIN_KV).and_then(|b| a.checked_add(b)))
        .ok_or_else(|| err(format!("tensor count {n_tensors} / key-value count {n_kv} overflow the header size")))?;
    if min > c.remaining() as u64 {
        return Err(err(format!(
            "the file ends too early: tensor count {n_tensors} and key-value count {n_kv} need at least {min} bytes of header, only {} left",
            c.remaining()
        )));
    }
    // both counts are now bounded by the file size
    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(n_kv as usize);
    let mut keys = HashSet::with_capacity(n_kv as usize);
    for i in 0..n_kv {
        let key = c.string(&|| format!("key {i}"))?;
        let tag = c.u32(&|| format!("the value type of '{key}'"))?;
        let ty = ValueType::from_tag(tag)
            .ok_or_else(|| err(format!("key '{key}' has invalid value type {tag} (valid: 0..=12)")))?;
        let v = read_value(&mut c, ty, 0, &key)?;
        if !keys.insert(key.clone()) {
            return Err(err(format!("duplicate key '{key}'")));
        }
        metadata.push((key, v));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) => {
            if *a == 0 || !a.is_power_of_two() {
                return Err(err(format!("general.alignment = {a} is not a power of two")));
            }
            *a as u64
        }
        Some((_, v)) => {
            return Err(err(format!("general.alignment has type {}, expected UINT32", v.value_type())));
        }
    };
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut names = HashSet::with_capacity(n_tensors as usize);
    for i in 0..n_tensors {
        let t = read_tensor_info(&mut c, i)?;
        if !names.insert(t.name.clone()) {
            return Err(err(format!("duplicate tensor name '{}'", t.name)));
        }
        tensors.push(t);
    }
    let header_end = c.pos() as u64;
    let data_offset = header_end
        .checked_add(alignment - 1)
        .map(|x| x / alignment * alignment)
        .ok_or_else(|| err("data section offset overflows"))?;
    let file_len = bytes.len() as u64;
    for t in &tensors {
        if t.offset % alignment != 0 {
            return Err(err(format!(
                "tensor '{}' has data offset {}, not a multiple of the alignment {alignment}",
                t.name, t.offset
            )));
        }
        let end = data_offset.checked_add(t.offset).and_then(|b| b.checked_add(t.nbytes));
        match end {
            Some(e) if e <= file_len => {}
            _ => {
                return Err(err(format!(
                    "tensor '{}' data (offset {} + {} bytes in the data section at {data_offset}) is not within the file ({file_len} bytes)",
                    t.name, t.offset, t.nbytes
                )))
            }
        }
    }
    // data ranges must not overlap
    let mut order: Vec<&TensorInfo> = tensors.iter().filter(|t| t.nbytes > 0).collect();
    order.sort_by_key(|t| t.offset);
    for w in order.windows(2) {
        if w[0].offset + w[0].nbytes > w[1].offset {
            return Err(err(format!("tensors '{}' and '{}' overlap in the data section", w[0].name, w[1].name)));
        }
    }
    Ok(Header { version, metadata, tensors, alignment, data_offset })
}

enum Backing {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

/// A validated GGUF file (memory-mapped, or owned bytes): metadata, tensor infos, and tensors
/// decoded on request, so quantized blocks can stay in the file until they are needed.
pub struct GgufFile {
    backing: Backing,
    header: Header,
    index: HashMap<String, usize>,
    path: Option<PathBuf>,
}

impl GgufFile {
    /// Maps `path` and validates the whole header and every tensor's byte range.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let f = std::fs::File::open(path).map_err(|e| err(format!("cannot open {}: {e}", path.display())))?;
        let len = f.metadata().map_err(|e| err(format!("cannot stat {}: {e}", path.display())))?.len();
        let backing = if len == 0 {
            Backing::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only; a concurrent writer could change bytes under us, which
            // the decoder treats as any other (validated-length) input.
            Backing::Map(unsafe { memmap2::Mmap::map(&f) }.map_err(|e| err(format!("cannot map {}: {e}", path.display())))?)
        };
        let header = parse_header(backing.bytes()).map_err(|e| match e {
            Error::Io { msg, .. } => err(format!("{}: {msg}", path.display())),
            other => other,
        })?;
        Ok(Self::build(backing, header, Some(path.to_path_buf())))
    }

    /// Parses a GGUF file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile> {
        let header = parse_header(&bytes)?;
        Ok(Self::build(Backing::Owned(bytes), header, None))
    }

    fn build(backing: Backing, header: Header, path: Option<PathBuf>) -> GgufFile {
        let index = header.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        GgufFile { backing, header, index, path }
    }

    /// The file's path (`None` when parsed from bytes).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The parsed header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.header.version
    }

    /// The data alignment.
    pub fn alignment(&self) -> u64 {
        self.header.alignment
    }

    /// Metadata key/value pairs in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.header.metadata
    }

    /// The metadata value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.header.get(key)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// The info of tensor `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.header.tensors[i])
    }

    fn find(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor_info(name).ok_or_else(|| err(format!("no tensor named '{name}'")))
    }

    /// The raw bytes of tensor `name` (blocks of its ggml type, as stored).
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let t = self.find(name)?;
        let start = (self.header.data_offset + t.offset) as usize;
        // in bounds: checked by parse_header
        Ok(&self.backing.bytes()[start..start + t.nbytes as usize])
    }

    /// Tensor `name` dequantized to f32 values in row-major order.
    pub fn tensor_data_f32(&self, name: &str) -> Result<Vec<f32>> {
        let t = self.find(name)?;
        let bytes = self.tensor_bytes(name)?;
        super::dequant::dequantize(t.ggml_type, bytes, t.n_elements() as usize)
            .map_err(|e| match e {
                Error::Io { msg, .. } => err(format!("tensor '{name}': {msg}")),
                other => other,
            })
    }

    /// Tensor `name` dequantized to an f32 CPU tensor of shape `ne` reversed (row-major, like
    /// the numpy arrays gguf-py returns).
    pub fn tensor_f32(&self, name: &str) -> Result<Tensor> {
        let shape = self.find(name)?.shape();
        Tensor::from_vec(self.tensor_data_f32(name)?, &shape)
    }
}

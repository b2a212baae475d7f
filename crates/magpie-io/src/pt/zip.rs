//! The zip checkpoint format (`torch.save` since 1.6): `<archive>/data.pkl` holds the object
//! pickle, `<archive>/data/<key>` each storage's raw little-endian bytes, `<archive>/byteorder`
//! the byte order. Member names are only ever looked up in the archive, never on disk.

use std::collections::HashSet;
use std::io::{Cursor, Read};

use magpie_core::{Error, Result, Tensor};

use super::{build, pickle, storage, PtValue};
use crate::mapped::{self, Owner};

fn err(msg: impl Into<String>) -> Error {
    Error::io("pt", msg.into())
}

/// True when `data` starts like a zip archive.
pub(crate) fn is_zip(data: &[u8]) -> bool {
    data.starts_with(b"PK\x03\x04") || data.starts_with(b"PK\x05\x06")
}

/// True for a member name that could escape a folder: `..` parts, absolute or drive paths.
fn unsafe_name(name: &str) -> bool {
    name.starts_with('/')
        || name.starts_with('\\')
        || name.contains('\0')
        || name.contains(':')
        || name.split(['/', '\\']).any(|p| p == "..")
}

type Archive<'a> = ::zip::ZipArchive<Cursor<&'a [u8]>>;

/// The bytes of member `name`, checked against its declared sizes.
fn read_member(ar: &mut Archive<'_>, name: &str) -> Result<Vec<u8>> {
    let f = ar.by_name(name).map_err(|e| err(format!("zip member {name}: {e}")))?;
    let size = f.size();
    let compressed = f.compressed_size();
    // torch.save stores members uncompressed; a compressed member could inflate far past the
    // file's own size, so it is refused rather than decompressed
    if f.compression() != ::zip::CompressionMethod::Stored {
        return Err(err(format!("zip member {name} is compressed ({}); checkpoints written by torch.save store members uncompressed", f.compression())));
    }
    if size != compressed {
        return Err(err(format!("zip member {name} claims {size} bytes but stores {compressed}")));
    }
    let mut out = Vec::new();
    f.take(size.saturating_add(1)).read_to_end(&mut out).map_err(|e| err(format!("zip member {name}: {e}")))?;
    if out.len() as u64 != size {
        return Err(err(format!("zip member {name} holds {} bytes, its header says {size}", out.len())));
    }
    Ok(out)
}

/// Where member `name`'s bytes lie in the archive (`data_len` bytes): its data offset and size,
/// for a stored (uncompressed) member whose whole record lies inside the archive. Like
/// `torch.load`, the record's CRC is not checked (reading it would touch every byte).
fn record_span(ar: &mut Archive<'_>, name: &str, data_len: usize) -> Result<(usize, u64)> {
    let f = ar.by_name(name).map_err(|e| err(format!("zip member {name}: {e}")))?;
    let (size, compressed) = (f.size(), f.compressed_size());
    if f.compression() != ::zip::CompressionMethod::Stored {
        return Err(err(format!("zip member {name} is compressed ({}); checkpoints written by torch.save store members uncompressed", f.compression())));
    }
    if size != compressed {
        return Err(err(format!("zip member {name} claims {size} bytes but stores {compressed}")));
    }
    let start = f.data_start();
    match start.checked_add(size) {
        Some(end) if end <= data_len as u64 => Ok((start as usize, size)),
        _ => Err(err(format!("zip member {name} holds {} bytes, its header says {size}", (data_len as u64).saturating_sub(start)))),
    }
}

/// Loads a zip-format checkpoint from its bytes; storages borrow `owner` (the same bytes, mapped)
/// where they can, as `torch.load(mmap=True)` does, and are copied otherwise.
pub(crate) fn load(data: &[u8], owner: &Owner) -> Result<PtValue> {
    let mut ar = Archive::new(Cursor::new(data)).map_err(|e| err(format!("not a readable zip archive: {e}")))?;
    let names: HashSet<String> = ar.file_names().map(str::to_string).collect();
    if let Some(bad) = names.iter().find(|n| unsafe_name(n)) {
        return Err(err(format!("zip member name {bad:?} is not a plain relative path")));
    }
    let mut pkls: Vec<&String> = names.iter().filter(|n| matches!(n.split_once('/'), Some((p, "data.pkl")) if !p.is_empty())).collect();
    pkls.sort();
    let pkl = match pkls.as_slice() {
        [one] => (*one).clone(),
        [] => return Err(err("zip archive has no <archive>/data.pkl")),
        _ => return Err(err("zip archive has several data.pkl members")),
    };
    let prefix = pkl.trim_end_matches("data.pkl").to_string();
    let bo = format!("{prefix}byteorder");
    if names.contains(&bo) {
        let b = read_member(&mut ar, &bo)?;
        if b != b"little" {
            return Err(err(format!("byteorder {:?} is not supported (only little)", String::from_utf8_lossy(&b))));
        }
    }
    let pickle_bytes = read_member(&mut ar, &pkl)?;
    let u = pickle::unpickle(&pickle_bytes, 0)?;
    let mut roots: Vec<Tensor> = Vec::with_capacity(u.storages.len());
    for s in &u.storages {
        if s.key.is_empty() || s.key.contains(['/', '\\']) || s.key.contains("..") {
            return Err(err(format!("storage key {:?} is not a plain name", s.key)));
        }
        let name = format!("{prefix}data/{}", s.key);
        if !names.contains(&name) {
            return Err(err(format!("storage '{}' has no record {name} in the archive", s.key)));
        }
        let need = s.numel.checked_mul(s.dtype.size()).ok_or_else(|| err(format!("storage '{}' size overflows", s.key)))?;
        let (start, declared) = record_span(&mut ar, &name, data.len())?;
        if (need as u64) > declared {
            return Err(err(format!(
                "storage '{}' declares {} elements ({need} bytes) but {name} holds {declared} bytes",
                s.key, s.numel
            )));
        }
        // in bounds: record_span checked start + declared against the data, and need <= declared
        let bytes = &data[start..start + need];
        let copy = |b: &[u8]| storage::storage_tensor(&s.key, s.dtype, s.numel, b);
        roots.push(mapped::tensor_at(owner, start, bytes, s.dtype, &[s.numel], copy)?);
    }
    build::build(&u, &roots, data.len())
}

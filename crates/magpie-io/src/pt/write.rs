//! Writes a state dict (an `OrderedDict` of tensors) in the zip checkpoint format `torch.save`
//! uses: a protocol-2 `data.pkl`, one `data/<key>` record per storage (its whole contents,
//! aligned to 64 bytes, stored uncompressed), `version`, `byteorder`, `.format_version`,
//! `.storage_alignment`. Tensors that share a storage (tied weights, views) share it in the file,
//! with their own offsets and strides, as `torch.save` writes them.

use std::collections::HashMap;
use std::io::{Cursor, Write};
use std::sync::Arc;
use std::path::Path;

use magpie_core::num_complex::Complex64;
use magpie_core::{DType, Error, Result, Tensor};

use super::globals;

fn err(msg: impl Into<String>) -> Error {
    Error::io("pt", msg.into())
}

struct Pickler(Vec<u8>);

impl Pickler {
    fn global(&mut self, module: &str, name: &str) {
        self.0.push(b'c');
        self.0.extend_from_slice(module.as_bytes());
        self.0.push(b'\n');
        self.0.extend_from_slice(name.as_bytes());
        self.0.push(b'\n');
    }
    fn str(&mut self, s: &str) -> Result<()> {
        let n = u32::try_from(s.len()).map_err(|_| err("string too long for a pickle"))?;
        self.0.push(b'X');
        self.0.extend_from_slice(&n.to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
    fn int(&mut self, v: i64) {
        if let Ok(i) = i32::try_from(v) {
            self.0.push(b'J');
            self.0.extend_from_slice(&i.to_le_bytes());
        } else {
            self.0.push(0x8a);
            self.0.push(8);
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }
    fn int_tuple(&mut self, v: &[usize]) -> Result<()> {
        self.0.push(b'(');
        for &x in v {
            self.int(i64::try_from(x).map_err(|_| err("dimension too large"))?);
        }
        self.0.push(b't');
        Ok(())
    }
    fn empty_odict(&mut self) {
        self.global("collections", "OrderedDict");
        self.0.extend_from_slice(b")R");
    }
}

fn tensor_bytes(t: &Tensor) -> Result<Vec<u8>> {
    if t.dtype() == DType::C128 {
        return Ok(t.to_vec::<Complex64>()?.into_iter().flat_map(|c| {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&c.re.to_le_bytes());
            b[8..].copy_from_slice(&c.im.to_le_bytes());
            b
        }).collect());
    }
    crate::safetensors::tensor_to_le_bytes(t)
}

/// The bytes of a zip-format checkpoint holding `tensors` as an `OrderedDict` state dict.
pub fn serialize(tensors: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let mut p = Pickler(vec![0x80, 2]);
    p.empty_odict();
    p.0.push(b'(');
    let mut records: Vec<Vec<u8>> = Vec::new();
    let mut by_storage: HashMap<usize, (usize, usize)> = HashMap::new();
    for (name, t) in tensors {
        let storage = globals::storage_name(t.dtype())
            .ok_or_else(|| err(format!("tensor {name}: dtype {} has no PyTorch storage type", t.dtype())))?;
        let ptr = Arc::as_ptr(t.storage()) as usize;
        let (i, numel) = match by_storage.get(&ptr) {
            Some(&v) => v,
            None => {
                // the whole storage, as one 1-d tensor
                let len = t.storage().read().len();
                let n = i64::try_from(len).map_err(|_| err(format!("tensor {name}: storage too large")))?;
                let all = t.detach().as_strided(&[n], &[1], Some(0))?;
                records.push(tensor_bytes(&all).map_err(|e| err(format!("tensor {name}: {e}")))?);
                let v = (records.len() - 1, len);
                by_storage.insert(ptr, v);
                v
            }
        };
        p.str(name)?;
        p.global("torch._utils", "_rebuild_tensor_v2");
        p.0.push(b'(');
        // persistent id ('storage', torch.XStorage, key, 'cpu', numel)
        p.0.push(b'(');
        p.str("storage")?;
        p.global("torch", storage);
        p.str(&i.to_string())?;
        p.str("cpu")?;
        p.int(i64::try_from(numel).map_err(|_| err("tensor too large"))?);
        p.0.extend_from_slice(b"tQ");
        p.int(i64::try_from(t.storage_offset()).map_err(|_| err("offset too large"))?);
        p.int_tuple(t.shape())?;
        p.int_tuple(t.strides())?;
        p.0.push(if t.requires_grad() { 0x88 } else { 0x89 });
        p.empty_odict();
        p.0.extend_from_slice(b"tR");
    }
    p.0.extend_from_slice(b"u.");

    let mut w = ::zip::ZipWriter::new(Cursor::new(Vec::new()));
    let total: usize = records.iter().map(Vec::len).sum();
    let opts = ::zip::write::SimpleFileOptions::default()
        .compression_method(::zip::CompressionMethod::Stored)
        .with_alignment(64)
        .large_file(total > (1 << 31));
    let zerr = |e: ::zip::result::ZipError| err(format!("zip writer: {e}"));
    let put = |w: &mut ::zip::ZipWriter<Cursor<Vec<u8>>>, name: &str, bytes: &[u8]| -> Result<()> {
        w.start_file(format!("archive/{name}"), opts).map_err(zerr)?;
        w.write_all(bytes).map_err(|e| err(format!("zip writer: {e}")))
    };
    put(&mut w, "data.pkl", &p.0)?;
    put(&mut w, ".format_version", b"1")?;
    put(&mut w, ".storage_alignment", b"64")?;
    put(&mut w, "byteorder", b"little")?;
    for (i, r) in records.iter().enumerate() {
        put(&mut w, &format!("data/{i}"), r)?;
    }
    put(&mut w, "version", b"3\n")?;
    Ok(w.finish().map_err(zerr)?.into_inner())
}

/// Writes `tensors` to `path` as a zip-format state dict (atomically).
pub fn save(path: impl AsRef<Path>, tensors: &[(String, Tensor)]) -> Result<()> {
    let bytes = serialize(tensors)?;
    crate::atomic::write_atomic(path.as_ref(), &bytes)
}

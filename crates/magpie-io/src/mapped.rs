//! Read-only memory maps of checkpoint files, and tensors that borrow their bytes without a
//! copy (as `torch.load(mmap=True)` and safetensors' `load_file` do). The storages hold the map,
//! so it outlives every tensor over it; the first write to such a tensor copies its storage
//! (magpie-core's copy-on-write), so nothing written ever reaches the file. The map is
//! `PROT_READ`: a stray write through it would fault rather than change the file. As with every
//! mmap-based loader, truncating the file while tensors still borrow it is an error the OS
//! reports as a bus error.

use std::path::Path;
use std::sync::Arc;

use magpie_core::storage::{CpuStorage, MappedStorage, StableBytes};
use magpie_core::{DType, Error, Result, Tensor};

/// A read-only map of a whole file.
pub(crate) struct FileMap(memmap2::Mmap);

// SAFETY: a read-only mapping neither moves nor is written by this process while it lives.
unsafe impl StableBytes for FileMap {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The bytes tensors may borrow: a file map, or none for an in-memory buffer (then they copy).
pub(crate) type Owner = Option<Arc<dyn StableBytes>>;

/// Maps `path` read-only; `None` for an empty file (which cannot be mapped).
pub(crate) fn map_file(path: &Path, op: &str) -> Result<Option<Arc<FileMap>>> {
    let f = std::fs::File::open(path).map_err(|e| Error::io(op, format!("cannot open {}: {e}", path.display())))?;
    let len = f.metadata().map_err(|e| Error::io(op, format!("cannot stat {}: {e}", path.display())))?.len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: the map is read-only and private to this process's readers; another process
    // changing the file under it is the shared caveat of mmap loaders (see the module doc).
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io(op, format!("cannot map {}: {e}", path.display())))?;
    Ok(Some(Arc::new(FileMap(map))))
}

/// The tensor of `dtype` and `shape` stored at `owner`'s bytes `offset..`: borrowed in place when
/// the dtype and alignment allow, otherwise `decode(bytes)` (a checked copy). `bytes` is the
/// tensor's slice of the same memory, already checked against the file's length.
pub(crate) fn tensor_at(
    owner: &Owner,
    offset: usize,
    bytes: &[u8],
    dtype: DType,
    shape: &[usize],
    decode: impl FnOnce(&[u8]) -> Result<Tensor>,
) -> Result<Tensor> {
    let numel = shape.iter().product::<usize>();
    if let Some(o) = owner {
        // the owner's slice must be the one `bytes` was cut from (a defensive check, it is by construction)
        let same = offset.checked_add(bytes.len()).and_then(|end| o.bytes().get(offset..end)).is_some_and(|b| b.as_ptr() == bytes.as_ptr());
        if same && numel.checked_mul(dtype.size()) == Some(bytes.len()) {
            if let Some(m) = MappedStorage::new(o.clone(), offset, numel, dtype) {
                return Tensor::from_cpu_storage(CpuStorage::Mapped(m), shape);
            }
        }
    }
    decode(bytes)
}

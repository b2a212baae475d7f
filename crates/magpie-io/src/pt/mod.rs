//! PyTorch checkpoints (`.pt` / `.bin` written by `torch.save`), zip and legacy formats, read
//! like `torch.load(weights_only=True)`: a pickle interpreter over a fixed allowlist of globals
//! (state dicts, tensors, parameters, containers, `torch.Size`, dtypes, complex) that never
//! imports or calls anything. Tensors come back as views over shared storages, as in PyTorch.
//!
//! ```no_run
//! let tree = magpie_io::pt::load("model.pt")?;
//! for (name, t) in magpie_io::pt::load_tensors("model.pt")? {
//!     println!("{name}: {:?}", t.shape());
//! }
//! # let _ = tree;
//! # Ok::<(), magpie_core::Error>(())
//! ```

mod build;
mod globals;
mod legacy;
mod pickle;
mod storage;
mod value;
mod write;
mod zip;

use std::path::Path;
use std::sync::Arc;

use magpie_core::storage::StableBytes;
use magpie_core::{Error, Result, Tensor};

pub use build::MAX_DEPTH;
pub use value::{PtTensor, PtValue};
pub use write::{save, serialize};

/// Loads a checkpoint file's object tree. The file is memory-mapped and the tensors of a zip
/// checkpoint borrow its storage records in place, as `torch.load(path, weights_only=True,
/// mmap=True)` does: nothing is copied or read until used, and the first write to a tensor
/// copies its storage (the file never changes). Legacy-format storages, compressed or
/// misaligned records are copied. Every check of [`load_bytes`] applies.
pub fn load(path: impl AsRef<Path>) -> Result<PtValue> {
    let path = path.as_ref();
    let map = crate::mapped::map_file(path, "pt")?;
    let data = map.as_ref().map_or(&[][..], |m| m.bytes());
    let owner: crate::mapped::Owner = map.clone().map(|m| m as Arc<dyn StableBytes>);
    parse(data, &owner)
}

/// Loads a checkpoint's object tree from its bytes (zip or legacy format); the tensors own
/// copies of their data.
pub fn load_bytes(data: &[u8]) -> Result<PtValue> {
    parse(data, &None)
}

fn parse(data: &[u8], owner: &crate::mapped::Owner) -> Result<PtValue> {
    if zip::is_zip(data) {
        zip::load(data, owner)
    } else if legacy::is_legacy(data) {
        legacy::load(data)
    } else {
        Err(Error::io("pt", "not a PyTorch checkpoint (neither a zip archive nor a legacy pickle)"))
    }
}

/// Loads a checkpoint file's tensors under their paths (see [`flatten`]).
pub fn load_tensors(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    Ok(flatten(&load(path)?))
}

/// Every tensor of a tree under its path: dict keys and list/tuple indices joined with `.`
/// (`nested.list.6.0`); a state dict's keys are top-level, so the path is the key. Tensors
/// under keys that are not str, int or bool, and `OrderedDict` attributes, are left out.
pub fn flatten(v: &PtValue) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    // explicit stack: (value, path); children pushed in reverse to keep file order
    let mut stack: Vec<(&PtValue, String)> = vec![(v, String::new())];
    let join = |p: &str, k: &str| if p.is_empty() { k.to_string() } else { format!("{p}.{k}") };
    while let Some((v, path)) = stack.pop() {
        match v {
            PtValue::Tensor(t) => out.push((path, t.tensor.clone())),
            PtValue::List(items) | PtValue::Tuple(items) => {
                for (i, x) in items.iter().enumerate().rev() {
                    stack.push((x, join(&path, &i.to_string())));
                }
            }
            PtValue::Dict(items) | PtValue::OrderedDict { items, .. } => {
                for (k, x) in items.iter().rev() {
                    let key = match k {
                        PtValue::Str(s) => s.clone(),
                        PtValue::Int(i) => i.to_string(),
                        PtValue::BigInt(s) => s.clone(),
                        PtValue::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                        _ => continue,
                    };
                    stack.push((x, join(&path, &key)));
                }
            }
            _ => {}
        }
    }
    out
}

//! The legacy checkpoint format (before PyTorch 1.6): consecutive pickles (the magic number,
//! the protocol version 1001, a sys_info dict, the object, the list of storage keys), then for
//! each key an int64 element count and the storage's raw little-endian bytes.

use std::collections::HashMap;

use magpie_core::{Error, Result, Tensor};

use super::pickle::{self, Obj, V};
use super::{build, storage, PtValue};

/// The legacy magic number 0x1950a86a20f9469cfc6c in decimal.
const MAGIC: &str = "119547037146038801333356";

fn err(msg: impl Into<String>) -> Error {
    Error::io("pt", msg.into())
}

/// True when `data` starts with a pickle (PROTO opcode), as a legacy file does.
pub(crate) fn is_legacy(data: &[u8]) -> bool {
    data.first() == Some(&0x80)
}

/// Loads a legacy-format checkpoint from its bytes.
pub(crate) fn load(data: &[u8]) -> Result<PtValue> {
    let magic = pickle::unpickle(data, 0)?;
    let ok = matches!(&magic.root, V::BigInt(s) if &**s == MAGIC);
    if !ok {
        return Err(err("invalid magic number: not a legacy PyTorch checkpoint"));
    }
    let proto = pickle::unpickle(data, magic.end)?;
    if !matches!(proto.root, V::Int(1001)) {
        return Err(err("unsupported legacy protocol version (expected 1001)"));
    }
    let sys = pickle::unpickle(data, proto.end)?;
    if let V::Obj(i) = &sys.root {
        if let Some(Obj::Dict(d)) = sys.objs.get(*i) {
            let le = d.iter().find(|(k, _)| matches!(k, V::Str(s) if &**s == "little_endian"));
            if let Some((_, V::Bool(false))) = le {
                return Err(err("big-endian legacy checkpoints are not supported"));
            }
        }
    }
    let u = pickle::unpickle(data, sys.end)?;
    let keys_p = pickle::unpickle(data, u.end)?;
    let keys: Vec<String> = match &keys_p.root {
        V::Obj(i) => match keys_p.objs.get(*i) {
            Some(Obj::List(l)) => l
                .iter()
                .map(|k| match k {
                    V::Str(s) => Ok(s.to_string()),
                    V::Int(i) => Ok(i.to_string()),
                    _ => Err(err("storage key list holds a non-str key")),
                })
                .collect::<Result<_>>()?,
            _ => return Err(err("storage key list is not a list")),
        },
        _ => return Err(err("storage key list is not a list")),
    };
    let index: HashMap<&str, usize> = u.storages.iter().enumerate().map(|(i, s)| (s.key.as_str(), i)).collect();
    let mut roots: Vec<Option<Tensor>> = vec![None; u.storages.len()];
    let mut pos = keys_p.end;
    for key in &keys {
        let &i = index.get(key.as_str()).ok_or_else(|| err(format!("storage '{key}' is listed but no tensor uses it")))?;
        let s = &u.storages[i];
        let head = data.get(pos..pos.saturating_add(8)).ok_or_else(|| err(format!("file truncated at storage '{key}' size")))?;
        let mut a = [0u8; 8];
        a.copy_from_slice(head);
        let count = i64::from_le_bytes(a);
        pos += 8;
        let count = usize::try_from(count).map_err(|_| err(format!("storage '{key}' has a negative element count {count}")))?;
        let nbytes = count.checked_mul(s.dtype.size()).ok_or_else(|| err(format!("storage '{key}' size overflows")))?;
        let bytes = data.get(pos..pos.saturating_add(nbytes)).filter(|b| b.len() == nbytes).ok_or_else(|| {
            err(format!("file truncated: storage '{key}' needs {nbytes} bytes at offset {pos}, {} left", data.len().saturating_sub(pos)))
        })?;
        pos += nbytes;
        if count < s.numel {
            return Err(err(format!("storage '{key}' declares {} elements but the file holds {count}", s.numel)));
        }
        if roots[i].is_some() {
            return Err(err(format!("storage '{key}' is listed twice")));
        }
        roots[i] = Some(storage::storage_tensor(key, s.dtype, s.numel, bytes)?);
    }
    let roots: Vec<Tensor> = roots
        .into_iter()
        .zip(&u.storages)
        .map(|(r, s)| r.ok_or_else(|| err(format!("storage '{}' is not in the file", s.key))))
        .collect::<Result<_>>()?;
    build::build(&u, &roots, data.len())
}

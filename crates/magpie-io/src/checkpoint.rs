//! Checkpoint directories: a folder of files (safetensors, JSON) plus a `manifest.json` naming
//! each file with its size and checksum, written atomically as a whole.
//!
//! Saving builds the new folder next to the target (`.NAME.tmp-PID`), fsyncs every file and the
//! folder, then swaps it in with two renames (old folder aside, new folder in place) and removes
//! the old one. A crash at any point leaves either the old checkpoint, the new one, or no folder
//! at `dir` (with the previous checkpoint intact at `.NAME.old-PID`, which the load error names);
//! never a folder that loads wrong. Loading checks the manifest, every size and every checksum,
//! so truncated or corrupted files are clear errors.
//!
//! ```
//! use magpie_io::checkpoint::{load_dir, save_dir};
//! let dir = std::env::temp_dir().join(format!("ckpt-doc-{}", std::process::id()));
//! save_dir(&dir, &[("meta.json".to_string(), br#"{"step": 3}"#.to_vec())])?;
//! let ck = load_dir(&dir)?;
//! assert_eq!(ck.bytes("meta.json")?, br#"{"step": 3}"#);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), magpie_core::Error>(())
//! ```

use magpie_core::{Error, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The manifest's file name inside a checkpoint folder.
pub const MANIFEST: &str = "manifest.json";
const FORMAT: &str = "magpie-checkpoint";
const VERSION: u64 = 1;

fn err(msg: impl Into<String>) -> Error {
    Error::io("checkpoint", msg)
}

/// FNV-1a, 64 bit: a cheap checksum that catches truncation and bit flips (not an adversary).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != MANIFEST
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |what: &str, e: std::io::Error| err(format!("cannot {what} {}: {e}", path.display()));
    let mut f = std::fs::File::create(path).map_err(|e| io("create", e))?;
    f.write_all(bytes).map_err(|e| io("write", e))?;
    f.sync_all().map_err(|e| io("sync", e))
}

fn sync_dir(dir: &Path) {
    // directory fsync makes the renames durable; some filesystems refuse it, which is harmless
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

fn split_dir(dir: &Path) -> Result<(PathBuf, String)> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| err(format!("{} is not a folder path", dir.display())))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

/// Writes `files` (name, contents) as the checkpoint folder `dir`, atomically replacing a previous
/// checkpoint there. Refuses to replace a non-empty folder that is not a checkpoint.
pub fn save_dir(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    let (parent, name) = split_dir(dir)?;
    let mut manifest = serde_json::Map::new();
    for (n, b) in files {
        if !valid_name(n) {
            return Err(err(format!("invalid checkpoint file name {n:?}")));
        }
        if manifest.contains_key(n) {
            return Err(err(format!("file {n:?} given twice")));
        }
        manifest.insert(n.clone(), serde_json::json!({ "bytes": b.len(), "fnv1a64": format!("{:016x}", fnv1a64(b)) }));
    }
    if dir.exists() {
        let is_ckpt = dir.join(MANIFEST).is_file();
        let empty = std::fs::read_dir(dir).map(|mut r| r.next().is_none()).unwrap_or(false);
        if !is_ckpt && !empty {
            return Err(err(format!("{} exists and is not a checkpoint folder; refusing to replace it", dir.display())));
        }
    }
    std::fs::create_dir_all(&parent).map_err(|e| err(format!("cannot create {}: {e}", parent.display())))?;
    let pid = std::process::id();
    let tmp = parent.join(format!(".{name}.tmp-{pid}"));
    let old = parent.join(format!(".{name}.old-{pid}"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| err(format!("cannot remove stale {}: {e}", tmp.display())))?;
    }
    std::fs::create_dir(&tmp).map_err(|e| err(format!("cannot create {}: {e}", tmp.display())))?;
    let result = (|| {
        for (n, b) in files {
            write_synced(&tmp.join(n), b)?;
        }
        let m = serde_json::json!({ "format": FORMAT, "version": VERSION, "files": manifest });
        let text = serde_json::to_string_pretty(&m).map_err(|e| err(e.to_string()))?;
        // the manifest goes last: a folder without one is never taken for a checkpoint
        write_synced(&tmp.join(MANIFEST), text.as_bytes())?;
        sync_dir(&tmp);
        if dir.exists() {
            if old.exists() {
                std::fs::remove_dir_all(&old).map_err(|e| err(format!("cannot remove stale {}: {e}", old.display())))?;
            }
            std::fs::rename(dir, &old).map_err(|e| err(format!("cannot move the previous checkpoint aside: {e}")))?;
        }
        std::fs::rename(&tmp, dir).map_err(|e| err(format!("cannot move the new checkpoint into {}: {e}", dir.display())))?;
        sync_dir(&parent);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        // put the previous checkpoint back if it was moved aside and the new one is not in place
        if old.exists() && !dir.exists() {
            let _ = std::fs::rename(&old, dir);
        }
        return result;
    }
    if old.exists() {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}

/// A loaded, verified checkpoint folder: every file's bytes by name.
#[derive(Debug)]
pub struct CheckpointFiles {
    dir: PathBuf,
    files: BTreeMap<String, Vec<u8>>,
}

impl CheckpointFiles {
    /// The folder it was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The names of the files, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.files.keys().map(|s| s.as_str()).collect()
    }
    /// The contents of file `name`.
    pub fn bytes(&self, name: &str) -> Result<&[u8]> {
        self.files
            .get(name)
            .map(|v| v.as_slice())
            .ok_or_else(|| err(format!("checkpoint {} has no file {name:?}", self.dir.display())))
    }
    /// File `name` parsed as JSON into `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T> {
        serde_json::from_slice(self.bytes(name)?)
            .map_err(|e| err(format!("checkpoint {}: {name} is not valid: {e}", self.dir.display())))
    }
    /// File `name` parsed as safetensors.
    pub fn safetensors(&self, name: &str) -> Result<crate::safetensors::Loaded> {
        crate::safetensors::deserialize(self.bytes(name)?)
            .map_err(|e| err(format!("checkpoint {}: {name}: {e}", self.dir.display())))
    }
}

/// Loads and verifies the checkpoint folder `dir` (manifest, sizes, checksums).
pub fn load_dir(dir: &Path) -> Result<CheckpointFiles> {
    let d = dir.display();
    if !dir.exists() {
        let hint = split_dir(dir).ok().and_then(|(parent, name)| {
            let prefix = format!(".{name}.old-");
            std::fs::read_dir(&parent).ok()?.flatten().find(|e| e.file_name().to_string_lossy().starts_with(&prefix)).map(|e| e.path())
        });
        return Err(match hint {
            Some(h) => err(format!("no checkpoint at {d} (an interrupted save left the previous one at {})", h.display())),
            None => err(format!("no checkpoint at {d}: the folder does not exist")),
        });
    }
    if !dir.is_dir() {
        return Err(err(format!("{d} is not a folder (a checkpoint is a folder with {MANIFEST})")));
    }
    let mpath = dir.join(MANIFEST);
    let text = std::fs::read(&mpath).map_err(|e| err(format!("{d} is not a checkpoint: cannot read {MANIFEST}: {e}")))?;
    let m: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| err(format!("{d}: {MANIFEST} is corrupt: {e}")))?;
    if m["format"] != FORMAT {
        return Err(err(format!("{d}: {MANIFEST} is not a magpie checkpoint manifest")));
    }
    if m["version"].as_u64() != Some(VERSION) {
        return Err(err(format!("{d}: unsupported checkpoint version {} (this build reads version {VERSION})", m["version"])));
    }
    let entries = m["files"].as_object().ok_or_else(|| err(format!("{d}: {MANIFEST} has no file list")))?;
    let mut files = BTreeMap::new();
    for (n, e) in entries {
        if !valid_name(n) {
            return Err(err(format!("{d}: {MANIFEST} names an invalid file {n:?}")));
        }
        let (Some(size), Some(sum)) = (e["bytes"].as_u64(), e["fnv1a64"].as_str()) else {
            return Err(err(format!("{d}: {MANIFEST} entry for {n} is malformed")));
        };
        let b = std::fs::read(dir.join(n)).map_err(|e| err(format!("{d}: cannot read {n}: {e}")))?;
        if b.len() as u64 != size {
            return Err(err(format!("{d}: {n} is {} bytes but the manifest says {size} (truncated or overwritten)", b.len())));
        }
        if format!("{:016x}", fnv1a64(&b)) != sum {
            return Err(err(format!("{d}: {n} fails its checksum (the file is corrupt)")));
        }
        files.insert(n.clone(), b);
    }
    Ok(CheckpointFiles { dir: dir.to_path_buf(), files })
}

//! Atomic file writes: write a temporary file in the same folder, fsync it, rename it over the
//! target, fsync the folder. A crash mid-write leaves the old file or the new one, never a torn one.

use magpie_core::{Error, Result};
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |what: &str, e: std::io::Error| Error::io("save", format!("{what} {}: {e}", path.display()));
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| Error::io("save", format!("{} is not a file path", path.display())))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| io("cannot create a temporary file for", e))?;
        f.write_all(bytes).map_err(|e| io("cannot write", e))?;
        f.sync_all().map_err(|e| io("cannot sync", e))?;
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("cannot rename the temporary file onto", e));
    }
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

//! Helpers shared by the CLI test binaries: run the built `magpie`, and check a failure is one
//! clear line on stderr.

use std::process::{Command, Output};

/// The `magpie` binary: `$MAGPIE_BIN` when set (a copy on another machine), else the one built.
#[allow(dead_code)]
pub fn bin() -> String {
    std::env::var("MAGPIE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_magpie").to_string())
}

/// Runs the built binary with `args`.
pub fn magpie(args: &[&str]) -> Output {
    Command::new(bin()).args(args).env("RUST_BACKTRACE", "1").output().expect("running magpie")
}

/// Bytes as (lossy) text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts a failure with exactly one stderr line, starting `magpie: ` and containing `needle`, no
/// panic, and nothing on stdout.
#[allow(dead_code)]
pub fn fails_with(args: &[&str], needle: &str) {
    let o = magpie(args);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!o.status.success(), "{args:?} should fail; stdout: {out}");
    assert_eq!(err.lines().count(), 1, "{args:?}: stderr should be one line, got:\n{err}");
    assert!(err.starts_with("magpie: ") && err.contains(needle), "{args:?}: expected {needle:?} in {err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace") && !err.contains("internal error"), "{err}");
    assert!(out.is_empty(), "{args:?}: nothing on stdout expected, got {out}");
}

//! Helpers shared by the CLI test binaries: run the built `magpie`, and check a failure is one
//! clear line on stderr.

use std::process::{Command, Output};

/// Runs the built binary with `args`.
pub fn magpie(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_magpie")).args(args).env("RUST_BACKTRACE", "1").output().expect("running magpie")
}

/// Bytes as (lossy) text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts a failure with exactly one stderr line, starting `magpie: ` and containing `needle`, no
/// panic, and nothing on stdout.
pub fn fails_with(args: &[&str], needle: &str) {
    let o = magpie(args);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!o.status.success(), "{args:?} should fail; stdout: {out}");
    assert_eq!(err.lines().count(), 1, "{args:?}: stderr should be one line, got:\n{err}");
    assert!(err.starts_with("magpie: ") && err.contains(needle), "{args:?}: expected {needle:?} in {err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace") && !err.contains("internal error"), "{err}");
    assert!(out.is_empty(), "{args:?}: nothing on stdout expected, got {out}");
}

//! `include/magpie.h` is what cbindgen makes of the crate today: regenerate it with
//! `MAGPIE_WRITE_HEADER=1 cargo test -p magpie-ffi --test header` after changing the ABI.

use std::path::PathBuf;

#[test]
fn header_is_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cfg = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new().with_crate(&dir).with_config(cfg).generate().expect("cbindgen").write(&mut out);
    let fresh = String::from_utf8(out).expect("utf-8 header");
    let path = dir.join("include/magpie.h");
    if std::env::var("MAGPIE_WRITE_HEADER").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &fresh).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(checked_in == fresh, "include/magpie.h is stale: run MAGPIE_WRITE_HEADER=1 cargo test -p magpie-ffi --test header");
}

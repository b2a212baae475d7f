//! Writes `tests/fixtures/from_magpie.safetensors` when `MAGPIE_WRITE_FIXTURES=1` (then run
//! `make_fixtures.py` with Python to check that Python reads it). A no-op otherwise.

mod common;

#[test]
fn write_fixture_for_python() {
    if std::env::var("MAGPIE_WRITE_FIXTURES").as_deref() != Ok("1") {
        return;
    }
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/from_magpie.safetensors");
    magpie_io::safetensors::save(&common::fixture_tensors(), None, p).unwrap();
}

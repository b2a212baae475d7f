//! safetensors: round trips of every dtype, files written by Python's `safetensors` package,
//! every malformed-file class the format can have, and a bounded mutation test.

use magpie_io::safetensors::{deserialize, load, save, serialize};
use std::path::PathBuf;

mod common;
use common::fixture_tensors;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn every_dtype_round_trips() {
    let ts = fixture_tensors();
    let bytes = serialize(&ts, None).unwrap();
    let back = deserialize(&bytes).unwrap();
    assert_eq!(back.tensors.len(), ts.len());
    for (n, t) in &ts {
        let b = back.get(n).unwrap();
        assert_eq!(b.dtype(), t.dtype(), "{n}");
        assert_eq!(b.shape(), t.shape(), "{n}");
        assert_eq!(b.to_vec::<f64>().unwrap(), t.to_vec::<f64>().unwrap(), "{n}");
    }
}

#[test]
fn reads_files_written_by_python_and_writes_what_python_read() {
    let py = load(fixtures().join("from_python.safetensors")).unwrap();
    assert_eq!(py.metadata.get("format").map(String::as_str), Some("pt"));
    for (n, t) in fixture_tensors() {
        let p = py.get(&n).unwrap_or_else(|| panic!("python file lacks {n}"));
        assert_eq!(p.dtype(), t.dtype(), "{n}");
        assert_eq!(p.shape(), t.shape(), "{n}");
        assert_eq!(p.to_vec::<f64>().unwrap(), t.to_vec::<f64>().unwrap(), "{n}");
    }
    // make_fixtures.py checked that Python reads from_magpie.safetensors to the same values;
    // our writer must still produce exactly those bytes.
    let ours = serialize(&fixture_tensors(), None).unwrap();
    let committed = std::fs::read(fixtures().join("from_magpie.safetensors")).unwrap();
    assert!(ours == committed, "the writer's output changed; rerun make_fixtures.py to re-check Python compatibility");
}

#[test]
fn save_is_atomic_and_load_reads_it_back() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("m.safetensors");
    save(&fixture_tensors(), None, &p).unwrap();
    save(&fixture_tensors()[..2], None, &p).unwrap();
    assert_eq!(load(&p).unwrap().tensors.len(), 2);
    let leftovers: Vec<_> = std::fs::read_dir(d.path()).unwrap().filter_map(|e| e.ok()).collect();
    assert_eq!(leftovers.len(), 1, "no temporary files left behind");
    let e = load(d.path().join("missing.safetensors")).unwrap_err().to_string();
    assert!(e.contains("cannot open"), "{e}");
}

fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn expect_err(bytes: &[u8], needle: &str) {
    let e = deserialize(bytes).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains(needle), "expected '{needle}' in: {e}");
}

#[test]
fn malformed_files_are_clear_errors() {
    let ok = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    assert!(deserialize(&file(ok, &[0; 8])).is_ok());
    expect_err(&[1, 2, 3], "too short");
    expect_err(&file(ok, &[0; 4]), "truncated");
    let mut long = file(ok, &[0; 8]);
    long[0] = 0xff;
    expect_err(&long, "past the end");
    long[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    expect_err(&long, "limit");
    expect_err(&file("not json", &[]), "not a JSON object");
    expect_err(&file(ok, &[0; 9]), "trailing bytes");
    expect_err(&file(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#, &[0; 8]), "overlaps");
    expect_err(&file(r#"{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#, &[0; 8]), "gap");
    expect_err(&file(r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, &[0; 8]), "needs 12 bytes");
    expect_err(&file(r#"{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}"#, &[0; 8]), "overflows");
    expect_err(&file(r#"{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}"#, &[0; 8]), "unknown or unsupported dtype");
    expect_err(&file(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#, &[0; 8]), "duplicate");
    expect_err(&file(r#"{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}"#, &[0; 8]), "non-negative");
    expect_err(&file(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}"#, &[0; 8]), "begin after end");
    expect_err(&file(r#"{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}"#, &[7]), "invalid bool");
    expect_err(&file(r#"{"__metadata__":{"k":1}}"#, &[]), "not a string");
}

/// Mutates a valid file many ways (bytes flipped, truncated, header numbers changed): every
/// result must be `Ok` or `Err`, never a panic. Bounded: a fixed seed and count, well under a second.
#[test]
fn mutated_files_never_panic() {
    let valid = serialize(&fixture_tensors(), None).unwrap();
    let mut state = 0x2545F4914F6CDD1Du64;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let hlen = u64::from_le_bytes(valid[..8].try_into().unwrap()) as usize;
    let digits: Vec<usize> = (8..8 + hlen).filter(|&i| valid[i].is_ascii_digit()).collect();
    let (mut ok, mut err) = (0, 0);
    for i in 0..4000 {
        let mut m = valid.clone();
        match i % 4 {
            0 => {
                let k = (rnd() as usize) % m.len();
                m[k] ^= 1 << (rnd() % 8);
            }
            1 => m.truncate((rnd() as usize) % m.len()),
            2 => {
                let k = digits[(rnd() as usize) % digits.len()];
                m[k] = b'0' + (rnd() % 10) as u8;
            }
            _ => {
                let k = (rnd() as usize) % 8;
                m[k] = rnd() as u8;
            }
        }
        match std::panic::catch_unwind(|| deserialize(&m).is_ok()) {
            Ok(true) => ok += 1,
            Ok(false) => err += 1,
            Err(_) => panic!("deserialize panicked on mutation {i}"),
        }
    }
    assert!(err > 1000 && ok > 0, "mutations should produce both outcomes ({ok} ok, {err} err)");
}

//! Zero-copy loading: safetensors and `.pt` zip files load as tensors over the memory-mapped
//! file (as safetensors' `load_file` and `torch.load(mmap=True)` do), with the same values as the
//! copying readers; bool and misaligned entries are copied; a write copies the storage and never
//! reaches the file; tensors keep the map alive after the loader's handles are gone.

use std::path::PathBuf;

use magpie_core::storage::Storage;
use magpie_core::{DType, Tensor};

use magpie_io::{pt, safetensors};

fn is_mapped(t: &Tensor) -> bool {
    matches!(&*t.storage().read(), Storage::Cpu(c) if c.is_mapped())
}

fn le(t: &Tensor) -> Vec<u8> {
    safetensors::tensor_to_le_bytes(&t.contiguous().unwrap()).unwrap()
}

fn pt_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pt").join(name)
}

/// A safetensors file laid out by hand: `entries` in this order, no padding between them, so a
/// 3-byte u8 tensor leaves the next f32 entry misaligned.
fn hand_file(entries: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut pos = 0;
    for (name, dt, shape, bytes) in entries {
        header.insert(name.to_string(), serde_json::json!({"dtype": dt, "shape": shape, "data_offsets": [pos, pos + bytes.len()]}));
        pos += bytes.len();
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    while (8 + h.len()) % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    for (_, _, _, b) in entries {
        out.extend(b);
    }
    out
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn safetensors_tensors_borrow_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let bf: Vec<u8> = [1.5f32, -2.0, 3.25].iter().flat_map(|&x| magpie_core::half::bf16::from_f32(x).to_le_bytes()).collect();
    let file = hand_file(&[
        ("a", "F32", vec![2, 3], f32s(&[1., 2., 3., 4., 5., 6.])),
        ("c", "I64", vec![2], [7i64, -9].iter().flat_map(|x| x.to_le_bytes()).collect()),
        ("b", "BF16", vec![3], bf),
        ("flags", "BOOL", vec![3], vec![1, 0, 1]),
        ("odd", "F32", vec![2], f32s(&[0.5, -0.5])), // at data offset 49: misaligned, copied
    ]);
    std::fs::write(&path, &file).unwrap();
    let copied = safetensors::deserialize(&file).unwrap();
    let loaded = safetensors::load(&path).unwrap();
    assert_eq!(loaded.tensors.len(), 5);
    for ((n, t), (m, u)) in loaded.tensors.iter().zip(&copied.tensors) {
        assert_eq!(n, m);
        assert_eq!(t.dtype(), u.dtype());
        assert_eq!(t.shape(), u.shape());
        assert_eq!(le(t), le(u), "{n}");
        assert!(!is_mapped(u), "deserialize copies");
    }
    let get = |n: &str| loaded.get(n).unwrap().clone();
    assert!(is_mapped(&get("a")) && is_mapped(&get("b")) && is_mapped(&get("c")));
    assert!(!is_mapped(&get("flags")), "bool bytes are checked, so copied");
    assert!(!is_mapped(&get("odd")), "a misaligned entry is copied");
    assert_eq!(get("odd").to_vec::<f32>().unwrap(), vec![0.5, -0.5]);

    // a write copies the storage: the tensor changes, the file and a second load do not
    let a = get("a");
    drop(loaded); // the tensor keeps the map alive
    a.mul_scalar_(10.0).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![10., 20., 30., 40., 50., 60.]);
    assert_eq!(std::fs::read(&path).unwrap(), file);
    let again = safetensors::MappedFile::open(&path).unwrap();
    let a2 = again.tensor("a").unwrap();
    assert!(is_mapped(&a2));
    assert_eq!(a2.to_vec::<f32>().unwrap(), vec![1., 2., 3., 4., 5., 6.]);
    // the model loader's conversion reads the mapped bytes in place
    assert_eq!(again.tensor("b").unwrap().to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(), vec![1.5, -2.0, 3.25]);
}

#[test]
fn safetensors_bad_bool_in_a_file_is_still_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.safetensors");
    std::fs::write(&path, hand_file(&[("flags", "BOOL", vec![2], vec![1, 7])])).unwrap();
    let e = safetensors::load(&path).unwrap_err().to_string();
    assert!(e.contains("invalid bool byte 7"), "{e}");
}

#[test]
fn pt_zip_storages_borrow_the_file() {
    let path = pt_fixture("mixed.pt");
    let bytes = std::fs::read(&path).unwrap();
    let mapped = pt::flatten(&pt::load(&path).unwrap());
    let copied = pt::flatten(&pt::load_bytes(&bytes).unwrap());
    assert_eq!(mapped.len(), copied.len());
    let mut n_mapped = 0;
    for ((n, t), (m, u)) in mapped.iter().zip(&copied) {
        assert_eq!(n, m);
        assert_eq!((t.dtype(), t.shape(), t.strides(), t.storage_offset()), (u.dtype(), u.shape(), u.strides(), u.storage_offset()), "{n}");
        assert_eq!(le(t), le(u), "{n}");
        assert!(!is_mapped(u), "load_bytes copies");
        if t.numel() > 0 {
            assert_eq!(is_mapped(t), t.dtype() != DType::Bool, "{n}: storages are borrowed, bool copied");
            n_mapped += is_mapped(t) as usize;
        }
    }
    assert!(n_mapped > 10);
    // `row` and `base` share a storage: a write through one is seen through the other (one copy)
    let get = |k: &str| mapped.iter().find(|(n, _)| n == k).unwrap().1.clone();
    let (base, row) = (get("base"), get("row"));
    assert!(base.shares_storage(&row));
    let before = le(&base);
    row.fill_(-7.0).unwrap();
    assert!(!is_mapped(&base));
    assert_ne!(le(&base), before);
    assert_eq!(row.to_vec::<f32>().unwrap(), vec![-7.0; 8]);
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the file never changes");
    let again = pt::flatten(&pt::load(&path).unwrap());
    assert_eq!(le(&again.iter().find(|(n, _)| n == "base").unwrap().1), before);
}

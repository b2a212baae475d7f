//! GGUF reader, dequantizers and writer against the fixtures made with gguf-py 0.19.0
//! (`tests/fixtures/gguf/`).

use magpie_core::Tensor;
use magpie_io::gguf::{self, GgmlType, GgufFile, GgufWriter, Value, ValueType};
use serde_json::Value as Json;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf").join(name)
}

fn json(name: &str) -> Json {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Checks one value against its JSON description (`type`, `value`, `elem_type` for arrays).
fn check_value(key: &str, v: &Value, ty: &str, expected: &Json, elem: Option<&str>) {
    assert_eq!(v.value_type().name(), ty, "type of {key}");
    match v {
        Value::U8(_) | Value::U16(_) | Value::U32(_) | Value::U64(_) => {
            assert_eq!(v.as_u64(), expected.as_u64(), "{key}")
        }
        Value::I8(_) | Value::I16(_) | Value::I32(_) | Value::I64(_) => {
            assert_eq!(v.as_i64(), expected.as_i64(), "{key}")
        }
        Value::F32(x) => assert_eq!(x.to_bits(), (expected.as_f64().unwrap() as f32).to_bits(), "{key}"),
        Value::F64(x) => assert_eq!(x.to_bits(), expected.as_f64().unwrap().to_bits(), "{key}"),
        Value::Bool(b) => assert_eq!(Some(*b), expected.as_bool(), "{key}"),
        Value::String(s) => assert_eq!(Some(s.as_str()), expected.as_str(), "{key}"),
        Value::Array(a) => {
            let elem = elem.unwrap();
            assert_eq!(a.elem_type.name(), elem, "element type of {key}");
            let items = expected.as_array().unwrap();
            assert_eq!(a.items.len(), items.len(), "length of {key}");
            for (item, e) in a.items.iter().zip(items) {
                check_value(key, item, elem, e, None);
            }
        }
    }
}

#[test]
fn kv_types_match_expected_json() {
    let f = GgufFile::open(fixture("kv-types.gguf")).unwrap();
    let exp = json("kv-types.expected.json");
    assert_eq!(f.tensors().len(), 0);
    assert_eq!(f.version(), 3);
    let kv = exp["kv"].as_array().unwrap();
    assert_eq!(f.metadata().len(), kv.len());
    for ((k, v), e) in f.metadata().iter().zip(kv) {
        assert_eq!(k, e["key"].as_str().unwrap());
        check_value(k, v, e["type"].as_str().unwrap(), &e["value"], e["elem_type"].as_str());
    }
    assert_eq!(f.get("test.u64"), Some(&Value::U64(9223372036854775813)));
    assert_eq!(f.get("test.arr_str").unwrap().as_str_array().unwrap(), vec!["a", "", "日本"]);
}

#[test]
fn quant_blocks_dequantize_bit_exact() {
    let f = GgufFile::open(fixture("quant-blocks.gguf")).unwrap();
    let r = magpie_io::safetensors::load(fixture("quant-blocks.reference.safetensors")).unwrap();
    let mut seen = Vec::new();
    for t in f.tensors() {
        let got = f.tensor_f32(&t.name).unwrap();
        let want = r.get(&t.name).unwrap_or_else(|| panic!("no reference for {}", t.name));
        assert_eq!(got.shape(), want.shape(), "{}", t.name);
        let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
        assert_eq!(bits(&g), bits(&w), "{} ({}) differs from gguf-py", t.name, t.ggml_type);
        seen.push(t.ggml_type);
    }
    for ty in ["F32", "F16", "Q8_0", "Q4_0", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"] {
        assert!(seen.contains(&GgmlType::from_name(ty).unwrap()), "{ty} not covered");
    }
}

const TINY: [&str; 9] = ["F32", "F16", "Q8_0", "Q4_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"];

#[test]
fn tiny_llama_files_match_manifest() {
    let m = json("manifest.json");
    for ty in TINY {
        let name = format!("tiny-llama-{ty}.gguf");
        let f = GgufFile::open(fixture(&name)).unwrap();
        let e = &m["files"][&name];
        assert_eq!(f.alignment(), e["alignment"].as_u64().unwrap());
        let tensors = e["tensors"].as_array().unwrap();
        assert_eq!(f.tensors().len(), tensors.len(), "{name}");
        assert_eq!(f.tensors().len(), 31);
        let mut counts = std::collections::BTreeMap::<String, u64>::new();
        for (t, et) in f.tensors().iter().zip(tensors) {
            assert_eq!(t.name, et["name"].as_str().unwrap());
            assert_eq!(t.ggml_type.name(), et["type"].as_str().unwrap(), "{name} {}", t.name);
            let ne: Vec<u64> = et["ne"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
            assert_eq!(t.ne, ne);
            assert_eq!(t.offset, et["offset_in_data"].as_u64().unwrap());
            assert_eq!(t.nbytes, et["nbytes"].as_u64().unwrap());
            *counts.entry(t.ggml_type.name().to_string()).or_default() += 1;
        }
        let want: std::collections::BTreeMap<String, u64> =
            e["tensor_types"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
        assert_eq!(counts, want, "{name}");
        // metadata: keys in order, types, scalar values, array lengths
        let kv = e["kv"].as_object().unwrap();
        let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k.as_str()).collect();
        let want_keys: Vec<&str> = kv.keys().map(|k| k.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, want_keys, "{name} keys");
        assert_eq!(keys[0], "general.architecture");
        for (k, v) in f.metadata() {
            let ek = &kv[k];
            let ety = ek["type"].as_str().unwrap();
            if let Some(elem) = ety.strip_prefix("array[").and_then(|s| s.strip_suffix(']')) {
                let a = v.as_array().unwrap();
                assert_eq!(a.elem_type.name(), elem, "{k}");
                assert_eq!(a.items.len() as u64, ek["len"].as_u64().unwrap(), "{k}");
            } else {
                check_value(k, v, ety, &ek["value"], None);
            }
        }
        // every tensor dequantizes
        for t in f.tensors() {
            let x = f.tensor_f32(&t.name).unwrap();
            assert_eq!(x.shape(), t.shape().as_slice());
        }
    }
}

#[test]
fn tiny_llama_tensors_equal_references() {
    for ty in ["F32", "Q8_0", "Q4_K"] {
        let f = GgufFile::open(fixture(&format!("tiny-llama-{ty}.gguf"))).unwrap();
        let r = magpie_io::safetensors::load(fixture(&format!("tiny-llama-{ty}.reference.safetensors"))).unwrap();
        for t in f.tensors() {
            let got = f.tensor_f32(&t.name).unwrap();
            let want = r.get(&t.name).unwrap_or_else(|| panic!("{ty}: no reference for {}", t.name));
            assert_eq!(got.shape(), want.shape(), "{ty} {}", t.name);
            assert_eq!(
                bits(&got.to_vec::<f32>().unwrap()),
                bits(&want.to_vec::<f32>().unwrap()),
                "{ty}: {} ({})",
                t.name,
                t.ggml_type
            );
        }
    }
}

/// gguf-py quantized the F32 model's weights to make the Q8_0 and Q4_0 files: our quantizers
/// give the same blocks byte for byte.
#[test]
fn quantizers_match_gguf_py_blocks() {
    let src = GgufFile::open(fixture("tiny-llama-F32.gguf")).unwrap();
    for (ty, file) in [(GgmlType::Q8_0, "tiny-llama-Q8_0.gguf"), (GgmlType::Q4_0, "tiny-llama-Q4_0.gguf")] {
        let q = GgufFile::open(fixture(file)).unwrap();
        let mut n = 0;
        for t in q.tensors().iter().filter(|t| t.ggml_type == ty) {
            let x = src.tensor_data_f32(&t.name).unwrap();
            let ours = gguf::quantize(ty, &x).unwrap();
            assert!(ours == q.tensor_bytes(&t.name).unwrap(), "{ty} blocks of {} differ from gguf-py's", t.name);
            n += 1;
        }
        assert_eq!(n, 23, "{file}");
    }
}

/// `extra-quants.gguf` (made by `make_extra_quants.py` with gguf-py): edge-case rows quantized by
/// gguf-py, next to gguf-py's dequantization. Our dequantizers and quantizers give the same bits,
/// and our writer the same file.
#[test]
fn extra_quants_match_gguf_py() {
    let path = fixture("extra-quants.gguf");
    let f = GgufFile::open(&path).unwrap();
    let src = f.tensor_data_f32("source").unwrap();
    let mut w = GgufWriter::new();
    w.add("general.architecture", "test").unwrap();
    w.add_tensor("source", &Tensor::from_vec(src.clone(), &[8, 256]).unwrap(), GgmlType::F32).unwrap();
    for name in ["bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"] {
        let ty = GgmlType::from_name(name).unwrap();
        let wname = format!("{name}.weight");
        let dname = format!("{name}.dequant");
        assert_eq!(f.tensor_info(&wname).unwrap().ggml_type, ty);
        assert_eq!(
            bits(&f.tensor_data_f32(&wname).unwrap()),
            bits(&f.tensor_data_f32(&dname).unwrap()),
            "{name}: dequantization differs from gguf-py"
        );
        let ours = gguf::quantize(ty, &src).unwrap();
        let theirs = f.tensor_bytes(&wname).unwrap();
        for (i, (a, b)) in ours.chunks(ty.block_bytes()).zip(theirs.chunks(ty.block_bytes())).enumerate() {
            assert_eq!(a, b, "{name}: block {i} (row {}) differs from gguf-py's", i * ty.block_size() / 256);
        }
        w.add_tensor(&wname, &Tensor::from_vec(src.clone(), &[8, 256]).unwrap(), ty).unwrap();
        w.add_tensor(&dname, &f.tensor_f32(&dname).unwrap(), GgmlType::F32).unwrap();
    }
    assert!(w.to_bytes().unwrap() == std::fs::read(&path).unwrap(), "writer output differs from gguf-py's file");
}

/// Writing a fixture's metadata and raw tensors back gives gguf-py's file byte for byte.
#[test]
fn rewriting_fixtures_reproduces_them() {
    let mut names: Vec<String> = TINY.iter().map(|t| format!("tiny-llama-{t}.gguf")).collect();
    names.extend(["kv-types.gguf", "quant-blocks.gguf", "malformed/valid_base.gguf"].map(String::from));
    for name in names {
        let bytes = std::fs::read(fixture(&name)).unwrap();
        let f = GgufFile::from_bytes(bytes.clone()).unwrap();
        let mut w = GgufWriter::new();
        for (k, v) in f.metadata() {
            w.add(k.clone(), v.clone()).unwrap();
        }
        for t in f.tensors() {
            w.add_raw(t.name.clone(), t.ggml_type, &t.ne, f.tensor_bytes(&t.name).unwrap().to_vec()).unwrap();
        }
        assert!(w.to_bytes().unwrap() == bytes, "{name}: rewritten file differs");
    }
}

#[test]
fn malformed_files_rejected() {
    let cases = json("malformed/cases.json");
    // a word the error message must contain, per case
    let words = [
        ("bad_magic.gguf", "magic"),
        ("version_4.gguf", "version 4"),
        ("truncated_header.gguf", "file ends"),
        ("truncated_tensor_data.gguf", "not within the file"),
        ("n_tensors_huge.gguf", "tensor count"),
        ("string_len_beyond_eof.gguf", "string length 5000"),
        ("array_len_overflow.gguf", "overflows"),
        ("unknown_value_type.gguf", "invalid value type 13"),
        ("unknown_ggml_type.gguf", "unknown ggml type 99"),
        ("tensor_offset_beyond_eof.gguf", "not within the file"),
        ("misaligned_tensor_offset.gguf", "not a multiple of the alignment"),
        ("n_dims_5.gguf", "n_dims = 5"),
        ("duplicate_tensor_name.gguf", "duplicate tensor name"),
        ("alignment_not_pow2.gguf", "not a power of two"),
    ];
    let list = cases["cases"].as_array().unwrap();
    assert_eq!(list.len(), 15);
    for c in list {
        let file = c["file"].as_str().unwrap();
        let path = fixture(&format!("malformed/{file}"));
        let res = GgufFile::open(&path);
        match c["expect"].as_str().unwrap() {
            "accept" => {
                let f = res.unwrap_or_else(|e| panic!("{file} must load: {e}"));
                assert_eq!(f.tensors().len(), 3);
                for t in f.tensors() {
                    f.tensor_f32(&t.name).unwrap();
                }
                assert_eq!(f.tensor_info("b.weight").unwrap().ggml_type, GgmlType::Q8_0);
            }
            "reject" => {
                let e = match res {
                    Ok(_) => panic!("{file} must be rejected ({})", c["what"]),
                    Err(e) => e.to_string(),
                };
                let word = words.iter().find(|(f, _)| *f == file).unwrap_or_else(|| panic!("no key word for {file}")).1;
                assert!(e.contains(word), "{file}: error '{e}' does not mention '{word}'");
                // the same from bytes
                assert!(GgufFile::from_bytes(std::fs::read(&path).unwrap()).is_err());
            }
            other => panic!("unknown expectation {other}"),
        }
    }
}

fn sample(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 * 0.37 + seed as f32).sin() * 3.0) + if i % 97 == 5 { 20.0 } else { 0.0 }).collect()
}

#[test]
fn writer_round_trip() {
    let mut w = GgufWriter::new();
    w.add("general.architecture", "llama").unwrap();
    w.add("t.u8", 200u8).unwrap();
    w.add("t.i8", -100i8).unwrap();
    w.add("t.u16", 65000u16).unwrap();
    w.add("t.i16", -30000i16).unwrap();
    w.add("t.u32", 4_000_000_000u32).unwrap();
    w.add("t.i32", -2_000_000_000i32).unwrap();
    w.add("t.f32", 0.15625f32).unwrap();
    w.add("t.bool", true).unwrap();
    w.add("t.str", "héllo ✓ 🦙").unwrap();
    w.add("t.empty", "").unwrap();
    w.add("t.u64", u64::MAX).unwrap();
    w.add("t.i64", i64::MIN).unwrap();
    w.add("t.f64", -1e300f64).unwrap();
    w.add("t.arr_str", gguf::array_of(ValueType::String, ["a", "", "日本"])).unwrap();
    w.add("t.arr_f32", gguf::array_of(ValueType::F32, [1.5f32, -0.0])).unwrap();
    w.add("t.arr_empty", gguf::array_of::<i32>(ValueType::I32, [])).unwrap();
    let inner = gguf::array_of(ValueType::U16, [1u16, 2]);
    w.add("t.nested", Value::array(ValueType::Array, vec![inner.clone(), gguf::array_of::<u16>(ValueType::U16, [])]))
        .unwrap();
    w.add("general.alignment", 64u32).unwrap();
    assert!(w.add("t.u8", 1u8).is_err(), "duplicate key");
    assert!(w.add("t.bad", Value::array(ValueType::U8, vec![Value::I8(1)])).is_err(), "mixed array");

    let a = sample(8 * 64, 1);
    let b = sample(3 * 32, 2);
    let c = sample(2 * 64, 3);
    let d = sample(5 * 64, 4);
    w.add_tensor("a", &Tensor::from_vec(a.clone(), &[8, 64]).unwrap(), GgmlType::F32).unwrap();
    w.add_tensor("b", &Tensor::from_vec(b.clone(), &[3, 32]).unwrap(), GgmlType::F16).unwrap();
    w.add_tensor("c", &Tensor::from_vec(c.clone(), &[2, 64]).unwrap(), GgmlType::Q8_0).unwrap();
    w.add_tensor("d", &Tensor::from_vec(d.clone(), &[5, 64]).unwrap(), GgmlType::BF16).unwrap();
    w.add_tensor("e", &Tensor::from_vec(c.clone(), &[2, 64]).unwrap(), GgmlType::Q4_0).unwrap();
    // already-quantized blocks stay as they are
    let qb = GgufFile::open(fixture("quant-blocks.gguf")).unwrap();
    let q4k = qb.tensor_info("q4_k.weight").unwrap().clone();
    w.add_raw("raw_q4_k", GgmlType::Q4_K, &q4k.ne, qb.tensor_bytes("q4_k.weight").unwrap().to_vec()).unwrap();
    assert!(w.add_tensor("a", &Tensor::from_vec(a.clone(), &[8, 64]).unwrap(), GgmlType::F32).is_err());
    assert!(w.add_tensor("odd", &Tensor::from_vec(vec![0f32; 40], &[40]).unwrap(), GgmlType::Q8_0).is_err());
    assert!(w.add_raw("short", GgmlType::Q8_0, &[32], vec![0; 33]).is_err());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rt.gguf");
    w.write(&path).unwrap();
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.metadata().len(), 19);
    assert_eq!(f.get("t.str").unwrap().as_str(), Some("héllo ✓ 🦙"));
    assert_eq!(f.get("t.u64"), Some(&Value::U64(u64::MAX)));
    assert_eq!(f.get("t.i64"), Some(&Value::I64(i64::MIN)));
    assert_eq!(f.get("t.f64"), Some(&Value::F64(-1e300)));
    assert_eq!(f.get("t.f32"), Some(&Value::F32(0.15625)));
    assert_eq!(f.get("t.i8"), Some(&Value::I8(-100)));
    assert_eq!(f.get("t.bool"), Some(&Value::Bool(true)));
    assert_eq!(f.get("t.arr_str").unwrap().as_str_array().unwrap(), vec!["a", "", "日本"]);
    assert_eq!(f.get("t.arr_f32").unwrap().as_f32_array().unwrap()[1].to_bits(), (-0.0f32).to_bits());
    let empty = f.get("t.arr_empty").unwrap().as_array().unwrap();
    assert_eq!((empty.elem_type, empty.items.len()), (ValueType::I32, 0));
    let nested = f.get("t.nested").unwrap().as_array().unwrap();
    assert_eq!(nested.items[0], inner);
    // every value as written
    let again = GgufFile::from_bytes(std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(again.metadata(), f.metadata());

    assert_eq!(f.tensor_info("a").unwrap().ne, vec![64, 8]);
    assert_eq!(f.tensor_f32("a").unwrap().shape(), &[8, 64]);
    assert_eq!(bits(&f.tensor_data_f32("a").unwrap()), bits(&a));
    let b16: Vec<f32> = b.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect();
    assert_eq!(bits(&f.tensor_data_f32("b").unwrap()), bits(&b16));
    let dbf: Vec<f32> = d.iter().map(|&x| half::bf16::from_f32(x).to_f32()).collect();
    assert_eq!(bits(&f.tensor_data_f32("d").unwrap()), bits(&dbf));
    assert_eq!(f.tensor_info("c").unwrap().ggml_type, GgmlType::Q8_0);
    assert_eq!(f.tensor_bytes("c").unwrap(), gguf::quantize_q8_0(&c).as_slice());
    assert_eq!(f.tensor_bytes("raw_q4_k").unwrap(), qb.tensor_bytes("q4_k.weight").unwrap());
    assert_eq!(bits(&f.tensor_data_f32("raw_q4_k").unwrap()), bits(&qb.tensor_data_f32("q4_k.weight").unwrap()));
    for t in f.tensors() {
        assert_eq!(t.offset % 64, 0);
        assert_eq!((f.header().data_offset + t.offset) % 64, 0);
    }
    // Q8_0 error: at most half a step (d/2, d = max|x|/127 per block) plus f16 rounding of d
    let cq = f.tensor_data_f32("c").unwrap();
    for (blk, got) in c.chunks(32).zip(cq.chunks(32)) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (x, y) in blk.iter().zip(got) {
            assert!((x - y).abs() <= amax / 127.0 * 0.5 + amax * 1e-3, "{x} vs {y}");
        }
    }
    // Q4_0 error: at most one step d = max|x|/8 (plus f16 rounding)
    let eq = f.tensor_data_f32("e").unwrap();
    for (blk, got) in c.chunks(32).zip(eq.chunks(32)) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (x, y) in blk.iter().zip(got) {
            assert!((x - y).abs() <= amax / 8.0 + amax * 1e-3, "{x} vs {y}");
        }
    }
}

/// Q4_K (our simple scale choice): every value within one step of its super-block's coarsest
/// sub-block plus one step of the 6-bit minimums, small relative error on real weights, and the
/// writer stores the blocks.
#[test]
fn q4_k_quantizer_error_bounded() {
    let src = GgufFile::open(fixture("tiny-llama-F32.gguf")).unwrap();
    let mut x = src.tensor_data_f32("blk.0.ffn_down.weight").unwrap();
    x.extend(std::iter::repeat_n(0f32, 256));
    x.extend(std::iter::repeat_n(2.5f32, 256));
    x.extend(std::iter::repeat_n(-1.25f32, 256));
    x.extend((0..256).map(|i| if i % 50 == 3 { 40.0 } else { (i as f32 * 0.1).cos() }));
    x.extend((0..256).map(|i| -1e-3 * i as f32));
    let q = gguf::quantize(GgmlType::Q4_K, &x).unwrap();
    assert_eq!(q.len(), x.len() / 256 * 144);
    let y = gguf::dequantize(GgmlType::Q4_K, &q, x.len()).unwrap();
    // relative RMS error on the real weights (the first 96 super-blocks)
    let n = 96 * 256;
    let se: f64 = x[..n].iter().zip(&y[..n]).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
    let sx: f64 = x[..n].iter().map(|a| (*a as f64).powi(2)).sum();
    let rel = (se / sx).sqrt();
    assert!(rel < 0.1, "relative RMS error {rel}");
    eprintln!("Q4_K relative RMS error on blk.0.ffn_down.weight: {rel:.4}");
    for (bx, by) in x.chunks(256).zip(y.chunks(256)) {
        let lows = bx.chunks(32).map(|s| s.iter().copied().fold(0f32, f32::min));
        let highs = bx.chunks(32).map(|s| s.iter().copied().fold(f32::NEG_INFINITY, f32::max));
        let step = lows.clone().zip(highs).map(|(l, h)| h - l).fold(0f32, f32::max) / 15.0;
        let min_step = lows.map(|l| -l).fold(0f32, f32::max) / 63.0;
        for (a, b) in bx.iter().zip(by) {
            assert!((a - b).abs() <= (step + min_step) * 1.01 + 1e-6, "{a} vs {b} (steps {step}, {min_step})");
        }
    }
    // a constant or zero super-block comes back exactly
    assert!(y[256 * 96..256 * 97].iter().all(|&v| v == 0.0));
    let mut w = GgufWriter::new();
    w.add_tensor("k", &Tensor::from_vec(x.clone(), &[x.len() / 256, 256]).unwrap(), GgmlType::Q4_K).unwrap();
    let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.tensor_bytes("k").unwrap(), q.as_slice());
}

#[test]
fn quantizer_edge_cases() {
    // all-zero block: d = 0, every q = 0
    let z = gguf::quantize_q8_0(&[0f32; 32]);
    assert!(z.iter().all(|&b| b == 0));
    assert_eq!(gguf::dequantize(GgmlType::Q8_0, &z, 32).unwrap(), vec![0f32; 32]);
    // halves round away from zero: x = 127 * k / 2 with max 127 gives d = 1
    let mut x = vec![0f32; 32];
    x[0] = 127.0;
    x[1] = 2.5;
    x[2] = -2.5;
    let q = gguf::quantize_q8_0(&x);
    assert_eq!((q[2] as i8, q[3] as i8, q[4] as i8), (127, 3, -3));
    assert_eq!(gguf::f32_to_bf16_bits(f32::from_bits(0x7f80_0001)) & 0x7fc0, 0x7fc0);
    assert!(gguf::quantize(GgmlType::Q6_K, &[0f32; 256]).is_err());
    assert!(gguf::quantize(GgmlType::Q4_K, &[0f32; 255]).is_err());
    assert!(gguf::dequantize(GgmlType::Q8_0, &[0u8; 33], 32).is_err());
    assert!(gguf::dequantize(GgmlType::Q8_0, &[0u8; 34], 31).is_err());
    assert!(GgmlType::from_id(99).unwrap_err().to_string().contains("99"));
    assert!(GgmlType::from_id(16).unwrap_err().to_string().contains("IQ2_XXS"));
}

#[test]
fn every_truncation_rejected() {
    let base = std::fs::read(fixture("malformed/valid_base.gguf")).unwrap();
    let h = gguf::parse_header(&base).unwrap();
    let end = h.tensors.iter().map(|t| h.data_offset + t.offset + t.nbytes).max().unwrap() as usize;
    for n in 0..end {
        assert!(GgufFile::from_bytes(base[..n].to_vec()).is_err(), "prefix of {n} bytes accepted");
    }
    GgufFile::from_bytes(base[..end].to_vec()).unwrap();
}

/// Builds GGUF bytes by hand, for inputs the writer refuses to make.
struct Raw(Vec<u8>);
impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &[u8]) -> &mut Raw {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s);
        self
    }
    fn tensor(&mut self, name: &str, ne: &[u64], ty: u32, offset: u64) -> &mut Raw {
        self.str(name.as_bytes()).u32(ne.len() as u32);
        for &n in ne {
            self.u64(n);
        }
        self.u32(ty).u64(offset)
    }
    fn pad(&mut self, extra: usize) -> Vec<u8> {
        let mut b = self.0.clone();
        b.resize(b.len().div_ceil(32) * 32 + extra, 0);
        b
    }
}

fn rejects(bytes: Vec<u8>, word: &str) {
    match GgufFile::from_bytes(bytes) {
        Ok(_) => panic!("accepted; expected an error mentioning '{word}'"),
        Err(e) => assert!(e.to_string().contains(word), "error '{e}' does not mention '{word}'"),
    }
}

#[test]
fn hand_made_bad_headers_rejected() {
    rejects(Vec::new(), "magic");
    rejects(Raw::header(1, 0, 0).pad(0), "version 1");
    rejects(Raw::header(3u32.swap_bytes(), 0, 0).pad(0), "big-endian");
    rejects(Raw::header(3, 0, u64::MAX).pad(0), "key-value count");
    rejects(Raw::header(3, u64::MAX / 16, 1).pad(0), "overflow");
    // a bool must be 0 or 1
    rejects(Raw::header(3, 0, 1).str(b"k").u32(7).0.iter().copied().chain([2u8]).collect(), "bool");
    // invalid UTF-8 in a key
    rejects(Raw::header(3, 0, 1).str(b"\xff\xfe").u32(0).pad(1), "UTF-8");
    // duplicate key
    rejects(Raw::header(3, 0, 2).str(b"k").u32(4).u32(1).str(b"k").u32(4).u32(2).pad(0), "duplicate key");
    // general.alignment of the wrong type, and 0
    rejects(Raw::header(3, 0, 1).str(b"general.alignment").u32(10).u64(32).pad(0), "UINT32");
    rejects(Raw::header(3, 0, 1).str(b"general.alignment").u32(4).u32(0).pad(0), "power of two");
    // an array of 2^60 strings: needs 8 bytes each before anything is allocated
    rejects(Raw::header(3, 0, 1).str(b"a").u32(9).u32(8).u64(1 << 60).pad(0), "needs at least");
    // array element type out of range
    rejects(Raw::header(3, 0, 1).str(b"a").u32(9).u32(13).u64(0).pad(0), "element type 13");
    // arrays nested deeper than the limit
    let mut deep = Raw::header(3, 0, 1);
    deep.str(b"a").u32(9);
    for _ in 0..1000 {
        deep.u32(9).u64(1);
    }
    rejects(deep.pad(0), "nested");
    // tensor checks: n_dims 0, negative ne, ne0 not whole blocks, element count overflow, overlap
    rejects(Raw::header(3, 1, 0).tensor("t", &[], 0, 0).pad(64), "n_dims = 0");
    rejects(Raw::header(3, 1, 0).tensor("t", &[u64::MAX], 0, 0).pad(64), "negative");
    rejects(Raw::header(3, 1, 0).tensor("t", &[48], 8, 0).pad(64), "block size 32");
    rejects(Raw::header(3, 1, 0).tensor("t", &[1 << 40, 1 << 40], 0, 0).pad(64), "elements");
    rejects(Raw::header(3, 1, 0).tensor("t", &[1 << 62], 0, 0).pad(64), "overflows");
    rejects(Raw::header(3, 2, 0).tensor("a", &[16], 0, 0).tensor("b", &[16], 0, 32).pad(96), "overlap");
    rejects(Raw::header(3, 1, 0).tensor("t", &[8], 16, 0).pad(64), "IQ2_XXS");
    // and the same layouts done right are accepted
    GgufFile::from_bytes(Raw::header(3, 2, 0).tensor("a", &[16], 0, 0).tensor("b", &[16], 0, 64).pad(128)).unwrap();
    GgufFile::from_bytes(Raw::header(2, 1, 0).tensor("z", &[0, 5], 8, 0).pad(0)).unwrap();
    let f = GgufFile::from_bytes(Raw::header(3, 0, 1).str(b"a").u32(9).u32(9).u64(1).u32(8).u64(1).str(b"x").pad(0))
        .unwrap();
    let outer = f.get("a").unwrap().as_array().unwrap();
    assert_eq!(outer.items[0].as_str_array().unwrap(), vec!["x"]);
}

#[test]
fn q8_k_q8_1_bf16_blocks() {
    // Q8_K: f32 d, 256 int8, 16 int16 sums
    let mut b = 0.5f32.to_le_bytes().to_vec();
    b.extend((0..256).map(|i| (i - 128) as i8 as u8));
    b.extend([0u8; 32]);
    let y = gguf::dequantize(GgmlType::Q8_K, &b, 256).unwrap();
    assert!(y.iter().enumerate().all(|(i, &v)| v == 0.5 * (i as f32 - 128.0)));
    // Q8_1: f16 d, f16 s, 32 int8
    let mut b = half::f16::from_f32(0.25).to_bits().to_le_bytes().to_vec();
    b.extend([0u8, 0]);
    b.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let y = gguf::dequantize(GgmlType::Q8_1, &b, 32).unwrap();
    assert!(y.iter().enumerate().all(|(i, &v)| v == 0.25 * (i as f32 - 16.0)));
    // BF16 is the top half of f32
    let y = gguf::dequantize(GgmlType::BF16, &[0x80, 0x3f, 0xc0, 0xbf], 2).unwrap();
    assert_eq!(y, vec![1.0, -1.5]);
    assert_eq!(gguf::f32_to_bf16_bits(1.0), 0x3f80);
    assert_eq!(gguf::f32_to_bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80); // tie to even
    assert_eq!(gguf::f32_to_bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82);
}

/// A fixed-seed xorshift generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(rng: &mut Rng, base: &[u8], hot: usize) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        // mostly inside the header (`hot` bytes), sometimes anywhere
        let span = if rng.below(4) == 0 { b.len() } else { hot.min(b.len()) };
        if span == 0 {
            break;
        }
        let p = rng.below(span);
        match rng.below(6) {
            0 => b[p] ^= 1 << rng.below(8),
            1 => b[p] = rng.next() as u8,
            2 => {
                let vals = [0u64, 1, 4, 5, 13, 99, u32::MAX as u64, 1 << 62, u64::MAX, 1 << 40, 64, 24];
                let v = vals[rng.below(vals.len())].to_le_bytes();
                for (i, x) in v.iter().enumerate().take(b.len() - p) {
                    b[p + i] = *x;
                }
            }
            3 => b.truncate(p),
            4 => {
                let v = (rng.next() as u32).to_le_bytes();
                for (i, x) in v.iter().enumerate().take(b.len() - p) {
                    b[p + i] = *x;
                }
            }
            _ => b.insert(p, rng.next() as u8),
        }
    }
    b
}

#[test]
fn mutated_files_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let inputs = [("malformed/valid_base.gguf", 4000), ("tiny-llama-Q4_K.gguf", 2000)];
    let mut results = [0usize; 2];
    for (name, count) in inputs {
        let base = std::fs::read(fixture(name)).unwrap();
        let hot = gguf::parse_header(&base).unwrap().data_offset as usize;
        for i in 0..count {
            let m = mutate(&mut rng, &base, hot);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let f = match GgufFile::from_bytes(m.clone()) {
                    Ok(f) => f,
                    Err(_) => return false,
                };
                for t in f.tensors().iter().take(4) {
                    let _ = f.tensor_f32(&t.name);
                }
                true
            }));
            match r {
                Ok(ok) => results[ok as usize] += 1,
                Err(_) => panic!("{name}: mutant {i} panicked"),
            }
        }
    }
    // both outcomes occur
    assert!(results[0] > 0 && results[1] > 0, "{results:?}");
}

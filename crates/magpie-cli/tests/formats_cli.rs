//! `magpie inspect` and `magpie convert` on the GGUF fixtures (`magpie-io/tests/fixtures/gguf/`,
//! made by llama.cpp's gguf package) and the tiny models' safetensors: listings, conversions that
//! keep the values, and every malformed file refused in one line.

mod common;
use common::{fails_with, magpie, text};
use magpie_io::safetensors;
use std::path::PathBuf;

fn gguf(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-io/tests/fixtures/gguf").join(name).display().to_string()
}

#[test]
fn inspect_lists_tensors_and_metadata() {
    let o = magpie(&["inspect", &gguf("tiny-llama-Q4_K.gguf")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("GGUF v3") && out.contains("31 tensors"), "{out}");
    assert!(out.contains("general.architecture (STRING) = \"llama\""), "{out}");
    assert!(out.contains("blk.0.ffn_down.weight  Q4_K  [96, 256]"), "{out}");
    let st = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-models/tests/fixtures/hf/tiny-gpt2/model.safetensors");
    let o = magpie(&["inspect", st.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(o.status.success() && out.contains("safetensors, 40 tensors") && out.contains("transformer.wte.weight  float32  [1100, 96]"), "{out}");
}

#[test]
fn inspect_refuses_every_malformed_file_in_one_line() {
    let dir = PathBuf::from(gguf("malformed"));
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".gguf") || name == "valid_base.gguf" {
            continue;
        }
        let o = magpie(&["inspect", p.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{name} was accepted");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.starts_with("magpie: ") && !err.contains("panicked"), "{name}: {err}");
        n += 1;
    }
    assert!(n >= 14, "only {n} malformed files");
    assert!(magpie(&["inspect", &gguf("malformed/valid_base.gguf")]).status.success());
    fails_with(&["inspect", &gguf("README.md")], "not a safetensors, GGUF or PyTorch file");
    fails_with(&["inspect", "/nonexistent.gguf"], "cannot read");
}

#[test]
fn convert_gguf_to_safetensors_and_back() {
    let d = tempfile::tempdir().unwrap();
    // GGUF (Q8_0) -> safetensors: every tensor as gguf-py dequantizes it
    let st = d.path().join("q8.safetensors").display().to_string();
    let o = magpie(&["convert", &gguf("tiny-llama-Q8_0.gguf"), &st]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let got = safetensors::load(&st).unwrap();
    let want = safetensors::load(gguf("tiny-llama-Q8_0.reference.safetensors")).unwrap();
    assert_eq!(got.tensors.len(), 31);
    for (n, t) in &got.tensors {
        assert_eq!(t.to_vec::<f32>().unwrap(), want.get(n).unwrap().to_vec::<f32>().unwrap(), "{n}");
    }
    // bfloat16 output
    let bf = d.path().join("bf.safetensors").display().to_string();
    assert!(magpie(&["convert", &gguf("tiny-llama-F32.gguf"), &bf, "--dtype", "bfloat16"]).status.success());
    assert_eq!(safetensors::load(&bf).unwrap().tensors[0].1.dtype(), magpie_core::DType::BF16);
    // safetensors -> GGUF Q8_0 -> safetensors: within Q8_0's rounding
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-models/tests/fixtures/hf/tiny-llama/model.safetensors");
    let g = d.path().join("m.gguf").display().to_string();
    let o = magpie(&["convert", src.to_str().unwrap(), &g, "--quant", "q8_0"]);
    assert!(o.status.success() && text(&o.stderr).contains("as Q8_0"), "{}", text(&o.stderr));
    let back = d.path().join("back.safetensors").display().to_string();
    assert!(magpie(&["convert", &g, &back]).status.success());
    let (a, b) = (safetensors::load(&src).unwrap(), safetensors::load(&back).unwrap());
    for (n, t) in &a.tensors {
        let (x, y) = (t.to_vec::<f32>().unwrap(), b.get(n).unwrap().to_vec::<f32>().unwrap());
        let scale = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let err = x.iter().zip(&y).fold(0f32, |m, (p, q)| m.max((p - q).abs()));
        assert!(err <= scale / 127.0 + 1e-6, "{n}: {err} vs scale {scale}");
    }
    fails_with(&["convert", src.to_str().unwrap(), &g, "--quant", "q9_9"], "--quant");
    fails_with(&["convert", src.to_str().unwrap(), &back, "--quant", "q8_0"], "GGUF output");
    fails_with(&["convert", src.to_str().unwrap(), &back, "--dtype", "int8"], "--dtype");
}

fn pt(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-io/tests/fixtures/pt").join(name).display().to_string()
}

#[test]
fn pytorch_checkpoints_inspect_convert_and_refuse_malicious_files() {
    let o = magpie(&["inspect", &pt("gpt2_state_dict.pt")]);
    let out = text(&o.stdout);
    assert!(o.status.success() && out.contains("PyTorch checkpoint, 41 tensors") && out.contains("lm_head.weight  float32  [1100, 96]"), "{out}");
    // .pt (legacy format too) -> safetensors: the expected tensors under their paths
    let d = tempfile::tempdir().unwrap();
    for name in ["mixed", "mixed_legacy", "gpt2_state_dict"] {
        let st = d.path().join(format!("{name}.safetensors")).display().to_string();
        let o = magpie(&["convert", &pt(&format!("{name}.pt")), &st]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let got = safetensors::load(&st).unwrap();
        let want = safetensors::load(pt(&format!("{name}.expected.safetensors"))).unwrap();
        let mut compared = 0;
        for (n, t) in &got.tensors {
            let Some(w) = want.get(n) else { continue };
            if t.dtype() != w.dtype() {
                continue; // complex tensors are stored as view_as_real in the expected file
            }
            assert_eq!(magpie_io::safetensors::tensor_to_le_bytes(t).unwrap(), magpie_io::safetensors::tensor_to_le_bytes(w).unwrap(), "{name}: {n}");
            compared += 1;
        }
        assert!(compared >= 20, "{name}: only {compared} tensors compared");
    }
    // safetensors -> .pt -> safetensors keeps every value
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../magpie-models/tests/fixtures/hf/tiny-gpt2/model.safetensors");
    let p = d.path().join("gpt2.pt").display().to_string();
    let back = d.path().join("back.safetensors").display().to_string();
    assert!(magpie(&["convert", src.to_str().unwrap(), &p]).status.success());
    assert!(magpie(&["convert", &p, &back]).status.success());
    let (a, b) = (safetensors::load(&src).unwrap(), safetensors::load(&back).unwrap());
    for (n, t) in &a.tensors {
        assert_eq!(t.to_vec::<f32>().unwrap(), b.get(n).unwrap().to_vec::<f32>().unwrap(), "{n}");
    }
    // every malicious file: one line, nothing executed
    for f in ["reduce_os_system.pt", "reduce_builtins_eval.pt", "reduce_subprocess_popen.pt", "global_unknown_module.pt", "storage_record_missing.pt", "storage_larger_than_record.pt", "zip_path_traversal.pt", "zip_truncated.pt", "legacy_bad_magic.pt", "deep_nesting.pt"] {
        let o = magpie(&["inspect", &pt(&format!("malicious/{f}"))]);
        let err = text(&o.stderr);
        assert!(!o.status.success() && err.lines().count() == 1 && err.starts_with("magpie: ") && !err.contains("panicked"), "{f}: {err}");
    }
    assert!(!std::path::Path::new("/tmp/pwned_magpie").exists(), "a payload ran");
}

//! End-to-end tests of the conformance runner binary on small hand-made case folders.

use safetensors::tensor::{serialize, Dtype, TensorView};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn write_folder(dir: &Path, manifest: &str, tensors: &[(&str, Vec<f32>, Vec<usize>)]) {
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    let bytes: Vec<(String, Vec<u8>, Vec<usize>)> = tensors
        .iter()
        .map(|(k, v, s)| (k.to_string(), v.iter().flat_map(|x| x.to_le_bytes()).collect(), s.clone()))
        .collect();
    let views: HashMap<String, TensorView> =
        bytes.iter().map(|(k, b, s)| (k.clone(), TensorView::new(Dtype::F32, s.clone(), b).unwrap())).collect();
    std::fs::write(dir.join("cases.safetensors"), serialize(&views, &None).unwrap()).unwrap();
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_magpie-conformance")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

const GOOD: &str = r#"{"torch_version": "test", "seed": 1, "dtype": "float32", "ops": ["neg", "add", "nosuchop"],
 "cases": [
  {"id": "neg#0", "op": "neg", "variant": "", "dtype": "float32",
   "input": {"tensor": "neg#0/in0", "dtype": "float32", "shape": [2]}, "args": [], "kwargs": {},
   "output": {"tensor": "neg#0/out", "dtype": "float32", "shape": [2]}, "nondeterministic": false,
   "tol": {"rtol": 1e-6, "atol": 1e-6},
   "grad": {"wrt": ["neg#0/in0"], "output_grads": [{"tensor": "neg#0/gout", "dtype": "float32", "shape": [2]}],
            "expected": [{"tensor": "neg#0/grad", "dtype": "float32", "shape": [2]}]}},
  {"id": "neg#1", "op": "neg", "variant": "", "dtype": "float32",
   "input": {"tensor": "neg#0/in0", "dtype": "float32", "shape": [2]}, "args": [], "kwargs": {},
   "output": {"tensor": "neg#0/in0", "dtype": "float32", "shape": [2]}, "nondeterministic": false},
  {"id": "add!0", "op": "add", "variant": "", "dtype": null,
   "input": {"tensor": "neg#0/in0", "dtype": "float32", "shape": [2]}, "args": [{"tensor": "add!0/in1", "dtype": "float32", "shape": [3]}],
   "kwargs": {}, "expect_error": "RuntimeError", "error_regex": "must match"},
  {"id": "nosuchop#0", "op": "nosuchop", "variant": "", "dtype": "float32",
   "input": {"tensor": "neg#0/in0", "dtype": "float32", "shape": [2]}, "args": [], "kwargs": {},
   "output": {"tensor": "neg#0/in0", "dtype": "float32", "shape": [2]}, "nondeterministic": false}
 ], "skipped": {}}"#;

fn good_tensors() -> Vec<(&'static str, Vec<f32>, Vec<usize>)> {
    vec![
        ("neg#0/in0", vec![1.0, -2.0], vec![2]),
        ("neg#0/out", vec![-1.0, 2.0], vec![2]),
        ("neg#0/gout", vec![0.5, 3.0], vec![2]),
        ("neg#0/grad", vec![-0.5, -3.0], vec![2]),
        ("add!0/in1", vec![1.0, 2.0, 3.0], vec![3]),
    ]
}

#[test]
fn counts_passes_failures_and_unsupported() {
    let d = tempfile::tempdir().unwrap();
    write_folder(d.path(), GOOD, &good_tensors());
    let json = d.path().join("out.json");
    let (code, out, err) = run(&["--cases", d.path().to_str().unwrap(), "--json", json.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    // neg#0 (value and grad) and add!0 pass; neg#1 has a wrong expected value; nosuchop is unsupported
    assert!(out.trim_end().ends_with("2 passed, 2 failed"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let by_id = |id: &str| j["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(by_id("neg#0")["value"], "passed");
    assert_eq!(by_id("neg#0")["grad"], "passed");
    assert_eq!(by_id("neg#1")["value"], "failed");
    assert_eq!(by_id("add!0")["value"], "passed");
    assert_eq!(by_id("nosuchop#0")["value"], "unsupported");
}

#[test]
fn malformed_manifest_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    write_folder(d.path(), "{\"cases\": [", &good_tensors());
    let (code, _, err) = run(&["--cases", d.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("malformed manifest"), "{err}");
}

#[test]
fn missing_tensor_key_names_the_case() {
    let d = tempfile::tempdir().unwrap();
    let mut ts = good_tensors();
    ts.retain(|(k, _, _)| *k != "neg#0/out");
    write_folder(d.path(), GOOD, &ts);
    let (code, _, err) = run(&["--cases", d.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("neg#0") && err.contains("neg#0/out") && err.contains("missing"), "{err}");
}

#[test]
fn baseline_drop_fails_and_rise_is_reported() {
    let d = tempfile::tempdir().unwrap();
    write_folder(d.path(), GOOD, &good_tensors());
    let name = d.path().file_name().unwrap().to_str().unwrap().to_string();
    let base = d.path().join("baseline.json");
    let high = format!(r#"{{"{name}": {{"neg": {{"value": 2, "grad": 1, "error": 0}}}}}}"#);
    std::fs::write(&base, high).unwrap();
    let (code, out, _) = run(&["--cases", d.path().to_str().unwrap(), "--baseline", base.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("dropped below the baseline"), "{out}");
    let low = format!(r#"{{"{name}": {{"neg": {{"value": 0, "grad": 0, "error": 0}}}}}}"#);
    std::fs::write(&base, low).unwrap();
    let (code, out, _) = run(&["--cases", d.path().to_str().unwrap(), "--baseline", base.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("rose above the baseline"), "{out}");
}

#[test]
fn cuda_device_is_reported_unavailable() {
    let d = tempfile::tempdir().unwrap();
    write_folder(d.path(), GOOD, &good_tensors());
    let (code, _, err) = run(&["--cases", d.path().to_str().unwrap(), "--device", "cuda"]);
    assert_eq!(code, 2);
    assert!(err.contains("CUDA is not available"), "{err}");
}

#[test]
fn a_panic_or_an_abort_is_one_crashed_case_and_the_run_goes_on() {
    let d = tempfile::tempdir().unwrap();
    write_folder(d.path(), GOOD, &good_tensors());
    for flag in ["--inject-panic", "--inject-abort"] {
        let json = d.path().join("out.json");
        let (code, out, err) = run(&["--cases", d.path().to_str().unwrap(), flag, "neg#1", "--json", json.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains("CRASH neg#1"), "{out}");
        let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let st: Vec<(String, String)> = j["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["id"].as_str().unwrap().to_string(), c["value"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(st.len(), 4, "every case has a record after {flag}");
        assert!(st.contains(&("neg#1".into(), "crashed".into())));
        assert!(st.contains(&("add!0".into(), "passed".into())), "cases after the crash still run ({flag})");
    }
}

#[test]
fn gradcheck_mode_reports_and_checks_its_baseline() {
    let d = tempfile::tempdir().unwrap();
    write_folder(d.path(), GOOD, &good_tensors());
    let dir = d.path().to_str().unwrap();
    let report = d.path().join("report.md");
    let (code, out, err) = run(&["--gradcheck", "--cases", dir, "--gradcheck-report", report.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    // neg has a gradient case and passes; nosuchop has none and is excluded with a reason
    assert!(out.contains("gradcheck: 1 ops passed, 0 failed, 1 excluded"), "{out}");
    assert!(out.contains("gradgradcheck: 1 ops passed, 0 failed, 1 excluded"), "{out}");
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("| nosuchop | excluded | excluded | 0 | no gradient case"), "{text}");
    // a baseline in which an op passed that no longer passes makes the run fail
    let base = d.path().join("base.json");
    std::fs::write(&base, r#"{"neg": ["grad", "gradgrad"], "nosuchop": ["grad"]}"#).unwrap();
    let (code, out, _) = run(&["--gradcheck", "--cases", dir, "--gradcheck-baseline", base.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("nosuchop: gradcheck no longer passes"), "{out}");
}

/// A case whose expected gradient is 1% off ours: `tol` (1e-6) rejects it, the low-precision
/// sets' `grad_tol` (2%) accepts it, and the value part keeps using `tol`.
fn grad_tol_case(grad_tol: &str) -> String {
    format!(
        r#"{{"torch_version": "test", "seed": 1, "dtype": "bfloat16", "ops": ["neg"],
 "cases": [
  {{"id": "neg#0", "op": "neg", "variant": "", "dtype": "float32",
   "input": {{"tensor": "neg#0/in0", "dtype": "float32", "shape": [2]}}, "args": [], "kwargs": {{}},
   "output": {{"tensor": "neg#0/out", "dtype": "float32", "shape": [2]}}, "nondeterministic": false,
   "tol": {{"rtol": 1e-6, "atol": 1e-6}}{grad_tol},
   "grad": {{"wrt": ["neg#0/in0"], "output_grads": [{{"tensor": "neg#0/gout", "dtype": "float32", "shape": [2]}}],
            "expected": [{{"tensor": "neg#0/grad", "dtype": "float32", "shape": [2]}}]}}}}
 ], "skipped": {{}}}}"#
    )
}

#[test]
fn gradients_compare_with_grad_tol_where_a_case_has_one() {
    let tensors = vec![
        ("neg#0/in0", vec![1.0, -2.0], vec![2]),
        ("neg#0/out", vec![-1.0, 2.0], vec![2]),
        ("neg#0/gout", vec![0.5, 3.0], vec![2]),
        ("neg#0/grad", vec![-0.505, -3.0], vec![2]),
    ];
    for (grad_tol, want) in [("", "failed"), (r#", "grad_tol": {"rtol": 0.02, "atol": 1e-5}"#, "passed")] {
        let d = tempfile::tempdir().unwrap();
        write_folder(d.path(), &grad_tol_case(grad_tol), &tensors);
        let json = d.path().join("out.json");
        let (code, out, err) = run(&["--cases", d.path().to_str().unwrap(), "--json", json.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}\n{err}");
        let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        assert_eq!(j["cases"][0]["value"], "passed", "{j}");
        assert_eq!(j["cases"][0]["grad"], want, "grad_tol {grad_tol:?}: {j}");
    }
}

#[test]
fn readme_table_names_every_folder_of_the_run() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    write_folder(a.path(), GOOD, &good_tensors());
    write_folder(b.path(), GOOD, &good_tensors());
    let readme = a.path().join("README.md");
    std::fs::write(&readme, "# x\n<!-- conformance:begin -->\nold\n<!-- conformance:end -->\ntail\n").unwrap();
    let (pa, pb, pr) = (a.path().to_str().unwrap(), b.path().to_str().unwrap(), readme.to_str().unwrap());
    let (code, out, err) = run(&["--cases", pa, "--cases", pb, "--readme", pr]);
    assert_eq!(code, 0, "{out}\n{err}");
    let text = std::fs::read_to_string(&readme).unwrap();
    let (na, nb) = (a.path().file_name().unwrap().to_str().unwrap(), b.path().file_name().unwrap().to_str().unwrap());
    let cmd = format!("--cases tests/conformance/{na} --cases tests/conformance/{nb} --readme README.md");
    assert!(text.contains(&cmd), "{text}");
    assert!(text.contains(&format!("| {na} | 1/3 (33.3%) | 1/1 (100.0%)")) && text.contains(&format!("| {nb} | 1/3 (33.3%) | 1/1 (100.0%)")), "{text}");
    assert!(!text.contains("old") && text.ends_with("tail\n"), "{text}");
    // the check passes on the fresh table and fails once the folder list changes
    let (code, out, _) = run(&["--cases", pa, "--cases", pb, "--readme-check", pr]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = run(&["--cases", pa, "--readme-check", pr]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("stale"), "{out}");
}

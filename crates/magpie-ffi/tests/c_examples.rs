//! The C programs of `examples/c/` built with the system C compiler against the static library and
//! run: an MLP learns XOR, a tiny GPT-2 from the Hugging Face fixtures generates transformers'
//! greedy tokens, and misuse (double release, stale handles, null pointers, bad codes) ends in
//! error codes, never a crash; each also under valgrind (memory errors and leaks fail the test).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `target/<profile>/libmagpie_ffi.a`, next to this test's `deps/` folder, brought up to date
/// first: `cargo test` builds the library as an rlib for the tests, not the static library.
fn static_lib() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
            if let Ok(cargo) = std::env::var("CARGO") {
                let target = dir.parent().unwrap();
                let mut c = Command::new(cargo);
                // the workspace's own build (scripts/test.sh's first step): the same feature set as
                // `cargo test --workspace`, so it is a no-op there; `-p magpie-ffi` alone would
                // resolve other features and rebuild the dependencies
                c.args(["build", "--workspace", "--all-targets"]).env("CARGO_TARGET_DIR", target).current_dir(root());
                if dir.file_name().is_some_and(|n| n == "release") {
                    c.arg("--release");
                }
                let o = c.output().expect("running cargo build");
                assert!(o.status.success(), "building the static library failed:\n{}", String::from_utf8_lossy(&o.stderr));
            }
            let lib = dir.join("libmagpie_ffi.a");
            assert!(lib.is_file(), "{} is missing: build it first (cargo build --release -p magpie-ffi)", lib.display());
            lib
        })
        .clone()
}

fn build(name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("c-{name}"));
    let src = root().join(format!("examples/c/{name}.c"));
    let o = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c99", "-O1", "-Wall", "-Wextra", "-Werror"])
        .arg(&src)
        .arg("-I")
        .arg(root().join("crates/magpie-ffi/include"))
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm", "-lgcc_s", "-o"])
        .arg(&out)
        .output()
        .expect("running the C compiler");
    assert!(o.status.success(), "compiling {name}.c failed:\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// Runs `exe` natively and then under valgrind's memcheck: no invalid access, no use of
/// uninitialised memory, no definite leak once every handle is released (threads of the CPU pool
/// that are still alive at exit are "possibly lost", which is not a leak).
fn run(exe: &Path, args: &[&str]) -> String {
    let o = Command::new(exe).args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{} {args:?} failed:\n{text}", exe.display());
    let vg = Command::new("valgrind")
        .args(["--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=99", "-q"])
        .arg(exe)
        .args(args)
        .output()
        .expect("valgrind is needed for the C ABI tests (Debian package valgrind)");
    let report = String::from_utf8_lossy(&vg.stderr);
    assert!(vg.status.success(), "{} {args:?} under valgrind: exit {:?}\n{report}", exe.display(), vg.status.code());
    text
}

#[test]
fn mlp_learns_xor() {
    let out = run(&build("mlp_train"), &[]);
    assert!(out.contains("learned XOR"), "{out}");
}

#[test]
fn generate_matches_transformers_greedy() {
    let dir = root().join("crates/magpie-models/tests/fixtures/hf/tiny-gpt2");
    let r = magpie_io::safetensors::load(dir.join("reference.safetensors")).unwrap();
    let ids = r.get("input_ids").unwrap().to_vec::<i64>().unwrap();
    let greedy = r.get("greedy").unwrap().to_vec::<i64>().unwrap();
    let join = |v: &[i64]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
    let n_new = (greedy.len() - ids.len()).to_string();
    let out = run(&build("generate"), &[dir.to_str().unwrap(), &n_new, &join(&ids), &join(&greedy[ids.len()..])]);
    assert!(out.contains(&format!("matches the expected {n_new} tokens")), "{out}");
}

#[test]
fn misuse_is_errors_not_crashes() {
    let out = run(&build("misuse"), &[]);
    assert!(out.contains("all misuse handled"), "{out}");
}

//! The built `magpie` binary: a tiny train/sample round trip, and bad input ending in one clear
//! line on stderr with a non-zero exit (no panic, no backtrace).

mod common;
use common::{fails_with, magpie, text};
use std::path::Path;

const TINY: &[&str] = &["--steps", "4", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "2", "--eval-every", "2"];

fn corpus(dir: &Path) -> String {
    let p = dir.join("corpus.txt");
    std::fs::write(&p, "fn main() { println!(\"hello, magpie\"); }\n".repeat(40)).unwrap();
    p.display().to_string()
}

#[test]
fn train_then_sample() {
    let d = tempfile::tempdir().unwrap();
    let c = corpus(d.path());
    let out = d.path().join("ck").display().to_string();
    let mut args = vec!["train", "--corpus", &c, "--out", &out, "--sample-tokens", "20"];
    args.extend_from_slice(TINY);
    let o = magpie(&args);
    let s = text(&o.stdout);
    assert!(o.status.success(), "stdout: {s}\nstderr: {}", text(&o.stderr));
    assert!(s.contains("unigram baseline"), "{s}");
    assert!(s.contains("step     4: train loss"), "{s}");
    assert!(s.contains("sample (temperature"), "{s}");
    let o = magpie(&["sample", "--checkpoint", &out, "--prompt", "fn ", "--max-new-tokens", "30", "--top-k", "5", "--top-p", "0.9", "--seed", "3"]);
    let s = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(s.starts_with("fn ") && s.trim_end().chars().count() >= 3, "{s}");
    // same seed, same text
    let again = magpie(&["sample", "--checkpoint", &out, "--prompt", "fn ", "--max-new-tokens", "30", "--top-k", "5", "--top-p", "0.9", "--seed", "3"]);
    assert_eq!(text(&again.stdout), s);
    // a finished run cannot be resumed; flags that the checkpoint fixes are refused
    fails_with(&["train", "--corpus", &c, "--resume", &out, "--out", &out], "already finished its 4 steps");
    fails_with(&["train", "--corpus", &c, "--resume", &out, "--n-layer", "3"], "--n-layer cannot be combined with --resume");
    // a character the model never saw
    fails_with(&["sample", "--checkpoint", &out, "--prompt", "é"], "not in the model's vocabulary");
    // damage the checkpoint
    let model = Path::new(&out).join("model.safetensors");
    let b = std::fs::read(&model).unwrap();
    std::fs::write(&model, &b[..b.len() - 7]).unwrap();
    fails_with(&["sample", "--checkpoint", &out], "truncated");
    fails_with(&["train", "--corpus", &c, "--resume", &out], "truncated");
}

#[test]
fn bad_input_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    let c = corpus(d.path());
    let out = d.path().join("ck").display().to_string();
    fails_with(&["train", "--corpus", "/nonexistent/corpus.txt"], "cannot read corpus /nonexistent/corpus.txt");
    let empty = d.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    fails_with(&["train", "--corpus", &empty.display().to_string()], "is empty");
    let short = d.path().join("short.txt");
    std::fs::write(&short, "abc").unwrap();
    fails_with(&["train", "--corpus", &short.display().to_string(), "--out", &out], "corpus is too short");
    let bin = d.path().join("bin.dat");
    std::fs::write(&bin, [0xffu8, 0xfe, 0x00]).unwrap();
    fails_with(&["train", "--corpus", &bin.display().to_string()], "not UTF-8");
    fails_with(&["train", "--corpus", &c, "--n-embd", "30", "--n-head", "4"], "n_embd (30) must be divisible by n_head (4)");
    fails_with(&["train", "--corpus", &c, "--steps", "0"], "steps must be at least 1");
    fails_with(&["train", "--corpus", &c, "--lr=-1"], "learning rate");
    fails_with(&["train", "--corpus", &c, "--steps", "many"], "invalid value 'many' for '--steps");
    fails_with(&["train", "--bogus"], "unexpected argument '--bogus'");
    fails_with(&["train", "--corpus", &c, "--device", "cuda"], "CUDA is not available");
    fails_with(&["train", "--corpus", &c, "--device", "tpu"], "expected one of cpu, cuda");
    fails_with(&["train", "--corpus", &c, "--dtype", "int8"], "not supported for training");
    fails_with(&["train", "--corpus", &c, "--resume", "/nonexistent/ck"], "no checkpoint at /nonexistent/ck");
    fails_with(&["sample", "--checkpoint", "/nonexistent/ck"], "no checkpoint at /nonexistent/ck");
    fails_with(&["sample", "--checkpoint", d.path().to_str().unwrap()], "is not a checkpoint");
    fails_with(&["sample", "--checkpoint", &out, "--temperature=-1"], "temperature must be >= 0");
    // data parallel: launcher flags are checked before anything starts
    fails_with(&["train", "--corpus", &c, "--nproc-per-node", "0", "--device", "cuda"], "--nproc-per-node must be at least 1");
    fails_with(&["train", "--corpus", &c, "--nproc-per-node", "2", "--nnodes", "2", "--device", "cuda"], "--nnodes 2 needs --master-addr");
    fails_with(&["train", "--corpus", &c, "--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "2", "--master-addr", "10.0.0.1", "--device", "cuda"], "--node-rank 2 must be below --nnodes 2");
    fails_with(&["train", "--corpus", &c, "--nproc-per-node", "2", "--master-port", "0", "--device", "cuda"], "--master-port");
    fails_with(&["train", "--corpus", &c, "--nproc-per-node", "2", "--device", "cpu"], "runs on GPUs (--device cuda), not --device cpu");
    fails_with(&["train", "--corpus", &c, "--nproc-per-node", "2"], "--nproc-per-node needs --device cuda");
    fails_with(&["train", "--corpus", &c, "--nnodes", "2"], "need --nproc-per-node");
    // nothing was written by the failed runs
    assert!(!Path::new(&out).exists());
}

#[test]
fn a_rank_with_bad_environment_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    let c = corpus(d.path());
    for (vars, needle) in [
        (vec![("RANK", "0"), ("WORLD_SIZE", "two")], "WORLD_SIZE=\"two\" is not a valid number"),
        (vec![("RANK", "3"), ("WORLD_SIZE", "2")], "RANK=3 is not below WORLD_SIZE=2"),
        (vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "http")], "MASTER_PORT=\"http\""),
    ] {
        let mut cmd = std::process::Command::new(common::bin());
        cmd.args(["train", "--corpus", &c, "--device", "cuda"]);
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        let err = text(&o.stderr);
        assert!(!o.status.success() && err.lines().count() == 1 && err.contains(needle), "{vars:?}: {err}");
    }
}

//! `magpie train --nproc-per-node 2` on two GPUs: 50 steps with a global batch of 16 (8 rows per
//! rank) give the losses of one GPU with batch 16, within float32 reduction-order noise; a run
//! stopped at step 25 on two GPUs resumes on one and ends as the uninterrupted run.
//! Skipped with fewer than two GPUs unless `MAGPIE_REQUIRE_GPUS=2`.

mod common;
use common::{magpie, text};
use std::path::Path;

fn losses(p: &Path) -> Vec<(usize, f64)> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["step"].as_u64().unwrap() as usize, v["loss"].as_f64().unwrap())
        })
        .collect()
}

fn gpus() -> usize {
    let o = std::process::Command::new("nvidia-smi").args(["--query-gpu=name", "--format=csv,noheader"]).output();
    o.map(|o| text(&o.stdout).lines().count()).unwrap_or(0)
}

fn run(args: &[&str]) {
    let o = magpie(args);
    assert!(o.status.success(), "{args:?}\nstdout:\n{}\nstderr:\n{}", text(&o.stdout), text(&o.stderr));
}

/// Largest |a - b| over the steps both logs have; every step of `b` must be in `a`.
fn max_diff(a: &[(usize, f64)], b: &[(usize, f64)]) -> f64 {
    b.iter()
        .map(|(s, l)| {
            let (_, r) = a.iter().find(|(t, _)| t == s).unwrap_or_else(|| panic!("step {s} missing"));
            (l - r).abs()
        })
        .fold(0.0, f64::max)
}

#[test]
fn two_gpus_match_one_gpu_with_the_whole_batch() {
    let need: usize = std::env::var("MAGPIE_REQUIRE_GPUS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    if gpus() < 2 {
        assert!(need < 2, "two GPUs are required here");
        eprintln!("skipped: needs two GPUs");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let corpus = d.path().join("corpus.txt");
    std::fs::write(&corpus, include_str!("../src/train.rs").repeat(4)).unwrap();
    let c = corpus.display().to_string();
    let p = |n: &str| d.path().join(n).display().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let common = ["train", "--corpus", &c, "--steps", "50", "--batch-size", "16", "--eval-every", "0", "--sample-tokens", "0"];
    let with = |extra: &[&str]| -> Vec<String> { common.iter().chain(extra).map(|s| s.to_string()).collect() };
    let go = |v: Vec<String>| run(&v.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    // one GPU, batch 16
    go(with(&["--device", "cuda", "--loss-log", &p("one.jsonl"), "--out", &p("ck1")]));
    // two GPUs, 8 rows each
    go(with(&["--device", "cuda", "--nproc-per-node", "2", "--master-port", &port, "--loss-log", &p("two.jsonl"), "--out", &p("ck2")]));
    let (one, two) = (losses(Path::new(&p("one.jsonl"))), losses(Path::new(&p("two.jsonl"))));
    assert_eq!(one.len(), 50);
    assert_eq!(two.len(), 50, "rank 0 alone writes the log");
    let diff = max_diff(&one, &two);
    eprintln!("50 steps: first loss {:.5} / {:.5}, last {:.5} / {:.5}, max |difference| {diff:.2e}", one[0].1, two[0].1, one[49].1, two[49].1);
    assert!(one[49].1 < one[0].1 - 0.5, "the run must learn: {} -> {}", one[0].1, one[49].1);
    assert!(diff < 2e-3, "two GPUs drift from one: max |difference| {diff}");
    // stopped at 25 on two GPUs, resumed on one GPU: the same run
    go(with(&["--device", "cuda", "--nproc-per-node", "2", "--master-port", &port, "--stop-after", "25", "--loss-log", &p("split.jsonl"), "--out", &p("ck3")]));
    assert_eq!(losses(Path::new(&p("split.jsonl"))).len(), 25);
    run(&["train", "--corpus", &c, "--resume", &p("ck3"), "--eval-every", "0", "--sample-tokens", "0", "--loss-log", &p("split.jsonl")]);
    let split = losses(Path::new(&p("split.jsonl")));
    assert_eq!(split.iter().map(|x| x.0).collect::<Vec<_>>(), (1..=50).collect::<Vec<_>>());
    let diff2 = max_diff(&one, &split);
    eprintln!("2 GPUs to step 25, then 1 GPU to 50: max |difference| {diff2:.2e}");
    assert!(diff2 < 2e-3, "resumed run drifts: {diff2}");
}

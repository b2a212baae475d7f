//! `magpie train --model bert`: a tiny run with the character vocabulary and one with a WordPiece
//! tokenizer.json, resume, and bad input ending in one clear line on stderr with a non-zero exit.

mod common;
use common::{fails_with, magpie, text};
use std::path::Path;

const TINY: &[&str] = &["--steps", "4", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "4", "--eval-every", "2"];

fn corpus(dir: &Path) -> String {
    let p = dir.join("corpus.txt");
    std::fs::write(&p, "fn main() { println!(\"hello, magpie\"); } // the quick brown fox\n".repeat(40)).unwrap();
    p.display().to_string()
}

fn wordpiece() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../magpie-models/tests/fixtures/wordpiece/tokenizer.json").to_string()
}

#[test]
fn bert_trains_resumes_and_fills_masks() {
    let d = tempfile::tempdir().unwrap();
    let c = corpus(d.path());
    let out = d.path().join("ck").display().to_string();
    let mut args = vec!["train", "--model", "bert", "--corpus", &c, "--out", &out, "--stop-after", "2"];
    args.extend_from_slice(TINY);
    let o = magpie(&args);
    let s = text(&o.stdout);
    assert!(o.status.success(), "stdout: {s}\nstderr: {}", text(&o.stderr));
    assert!(s.contains("model: BertForMaskedLM, 1 layers") && s.contains("[MASK]") && s.contains("unigram baseline"), "{s}");
    assert!(s.contains("stopped after 2 steps"), "{s}");
    for f in ["config.json", "model.safetensors", "tokenizer.json", "trainer.json"] {
        assert!(Path::new(&out).join(f).is_file(), "{f} missing");
    }
    let o = magpie(&["train", "--corpus", &c, "--resume", &out, "--out", &out]);
    let s = text(&o.stdout);
    assert!(o.status.success(), "stdout: {s}\nstderr: {}", text(&o.stderr));
    assert!(s.contains("resuming at step 2") && s.contains("masked-token accuracy") && s.contains("fill-mask"), "{s}");
    assert!(!s.contains("sample (temperature"), "{s}");
    // the BERT checkpoint is not a GPT one
    fails_with(&["train", "--corpus", &c, "--resume", &out, "--model", "gpt"], "holds a bert model");
    fails_with(&["sample", "--checkpoint", &out], "holds a bert model");
}

#[test]
fn bert_with_a_wordpiece_tokenizer() {
    let d = tempfile::tempdir().unwrap();
    let c = corpus(d.path());
    let out = d.path().join("ck").display().to_string();
    let tok = wordpiece();
    let mut args = vec!["train", "--model", "bert", "--tokenizer", &tok, "--corpus", &c, "--out", &out];
    args.extend_from_slice(TINY);
    let o = magpie(&args);
    let s = text(&o.stdout);
    assert!(o.status.success(), "stdout: {s}\nstderr: {}", text(&o.stderr));
    assert!(s.contains("vocabulary 93 (WordPiece)") && s.contains("fill-mask"), "{s}");
    assert_eq!(std::fs::read(Path::new(&out).join("tokenizer.json")).unwrap(), std::fs::read(&tok).unwrap());
}

#[test]
fn bert_bad_input_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    let c = corpus(d.path());
    let out = d.path().join("ck").display().to_string();
    fails_with(&["train", "--model", "roberta", "--corpus", &c], "unknown --model \"roberta\" (gpt or bert)");
    fails_with(&["train", "--model", "bert", "--corpus", &c, "--tokenizer", "/nonexistent/tokenizer.json"], "[tokenizer] cannot read /nonexistent/tokenizer.json");
    let broken = d.path().join("tokenizer.json");
    std::fs::write(&broken, "{\"model\": 5").unwrap();
    fails_with(&["train", "--model", "bert", "--corpus", &c, "--tokenizer", &broken.display().to_string()], "not a valid tokenizer.json");
    fails_with(&["train", "--corpus", &c, "--tokenizer", &wordpiece()], "--tokenizer is for --model bert");
    let short = d.path().join("short.txt");
    std::fs::write(&short, "abc").unwrap();
    fails_with(&["train", "--model", "bert", "--corpus", &short.display().to_string(), "--out", &out], "corpus is too short");
    fails_with(&["train", "--model", "bert", "--corpus", &c, "--block-size", "2"], "too small for [CLS] token [SEP]");
    // a GPT checkpoint resumed as BERT
    let gpt = d.path().join("gpt").display().to_string();
    let mut args = vec!["train", "--corpus", &c, "--out", &gpt, "--sample-tokens", "0", "--stop-after", "1"];
    args.extend_from_slice(TINY);
    let o = magpie(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    fails_with(&["train", "--model", "bert", "--corpus", &c, "--resume", &gpt], "holds a gpt model; it cannot be resumed with --model bert");
}

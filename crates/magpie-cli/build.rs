//! Concatenates a fixed set of this project's Rust sources into the built-in training corpus
//! (`$OUT_DIR/corpus.txt`, a few hundred KB), in sorted path order so it is deterministic.

use std::path::{Path, PathBuf};

/// Source folders, relative to this crate, that make up the corpus.
const DIRS: &[&str] = &["../magpie-nn/src", "../magpie-optim/src", "../magpie-io/src", "../magpie-core/src/autograd", "../magpie-models/src", "src"];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    let mut files = Vec::new();
    for d in DIRS {
        println!("cargo:rerun-if-changed={d}");
        walk(Path::new(d), &mut files);
    }
    files.sort();
    let mut corpus = String::new();
    for f in files {
        if let Ok(s) = std::fs::read_to_string(&f) {
            corpus.push_str(&s);
            if !corpus.ends_with('\n') {
                corpus.push('\n');
            }
        }
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("corpus.txt");
    std::fs::write(out, corpus).expect("writing the corpus into OUT_DIR");
}

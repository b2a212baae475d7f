//! Tallies, the per-op table, the baseline ratchet and the README section.

use crate::case::{CaseResult, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Passed counts of one op (or a folder's total) by category.
#[derive(Serialize, Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Counts {
    pub value: usize,
    pub grad: usize,
    pub error: usize,
}

/// Totals of one folder.
#[derive(Default, Clone, Debug)]
pub struct Tally {
    pub value: BTreeMap<Status, usize>,
    pub grad: BTreeMap<Status, usize>,
    pub error: BTreeMap<Status, usize>,
    pub per_op: BTreeMap<String, (Counts, Counts)>, // (passed, total)
}

impl Tally {
    /// Tallies a folder's results.
    pub fn of(results: &[CaseResult]) -> Tally {
        let mut t = Tally::default();
        for r in results {
            let e = t.per_op.entry(r.op.clone()).or_default();
            if r.error_case {
                *t.error.entry(r.value).or_default() += 1;
                e.1.error += 1;
                e.0.error += (r.value == Status::Passed) as usize;
            } else {
                *t.value.entry(r.value).or_default() += 1;
                e.1.value += 1;
                e.0.value += (r.value == Status::Passed) as usize;
            }
            if let Some(g) = r.grad {
                *t.grad.entry(g).or_default() += 1;
                e.1.grad += 1;
                e.0.grad += (g == Status::Passed) as usize;
            }
        }
        t
    }
    /// Passed counts per op (the baseline's content).
    pub fn passed_per_op(&self) -> BTreeMap<String, Counts> {
        self.per_op.iter().map(|(k, v)| (k.clone(), v.0)).collect()
    }
    /// (passed, total) in a category.
    pub fn ratio(m: &BTreeMap<Status, usize>) -> (usize, usize) {
        (m.get(&Status::Passed).copied().unwrap_or(0), m.values().sum())
    }
    /// Cases whose value (or error check) crashed, plus gradients that crashed.
    pub fn crashed(&self) -> usize {
        [&self.value, &self.grad, &self.error].iter().map(|m| m.get(&Status::Crashed).copied().unwrap_or(0)).sum()
    }
}

fn pct(p: usize, n: usize) -> String {
    if n == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * p as f64 / n as f64)
    }
}

fn breakdown(m: &BTreeMap<Status, usize>) -> String {
    let g = |s| m.get(&s).copied().unwrap_or(0);
    format!(
        "{} passed, {} failed, {} unsupported, {} errored, {} crashed",
        g(Status::Passed),
        g(Status::Failed),
        g(Status::Unsupported),
        g(Status::Errored),
        g(Status::Crashed)
    )
}

/// Prints the per-op table and the category totals of one folder.
pub fn print_folder(name: &str, results: &[CaseResult], t: &Tally, per_op: bool) {
    let crashed: Vec<&CaseResult> =
        results.iter().filter(|r| r.value == Status::Crashed || r.grad == Some(Status::Crashed)).collect();
    if !crashed.is_empty() {
        println!("== {name}: {} CRASHED cases (bugs to fix first)", crashed.len());
        for r in crashed {
            println!("  CRASH {}: {}", r.id, r.message);
        }
    }
    if per_op {
        println!("== {name}: per op (passed/total)");
        println!("{:<58} {:>9} {:>9} {:>9}", "op", "value", "grad", "error");
        for (op, (p, n)) in &t.per_op {
            let cell = |p: usize, n: usize| if n == 0 { "-".to_string() } else { format!("{p}/{n}") };
            println!("{:<58} {:>9} {:>9} {:>9}", op, cell(p.value, n.value), cell(p.grad, n.grad), cell(p.error, n.error));
        }
    }
    println!("== {name}: totals");
    println!("  value cases:    {}", breakdown(&t.value));
    println!("  gradient parts: {}", breakdown(&t.grad));
    println!("  error cases:    {}", breakdown(&t.error));
}

/// The baseline file: per folder, per op, the passed counts.
pub type Baseline = BTreeMap<String, BTreeMap<String, Counts>>;

/// Compares with the baseline: returns the drops (each a line) and whether anything rose.
pub fn check_baseline(base: &Baseline, current: &Baseline) -> (Vec<String>, bool) {
    let mut drops = Vec::new();
    let mut rose = false;
    for (folder, ops) in base {
        let Some(cur) = current.get(folder) else { continue };
        for (op, b) in ops {
            let c = cur.get(op).copied().unwrap_or_default();
            for (what, bv, cv) in [("value", b.value, c.value), ("grad", b.grad, c.grad), ("error", b.error, c.error)] {
                if cv < bv {
                    drops.push(format!("{folder} {op} {what}: {cv} passed, baseline {bv}"));
                }
            }
        }
    }
    for (folder, ops) in current {
        let base_ops = base.get(folder);
        for (op, c) in ops {
            let b = base_ops.and_then(|m| m.get(op)).copied().unwrap_or_default();
            if c.value > b.value || c.grad > b.grad || c.error > b.error {
                rose = true;
            }
        }
    }
    (drops, rose)
}

/// The README section (a Markdown table), between the markers the runner rewrites.
pub fn readme_section(folders: &[(String, Tally)], torch_version: &str) -> String {
    let mut s = String::new();
    // the command names the folders of this run (by name, under tests/conformance/, so that the
    // text does not depend on the directory the runner was started from)
    let cases: String = folders.iter().map(|(name, _)| format!(" --cases tests/conformance/{name}")).collect();
    s.push_str(&format!(
        "Cases generated from PyTorch {torch_version}'s OpInfo database; produced by `cargo run --release -p magpie-conformance --{cases} --readme README.md`.\n\n"
    ));
    s.push_str("| cases | value cases passed | gradients passed | error cases rejected | crashed |\n|---|---|---|---|---|\n");
    for (name, t) in folders {
        let (vp, vn) = Tally::ratio(&t.value);
        let (gp, gn) = Tally::ratio(&t.grad);
        let (ep, en) = Tally::ratio(&t.error);
        let cell = |p, n| if n == 0 { "-".to_string() } else { format!("{p}/{n} ({})", pct(p, n)) };
        s.push_str(&format!("| {name} | {} | {} | {} | {} |\n", cell(vp, vn), cell(gp, gn), cell(ep, en), t.crashed()));
    }
    s
}

pub const BEGIN: &str = "<!-- conformance:begin -->";
pub const END: &str = "<!-- conformance:end -->";

/// Replaces the text between the markers in `doc` with `section`.
pub fn splice(doc: &str, section: &str) -> Result<String, String> {
    let b = doc.find(BEGIN).ok_or("README has no conformance:begin marker")?;
    let e = doc.find(END).ok_or("README has no conformance:end marker")?;
    if e < b {
        return Err("README markers are out of order".into());
    }
    Ok(format!("{}{BEGIN}\n{section}{}", &doc[..b], &doc[e..]))
}

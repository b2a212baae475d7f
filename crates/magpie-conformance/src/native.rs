//! `--must-be-native LIST` (with `--device cuda`): the workers' per-op counts of registry calls
//! with CUDA tensors (native vs CPU fallback, `MAGPIE_FALLBACK_LOG` lines `op native fallback`)
//! are summed over the run, and the run fails when an op named in LIST fell back.

use std::collections::BTreeMap;
use std::path::Path;

/// The op names of a list file: one per line; blank lines and `#` comments are skipped.
pub fn read_list(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()).map(str::to_string).collect())
}

/// Sums `op native fallback` lines (one set per worker process) into per-op totals.
pub fn parse_counts(text: &str) -> Result<BTreeMap<String, (u64, u64)>, String> {
    let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("malformed fallback log line: {line:?}");
        if f.len() != 3 {
            return Err(bad());
        }
        let (n, b) = (f[1].parse::<u64>().map_err(|_| bad())?, f[2].parse::<u64>().map_err(|_| bad())?);
        let e = m.entry(f[0].to_string()).or_default();
        e.0 += n;
        e.1 += b;
    }
    Ok(m)
}

/// The ops of `list` that fell back (with their counts), and those never called with CUDA
/// tensors in the run.
pub fn check(list: &[String], counts: &BTreeMap<String, (u64, u64)>) -> (Vec<(String, u64, u64)>, Vec<String>) {
    let mut fell = Vec::new();
    let mut absent = Vec::new();
    for op in list {
        match counts.get(op) {
            Some(&(n, b)) if b > 0 => fell.push((op.clone(), n, b)),
            Some(_) => {}
            None => absent.push(op.clone()),
        }
    }
    (fell, absent)
}

/// Prints the totals and the check; returns 1 when a listed op fell back, else 0.
pub fn report(list: &[String], counts: &BTreeMap<String, (u64, u64)>) -> i32 {
    let (native, fallback): (u64, u64) = counts.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
    let host: u64 = counts.iter().filter(|(k, _)| k.starts_with("host:")).map(|(_, v)| v.1).sum();
    println!("CUDA registry calls: {native} native, {} fell back to the CPU (plus {host} host:* calls)", fallback - host);
    let (fell, absent) = check(list, counts);
    if !absent.is_empty() {
        println!("must-be-native ops not called with CUDA tensors in this run: {}", absent.join(", "));
    }
    if fell.is_empty() {
        println!("must-be-native: all {} listed ops ran natively", list.len() - absent.len());
        return 0;
    }
    println!("must-be-native ops that fell back to the CPU:");
    for (op, n, b) in &fell {
        println!("  {op}: {b} fallback, {n} native calls");
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_workers_and_flags_fallbacks() {
        let c = parse_counts("sort 3 0\ncumsum 1 2\nsort 2 0\nhost:conv 0 5\n").unwrap();
        assert_eq!(c["sort"], (5, 0));
        assert_eq!(c["cumsum"], (1, 2));
        let list: Vec<String> = ["sort", "cumsum", "topk"].iter().map(|s| s.to_string()).collect();
        let (fell, absent) = check(&list, &c);
        assert_eq!(fell, vec![("cumsum".to_string(), 1, 2)]);
        assert_eq!(absent, vec!["topk".to_string()]);
        assert_eq!(report(&list, &c), 1);
        assert_eq!(report(&list[..1], &c), 0);
        assert!(parse_counts("sort 1\n").is_err());
        assert!(parse_counts("sort x 1\n").is_err());
    }
}

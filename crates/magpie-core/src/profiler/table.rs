//! `key_averages()`: events grouped by name (and optionally input shapes) with self and total
//! times and memory, and `table(sort_by, row_limit)` laid out as PyTorch prints it.

use super::Event;
use crate::{Error, Result};
use std::collections::HashMap;
use std::fmt::Write;

/// One row of `key_averages()` (PyTorch's `FunctionEventAvg`); times in µs, memory in bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FunctionEventAvg {
    pub key: String,
    pub count: usize,
    pub cpu_time_total: f64,
    pub self_cpu_time_total: f64,
    pub cuda_time_total: f64,
    pub self_cuda_time_total: f64,
    pub cpu_memory_usage: i64,
    pub self_cpu_memory_usage: i64,
    pub cuda_memory_usage: i64,
    pub self_cuda_memory_usage: i64,
    /// The input shapes (when grouped by them), as PyTorch prints them.
    pub input_shapes: String,
}

impl FunctionEventAvg {
    /// Mean host time per call (µs).
    pub fn cpu_time(&self) -> f64 {
        self.cpu_time_total / self.count.max(1) as f64
    }
    /// Mean device time per call (µs).
    pub fn cuda_time(&self) -> f64 {
        self.cuda_time_total / self.count.max(1) as f64
    }
}

/// The rows of `key_averages()`, in first-seen order.
#[derive(Clone, Debug, Default)]
pub struct KeyAverages {
    pub rows: Vec<FunctionEventAvg>,
    has_cuda: bool,
    has_memory: bool,
    by_shape: bool,
}

/// Self time and memory of each event: its own minus its direct children's.
fn self_parts(events: &[Event]) -> HashMap<u64, (f64, f64, i64, i64)> {
    let mut child: HashMap<u64, (f64, f64, i64, i64)> = HashMap::new();
    for e in events {
        if let Some(p) = e.parent {
            let c = child.entry(p).or_default();
            c.0 += e.cpu_ns() as f64;
            c.1 += e.cuda.as_ref().map_or(0.0, |s| s.dur_ns);
            c.2 += e.cpu_memory;
            c.3 += e.cuda_memory;
        }
    }
    events
        .iter()
        .map(|e| {
            let c = child.get(&e.id).copied().unwrap_or_default();
            let cuda = e.cuda.as_ref().map_or(0.0, |s| s.dur_ns);
            (e.id, ((e.cpu_ns() as f64 - c.0).max(0.0), (cuda - c.1).max(0.0), e.cpu_memory - c.2, e.cuda_memory - c.3))
        })
        .collect()
}

fn shapes_key(e: &Event) -> String {
    let dims: Vec<String> = e.input_shapes.iter().map(|s| format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))).collect();
    format!("[{}]", dims.join(", "))
}

impl KeyAverages {
    pub(crate) fn new(events: &[Event], by_shape: bool) -> KeyAverages {
        let parts = self_parts(events);
        let mut rows: Vec<FunctionEventAvg> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        let (mut has_cuda, mut has_memory) = (false, false);
        for e in events {
            let shapes = if by_shape { shapes_key(e) } else { String::new() };
            let i = *index.entry((e.name.clone(), shapes.clone())).or_insert_with(|| {
                rows.push(FunctionEventAvg { key: e.name.clone(), input_shapes: shapes, ..Default::default() });
                rows.len() - 1
            });
            let (s_cpu, s_cuda, s_mem, s_cmem) = parts.get(&e.id).copied().unwrap_or_default();
            let r = &mut rows[i];
            r.count += 1;
            r.cpu_time_total += e.cpu_ns() as f64 / 1e3;
            r.self_cpu_time_total += s_cpu / 1e3;
            if let Some(c) = &e.cuda {
                has_cuda = true;
                r.cuda_time_total += c.dur_ns / 1e3;
            }
            r.self_cuda_time_total += s_cuda / 1e3;
            has_memory |= e.cpu_memory != 0 || e.cuda_memory != 0;
            r.cpu_memory_usage += e.cpu_memory;
            r.self_cpu_memory_usage += s_mem;
            r.cuda_memory_usage += e.cuda_memory;
            r.self_cuda_memory_usage += s_cmem;
        }
        KeyAverages { rows, has_cuda, has_memory, by_shape }
    }

    /// The row of `key` (the first, when grouped by input shape).
    pub fn get(&self, key: &str) -> Option<&FunctionEventAvg> {
        self.rows.iter().find(|r| r.key == key)
    }

    /// The rows sorted by `sort_by` (descending), PyTorch's keys: `self_cpu_time_total`,
    /// `cpu_time_total`, `cpu_time`, `self_cuda_time_total`, `cuda_time_total`, `cuda_time`
    /// (also spelled `device_...`), `cpu_memory_usage`, `self_cpu_memory_usage`,
    /// `cuda_memory_usage`, `self_cuda_memory_usage`, `count`.
    pub fn sorted(&self, sort_by: &str) -> Result<Vec<&FunctionEventAvg>> {
        let key = sort_by.replace("device_", "cuda_");
        let f: fn(&FunctionEventAvg) -> f64 = match key.as_str() {
            "self_cpu_time_total" => |r| r.self_cpu_time_total,
            "cpu_time_total" => |r| r.cpu_time_total,
            "cpu_time" => |r| r.cpu_time(),
            "self_cuda_time_total" => |r| r.self_cuda_time_total,
            "cuda_time_total" => |r| r.cuda_time_total,
            "cuda_time" => |r| r.cuda_time(),
            "cpu_memory_usage" => |r| r.cpu_memory_usage as f64,
            "self_cpu_memory_usage" => |r| r.self_cpu_memory_usage as f64,
            "cuda_memory_usage" => |r| r.cuda_memory_usage as f64,
            "self_cuda_memory_usage" => |r| r.self_cuda_memory_usage as f64,
            "count" => |r| r.count as f64,
            _ => return Err(Error::value("table", format!("'FunctionEventAvg' object has no attribute '{sort_by}'"))),
        };
        let mut v: Vec<&FunctionEventAvg> = self.rows.iter().collect();
        v.sort_by(|a, b| f(b).total_cmp(&f(a)));
        Ok(v)
    }

    /// `key_averages().table(sort_by=..., row_limit=...)`: PyTorch's table (columns for CUDA time
    /// and memory only when the profile has them), then the self-time totals.
    pub fn table(&self, sort_by: &str, row_limit: usize) -> Result<String> {
        let rows = self.sorted(sort_by)?;
        let rows = &rows[..rows.len().min(row_limit)];
        let name_w = self.rows.iter().map(|r| r.key.chars().count()).max().unwrap_or(4).clamp(4, 51) + 4;
        let mut heads = vec!["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"];
        if self.has_cuda {
            heads.extend(["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]);
        }
        if self.has_memory {
            heads.extend(["CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA Mem"]);
        }
        heads.push("# of Calls");
        let self_cpu: f64 = self.rows.iter().map(|r| r.self_cpu_time_total).sum();
        let self_cuda: f64 = self.rows.iter().map(|r| r.self_cuda_time_total).sum();
        let pct = |a: f64, b: f64| if b > 0.0 { format!("{:.2}%", 100.0 * a / b) } else { "0.00%".into() };
        let mut line = format!("{}  ", "-".repeat(name_w));
        for _ in &heads {
            line.push_str(&"-".repeat(12));
            line.push_str("  ");
        }
        let shape_w = if self.by_shape { rows.iter().map(|r| r.input_shapes.len()).max().unwrap_or(12).clamp(12, 80) } else { 0 };
        if self.by_shape {
            line.push_str(&"-".repeat(shape_w));
            line.push_str("  ");
        }
        let mut out = String::new();
        let _ = writeln!(out, "{line}");
        let mut head = format!("{:>name_w$}  ", "Name");
        for h in &heads {
            let _ = write!(head, "{h:>12}  ");
        }
        if self.by_shape {
            let _ = write!(head, "{:<shape_w$}  ", "Input Shapes");
        }
        let _ = writeln!(out, "{head}");
        let _ = writeln!(out, "{line}");
        for r in rows {
            let mut name = r.key.clone();
            if name.chars().count() > name_w - 4 {
                name = name.chars().take(name_w - 7).collect::<String>() + "...";
            }
            let mut cells = vec![pct(r.self_cpu_time_total, self_cpu), fmt_time(r.self_cpu_time_total), pct(r.cpu_time_total, self_cpu), fmt_time(r.cpu_time_total), fmt_time(r.cpu_time())];
            if self.has_cuda {
                cells.extend([fmt_time(r.self_cuda_time_total), pct(r.self_cuda_time_total, self_cuda), fmt_time(r.cuda_time_total), fmt_time(r.cuda_time())]);
            }
            if self.has_memory {
                cells.extend([fmt_memory(r.cpu_memory_usage), fmt_memory(r.self_cpu_memory_usage), fmt_memory(r.cuda_memory_usage), fmt_memory(r.self_cuda_memory_usage)]);
            }
            cells.push(r.count.to_string());
            let mut row = format!("{name:>name_w$}  ");
            for c in &cells {
                let _ = write!(row, "{c:>12}  ");
            }
            if self.by_shape {
                let _ = write!(row, "{:<shape_w$}  ", r.input_shapes);
            }
            let _ = writeln!(out, "{row}");
        }
        let _ = writeln!(out, "{line}");
        let _ = writeln!(out, "Self CPU time total: {}", fmt_time(self_cpu));
        if self.has_cuda {
            let _ = writeln!(out, "Self CUDA time total: {}", fmt_time(self_cuda));
        }
        Ok(out)
    }
}

/// PyTorch's `_format_time` (µs in).
pub fn fmt_time(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3}ms", us / 1e3)
    } else {
        format!("{us:.3}us")
    }
}

/// PyTorch's `_format_memory` (bytes in).
pub fn fmt_memory(b: i64) -> String {
    let (kb, mb, gb) = (1024.0, 1024.0 * 1024.0, 1024.0 * 1024.0 * 1024.0);
    let a = (b as f64).abs();
    if a >= gb {
        format!("{:.2} Gb", b as f64 / gb)
    } else if a >= mb {
        format!("{:.2} Mb", b as f64 / mb)
    } else if a >= kb {
        format!("{:.2} Kb", b as f64 / kb)
    } else {
        format!("{b} b")
    }
}

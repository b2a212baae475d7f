//! The Chrome trace exporter: PyTorch's `export_chrome_trace` layout (`traceEvents` of complete
//! events, `"ph": "X"`, `ts`/`dur` in µs, input shapes in `args`), which `chrome://tracing` and
//! Perfetto open. Host ranges sit on the process' threads; the device time of CUDA ops sits on one
//! track per GPU.

use super::Event;
use std::fmt::Write;

/// The process id of host events; GPU tracks use the device ordinal as their pid, as PyTorch does.
fn host_pid() -> u32 {
    std::process::id()
}

/// A JSON string literal.
pub(crate) fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1000.0)
}

fn shapes(e: &Event) -> String {
    let dims: Vec<String> = e.input_shapes.iter().map(|s| format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))).collect();
    format!("[{}]", dims.join(", "))
}

/// The trace as a JSON document.
pub(crate) fn to_json(events: &[Event]) -> String {
    let pid = host_pid();
    let mut out: Vec<String> = Vec::with_capacity(events.len() + 8);
    let mut threads: Vec<u64> = Vec::new();
    let mut gpus: Vec<usize> = Vec::new();
    let mut sorted: Vec<&Event> = events.iter().collect();
    // parents before children at equal start times, so viewers nest them
    sorted.sort_by_key(|e| (e.start_ns, std::cmp::Reverse(e.end_ns), e.id));
    for e in sorted {
        if !threads.contains(&e.thread) {
            threads.push(e.thread);
        }
        let mut args = format!("\"External id\": {}", e.id);
        if let Some(p) = e.parent {
            let _ = write!(args, ", \"Parent id\": {p}");
        }
        if !e.input_shapes.is_empty() {
            let types: Vec<String> = e.input_types.iter().map(|t| quote(t)).collect();
            let _ = write!(args, ", \"Input Dims\": {}, \"Input type\": [{}]", shapes(e), types.join(", "));
        }
        if e.cpu_memory != 0 {
            let _ = write!(args, ", \"CPU Mem\": {}", e.cpu_memory);
        }
        if e.cuda_memory != 0 {
            let _ = write!(args, ", \"CUDA Mem\": {}", e.cuda_memory);
        }
        out.push(format!(
            "{{\"ph\": \"X\", \"cat\": {}, \"name\": {}, \"pid\": {pid}, \"tid\": {}, \"ts\": {}, \"dur\": {}, \"args\": {{{args}}}}}",
            quote(e.kind.category()),
            quote(&e.name),
            e.thread,
            us(e.start_ns as f64),
            us(e.cpu_ns() as f64)
        ));
        if let Some(c) = &e.cuda {
            if !gpus.contains(&c.device) {
                gpus.push(c.device);
            }
            out.push(format!(
                "{{\"ph\": \"X\", \"cat\": \"gpu_op\", \"name\": {}, \"pid\": {}, \"tid\": 0, \"ts\": {}, \"dur\": {}, \"args\": {{\"External id\": {}, \"device\": {}}}}}",
                quote(&e.name),
                c.device,
                us(c.start_ns),
                us(c.dur_ns),
                e.id,
                c.device
            ));
        }
    }
    out.push(format!("{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {pid}, \"tid\": 0, \"args\": {{\"name\": \"magpie (host)\"}}}}"));
    for t in threads {
        out.push(format!("{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {pid}, \"tid\": {t}, \"args\": {{\"name\": \"thread {t}\"}}}}"));
    }
    for g in gpus {
        out.push(format!("{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {g}, \"tid\": 0, \"args\": {{\"name\": \"GPU {g}\"}}}}"));
        out.push(format!("{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {g}, \"tid\": 0, \"args\": {{\"name\": \"stream (op spans between CUDA events)\"}}}}"));
    }
    format!("{{\n\"schemaVersion\": 1,\n\"displayTimeUnit\": \"ms\",\n\"traceEvents\": [\n{}\n]\n}}\n", out.join(",\n"))
}

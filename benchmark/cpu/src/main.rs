//! `bench-cpu`: times each case of `benchmark/cpu/cases.json` in torch-magpie (median wall time
//! after warm-up) and measures the peak bytes allocated during one call, with a counting global
//! allocator. Prints one JSON object per case; `run.sh` joins them with PyTorch's numbers.

use magpie_core::registry::{call, Value};
use magpie_core::Tensor;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn json_to_value(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => n.as_i64().map(Value::Int).unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(0.0))),
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Array(a) => Value::List(a.iter().map(json_to_value).collect()),
        _ => Value::None,
    }
}

fn run_case(c: &serde_json::Value, min_secs: f64) -> Result<serde_json::Value, String> {
    let name = c["name"].as_str().unwrap_or("?");
    let op = c["op"].as_str().ok_or("case without op")?;
    let transpose = c["transpose"].as_bool().unwrap_or(false);
    let mut inputs = Vec::new();
    for s in c["inputs"].as_array().ok_or("case without inputs")? {
        let shape: Vec<usize> = s.as_array().ok_or("bad shape")?.iter().filter_map(|v| v.as_u64().map(|x| x as usize)).collect();
        let t = Tensor::randn(&shape).map_err(|e| e.to_string())?;
        inputs.push(if transpose { t.t().map_err(|e| e.to_string())? } else { t });
    }
    // tensor keyword arguments (weight=, bias=): {"name": shape}
    let mut kw_tensors = Vec::new();
    for (k, s) in c["kwarg_inputs"].as_object().into_iter().flatten() {
        let shape: Vec<usize> = s.as_array().ok_or("bad shape")?.iter().filter_map(|v| v.as_u64().map(|x| x as usize)).collect();
        let t = Tensor::randn(&shape).map_err(|e| e.to_string())?;
        inputs.push(t.clone());
        kw_tensors.push((k.clone(), Value::Tensor(t)));
    }
    let n_pos = inputs.len() - kw_tensors.len();
    let backward = c["backward"].as_bool().unwrap_or(false);
    if backward {
        for t in &inputs {
            t.requires_grad_(true).map_err(|e| e.to_string())?;
        }
    }
    let mut args: Vec<Value> = inputs[..n_pos].iter().cloned().map(Value::Tensor).collect();
    // integer inputs (class targets): {"shape": [...], "high": n} drawn from [0, n)
    for s in c["int_inputs"].as_array().into_iter().flatten() {
        let shape: Vec<usize> = s["shape"].as_array().ok_or("bad int shape")?.iter().filter_map(|v| v.as_u64().map(|x| x as usize)).collect();
        let high = s["high"].as_i64().ok_or("int input without high")?;
        let t = Tensor::randint_on(0, high, &shape, magpie_core::DType::I64, magpie_core::Device::Cpu).map_err(|e| e.to_string())?;
        args.push(Value::Tensor(t));
    }
    if let Some(a) = c["args"].as_array() {
        args.extend(a.iter().map(json_to_value));
    }
    let mut kwargs: Vec<(String, Value)> =
        c["kwargs"].as_object().map(|o| o.iter().map(|(k, v)| (k.clone(), json_to_value(v))).collect()).unwrap_or_default();
    kwargs.extend(kw_tensors);
    let fwd = || call(op, args.clone(), kwargs.clone()).map_err(|e| e.to_string());
    // backward cases time forward + backward with a fixed random output gradient
    let mut grad_out: Option<Tensor> = None;
    if backward {
        if let Value::Tensor(o) = fwd()? {
            grad_out = Some(Tensor::randn(o.shape()).map_err(|e| e.to_string())?);
        }
    }
    let once = || -> Result<Value, String> {
        let out = fwd()?;
        if backward {
            if let Value::Tensor(o) = &out {
                o.backward_with(grad_out.as_ref(), false, false).map_err(|e| e.to_string())?;
            }
            for t in &inputs {
                t.set_grad(None);
            }
        }
        Ok(out)
    };
    // peak memory of one call, above what the inputs already hold
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = once()?;
    let peak = PEAK.load(Ordering::Relaxed) - base;
    drop(out);
    once()?; // warm-up
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed().as_secs_f64() < min_secs && times.len() < 200) {
        let t0 = Instant::now();
        let o = once()?;
        times.push(t0.elapsed().as_secs_f64());
        drop(o);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    // BENCH_STAT=min reports the fastest repetition (robust on a machine shared with other work)
    let median = if std::env::var("BENCH_STAT").is_ok_and(|s| s == "min") { times[0] } else { times[times.len() / 2] };
    Ok(serde_json::json!({ "name": name, "seconds": median, "peak_bytes": peak, "reps": times.len() }))
}

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| "benchmark/cpu/cases.json".into());
    let min_secs: f64 = std::env::var("BENCH_MIN_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bench-cpu: cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let cases: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("bench-cpu: malformed {path}: {e}");
            std::process::exit(2);
        }
    };
    magpie_core::ops::random::manual_seed(0);
    for c in cases["cases"].as_array().into_iter().flatten() {
        let line = match run_case(c, min_secs) {
            Ok(v) => v,
            Err(e) => serde_json::json!({ "name": c["name"], "error": e }),
        };
        println!("{line}");
    }
}

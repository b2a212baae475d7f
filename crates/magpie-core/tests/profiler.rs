//! The profiler: op names, input shapes, nesting, self/total times, memory, backward nodes, the
//! schedule, the Chrome trace and the key_averages table; on CUDA, per-op times from events.
//! The CUDA test is skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1.

use magpie_core::profiler::{profile, record_function, Event, ProfileConfig, ProfilerAction, ProfilerActivity, Schedule};
use magpie_core::{Device, Tensor};
use std::sync::Mutex;

/// A profile records every thread of the process: the tests of this file take turns.
static ONE: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn by_name<'a>(evs: &'a [Event], name: &str) -> Vec<&'a Event> {
    evs.iter().filter(|e| e.name == name).collect()
}

fn parent<'a>(evs: &'a [Event], e: &Event) -> Option<&'a Event> {
    e.parent.and_then(|p| evs.iter().find(|x| x.id == p))
}

/// Every event lies inside its parent, on the host clock.
fn check_nesting(evs: &[Event]) {
    for e in evs {
        assert!(e.end_ns >= e.start_ns, "{} ends before it starts", e.name);
        if let Some(p) = parent(evs, e) {
            assert!(p.start_ns <= e.start_ns && e.end_ns <= p.end_ns, "{} [{}, {}] is not inside {} [{}, {}]", e.name, e.start_ns, e.end_ns, p.name, p.start_ns, p.end_ns);
            assert_eq!(p.thread, e.thread);
        }
    }
}

#[test]
fn records_ops_shapes_memory_scopes_and_backward_nodes() {
    let _l = lock();
    let a = Tensor::randn(&[8, 16]).unwrap().with_requires_grad().unwrap();
    let w = Tensor::randn(&[16, 4]).unwrap().with_requires_grad().unwrap();
    let prof = profile(ProfileConfig { record_shapes: true, profile_memory: true, ..ProfileConfig::default() }).unwrap();
    let keep;
    {
        let _s = record_function("block");
        let y = a.matmul(&w).unwrap();
        keep = y.exp().unwrap();
        keep.sum().unwrap().backward().unwrap();
    }
    let trace = prof.stop().unwrap();
    let evs = trace.events();
    check_nesting(evs);

    let mm = by_name(evs, "aten::matmul");
    assert_eq!(mm.len(), 1, "{:?}", evs.iter().map(|e| &e.name).collect::<Vec<_>>());
    assert_eq!(mm[0].input_shapes, vec![vec![8, 16], vec![16, 4]]);
    assert_eq!(mm[0].input_types, vec!["float32", "float32"]);
    assert_eq!(parent(evs, mm[0]).map(|p| p.name.as_str()), Some("block"));
    // the product's storage (8 x 4 float32) outlives the op; temporaries are freed inside it
    assert_eq!(mm[0].cpu_memory, 8 * 4 * 4);
    assert_eq!(by_name(evs, "aten::exp").len(), 1);
    assert_eq!(by_name(evs, "aten::exp")[0].cpu_memory, 8 * 4 * 4);

    // backward: PyTorch's two ranges per node, the node's name inside the engine's
    let outer: Vec<&Event> = evs.iter().filter(|e| e.name.starts_with("autograd::engine::evaluate_function: ")).collect();
    assert!(outer.len() >= 3, "expected the sum, exp and matmul nodes, got {:?}", outer.iter().map(|e| &e.name).collect::<Vec<_>>());
    for o in &outer {
        let node = o.name.trim_start_matches("autograd::engine::evaluate_function: ");
        assert!(node.ends_with("Backward0") || node.ends_with("Backward1") || node == "torch::autograd::AccumulateGrad", "{node}");
        let inner: Vec<&Event> = evs.iter().filter(|e| e.parent == Some(o.id)).collect();
        assert_eq!(inner.len(), 1);
        assert_eq!(inner[0].name, node);
    }
    assert!(outer.iter().any(|e| e.name.ends_with("ExpBackward0")));
    // the gradient rules' ops nest under their node
    let exp_node = evs.iter().find(|e| e.name == "ExpBackward0").unwrap();
    assert!(evs.iter().any(|e| e.parent == Some(exp_node.id) && e.name == "aten::mul"));

    // key_averages: self time is total minus the direct children's
    let ka = trace.key_averages();
    let block = ka.get("block").unwrap();
    assert_eq!(block.count, 1);
    let kids: f64 = evs.iter().filter(|e| e.parent == Some(by_name(evs, "block")[0].id)).map(|e| e.cpu_ns() as f64 / 1e3).sum();
    assert!((block.self_cpu_time_total - (block.cpu_time_total - kids)).abs() < 1e-6);
    assert!(ka.get("aten::matmul").unwrap().self_cpu_time_total <= ka.get("aten::matmul").unwrap().cpu_time_total);
    let table = ka.table("self_cpu_time_total", 5).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[1].contains("Name") && lines[1].contains("Self CPU %") && lines[1].contains("# of Calls") && lines[1].contains("CPU Mem"), "{table}");
    assert_eq!(lines.len(), 3 + 5 + 1 + 1, "{table}");
    assert!(table.contains("Self CPU time total:"));
    let by_count = ka.sorted("count").unwrap();
    assert!(by_count.windows(2).all(|w| w[0].count >= w[1].count));
    let err = ka.table("no_such_key", 5).unwrap_err().to_string();
    assert!(err.contains("no_such_key"), "{err}");
    assert!(trace.key_averages_by_input_shape().table("count", 100).unwrap().contains("[[8, 16], [16, 4]]"));

    // the Chrome trace: complete events in µs with shapes in args
    let json: serde_json::Value = serde_json::from_str(&trace.chrome_trace_json()).unwrap();
    let tev = json["traceEvents"].as_array().unwrap();
    let xs: Vec<&serde_json::Value> = tev.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(xs.len(), evs.len());
    for x in &xs {
        assert!(x["ts"].as_f64().is_some() && x["dur"].as_f64().unwrap() >= 0.0 && x["pid"].is_u64() && x["tid"].is_u64() && x["name"].is_string());
    }
    let jm = xs.iter().find(|x| x["name"] == "aten::matmul").unwrap();
    assert_eq!(jm["cat"], "cpu_op");
    assert_eq!(jm["args"]["Input Dims"], serde_json::json!([[8, 16], [16, 4]]));
    assert!((jm["dur"].as_f64().unwrap() - mm[0].cpu_ns() as f64 / 1e3).abs() < 1e-2);
    assert_eq!(xs.iter().find(|x| x["name"] == "block").unwrap()["cat"], "user_annotation");
    assert!(tev.iter().any(|e| e["ph"] == "M" && e["name"] == "process_name"));
}

#[test]
fn off_costs_nothing_and_one_profile_at_a_time() {
    let _l = lock();
    assert!(!magpie_core::profiler::is_enabled());
    assert!(record_function("x").is_none());
    let p = profile(ProfileConfig::default()).unwrap();
    assert!(magpie_core::profiler::is_enabled());
    let err = profile(ProfileConfig::default()).err().unwrap().to_string();
    assert!(err.contains("already enabled"), "{err}");
    // shapes and memory stay empty unless asked for
    let x = Tensor::ones(&[3, 5]).unwrap();
    let _y = x.add(&x).unwrap();
    let t = p.stop().unwrap();
    assert!(!magpie_core::profiler::is_enabled());
    let add = by_name(t.events(), "aten::add");
    assert_eq!(add.len(), 1);
    assert!(add[0].input_shapes.is_empty() && add[0].cpu_memory == 0);
    // nothing recorded after the stop
    let _z = x.add(&x).unwrap();
    assert_eq!(by_name(t.events(), "aten::add").len(), 1);
}

#[test]
fn schedule_follows_pytorch() {
    let _l = lock();
    use ProfilerAction::*;
    // torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    let s = Schedule { wait: 1, warmup: 1, active: 2, repeat: 2, skip_first: 1 };
    let got: Vec<ProfilerAction> = (0..11).map(|i| s.action(i)).collect();
    assert_eq!(got, [None, None, Warmup, Record, RecordAndSave, None, Warmup, Record, RecordAndSave, None, None]);
    // repeat 0 cycles forever
    let s0 = Schedule { wait: 0, warmup: 0, active: 1, repeat: 0, skip_first: 0 };
    assert!((0..50).all(|i| s0.action(i) == RecordAndSave));

    let one = Schedule { wait: 1, warmup: 1, active: 2, repeat: 1, skip_first: 1 };
    let mut p = profile(ProfileConfig { activities: vec![ProfilerActivity::Cpu], schedule: Some(one), ..ProfileConfig::default() }).unwrap();
    let x = Tensor::ones(&[4]).unwrap();
    for i in 0..7 {
        let _s = record_function(format!("work{i}"));
        let _y = x.add(&x).unwrap();
        drop(_s);
        p.step().unwrap();
    }
    let t = p.stop().unwrap();
    let names: Vec<&str> = t.events().iter().map(|e| e.name.as_str()).collect();
    // steps 3 and 4 are active; 2 warms up (discarded); the rest do not record
    let mut steps: Vec<&str> = names.iter().copied().filter(|n| n.starts_with("ProfilerStep#")).collect();
    steps.sort();
    assert_eq!(steps, ["ProfilerStep#3", "ProfilerStep#4"], "{names:?}");
    let mut work: Vec<&str> = names.iter().copied().filter(|n| n.starts_with("work")).collect();
    work.sort();
    assert_eq!(work, ["work3", "work4"]);
    assert_eq!(names.iter().filter(|n| **n == "aten::add").count(), 2);
    check_nesting(t.events());
    for e in t.events().iter().filter(|e| e.name.starts_with("work")) {
        assert!(parent(t.events(), e).unwrap().name.starts_with("ProfilerStep#"));
    }
}

fn cuda() -> bool {
    if magpie_core::backend::cuda::is_available() {
        return true;
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available");
    }
    eprintln!("CUDA not available: skipped");
    false
}

#[test]
fn cuda_ops_get_device_time_from_events() {
    if !cuda() {
        return;
    }
    let _l = lock();
    let gpu = Device::Cuda(0);
    let a = Tensor::randn(&[512, 512]).unwrap().to_device(gpu).unwrap().with_requires_grad().unwrap();
    let b = Tensor::randn(&[512, 512]).unwrap().to_device(gpu).unwrap();
    // warm the kernels up (NVRTC compilation, cuBLAS handles) outside the profile
    a.matmul(&b).unwrap().exp().unwrap().sum().unwrap().backward().unwrap();
    let prof = profile(ProfileConfig { record_shapes: true, profile_memory: true, ..ProfileConfig::default() }).unwrap();
    {
        let _s = record_function("outer");
        let y = a.matmul(&b).unwrap().exp().unwrap().sum().unwrap();
        y.backward().unwrap();
    }
    let t = prof.stop().unwrap();
    let evs = t.events();
    check_nesting(evs);
    for name in ["aten::matmul", "aten::exp", "aten::sum"] {
        let e = by_name(evs, name);
        assert_eq!(e.len(), 1, "{name}");
        let c = e[0].cuda.as_ref().unwrap_or_else(|| panic!("{name} has no CUDA time"));
        assert!(c.dur_ns > 0.0 && c.device == 0, "{name}: {c:?}");
        assert!(e[0].cuda_memory > 0 && e[0].cpu_memory == 0, "{name}: {} {}", e[0].cuda_memory, e[0].cpu_memory);
    }
    // a 512^3 GEMM takes microseconds, not nanoseconds or seconds
    let mm = by_name(evs, "aten::matmul")[0].cuda.clone().unwrap();
    assert!(mm.dur_ns > 1e3 && mm.dur_ns < 1e9, "{mm:?}");
    // device spans nest like the host ranges (inner ops' events lie between the outer op's)
    for e in evs {
        if let (Some(c), Some(p)) = (&e.cuda, parent(evs, e)) {
            if let Some(pc) = &p.cuda {
                assert!(pc.start_ns <= c.start_ns + 1e3 && c.start_ns + c.dur_ns <= pc.start_ns + pc.dur_ns + 1e3, "{} {c:?} not inside {} {pc:?}", e.name, p.name);
            }
        }
    }
    let bw = evs.iter().find(|e| e.name.starts_with("autograd::engine::evaluate_function: Mm")).expect("the matmul's node");
    assert!(bw.cuda.as_ref().is_some_and(|c| c.dur_ns > 0.0));
    // the table gets the CUDA columns, the trace a GPU track
    let table = t.key_averages().table("cuda_time_total", 10).unwrap();
    assert!(table.contains("Self CUDA") && table.contains("CUDA total") && table.contains("Self CUDA time total:"), "{table}");
    println!("{table}");
    let json: serde_json::Value = serde_json::from_str(&t.chrome_trace_json()).unwrap();
    let gpu_ops = json["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "gpu_op").count();
    assert_eq!(gpu_ops, evs.iter().filter(|e| e.cuda.is_some()).count());
}

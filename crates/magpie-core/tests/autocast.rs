//! Autocast against PyTorch: every op of fixtures/autocast_cpu.json (made by
//! fixtures/make_autocast.py) is called through the registry under `amp::autocast` with the same
//! input dtypes and must give PyTorch's output dtype, or fail where PyTorch fails; the CUDA table
//! (`--device cuda`, made on a GPU machine) is checked the same way on the GPU when both exist.
//! Then a small MLP forward and backward under bfloat16 autocast against PyTorch's values and
//! against float32, the weight-cast cache, nesting and `enabled = false`.

mod cuda_util;

use magpie_core::amp;
use magpie_core::ops::nn::loss::{cross_entropy, Reduction};
use magpie_core::ops::nn::{linear, native_layer_norm};
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Error, Tensor};
use serde_json::Value as J;

fn parse(text: &str) -> J {
    serde_json::from_str(text).expect("fixture parses")
}

fn cpu_fixture() -> J {
    parse(include_str!("fixtures/autocast_cpu.json"))
}

/// Deterministic test values (the dtype table does not depend on them).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn build(spec: &J, dev: Device, rng: &mut Lcg) -> Value {
    if let Some(shape) = spec.get("tensor") {
        let shape: Vec<usize> = shape.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        let n: usize = shape.iter().product();
        let fill = spec["fill"].as_str().unwrap();
        let dt = DType::parse(spec["dtype"].as_str().unwrap()).unwrap();
        let t = if let Some(high) = fill.strip_prefix("index:") {
            let high: i64 = high.parse().unwrap();
            Tensor::from_vec((0..n as i64).map(|i| (i * 7 + 1) % high).collect::<Vec<i64>>(), &shape).unwrap()
        } else {
            let v: Vec<f64> = (0..n)
                .map(|_| match fill {
                    "positive" => rng.next() * 2.0 + 0.5,
                    "prob" => rng.next() * 0.8 + 0.1,
                    _ => rng.next() * 4.0 - 2.0,
                })
                .collect();
            Tensor::from_vec(v, &shape).unwrap().to_dtype(dt).unwrap()
        };
        return Value::Tensor(t.to_device(dev).unwrap());
    }
    if let Some(items) = spec.get("list") {
        return Value::List(items.as_array().unwrap().iter().map(|s| build(s, dev, rng)).collect());
    }
    if let Some(d) = spec.get("dtype") {
        return Value::DType(DType::parse(d.as_str().unwrap()).unwrap());
    }
    match spec {
        J::Number(n) if n.is_i64() => Value::Int(n.as_i64().unwrap()),
        J::Number(n) => Value::Float(n.as_f64().unwrap()),
        J::String(s) => Value::Str(s.clone()),
        J::Bool(b) => Value::Bool(*b),
        J::Array(a) => Value::List(a.iter().map(|s| build(s, dev, rng)).collect()),
        _ => Value::None,
    }
}

/// The case's call on `dev` inside `amp::autocast(dev, low, enabled)`: its (first) output dtype.
fn run_case(c: &J, dev: Device, low: DType, enabled: bool) -> magpie_core::Result<DType> {
    let op = c["op"].as_str().unwrap();
    let mut rng = Lcg(7);
    let args: Vec<Value> = c["args"].as_array().unwrap().iter().map(|a| build(a, dev, &mut rng)).collect();
    let kwargs: Vec<(String, Value)> =
        c["kwargs"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), build(v, dev, &mut rng))).collect();
    let got = {
        let _ac = amp::autocast(dev, Some(low), enabled)?;
        call(op, args, kwargs)
    };
    let t = match got? {
        Value::List(l) => l.into_iter().next().ok_or_else(|| Error::value(op, "empty result")).and_then(Value::into_tensor)?,
        v => v.into_tensor()?,
    };
    Ok(t.dtype())
}

/// Whether our result (a dtype or an error) is PyTorch's (`out`, else an error).
fn same(got: &magpie_core::Result<DType>, want: Option<&str>) -> bool {
    match (got, want) {
        (Ok(d), Some(w)) => d.name() == w,
        (Err(_), None) => true,
        _ => false,
    }
}

fn show(r: &magpie_core::Result<DType>) -> String {
    match r {
        Ok(d) => d.name().to_string(),
        Err(e) => format!("error `{e}`"),
    }
}

struct Table {
    mismatches: Vec<String>,
    compared: usize,
    /// Cases where the op differs from PyTorch without autocast too (op gaps, not autocast's).
    op_gaps: Vec<String>,
}

/// Runs every case of `fx` on `dev`: first without autocast (a difference there is the op's, and
/// the case is listed apart), then under autocast, where our dtype (or refusal) must be PyTorch's.
fn dtype_table(fx: &J, dev: Device) -> Table {
    let mut t = Table { mismatches: Vec::new(), compared: 0, op_gaps: Vec::new() };
    for c in fx["cases"].as_array().unwrap() {
        let low = DType::parse(c["autocast"].as_str().unwrap()).unwrap();
        let what = format!("{} {} under {} autocast", c["op"].as_str().unwrap(), c["variant"], low);
        let plain = run_case(c, dev, low, false);
        let want_plain = c.get("plain_out").and_then(|o| o.as_str());
        if !same(&plain, want_plain) {
            t.op_gaps.push(format!("{what}: without autocast {} where PyTorch gives {}", show(&plain), want_plain.unwrap_or("an error")));
            continue;
        }
        let got = run_case(c, dev, low, true);
        let want = c.get("out").and_then(|o| o.as_str());
        t.compared += 1;
        if !same(&got, want) {
            let pt = match want {
                Some(w) => w.to_string(),
                None => format!("an error ({})", c["error"]),
            };
            t.mismatches.push(format!("{what}: {} where PyTorch gives {pt}", show(&got)));
        }
    }
    t
}

fn report(dev: &str, total: usize, t: Table) {
    for g in &t.op_gaps {
        eprintln!("op gap (not autocast): {g}");
    }
    eprintln!("{dev}: {} of {total} cases compared, {} op gaps, {} mismatches", t.compared, t.op_gaps.len(), t.mismatches.len());
    assert!(t.mismatches.is_empty(), "{} autocast dtype mismatches with PyTorch on {dev}:\n{}", t.mismatches.len(), t.mismatches.join("\n"));
    // the table is the test: most of it must be compared
    assert!(t.compared * 10 >= total * 9, "only {} of {total} cases compared on {dev}", t.compared);
}

#[test]
fn output_dtypes_match_pytorch_cpu() {
    let fx = cpu_fixture();
    let total = fx["cases"].as_array().unwrap().len();
    report("cpu", total, dtype_table(&fx, Device::Cpu));
}

#[test]
fn output_dtypes_match_pytorch_cuda() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/autocast_cuda.json");
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("skipped: {path} is absent (make it with make_autocast.py --device cuda on a GPU machine)");
        return;
    };
    let Some(dev) = cuda_util::gpu() else { return };
    let fx = parse(&text);
    let total = fx["cases"].as_array().unwrap().len();
    report("cuda", total, dtype_table(&fx, dev));
}

fn tensor(v: &J) -> Tensor {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap() as usize).collect();
    let data: Vec<f32> = v["data"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap() as f32).collect();
    Tensor::from_vec(data, &shape).unwrap()
}

struct Mlp {
    p: Vec<(String, Tensor)>,
}

impl Mlp {
    fn from(fx: &J, dev: Device) -> Mlp {
        let names = ["w1", "b1", "ln_w", "ln_b", "w2", "b2"];
        let p = names
            .iter()
            .map(|n| (n.to_string(), tensor(&fx["params"][n]).to_device(dev).unwrap().with_requires_grad().unwrap()))
            .collect();
        Mlp { p }
    }
    fn get(&self, n: &str) -> &Tensor {
        &self.p.iter().find(|(k, _)| k == n).unwrap().1
    }
    /// The same graph as make_autocast.py's `mlp`: (h, logits, loss).
    fn forward(&self, x: &Tensor, t: &Tensor) -> (Tensor, Tensor, Tensor) {
        let h = linear(x, self.get("w1"), Some(self.get("b1"))).unwrap();
        let h2 = linear(x, self.get("w1"), None).unwrap();
        let h = h.add(&h2.mul_scalar(0.5).unwrap()).unwrap().gelu("none").unwrap();
        let h = native_layer_norm(&h, &[16], Some(self.get("ln_w")), Some(self.get("ln_b")), 1e-5).unwrap().0;
        let logits = linear(&h, self.get("w2"), Some(self.get("b2"))).unwrap();
        let loss = cross_entropy(&logits, t, None, -100, Reduction::Mean, 0.0).unwrap();
        (h, logits, loss)
    }
}

fn close(what: &str, got: &Tensor, want: &[f64], rel: f64) {
    let g = got.to_dtype(DType::F64).unwrap().to_device(Device::Cpu).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(g.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= rel * scale, "{what}[{i}]: {a} vs {b} (scale {scale}, rel {rel})");
    }
}

fn mlp_case(fx: &J, dev: Device) {
    let m = &fx["mlp"];
    let x = tensor(&m["x"]).to_device(dev).unwrap();
    let t = Tensor::from_vec(m["target"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect::<Vec<_>>(), &[6])
        .unwrap()
        .to_device(dev)
        .unwrap();
    // float32 reference, no autocast
    let reference = Mlp::from(m, dev);
    let (_, ref_logits, ref_loss) = reference.forward(&x, &t);
    ref_loss.backward().unwrap();

    let mlp = Mlp::from(m, dev);
    let (h, logits, loss) = {
        let _ac = amp::autocast(dev, Some(DType::BF16), true).unwrap();
        let out = mlp.forward(&x, &t);
        // w1, b1, w2, b2 cast once each (w1 is used twice); the norm's parameters go to float32,
        // which is not cached (PyTorch caches only lower-precision casts)
        assert_eq!(amp::autocast_cache_len(), 4, "one cached cast per lower-precision leaf");
        out
    };
    assert_eq!(amp::autocast_cache_len(), 0, "the cache is cleared when the region ends");
    let dt = &m["dtypes"];
    assert_eq!(h.dtype().name(), dt["h"].as_str().unwrap(), "layer_norm output dtype");
    assert_eq!(logits.dtype().name(), dt["logits"].as_str().unwrap(), "logits dtype");
    assert_eq!(loss.dtype().name(), dt["loss"].as_str().unwrap(), "loss dtype");
    loss.backward().unwrap();

    let want_logits: Vec<f64> = m["logits"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    close("logits vs PyTorch's autocast", &logits, &want_logits, 2e-2);
    let want_loss = m["loss"].as_f64().unwrap();
    let l = loss.to_dtype(DType::F64).unwrap().item().unwrap().to_f64();
    assert!((l - want_loss).abs() <= 1e-2 * want_loss.abs().max(1.0), "loss {l} vs PyTorch's {want_loss}");
    let rl: Vec<f64> = ref_logits.to_dtype(DType::F64).unwrap().to_device(Device::Cpu).unwrap().to_vec().unwrap();
    close("logits vs float32", &logits, &rl, 3e-2);
    for (name, leaf) in &mlp.p {
        let g = leaf.grad().expect("a gradient");
        let want = &m["grads"][name];
        assert_eq!(g.dtype().name(), want["dtype"].as_str().unwrap(), "grad of {name}: dtype (the leaf's)");
        let wd: Vec<f64> = want["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        close(&format!("grad of {name} vs PyTorch's autocast"), &g, &wd, 4e-2);
        let r: Vec<f64> =
            reference.get(name).grad().unwrap().to_dtype(DType::F64).unwrap().to_device(Device::Cpu).unwrap().to_vec().unwrap();
        close(&format!("grad of {name} vs float32"), &g, &r, 6e-2);
    }
}

#[test]
fn mlp_forward_backward_cpu() {
    mlp_case(&cpu_fixture(), Device::Cpu);
}

#[test]
fn mlp_forward_backward_cuda() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/autocast_cuda.json");
    let Ok(text) = std::fs::read_to_string(path) else {
        eprintln!("skipped: {path} is absent");
        return;
    };
    let Some(dev) = cuda_util::gpu() else { return };
    mlp_case(&parse(&text), dev);
}

#[test]
fn weight_cast_cache_one_cast_per_leaf() {
    let w = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap().with_requires_grad().unwrap();
    let x = Tensor::from_vec(vec![1f32, 0., 0., 1.], &[2, 2]).unwrap();
    {
        let _ac = amp::autocast(Device::Cpu, Some(DType::BF16), true).unwrap();
        let a = x.matmul(&w).unwrap();
        let b = x.mm(&w).unwrap();
        // x needs no grad: cast each time, never cached; w: one cached cast
        assert_eq!(amp::autocast_cache_len(), 1);
        {
            // a nested region keeps the cache; with autocast off the op runs in float32
            let _off = amp::autocast(Device::Cpu, None, false).unwrap();
            assert_eq!(x.matmul(&w).unwrap().dtype(), DType::F32);
            assert_eq!(amp::autocast_cache_len(), 1);
        }
        // a view of the leaf is not cached (PyTorch's rule), nor is a non-leaf
        let _ = x.matmul(&w.t().unwrap()).unwrap();
        let _ = x.matmul(&w.mul_scalar(2.0).unwrap()).unwrap();
        assert_eq!(amp::autocast_cache_len(), 1);
        a.add(&b).unwrap().to_dtype(DType::F32).unwrap().sum().unwrap().backward().unwrap();
        // a weight float16 region inside a bfloat16 one casts again, to the new dtype
        let _f16 = amp::autocast(Device::Cpu, Some(DType::F16), true).unwrap();
        assert_eq!(x.matmul(&w).unwrap().dtype(), DType::F16);
        assert_eq!(amp::autocast_cache_len(), 2);
    }
    assert_eq!(amp::autocast_cache_len(), 0);
    // both products flow into the one cast: d/dw sum(x w) twice = 2 * column sums of x
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![2., 2., 2., 2.]);
    // caching can be switched off
    amp::set_autocast_cache_enabled(false);
    {
        let _ac = amp::autocast(Device::Cpu, None, true).unwrap();
        let _ = x.matmul(&w).unwrap();
        assert_eq!(amp::autocast_cache_len(), 0);
    }
    amp::set_autocast_cache_enabled(true);
}

#[test]
fn regions_nest_and_restore() {
    assert!(!amp::is_autocast_enabled(Device::Cpu));
    assert_eq!(amp::get_autocast_dtype(Device::Cpu), DType::BF16);
    assert_eq!(amp::get_autocast_dtype(Device::Cuda(0)), DType::F16);
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap();
    {
        let _a = amp::autocast(Device::Cpu, Some(DType::F16), true).unwrap();
        assert!(amp::is_autocast_enabled(Device::Cpu));
        assert!(!amp::is_autocast_enabled(Device::Cuda(0)), "the CUDA state is separate");
        assert_eq!(x.mm(&x).unwrap().dtype(), DType::F16);
        {
            let _b = amp::autocast(Device::Cpu, Some(DType::BF16), true).unwrap();
            assert_eq!(x.mm(&x).unwrap().dtype(), DType::BF16);
            let _c = amp::autocast(Device::Cpu, None, false).unwrap();
            assert!(!amp::is_autocast_enabled(Device::Cpu));
            assert_eq!(x.mm(&x).unwrap().dtype(), DType::F32);
        }
        assert_eq!(amp::get_autocast_dtype(Device::Cpu), DType::F16);
        assert_eq!(x.mm(&x).unwrap().dtype(), DType::F16);
        // CUDA autocast does not touch CPU tensors
        let _g = amp::autocast(Device::Cuda(0), Some(DType::BF16), true).unwrap();
        let _off = amp::autocast(Device::Cpu, None, false).unwrap();
        assert_eq!(x.mm(&x).unwrap().dtype(), DType::F32);
    }
    assert!(!amp::is_autocast_enabled(Device::Cpu));
    assert!(!amp::is_autocast_enabled(Device::Cuda(0)));
    assert_eq!(amp::get_autocast_dtype(Device::Cpu), DType::BF16);
    assert_eq!(x.mm(&x).unwrap().dtype(), DType::F32);
    // only the two lower-precision types
    let e = amp::autocast(Device::Cpu, Some(DType::F32), true).err().expect("float32 is refused");
    assert!(e.to_string().contains("[autocast]"), "{e}");
}

#[test]
fn backward_runs_in_the_forward_dtypes() {
    // gradients come back through the casts: a float32 leaf gets a float32 gradient, and the
    // backward of the bfloat16 product runs in bfloat16 even when backward() is called inside the region
    let w = Tensor::from_vec(vec![0.5f32, -1., 2., 0.25], &[2, 2]).unwrap().with_requires_grad().unwrap();
    let x = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[2, 2]).unwrap().with_requires_grad().unwrap();
    let _ac = amp::autocast(Device::Cpu, None, true).unwrap();
    let y = x.matmul(&w).unwrap();
    assert_eq!(y.dtype(), DType::BF16);
    let l = y.sum().unwrap(); // sum is not in the CPU lists: stays bfloat16
    assert_eq!(l.dtype(), DType::BF16);
    l.backward().unwrap();
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
    assert_eq!(x.grad().unwrap().dtype(), DType::F32);
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![4., 4., 6., 6.]);
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![-0.5, 2.25, -0.5, 2.25]);
}

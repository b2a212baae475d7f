//! magpie-quant against PyTorch (fixtures made by `fixtures/make_quant_fixtures.py` with torch's
//! x86 quantized engine): quantized tensors, observers, dynamic int8 Linear layers and an MLP.

use magpie_core::{Result, Tensor};
use magpie_nn::{Linear, Module, ReLU, Sequential};
use magpie_quant::gemm::Int8Kernel;
use magpie_quant::{
    choose_quantization_params, quantize_dynamic, quantize_per_channel, quantize_per_tensor, DynamicQConfig, DynamicQuantizedLinear, MinMaxObserver, ObserverOptions,
    PerChannelMinMaxObserver, QDType, QScheme,
};
use serde_json::Value;

fn load(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().expect("array").iter().map(|b| f32::from_bits(b.as_u64().expect("bits") as u32)).collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array().expect("array").iter().map(|b| b.as_i64().expect("int")).collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array().expect("array").iter().map(|b| b.as_u64().expect("size") as usize).collect()
}

fn qdtype(s: &str) -> QDType {
    match s {
        "quint8" => QDType::QUInt8,
        "qint8" => QDType::QInt8,
        "qint32" => QDType::QInt32,
        other => panic!("dtype {other}"),
    }
}

fn qscheme(s: &str) -> QScheme {
    match s {
        "per_tensor_affine" => QScheme::PerTensorAffine,
        "per_tensor_symmetric" => QScheme::PerTensorSymmetric,
        "per_channel_affine" => QScheme::PerChannelAffine,
        "per_channel_symmetric" => QScheme::PerChannelSymmetric,
        other => panic!("qscheme {other}"),
    }
}

/// Bitwise equality, with every NaN equal to every NaN.
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn quantized_tensors_match_pytorch() -> Result<()> {
    let fx = load("quant_tensors.json");
    let cases = fx["cases"].as_array().expect("cases");
    assert!(cases.len() > 40);
    for (ci, c) in cases.iter().enumerate() {
        let shape = usizes(&c["shape"]);
        let x = Tensor::from_vec(floats(&c["x"]), &shape)?;
        let dt = qdtype(c["dtype"].as_str().expect("dtype"));
        let q = match c["kind"].as_str() {
            Some("per_tensor") => {
                let (s, z) = (c["scale"].as_f64().expect("scale"), c["zero_point"].as_i64().expect("zp"));
                let q = quantize_per_tensor(&x, s, z, dt)?;
                assert_eq!((q.q_scale()?, q.q_zero_point()?), (s, z));
                q
            }
            _ => {
                let scales: Vec<f64> = c["scales"].as_array().expect("scales").iter().map(|v| v.as_f64().expect("f64")).collect();
                let zps = ints(&c["zero_points"]);
                let n = scales.len();
                let axis = c["axis"].as_i64().expect("axis");
                let q = quantize_per_channel(&x, &Tensor::from_vec(scales.clone(), &[n])?, &Tensor::from_vec(zps.clone(), &[n])?, axis, dt)?;
                assert_eq!(q.q_per_channel_scales()?.to_vec::<f64>()?, scales);
                assert_eq!(q.q_per_channel_zero_points()?.to_vec::<i64>()?, zps);
                assert_eq!(q.q_per_channel_axis()?, axis as usize);
                q
            }
        };
        let got: Vec<i64> = q.int_values()?.into_iter().map(i64::from).collect();
        assert_eq!(got, ints(&c["int_repr"]), "case {ci}: int_repr ({} {})", c["kind"], c["dtype"]);
        assert_eq!(q.int_repr()?.dtype(), dt.int_dtype());
        let deq = q.dequantize()?.to_vec::<f32>()?;
        assert!(same_bits(&deq, &floats(&c["dequant"])), "case {ci}: dequantize ({} {})", c["kind"], c["dtype"]);
    }
    Ok(())
}

#[test]
fn quantize_rejects_what_pytorch_rejects() -> Result<()> {
    let x = Tensor::from_vec(vec![0.5f32; 12], &[3, 4])?;
    let msg = |r: Result<magpie_quant::QuantizedTensor>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg(quantize_per_tensor(&x, 0.1, 300, QDType::QUInt8)).contains("zero_point 300 is above upper bound"));
    assert!(msg(quantize_per_tensor(&x, 0.1, -1, QDType::QUInt8)).contains("zero_point -1 is below lower bound"));
    assert!(msg(quantize_per_tensor(&x, 0.1, -129, QDType::QInt8)).contains("below lower bound"));
    assert!(msg(quantize_per_tensor(&x.to_dtype(magpie_core::DType::F64)?, 0.1, 0, QDType::QUInt8)).contains("Quantize only works on Float Tensor, got Double"));
    let s3 = Tensor::from_vec(vec![0.1f64, 0.2, 0.3], &[3])?;
    let z3 = Tensor::from_vec(vec![0i64, 1, 2], &[3])?;
    assert!(msg(quantize_per_channel(&x, &s3, &z3, 1, QDType::QUInt8)).contains("length of scales must equal to channel, expected 4 got, 3"));
    assert!(msg(quantize_per_channel(&x, &s3, &z3, 2, QDType::QUInt8)).contains("Channel axis out of range in per channel affine quantization. Got: 2Expected: [0, 2)"));
    assert!(msg(quantize_per_channel(&x, &s3, &z3, -2, QDType::QUInt8)).contains("Got: -2"));
    assert!(msg(quantize_per_channel(&x, &s3, &Tensor::from_vec(vec![0i64, 1], &[2])?, 0, QDType::QUInt8)).contains("number of elements in scales and zero_points must match"));
    assert!(msg(quantize_per_channel(&x, &s3, &Tensor::from_vec(vec![0i64, 1, 300], &[3])?, 0, QDType::QUInt8)).contains("zero_point 300 is above upper bound"));
    let pt = quantize_per_tensor(&x, 0.1, 0, QDType::QUInt8)?;
    assert!(pt.q_per_channel_scales().is_err() && pt.q_per_channel_axis().is_err());
    let pc = quantize_per_channel(&x, &s3, &z3, 0, QDType::QUInt8)?;
    assert!(pc.q_scale().is_err() && pc.q_zero_point().is_err());
    Ok(())
}

#[test]
fn observers_match_pytorch() -> Result<()> {
    let fx = load("observers.json");
    let cases = fx["cases"].as_array().expect("cases");
    assert!(cases.len() > 100);
    for (ci, c) in cases.iter().enumerate() {
        let qr = c["quant_range"].as_array().map(|r| (r[0].as_i64().expect("qmin"), r[1].as_i64().expect("qmax")));
        let opts = ObserverOptions {
            dtype: qdtype(c["dtype"].as_str().expect("dtype")),
            qscheme: Some(qscheme(c["qscheme"].as_str().expect("qscheme"))),
            reduce_range: c["reduce_range"].as_bool().expect("rr"),
            quant_min: qr.map(|r| r.0),
            quant_max: qr.map(|r| r.1),
            ..Default::default()
        };
        let data: Vec<Tensor> = c["data"].as_array().expect("data").iter().zip(c["shapes"].as_array().expect("shapes")).map(|(d, s)| Tensor::from_vec(floats(d), &usizes(s))).collect::<Result<_>>()?;
        let (scale, zp) = if c["observer"] == "minmax" {
            let mut o = MinMaxObserver::new(opts)?;
            for d in &data {
                o.forward(d)?;
            }
            o.calculate_qparams()?
        } else {
            let mut o = PerChannelMinMaxObserver::new(c["ch_axis"].as_i64().expect("axis"), opts)?;
            for d in &data {
                o.forward(d)?;
            }
            o.calculate_qparams()?
        };
        let (want_s, want_z) = (floats(&c["scale"]), ints(&c["zero_point"]));
        assert!(same_bits(&scale.to_vec::<f32>()?, &want_s), "case {ci} {c:?}: scale {:?} vs {want_s:?}", scale.to_vec::<f32>()?);
        assert_eq!(zp.to_vec::<i64>()?, want_z, "case {ci}: zero point ({} {} rr={})", c["dtype"], c["qscheme"], c["reduce_range"]);
    }
    Ok(())
}

#[test]
fn observers_reject_what_pytorch_rejects() -> Result<()> {
    let o = |q: QScheme, dt: QDType, rr: bool| ObserverOptions { dtype: dt, qscheme: Some(q), reduce_range: rr, ..Default::default() };
    assert!(MinMaxObserver::new(o(QScheme::PerChannelAffine, QDType::QUInt8, false)).is_err());
    assert!(MinMaxObserver::new(o(QScheme::PerTensorSymmetric, QDType::QUInt8, true)).err().map(|e| e.to_string()).unwrap_or_default().contains("Cannot reduce range for symmetric quantization for quint8"));
    assert!(PerChannelMinMaxObserver::new(0, o(QScheme::PerTensorAffine, QDType::QUInt8, false)).is_err());
    let custom = |lo, hi, dt| ObserverOptions { dtype: dt, quant_min: Some(lo), quant_max: Some(hi), ..Default::default() };
    assert!(MinMaxObserver::new(custom(1, 5, QDType::QUInt8)).err().map(|e| e.to_string()).unwrap_or_default().contains("must include 0"));
    assert!(MinMaxObserver::new(custom(-100, 200, QDType::QInt8)).err().map(|e| e.to_string()).unwrap_or_default().contains("(=256)"));
    // before any input: PyTorch's defaults (1.0, 0)
    let (s, z) = MinMaxObserver::new(ObserverOptions::default())?.calculate_qparams()?;
    assert_eq!((s.to_vec::<f32>()?, z.to_vec::<i64>()?), (vec![1.0], vec![0]));
    // the channel count may not change between calls
    let mut pc = PerChannelMinMaxObserver::new(1, ObserverOptions::default())?;
    pc.forward(&Tensor::randn(&[2, 3])?)?;
    assert!(pc.forward(&Tensor::randn(&[2, 4])?).is_err());
    Ok(())
}

/// Output differences in units of the output's quantization step (input scale x weight scale).
struct Diff {
    max_abs: f32,
    max_steps: f64,
    exact: usize,
    total: usize,
}

impl Diff {
    fn new() -> Diff {
        Diff { max_abs: 0.0, max_steps: 0.0, exact: 0, total: 0 }
    }
    fn add(&mut self, got: &[f32], want: &[f32], x: &[f32], wscales: &[f64]) -> Result<()> {
        let (lo, hi) = x.iter().fold((x[0], x[0]), |(l, h), &v| (l.min(v), h.max(v)));
        let a_scale = choose_quantization_params(lo, hi, 0, 255, false, false, true)?.scale as f64;
        let n = wscales.len().max(1);
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let ws = if wscales.len() == 1 { wscales[0] } else { wscales[i % n] };
            let d = (g - w).abs();
            self.max_abs = self.max_abs.max(d);
            self.max_steps = self.max_steps.max(d as f64 / (a_scale * ws));
            self.exact += usize::from(g.to_bits() == w.to_bits());
            self.total += 1;
        }
        Ok(())
    }
}

#[test]
fn dynamic_linear_matches_pytorch() -> Result<()> {
    let fx = load("dynamic_linear.json");
    let mut diff = Diff::new();
    for c in fx["cases"].as_array().expect("cases") {
        let (k, n) = (c["in"].as_u64().expect("in") as usize, c["out"].as_u64().expect("out") as usize);
        let pc = c["per_channel"].as_bool().expect("pc");
        let w = Tensor::from_vec(floats(&c["weight"]), &[n, k])?;
        let b = if c["bias"].is_null() { None } else { Some(Tensor::from_vec(floats(&c["bias"]), &[n])?) };
        let mut q = DynamicQuantizedLinear::from_weights(&w, b.as_ref(), pc)?;
        // the weight quantization itself is exact
        let qw: Vec<i64> = q.weight().int_values()?.into_iter().map(i64::from).collect();
        assert_eq!(qw, ints(&c["qweight"]), "{} per_channel={pc}: weight int_repr", c["name"]);
        let wscales: Vec<f64> = c["wscales"].as_array().expect("wscales").iter().map(|v| v.as_f64().expect("f64")).collect();
        let ours = if pc { q.weight().q_per_channel_scales()?.to_vec::<f64>()? } else { vec![q.weight().q_scale()?] };
        // f32 values both sides (the fixture's JSON decimal may be off by a double ulp when parsed)
        assert_eq!(ours.iter().map(|&s| s as f32).collect::<Vec<_>>(), wscales.iter().map(|&s| s as f32).collect::<Vec<_>>(), "{}: weight scales", c["name"]);
        for inp in c["inputs"].as_array().expect("inputs") {
            let shape = usizes(&inp["shape"]);
            let xs = floats(&inp["x"]);
            let x = Tensor::from_vec(xs.clone(), &shape)?;
            // every int8 kernel this CPU has gives the same (exact) sums
            let mut ys = Vec::new();
            for kern in Int8Kernel::available() {
                q.set_kernel(kern)?;
                ys.push(q.forward(&x)?.to_vec::<f32>()?);
            }
            assert!(ys.windows(2).all(|p| p[0] == p[1]), "{}: kernels disagree", c["name"]);
            let y = q.forward(&x)?;
            let mut want_shape = shape.clone();
            *want_shape.last_mut().expect("dims") = n;
            assert_eq!(y.shape(), &want_shape[..]);
            let (got, want) = (y.to_vec::<f32>()?, floats(&inp["y"]));
            let before = diff.max_steps;
            diff.add(&got, &want, &xs, &wscales)?;
            assert!(diff.max_steps <= 1.0 + 1e-6, "{} per_channel={pc} input {shape:?}: {} steps (was {before})", c["name"], diff.max_steps);
        }
    }
    println!("dynamic Linear vs PyTorch: {} of {} outputs bit-identical, max |diff| {:e}, max {:.3} output steps", diff.exact, diff.total, diff.max_abs, diff.max_steps);
    assert!(diff.total > 1000);
    // same fbgemm arithmetic step for step: every output is PyTorch's to the bit
    assert_eq!(diff.exact, diff.total, "max |diff| {:e}, {:.3} steps", diff.max_abs, diff.max_steps);
    Ok(())
}

fn mlp_from(fx: &Value) -> Result<Sequential> {
    let sd = &fx["state_dict"];
    let t = |name: &str| Tensor::from_vec(floats(&sd[name]["bits"]), &usizes(&sd[name]["shape"]));
    let lin = |i: usize| -> Result<Linear> { Linear::from_weights(t(&format!("{i}.weight"))?, Some(t(&format!("{i}.bias"))?)) };
    Ok(Sequential::new().add(lin(0)?).add(ReLU).add(lin(2)?).add(ReLU).add(lin(4)?))
}

#[test]
fn quantize_dynamic_mlp_matches_pytorch() -> Result<()> {
    let fx = load("dynamic_mlp.json");
    let float_model = mlp_from(&fx)?;
    let mut per_tensor = mlp_from(&fx)?;
    let mut per_channel = mlp_from(&fx)?;
    let report = quantize_dynamic(&mut per_tensor, DynamicQConfig::default())?;
    assert_eq!(report.quantized, vec!["0", "2", "4"]);
    assert!(report.left_float.is_empty());
    quantize_dynamic(&mut per_channel, DynamicQConfig::per_channel())?;
    assert!(per_tensor.layers.iter().all(|l| l.type_name() != "Linear"));
    let (mut exact, mut total, mut max_abs) = (0usize, 0usize, 0f32);
    for run in fx["runs"].as_array().expect("runs") {
        let x = Tensor::from_vec(floats(&run["x"]), &usizes(&run["shape"]))?;
        let model = if run["per_channel"].as_bool().expect("pc") { &per_channel } else { &per_tensor };
        let (got, want) = (model.forward(&x)?.to_vec::<f32>()?, floats(&run["y"]));
        // the float model is what the fixture's float output came from
        let yf = float_model.forward(&x)?.to_vec::<f32>()?;
        let wf = floats(&run["y_float"]);
        assert!(yf.iter().zip(&wf).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs())));
        for (g, w) in got.iter().zip(&want) {
            max_abs = max_abs.max((g - w).abs());
            exact += usize::from(g.to_bits() == w.to_bits());
            total += 1;
        }
    }
    println!("quantize_dynamic MLP vs PyTorch: {exact} of {total} outputs bit-identical, max |diff| {max_abs:e}");
    assert_eq!(exact, total, "max |diff| {max_abs:e}");
    Ok(())
}

#[test]
fn dynamic_linear_errors_and_shapes() -> Result<()> {
    let q = DynamicQuantizedLinear::from_weights(&Tensor::randn(&[3, 5])?, None, false)?;
    let err = |r: Result<Tensor>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(q.forward(&Tensor::randn(&[5])?)).contains("The dimension of input tensor should be larger than or equal to 2"));
    assert!(err(q.forward(&Tensor::randn(&[2, 4])?)).contains("equal to K"));
    assert!(err(q.forward(&Tensor::randn(&[2, 5])?.to_dtype(magpie_core::DType::F64)?)).contains("expected scalar type Float but found"));
    assert_eq!(q.forward(&Tensor::zeros(&[0, 5])?)?.shape(), &[0, 3]);
    // a bare Linear root stays float, as in PyTorch
    let mut lin = Linear::new(4, 4, true)?;
    let r = quantize_dynamic(&mut lin, DynamicQConfig::default())?;
    assert_eq!((r.quantized.len(), r.left_float.len()), (0, 1));
    Ok(())
}

/// A model with a typed `Linear` field (cannot change type) next to a boxed container.
struct Mixed {
    head: Linear,
    blocks: magpie_nn::ModuleDict,
}

impl Module for Mixed {
    fn type_name(&self) -> &'static str {
        "Mixed"
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.head.forward(x)
    }
    fn children(&self) -> Vec<(String, &dyn Module)> {
        vec![("head".into(), &self.head), ("blocks".into(), &self.blocks)]
    }
    fn children_mut(&mut self) -> Vec<(String, &mut dyn Module)> {
        vec![("head".into(), &mut self.head), ("blocks".into(), &mut self.blocks)]
    }
}

#[test]
fn quantize_dynamic_walks_every_container() -> Result<()> {
    let mut list: magpie_nn::ModuleList = magpie_nn::ModuleList::new();
    list.push(Box::new(Linear::new(4, 4, false)?));
    list.push(Box::new(ReLU));
    let mut blocks = magpie_nn::ModuleDict::new();
    blocks.insert("mlp", Box::new(Sequential::new().add(Linear::new(4, 8, true)?).add(ReLU)))?;
    blocks.insert("list", Box::new(list))?;
    blocks.insert("proj", Box::new(Linear::new(8, 4, true)?))?;
    let mut model = Mixed { head: Linear::new(4, 2, true)?, blocks };
    let report = quantize_dynamic(&mut model, DynamicQConfig::per_channel())?;
    assert_eq!(report.quantized, vec!["blocks.proj", "blocks.mlp.0", "blocks.list.0"]);
    assert_eq!(report.left_float, vec!["head"]);
    let names: Vec<(String, &str)> = magpie_nn::ModuleExt::named_modules(&model).into_iter().map(|(n, m)| (n, m.type_name())).collect();
    assert!(names.contains(&("blocks.mlp.0".to_string(), "DynamicQuantizedLinear")));
    assert!(names.contains(&("blocks.list.0".to_string(), "DynamicQuantizedLinear")));
    assert!(names.contains(&("head".to_string(), "Linear")));
    // the quantized layers keep the float layers' function (within int8 error)
    let proj = model.blocks.get("proj").expect("proj");
    assert_eq!(proj.forward(&Tensor::randn(&[3, 8])?)?.shape(), &[3, 4]);
    Ok(())
}

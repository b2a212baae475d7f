//! The numeric helper ops (`cov`, `corrcoef`, `diff`, `gradient`, `trapezoid`,
//! `cumulative_trapezoid`, `renorm`, `frexp`, `isin`, `bincount`, `histogram`, `unravel_index`,
//! `triu/tril_indices`, `_segment_reduce`, `_chunk_cat`, `complex`, `polar`, `kthvalue` among ties)
//! through the registry:
//! values against PyTorch 2.15 (fixtures/numeric_ops.json, made by make_numeric_ops.py on
//! random inputs of several sizes), gradients by gradcheck, and PyTorch's errors.

use magpie_core::autograd::{self, GradcheckOptions};
use magpie_core::registry::{self, Value};
use magpie_core::{DType, Result, Tensor};
use serde_json::Value as J;

fn dtype(s: &str) -> DType {
    match s {
        "float64" => DType::F64,
        "float32" => DType::F32,
        "int64" => DType::I64,
        "int32" => DType::I32,
        "bool" => DType::Bool,
        o => panic!("fixture dtype {o}"),
    }
}

fn tensor(j: &J) -> Tensor {
    let shape: Vec<usize> = j["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let dt = dtype(j["dtype"].as_str().unwrap());
    let data = j["tensor"].as_array().unwrap();
    if dt == DType::Bool {
        return Tensor::from_vec(data.iter().map(|v| v.as_bool().unwrap()).collect::<Vec<_>>(), &shape).unwrap();
    }
    // NaN and infinities are strings ("nan", "inf", "-inf") in the fixture
    let v: Vec<f64> = data.iter().map(|v| v.as_f64().unwrap_or_else(|| v.as_str().unwrap().parse().unwrap())).collect();
    Tensor::from_vec(v, &shape).unwrap().to_dtype(dt).unwrap()
}

fn value(j: &J) -> Value {
    match j {
        J::Object(o) if o.contains_key("tensor") => Value::Tensor(tensor(j)),
        J::Array(a) => Value::List(a.iter().map(value).collect()),
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) if n.is_i64() => Value::Int(n.as_i64().unwrap()),
        J::Number(n) => Value::Float(n.as_f64().unwrap()),
        J::String(s) => Value::Str(s.clone()),
        J::Null => Value::None,
        o => panic!("fixture value {o}"),
    }
}

fn outputs(v: Value) -> Vec<Tensor> {
    match v {
        Value::Tensor(t) => vec![t],
        Value::List(l) => l.into_iter().map(|x| x.into_tensor().unwrap()).collect(),
        o => panic!("unexpected result {o:?}"),
    }
}

fn close(op: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{op}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{op}: dtype");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 + 1e-10 * b.abs();
        assert!(ok, "{op}: element {i} is {a}, PyTorch {b}\n got {g:?}\nwant {w:?}");
    }
}

#[test]
fn values_match_pytorch() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/numeric_ops.json")).unwrap();
    let fx: J = serde_json::from_str(&text).unwrap();
    let cases = fx["cases"].as_array().unwrap();
    assert!(cases.len() >= 90);
    for c in cases {
        let op = c["op"].as_str().unwrap();
        let args: Vec<Value> = c["args"].as_array().unwrap().iter().map(value).collect();
        let kwargs: Vec<(String, Value)> = c["kwargs"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), value(v))).collect();
        let got = outputs(registry::call(op, args, kwargs.clone()).unwrap_or_else(|e| panic!("{op} {kwargs:?}: {e}")));
        let want: Vec<Tensor> = c["outputs"].as_array().unwrap().iter().map(tensor).collect();
        assert_eq!(got.len(), want.len(), "{op}: number of outputs");
        for (g, w) in got.iter().zip(&want) {
            close(op, g, w);
        }
    }
}

fn rand64(shape: &[usize], seed: u64) -> Tensor {
    // a small LCG: fixed, platform-independent inputs for the gradient checks
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let v: Vec<f64> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn call(op: &str, args: Vec<Value>, kwargs: Vec<(&str, Value)>) -> Result<Vec<Tensor>> {
    let kw = kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    Ok(outputs(registry::call(op, args, kw)?))
}

/// gradcheck of `op(x, *rest)` wrt `x` (every output).
fn check_grad(op: &str, x: Tensor, rest: Vec<Value>, kwargs: Vec<(&'static str, Value)>) {
    let x = x.requires_grad_(true).unwrap();
    let f = |v: &[Tensor]| -> Result<Vec<Tensor>> {
        let mut args = vec![Value::Tensor(v[0].clone())];
        args.extend(rest.iter().cloned());
        call(op, args, kwargs.clone())
    };
    autograd::gradcheck(f, &[x], &GradcheckOptions::default()).unwrap_or_else(|e| panic!("{op}: {e}"));
}

#[test]
fn gradients_pass_gradcheck() {
    for (i, shape) in [vec![5], vec![3, 7], vec![2, 4]].into_iter().enumerate() {
        let s = i as u64;
        check_grad("cov", rand64(&shape, s), vec![], vec![]);
        check_grad("corrcoef", rand64(&shape, s + 10), vec![], vec![]);
        check_grad("diff", rand64(&shape, s + 20), vec![Value::Int(2)], vec![]);
        check_grad("gradient", rand64(&shape, s + 30), vec![], vec![("edge_order", Value::Int(if shape[0] > 2 { 2 } else { 1 }))]);
        check_grad("trapezoid", rand64(&shape, s + 40), vec![], vec![("dx", Value::Float(0.7))]);
        check_grad("cumulative_trapezoid", rand64(&shape, s + 50), vec![], vec![]);
        let xs = Tensor::from_vec((0..shape[shape.len() - 1]).map(|k| (k * k) as f64 * 0.3).collect::<Vec<_>>(), &[shape[shape.len() - 1]]).unwrap();
        check_grad("trapezoid", rand64(&shape, s + 60), vec![Value::Tensor(xs.clone())], vec![]);
    }
    let aw = Tensor::from_vec(vec![0.5f64, 1.0, 2.0, 0.25, 1.5], &[5]).unwrap();
    check_grad("cov", rand64(&[3, 5], 70), vec![], vec![("aweights", Value::Tensor(aw))]);
    let c = Tensor::from_vec(vec![0.0f64, 0.5, 1.7, 2.0, 3.1], &[5]).unwrap();
    check_grad("gradient", rand64(&[5], 80), vec![], vec![("spacing", Value::List(vec![Value::Tensor(c)])), ("edge_order", Value::Int(2))]);
    // some rows above maxnorm and some below
    check_grad("renorm", rand64(&[4, 3], 90), vec![Value::Float(2.0), Value::Int(0), Value::Float(1.5)], vec![]);
    check_grad("renorm", rand64(&[3, 2, 4], 91), vec![Value::Float(3.0), Value::Int(1), Value::Float(1.0)], vec![]);
    let lens = Tensor::from_vec(vec![2i64, 3, 1], &[3]).unwrap();
    for red in ["sum", "mean", "max", "prod"] {
        check_grad("_segment_reduce", rand64(&[6], 100), vec![Value::Str(red.into())], vec![("lengths", Value::Tensor(lens.clone()))]);
    }
    check_grad("native_dropout_backward", rand64(&[3, 4], 110), vec![Value::Tensor(rand64(&[3, 4], 111).gt_scalar(0.0).unwrap()), Value::Float(2.0)], vec![]);
    // frexp: the mantissa's gradient is grad / 2^exponent
    let x = rand64(&[7], 120).mul_scalar(50.0).unwrap().requires_grad_(true).unwrap();
    let out = call("frexp", vec![Value::Tensor(x.clone())], vec![]).unwrap();
    out[0].sum().unwrap().backward().unwrap();
    let e = out[1].to_vec::<i32>().unwrap();
    let want: Vec<f64> = e.iter().map(|&k| 2f64.powi(-k)).collect();
    assert_eq!(x.grad().unwrap().to_f64_vec().unwrap(), want);
}

fn err(op: &str, args: Vec<Value>, kwargs: Vec<(&str, Value)>) -> String {
    match call(op, args, kwargs) {
        Ok(_) => panic!("{op}: expected an error"),
        Err(e) => {
            assert!(!e.is_unsupported(), "{op}: {e}");
            e.to_string()
        }
    }
}

#[test]
fn errors_match_pytorch() {
    let t = |s: &[usize]| Value::Tensor(rand64(s, 1).to_dtype(DType::F32).unwrap());
    let ti = |s: &[usize]| Value::Tensor(rand64(s, 2).to_dtype(DType::I64).unwrap());
    assert!(err("cov", vec![t(&[2, 2, 2])], vec![]).contains("expected input to have two or fewer dimensions"));
    assert!(err("cov", vec![t(&[5])], vec![("fweights", t(&[5]))]).contains("expected fweights to have integral dtype"));
    assert!(err("cov", vec![t(&[5])], vec![("aweights", t(&[5, 5]))]).contains("expected aweights to have one or fewer dimensions"));
    assert!(err("diff", vec![t(&[3]), Value::Int(-1)], vec![]).contains("order must be non-negative but got -1"));
    assert!(err("diff", vec![Value::Tensor(Tensor::scalar(1f32))], vec![]).contains("at least one-dimensional"));
    assert!(err("gradient", vec![ti(&[3, 3])], vec![("edge_order", Value::Int(3))]).contains("only supports edge_order=1 and edge_order=2"));
    assert!(err("gradient", vec![ti(&[3, 3])], vec![("dim", Value::List(vec![Value::Int(1), Value::Int(1)]))]).contains("appears multiple times"));
    assert!(err("gradient", vec![t(&[3, 3])], vec![("spacing", Value::List(vec![Value::Float(0.1), Value::Float(0.2), Value::Float(0.3)]))]).contains("expected spacing to be unspecified"));
    assert!(err("gradient", vec![t(&[1, 3])], vec![]).contains("at least edge_order+1"));
    assert!(err("renorm", vec![t(&[3]), Value::Float(2.0), Value::Int(0), Value::Float(1.0)], vec![]).contains("needs at least 2 dimensions, got 1"));
    assert!(err("renorm", vec![t(&[3, 3]), Value::Float(-1.0), Value::Int(0), Value::Float(1.0)], vec![]).contains("non-positive-norm"));
    assert!(err("sum_to_size", vec![t(&[10, 5, 10]), Value::Int(10), Value::Int(10)], vec![]).contains("is not expandable to size"));
    let cc = |a: Vec<Value>| err("_chunk_cat", vec![Value::List(a), Value::Int(-1), Value::Int(3)], vec![]);
    assert!(cc(vec![t(&[2, 3]), t(&[4])]).contains("non-negative dim when input tensors have different ndims"));
    assert!(err("_chunk_cat", vec![Value::List(vec![t(&[2, 3]), t(&[4])]), Value::Int(1), Value::Int(3)], vec![]).contains("dim < ndim"));
    assert!(err("_chunk_cat", vec![Value::List(vec![t(&[2, 3, 4]), t(&[4, 3])]), Value::Int(1), Value::Int(3)], vec![]).contains("same sizes of 0,...,dim-1"));
    assert!(err("bincount", vec![Value::Tensor(Tensor::from_vec(vec![1i64, -1], &[2]).unwrap())], vec![]).contains("non-negative"));
    assert!(err("unravel_index", vec![ti(&[2]), Value::List(vec![Value::Int(2), Value::Int(-1)])], vec![]).contains("cannot have negative values"));
    assert!(err("unravel_index", vec![Value::Tensor(Tensor::from_vec(vec![6i64], &[1]).unwrap()), Value::List(vec![Value::Int(2), Value::Int(3)])], vec![]).contains("out of bounds"));
    assert!(err("triu_indices", vec![Value::Int(-1), Value::Int(3)], vec![]).contains("row must be non-negative"));
    assert!(err("complex", vec![t(&[3]), ti(&[3])], vec![]).contains("Expected both inputs to be Half, Float or Double tensors"));
    let t64 = Value::Tensor(rand64(&[3], 3));
    assert!(err("complex", vec![t(&[3]), t64], vec![]).contains("Expected object of scalar type"));
    assert!(err("polar", vec![ti(&[3]), Value::Int(2)], vec![]).contains("must be Tensor"));
    assert!(err("_segment_reduce", vec![t(&[5]), Value::Str("max".into())], vec![("lengths", ti(&[2]).clone())]).contains("sum to data.size"));
}

#[test]
fn complex_and_polar_values() {
    let re = Tensor::from_vec(vec![1f32, -2., 0.5], &[3]).unwrap();
    let im = Tensor::from_vec(vec![0f32, 3., f32::INFINITY], &[3]).unwrap();
    let c = call("complex", vec![Value::Tensor(re.clone()), Value::Tensor(im)], vec![]).unwrap();
    let v = c[0].to_vec::<magpie_core::num_complex::Complex32>().unwrap();
    assert_eq!((v[1].re, v[1].im), (-2., 3.));
    assert_eq!((v[2].re, v[2].im), (0.5, f32::INFINITY));
    let ang = Tensor::from_vec(vec![0f32, std::f32::consts::FRAC_PI_2, std::f32::consts::PI], &[3]).unwrap();
    let p = call("polar", vec![Value::Tensor(re), Value::Tensor(ang)], vec![]).unwrap();
    let v = p[0].to_vec::<magpie_core::num_complex::Complex32>().unwrap();
    assert_eq!((v[0].re, v[0].im), (1., 0.));
    assert!((v[1].re - (-2.0 * std::f32::consts::FRAC_PI_2.cos())).abs() < 1e-7 && (v[1].im + 2.0).abs() < 1e-6);
    assert!((v[2].re + 0.5).abs() < 1e-7);
}

#[test]
fn linspace_with_one_step_is_start() {
    let x = call("linspace", vec![Value::Float(-2.0), Value::Int(-3), Value::Int(1)], vec![]).unwrap();
    assert_eq!(x[0].to_vec::<f32>().unwrap(), vec![-2.0]);
    let x = call("linspace", vec![Value::Float(1.0), Value::Float(2.0), Value::Int(5)], vec![]).unwrap();
    assert_eq!(x[0].to_vec::<f32>().unwrap(), vec![1.0, 1.25, 1.5, 1.75, 2.0]);
}

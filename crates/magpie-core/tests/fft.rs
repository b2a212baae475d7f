//! `torch.fft` and the window functions against PyTorch's answers (fixtures/fft/, made by
//! `make_fft_fixtures.py`: values and `torch.autograd.grad` with complex grad_outputs), plus
//! f64 gradcheck / gradgradcheck of every transform, the error messages PyTorch gives, and the
//! O(n^2) DFT as the reference at odd, prime and power-of-two lengths.

use magpie_core::autograd::{gradcheck, gradgradcheck, GradcheckOptions};
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Tensor};
use num_complex::{Complex32, Complex64};
use serde_json::Value as J;

fn load() -> Vec<J> {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fft/fft_cases.json");
    let s = std::fs::read_to_string(p).expect("fixture file");
    let j: J = serde_json::from_str(&s).expect("fixture json");
    j["cases"].as_array().expect("cases").clone()
}

fn dtype(s: &str) -> DType {
    DType::parse(s).expect("dtype")
}

/// A tensor from its fixture encoding (complex stored as interleaved re, im).
fn tensor(j: &J) -> Tensor {
    let shape: Vec<usize> = j["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let data: Vec<f64> = j["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let dt = dtype(j["dtype"].as_str().unwrap());
    if dt.is_complex() {
        let z: Vec<Complex64> = data.chunks(2).map(|p| Complex64::new(p[0], p[1])).collect();
        Tensor::from_vec(z, &shape).unwrap().to_dtype(dt).unwrap()
    } else {
        Tensor::from_vec(data, &shape).unwrap().to_dtype(dt).unwrap()
    }
}

/// A tensor's values as interleaved f64 (complex as re, im).
fn values(t: &Tensor) -> Vec<f64> {
    if t.dtype().is_complex() {
        t.to_vec::<Complex64>().unwrap().iter().flat_map(|z| [z.re, z.im]).collect()
    } else {
        t.to_vec::<f64>().unwrap()
    }
}

fn close(what: &str, got: &Tensor, want: &J, tol: f64) {
    let w = tensor(want);
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    assert_eq!(got.dtype(), w.dtype(), "{what}: dtype");
    let (g, e) = (values(got), values(&w));
    for (i, (a, b)) in g.iter().zip(&e).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}: element {i}: {a} vs {b}");
    }
}

fn kwargs(j: &J) -> Vec<(String, Value)> {
    j.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    let val = match v {
                        J::Null => Value::None,
                        J::Bool(b) => Value::Bool(*b),
                        J::Number(n) if n.is_i64() => Value::Int(n.as_i64().unwrap()),
                        J::Number(n) => Value::Float(n.as_f64().unwrap()),
                        J::String(s) => Value::Str(s.clone()),
                        J::Array(a) => Value::List(
                            a.iter().map(|x| if x.is_i64() { Value::Int(x.as_i64().unwrap()) } else { Value::Float(x.as_f64().unwrap()) }).collect(),
                        ),
                        J::Object(_) => panic!("unexpected kwarg {k}"),
                    };
                    (k.clone(), val)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn transforms_match_pytorch_values_and_gradients() {
    let mut n = 0;
    for c in load() {
        let op = c["op"].as_str().unwrap();
        if !op.starts_with("fft.") || c.get("input").is_none() {
            continue;
        }
        let x = tensor(&c["input"]);
        let tol = if x.dtype() == DType::F32 || x.dtype() == DType::C64 || x.dtype().is_integral() { 1e-5 } else { 1e-10 };
        let x = if c.get("grad").is_some() { x.with_requires_grad().unwrap() } else { x };
        let what = format!("{op} {}", c["kwargs"]);
        let y = call(op, vec![Value::Tensor(x.clone())], kwargs(&c["kwargs"])).unwrap_or_else(|e| panic!("{what}: {e}")).into_tensor().unwrap();
        close(&what, &y, &c["output"], tol);
        if c.get("grad").is_some() {
            let g = tensor(&c["grad_output"]);
            y.backward_with(Some(&g), false, false).unwrap_or_else(|e| panic!("{what}: backward: {e}"));
            close(&format!("{what} grad"), &x.grad().expect("a gradient"), &c["grad"], 1e-10);
        }
        n += 1;
    }
    assert!(n >= 135, "only {n} transform cases ran");
}

#[test]
fn windows_and_frequencies_match_pytorch() {
    let mut n = 0;
    for c in load() {
        let op = c["op"].as_str().unwrap();
        let out = if let Some(m) = c.get("M") {
            call(op, vec![Value::Int(m.as_i64().unwrap())], kwargs(&c["kwargs"]))
        } else if op.ends_with("freq") {
            call(op, vec![Value::Int(c["n"].as_i64().unwrap()), Value::Float(c["d"].as_f64().unwrap())], vec![])
        } else {
            continue;
        };
        let y = out.unwrap_or_else(|e| panic!("{op}: {e}")).into_tensor().unwrap();
        close(&format!("{op} {}", c), &y, &c["output"], 1e-6);
        n += 1;
    }
    assert!(n >= 100, "only {n} window cases ran");
}

/// The O(n^2) DFT of complex rows (the reference the fast path is tested against).
fn dft(x: &[Complex64], n: usize, sign: f64) -> Vec<Complex64> {
    x.chunks(n)
        .flat_map(|row| {
            (0..n).map(move |k| {
                row.iter().enumerate().fold(Complex64::new(0.0, 0.0), |acc, (j, v)| {
                    let a = sign * 2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                    acc + v * Complex64::new(a.cos(), a.sin())
                })
            })
        })
        .collect()
}

fn lcg(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn fast_paths_match_the_dft_at_many_lengths() {
    // odd, prime, power-of-two and large batches (the parallel path)
    for (rows, n) in [(3usize, 1usize), (5, 2), (4, 7), (2, 16), (3, 97), (1, 128), (600, 64), (70, 1000)] {
        let v = lcg(2 * rows * n, n as u64);
        let z: Vec<Complex64> = v.chunks(2).map(|p| Complex64::new(p[0], p[1])).collect();
        let x = Tensor::from_vec(z.clone(), &[rows, n]).unwrap();
        let want = dft(&z, n, -1.0);
        let got = x.fft_fft(None, -1, None).unwrap().to_vec::<Complex64>().unwrap();
        let scale = (n as f64).sqrt();
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).norm() < 1e-9 * scale * 10.0, "fft {rows}x{n}: {a} vs {b}");
        }
        // along dim 0 of the transpose: the strided (gathered) path
        let xt = x.t().unwrap().contiguous().unwrap();
        let got_t = xt.fft_fft(None, 0, None).unwrap().t().unwrap().contiguous().unwrap().to_vec::<Complex64>().unwrap();
        for (a, b) in got_t.iter().zip(&want) {
            assert!((a - b).norm() < 1e-9 * scale * 10.0, "fft dim 0 {rows}x{n}");
        }
        // real input through rfft: the first n/2 + 1 points
        let re: Vec<f64> = z.iter().map(|c| c.re).collect();
        let xr = Tensor::from_vec(re.clone(), &[rows, n]).unwrap();
        let half = xr.fft_rfft(None, -1, None).unwrap();
        assert_eq!(half.shape(), &[rows, n / 2 + 1]);
        let want_r = dft(&re.iter().map(|&v| Complex64::new(v, 0.0)).collect::<Vec<_>>(), n, -1.0);
        let hv = half.to_vec::<Complex64>().unwrap();
        for r in 0..rows {
            for k in 0..n / 2 + 1 {
                assert!((hv[r * (n / 2 + 1) + k] - want_r[r * n + k]).norm() < 1e-8 * scale, "rfft {rows}x{n}");
            }
        }
        // f32 matches f64 to single precision
        let h32 = xr.to_dtype(DType::F32).unwrap().fft_rfft(None, -1, None).unwrap();
        assert_eq!(h32.dtype(), DType::C64);
        for (a, b) in h32.to_vec::<Complex32>().unwrap().iter().zip(&hv) {
            assert!(((a.re as f64 - b.re).powi(2) + (a.im as f64 - b.im).powi(2)).sqrt() < 1e-4 * scale * 4.0, "rfft f32 {rows}x{n}");
        }
    }
}

type F = fn(&Tensor) -> magpie_core::Result<Tensor>;

/// Real-valued views of each transform for gradcheck: the real part of complex results.
fn real_part(t: Tensor) -> magpie_core::Result<Tensor> {
    if t.dtype().is_complex() {
        t.to_dtype(t.dtype().to_real())
    } else {
        Ok(t)
    }
}

#[test]
fn gradcheck_and_gradgradcheck_every_transform() {
    let fs: Vec<(&str, F)> = vec![
        ("fft", |x| x.fft_fft(Some(6), -1, Some("ortho"))),
        ("ifft", |x| x.fft_ifft(None, 0, None)),
        ("rfft", |x| x.fft_rfft(Some(7), -1, None)),
        ("ihfft", |x| x.fft_ihfft(None, -1, Some("forward"))),
        ("irfft", |x| x.fft_irfft(Some(9), -1, None)),
        ("hfft", |x| x.fft_hfft(None, 0, Some("ortho"))),
        ("fft2", |x| x.fft_fft2(Some(&[3, 4]), None, None)),
        ("rfftn", |x| x.fft_rfftn(None, None, Some("ortho"))),
        ("irfftn", |x| x.fft_irfftn(Some(&[4, 5]), Some(&[1, 0]), None)),
        ("hfftn", |x| x.fft_hfftn(None, None, Some("forward"))),
        ("ihfft2", |x| x.fft_ihfft2(None, None, None)),
        ("ifftn", |x| x.fft_ifftn(Some(&[5]), None, Some("ortho"))),
        ("fftshift", |x| x.fft_fftshift(None)),
    ];
    let opts = GradcheckOptions { eps: 1e-6, atol: 1e-6, rtol: 1e-4 };
    for (name, f) in fs {
        let x = Tensor::from_vec(lcg(20, 3), &[4, 5]).unwrap().with_requires_grad().unwrap();
        // both return an error naming the worst Jacobian entry when a check fails
        let r = gradcheck(|i| Ok(vec![real_part(f(&i[0])?)?]), &[x.clone()], &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(r.entries > 0, "{name}: nothing compared");
        gradgradcheck(|i| Ok(vec![real_part(f(&i[0])?)?]), &[x], None, &opts).unwrap_or_else(|e| panic!("{name}: gradgradcheck: {e}"));
    }
}

fn err(op: &str, x: Tensor, kw: Vec<(&str, Value)>) -> String {
    let kw = kw.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    match call(op, vec![Value::Tensor(x)], kw) {
        Ok(_) => panic!("{op} accepted a bad call"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_calls_give_pytorchs_errors() {
    let s = Tensor::from_vec(vec![1f32], &[]).unwrap();
    assert!(err("fft.fft", s.clone(), vec![]).contains("Dimension specified as -1 but tensor has no dimensions"));
    assert!(err("fft.rfftn", s, vec![("dim", Value::List(vec![Value::Int(0)]))]).contains("Dimension specified as 0 but tensor has no dimensions"));
    let x = Tensor::from_vec(vec![1f32; 6], &[2, 3]).unwrap();
    assert!(err("fft.fft", x.clone(), vec![("n", Value::Int(0))]).contains("Invalid number of data points (0) specified"));
    assert!(err("fft.irfft", Tensor::from_vec(vec![1f32], &[1]).unwrap(), vec![]).contains("Invalid number of data points (0) specified"));
    assert!(err("fft.fft", x.clone(), vec![("norm", Value::Str("bad".into()))]).contains("Invalid normalization mode"));
    assert!(err("fft.fftn", x.clone(), vec![("s", Value::List(vec![Value::Int(2); 3]))]).contains("Got shape with 3 values but input tensor only has 2 dimensions."));
    assert!(err("fft.fft2", x.clone(), vec![("dim", Value::List(vec![Value::Int(1), Value::Int(-1)]))]).contains("FFT dims must be unique"));
    let z = x.to_dtype(DType::C64).unwrap();
    assert!(err("fft.rfft", z.clone(), vec![]).contains("rfft expects a real input tensor, but found ComplexFloat"));
    assert!(err("fft.ihfftn", z, vec![]).contains("expects a real input tensor"));
    assert!(err("fft.fft", x.to_dtype(DType::F16).unwrap(), vec![]).contains("Unsupported dtype Half"));
    let w = |op: &str, m: i64, kw: Vec<(&str, Value)>| -> String {
        let kw = kw.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        call(op, vec![Value::Int(m)], kw).err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert!(w("signal.windows.hann", -1, vec![]).contains("requires non-negative window length, got M=-1"));
    assert!(w("signal.windows.kaiser", 3, vec![("dtype", Value::DType(DType::I64))]).contains("expects float32 or float64 dtypes, got: torch.int64"));
    assert!(w("signal.windows.gaussian", 3, vec![("std", Value::Float(0.0))]).contains("Standard deviation must be positive"));
    assert!(w("signal.windows.exponential", 3, vec![("center", Value::Float(1.0))]).contains("Center must be None for symmetric windows"));
    assert!(w("signal.windows.general_cosine", 3, vec![("a", Value::List(vec![]))]).contains("Coefficients cannot be empty"));
    assert!(w("hann_window", -2, vec![]).contains("requires non-negative window_length"));
}

#[test]
fn integer_inputs_promote_to_the_default_float() {
    let x = Tensor::from_vec(vec![1i64, 2, 3, 4], &[4]).unwrap();
    assert_eq!(x.fft_fft(None, -1, None).unwrap().dtype(), DType::C64);
    assert_eq!(x.fft_irfft(None, -1, None).unwrap().dtype(), DType::F32);
    assert_eq!(x.to_dtype(DType::F64).unwrap().fft_rfft(None, -1, None).unwrap().dtype(), DType::C128);
    // a round trip: irfft(rfft(x), n) == x for odd and even n
    for n in [5usize, 6] {
        let v: Vec<f64> = lcg(n, 9);
        let x = Tensor::from_vec(v.clone(), &[n]).unwrap();
        let back = x.fft_rfft(None, -1, Some("ortho")).unwrap().fft_irfft(Some(n as i64), -1, Some("ortho")).unwrap().to_vec::<f64>().unwrap();
        for (a, b) in back.iter().zip(&v) {
            assert!((a - b).abs() < 1e-12);
        }
    }
}

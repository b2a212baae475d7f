//! `torch.fft` on CUDA (cuFFT) against the CPU path (rustfft): every transform through the
//! registry on random inputs of odd, prime and power-of-two lengths, several dims, all three
//! norms, float32 and float64, values and gradients (complex grad_outputs), with no fall back to
//! the CPU. Skips without CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda;
use magpie_core::registry::{call, Value};
use magpie_core::{DType, Device, Tensor};
use num_complex::Complex64;
use util::{gpu, rand, Rng};

fn values(t: &Tensor) -> Vec<f64> {
    if t.dtype().is_complex() {
        t.to_vec::<Complex64>().unwrap().iter().flat_map(|z| [z.re, z.im]).collect()
    } else {
        t.to_vec::<f64>().unwrap()
    }
}

fn close(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (values(got), values(want));
    let scale = w.iter().fold(1f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= tol * scale, "{what}: element {i}: cuda {a}, cpu {b}");
    }
}

fn random(rng: &mut Rng, shape: &[usize], dt: DType) -> Tensor {
    if dt.is_complex() {
        let re = rand(rng, shape, DType::F64, -1.0, 1.0).to_vec::<f64>().unwrap();
        let im = rand(rng, shape, DType::F64, -1.0, 1.0).to_vec::<f64>().unwrap();
        let z: Vec<Complex64> = re.iter().zip(&im).map(|(&a, &b)| Complex64::new(a, b)).collect();
        Tensor::from_vec(z, shape).unwrap().to_dtype(dt).unwrap()
    } else {
        rand(rng, shape, dt, -1.0, 1.0)
    }
}

/// Runs `op` on `x` (on `dev`) with a gradient; returns the output and the input's gradient.
fn run(op: &str, x: &Tensor, kw: &[(&str, Value)], g: Option<&Tensor>, dev: Device) -> (Tensor, Option<Tensor>) {
    let xd = x.to_device(dev).unwrap().detach().requires_grad_(true).unwrap();
    let kw = kw.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let y = call(op, vec![Value::Tensor(xd.clone())], kw).unwrap_or_else(|e| panic!("{op} on {dev}: {e}")).into_tensor().unwrap();
    let grad = g.map(|g| {
        y.backward_with(Some(&g.to_device(dev).unwrap()), false, false).unwrap_or_else(|e| panic!("{op} backward on {dev}: {e}"));
        xd.grad().expect("a gradient").to_device(Device::Cpu).unwrap()
    });
    (y.to_device(Device::Cpu).unwrap(), grad)
}

fn ints(v: &[i64]) -> Value {
    Value::List(v.iter().map(|&i| Value::Int(i)).collect())
}

#[test]
fn cufft_matches_the_cpu_path() {
    let Some(dev) = gpu() else { return };
    cuda::reset_fallback_counts();
    let mut rng = Rng::new(11);
    let mut n = 0;
    for real in [DType::F32, DType::F64] {
        let cplx = real.to_complex();
        let tol = if real == DType::F32 { 2e-5 } else { 1e-11 };
        for norm in ["backward", "ortho", "forward"] {
            let nv = Value::Str(norm.into());
            // (op, input dtype, input shape, keyword arguments)
            let cases: Vec<(&str, DType, Vec<usize>, Vec<(&str, Value)>)> = vec![
                ("fft.fft", cplx, vec![6, 7], vec![]),
                ("fft.fft", real, vec![5, 16], vec![("n", Value::Int(13))]),
                ("fft.ifft", cplx, vec![8, 3, 5], vec![("dim", Value::Int(1)), ("n", Value::Int(4))]),
                ("fft.rfft", real, vec![4, 97], vec![]),
                ("fft.rfft", real, vec![9, 4, 3], vec![("dim", Value::Int(0))]),
                ("fft.ihfft", real, vec![3, 10], vec![("n", Value::Int(11))]),
                ("fft.irfft", cplx, vec![5, 9], vec![]),
                ("fft.irfft", cplx, vec![6, 4, 3], vec![("dim", Value::Int(1)), ("n", Value::Int(7))]),
                ("fft.hfft", cplx, vec![4, 33], vec![("n", Value::Int(64))]),
                ("fft.fft2", cplx, vec![3, 8, 9], vec![]),
                ("fft.ifftn", cplx, vec![4, 5, 6], vec![("s", ints(&[3, 8])), ("dim", ints(&[0, 2]))]),
                ("fft.rfft2", real, vec![2, 16, 15], vec![]),
                ("fft.rfftn", real, vec![6, 5, 4], vec![("dim", ints(&[2, 0]))]),
                ("fft.ihfftn", real, vec![3, 7, 8], vec![]),
                ("fft.irfft2", cplx, vec![2, 7, 5], vec![("s", ints(&[7, 9]))]),
                ("fft.irfftn", cplx, vec![5, 6, 4], vec![("dim", ints(&[2, 0]))]),
                ("fft.hfftn", cplx, vec![3, 4, 9], vec![("s", ints(&[5, 16]))]),
                ("fft.fftn", cplx, vec![512, 64], vec![]),
                ("fft.rfft", real, vec![256, 1024], vec![]),
            ];
            for (op, dt, shape, mut kw) in cases {
                kw.push(("norm", nv.clone()));
                let x = random(&mut rng, &shape, dt);
                let (y_cpu, _) = run(op, &x, &kw, None, Device::Cpu);
                let g = random(&mut rng, y_cpu.shape(), y_cpu.dtype());
                let (y_cpu, gx_cpu) = run(op, &x, &kw, Some(&g), Device::Cpu);
                let (y_gpu, gx_gpu) = run(op, &x, &kw, Some(&g), dev);
                let what = format!("{op} {dt} {shape:?} {norm}");
                close(&what, &y_gpu, &y_cpu, tol);
                close(&format!("{what} grad"), &gx_gpu.unwrap(), &gx_cpu.unwrap(), tol);
                n += 1;
            }
        }
    }
    assert_eq!(n, 2 * 3 * 19);
    for (op, native, fallback) in cuda::fallback_counts() {
        assert!(!op.starts_with("fft.") || fallback == 0, "{op}: {native} native, {fallback} fell back to the CPU");
    }
}

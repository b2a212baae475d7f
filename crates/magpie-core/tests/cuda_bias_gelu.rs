//! `bias_gelu` (`gelu(x + bias.to(x.dtype))`): the CUDA kernels against the composite on random
//! inputs at several sizes (odd widths, rows past the one-launch float32 column sum), float32,
//! bfloat16 and float16 activations with float32 or 16-bit biases, erf and tanh; values and
//! both gradients, also with `create_graph`. The CPU tests check the composite against a float64
//! loop and the argument errors. CUDA tests are skipped where CUDA is not available, unless
//! MAGPIE_REQUIRE_CUDA=1.

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, Rng};
use magpie_core::ops::nn::bias_gelu::{bias_gelu, bias_gelu_composite};
use magpie_core::{DType, Device, Tensor};

fn leaf(t: &Tensor) -> Tensor {
    t.detach().with_requires_grad().unwrap()
}

/// Asserts `got` is within `rt` relative of `want`, plus `at` of want's largest magnitude.
fn near(what: &str, got: &Tensor, want: &Tensor, rt: f64, at: f64) {
    let w = want.to_f64_vec().unwrap();
    let scale = w.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-6);
    assert_close(what, got, want, rt, at * scale);
}

#[allow(clippy::type_complexity)]
fn run(fused: bool, x: &Tensor, b: &Tensor, approx: &str, gy: &Tensor, create_graph: bool) -> (Tensor, Tensor, Tensor, String) {
    let (xl, bl) = (leaf(x), leaf(b));
    let y = if fused { bias_gelu(&xl, &bl, approx) } else { bias_gelu_composite(&xl, &bl, approx) }.unwrap();
    let name = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    y.backward_with(Some(&gy.to_dtype(y.dtype()).unwrap()), false, create_graph).unwrap();
    (y.detach(), xl.grad().unwrap().detach(), bl.grad().unwrap().detach(), name)
}

#[test]
fn fused_bias_gelu_matches_the_composite() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(41);
    let shapes: &[&[usize]] = &[&[1, 7], &[5, 3072], &[3, 11, 130], &[512, 3072], &[4100, 34], &[2, 1]];
    let mixes = [(DType::F32, DType::F32), (DType::BF16, DType::F32), (DType::BF16, DType::BF16), (DType::F16, DType::F32), (DType::F32, DType::BF16)];
    for &shape in shapes {
        let n = *shape.last().unwrap();
        for (xd, bd) in mixes {
            for approx in ["none", "tanh"] {
                for create_graph in [false, true] {
                    let what = format!("shape {shape:?} x {xd} bias {bd} {approx} create_graph {create_graph}");
                    let x = rand(&mut rng, shape, xd, -4.0, 4.0).to_device(dev).unwrap();
                    let b = rand(&mut rng, &[n], bd, -1.0, 1.0).to_device(dev).unwrap();
                    let gy = rand(&mut rng, shape, DType::F32, -1.0, 1.0).to_device(dev).unwrap();
                    let (ya, gxa, gba, na) = run(true, &x, &b, approx, &gy, create_graph);
                    // with create_graph both sides take the composite's tensor-op gradient rule
                    let (yc, gxc, gbc, nc) = run(false, &x, &b, approx, &gy, create_graph);
                    assert_eq!(na, "BiasGeluBackward0", "{what}: the fused path ran");
                    assert_ne!(nc, "BiasGeluBackward0", "{what}: the composite ran");
                    let tol = |d: DType| match d {
                        DType::F32 => (1e-5, 1e-6),
                        DType::BF16 => (1.0 / 128.0, 1.0 / 256.0),
                        _ => (1.0 / 1024.0, 1.0 / 2048.0),
                    };
                    let (rt, at) = tol(xd);
                    near(&format!("{what}: output"), &ya, &yc, rt, at);
                    near(&format!("{what}: grad x"), &gxa, &gxc, rt, at);
                    // the composite sums the bias gradient in x's dtype; the kernel path keeps a
                    // float32 sum for a float32 bias (one rounding apart)
                    let (brt, bat) = (rt.max(tol(bd).0).max(1e-4) * 2.0, at.max(tol(bd).1) * 2.0);
                    near(&format!("{what}: grad bias"), &gba, &gbc, brt, bat);
                }
            }
        }
    }
}

fn gelu64(v: f64, tanh: bool) -> f64 {
    if tanh {
        0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
    } else {
        // erf by its series (|v| small in this test)
        let z = v / std::f64::consts::SQRT_2;
        let mut term = z;
        let mut sum = z;
        for k in 1..60 {
            term *= -z * z / k as f64;
            sum += term / (2 * k + 1) as f64;
        }
        0.5 * v * (1.0 + 2.0 / std::f64::consts::PI.sqrt() * sum)
    }
}

#[test]
fn bias_gelu_on_the_cpu_is_gelu_of_the_sum() {
    let mut rng = Rng::new(8);
    for (rows, n) in [(1usize, 1usize), (3, 5), (7, 130)] {
        for approx in ["none", "tanh"] {
            let x = rand(&mut rng, &[rows, n], DType::F64, -2.0, 2.0);
            let b = rand(&mut rng, &[n], DType::F64, -1.0, 1.0);
            let y = bias_gelu(&x, &b, approx).unwrap();
            let (xv, bv) = (x.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
            let want: Vec<f64> = xv.iter().enumerate().map(|(i, v)| gelu64(v + bv[i % n], approx == "tanh")).collect();
            assert_close(&format!("{rows} x {n} {approx}"), &y, &Tensor::from_vec(want, &[rows, n]).unwrap(), 1e-10, 1e-12);
        }
    }
}

#[test]
fn bias_gelu_rejects_bad_arguments() {
    let x = Tensor::zeros_on(&[2, 4], DType::F32, Device::Cpu).unwrap();
    let e = bias_gelu(&x, &Tensor::zeros_on(&[3], DType::F32, Device::Cpu).unwrap(), "none").unwrap_err();
    assert!(e.to_string().contains("bias_gelu") && e.to_string().contains("bias"), "{e}");
    let e = bias_gelu(&x, &Tensor::zeros_on(&[4], DType::F32, Device::Cpu).unwrap(), "fast").unwrap_err();
    assert!(e.to_string().contains("approximate"), "{e}");
    let i = Tensor::zeros_on(&[2, 4], DType::I64, Device::Cpu).unwrap();
    assert!(bias_gelu(&i, &Tensor::zeros_on(&[4], DType::I64, Device::Cpu).unwrap(), "none").is_err(), "integer inputs are refused");
}

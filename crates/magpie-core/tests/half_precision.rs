//! Reduced-precision (bfloat16 / float16) ops compute in float32 and round once, as PyTorch's
//! kernels do (its `acc_type`), on the CPU and on CUDA: the value and the input gradients of each
//! composite op on half tensors equal the same op on float32 copies, rounded once to the half
//! dtype, at several sizes including odd ones. Rounding after every step of a composite (what
//! these ops did before) gives different values, which `chained_rounding_differs` shows on the
//! test data. Where CUDA is available (required with `MAGPIE_REQUIRE_CUDA=1`) every check runs
//! on CUDA tensors too, against the float32 op on CUDA: equal there within one half-precision
//! ulp, since cuBLAS may sum a 16-bit product in another order than a float32 one.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::ops::{linalg, nn};
use magpie_core::{autograd, DType, Device, Result, Scalar, Tensor};
use std::sync::OnceLock;

const HALF: [DType; 2] = [DType::BF16, DType::F16];

fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    magpie_core::ops::random::Generator::new(seed).normal(n).into_iter().map(|v| v as f32).collect()
}

fn t32(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(rand_vec(shape.iter().product(), seed), shape).unwrap()
}

/// Bit patterns of a half tensor (as f64 values, exact for both half dtypes).
fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// The devices the checks run on: the CPU, and CUDA where present.
fn devices() -> &'static [Device] {
    static D: OnceLock<Vec<Device>> = OnceLock::new();
    D.get_or_init(|| std::iter::once(Device::Cpu).chain(util::gpu()).collect())
}

/// The spacing of `dt`'s values at magnitude `v` (its subnormal spacing near zero).
fn ulp(dt: DType, v: f64) -> f64 {
    let (mant, tiny) = if dt == DType::BF16 { (7, 2f64.powi(-133)) } else { (10, 2f64.powi(-24)) };
    if v == 0.0 || !v.is_finite() {
        return tiny;
    }
    2f64.powi(v.abs().log2().floor() as i32 - mant).max(tiny)
}

/// `got` equals `want` (both of dtype `dt`), or is within `ulps` spacings of it.
fn same_within(what: &str, got: &Tensor, want: &Tensor, ulps: f64) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (a, b) = (vals(got), vals(want));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let ok = x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= ulps * ulp(got.dtype(), x.abs().max(y.abs()));
        assert!(ok, "{what}: element {i} is {x}, float32-then-round gives {y}");
    }
}

/// Runs `f` on half copies of `inputs` and on float32 copies of those half values, on each of
/// [`devices`]; the half result and the half inputs' gradients (for a random output gradient)
/// must equal the float32 ones rounded to the half dtype (on CUDA within one ulp).
fn check(what: &str, dt: DType, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>) {
    check_on(devices(), what, dt, inputs, f)
}

/// [`check`] on the CPU only: for the backward rules of elementwise ops, which stay in the half
/// dtype on CUDA, for attention, whose CUDA flash kernel rounds the probabilities to the half
/// dtype before their product with `v` (as PyTorch's CUDA flash kernel does), and for `linear`
/// with a bias, which CUDA adds to the rounded 16-bit product.
fn check_cpu(what: &str, dt: DType, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>) {
    check_on(&[Device::Cpu], what, dt, inputs, f)
}

fn check_on(devs: &[Device], what: &str, dt: DType, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>) {
    for &dev in devs {
        let ulps = if dev.is_cuda() { 1.0 } else { 0.0 };
        let h: Vec<Tensor> = inputs.iter().map(|t| t.to_dtype(dt).unwrap().to_device(dev).unwrap().requires_grad_(true).unwrap()).collect();
        let r: Vec<Tensor> = h.iter().map(|t| t.detach().to_dtype(DType::F32).unwrap().requires_grad_(true).unwrap()).collect();
        let yh = f(&h).unwrap();
        let yr = f(&r).unwrap();
        assert_eq!(yh.dtype(), dt, "{what}: result dtype");
        assert_eq!(yh.device(), dev, "{what}: result device");
        let at = format!("{what} {dt:?} on {dev:?}");
        same_within(&format!("{at} value"), &yh.to_device(Device::Cpu).unwrap(), &yr.to_dtype(dt).unwrap().to_device(Device::Cpu).unwrap(), ulps);
        let g = t32(yh.shape(), 99).to_dtype(dt).unwrap().to_device(dev).unwrap();
        let gh = autograd::grad(&[yh], &h, std::slice::from_ref(&g), false, false, true).unwrap();
        let gr = autograd::grad(&[yr], &r, &[g.to_dtype(DType::F32).unwrap()], false, false, true).unwrap();
        for (i, (a, b)) in gh.iter().zip(&gr).enumerate() {
            match (a, b) {
                (Some(a), Some(b)) => same_within(&format!("{at} grad[{i}]"), &a.to_device(Device::Cpu).unwrap(), &b.to_dtype(dt).unwrap().to_device(Device::Cpu).unwrap(), ulps),
                (None, None) => {}
                _ => panic!("{at}: gradient {i} present on one side only"),
            }
        }
    }
}

#[test]
fn norm_layers_round_once() {
    for dt in HALF {
        for (n, c, s) in [(2, 6, 5), (3, 4, 33), (1, 8, 1)] {
            let (x, w, b) = (t32(&[n, c, s], 1), t32(&[c], 2), t32(&[c], 3));
            check("group_norm", dt, &[x.clone(), w.clone(), b.clone()], |t| Ok(nn::native_group_norm(&t[0], 2, Some(&t[1]), Some(&t[2]), 1e-5)?.0));
            check("layer_norm", dt, &[x.clone(), t32(&[s], 4), t32(&[s], 5)], |t| {
                Ok(nn::native_layer_norm(&t[0], &[s as i64], Some(&t[1]), Some(&t[2]), 1e-5)?.0)
            });
            check("rms_norm", dt, &[x.clone(), t32(&[s], 6)], |t| nn::rms_norm(&t[0], &[s as i64], Some(&t[1]), Some(1e-5)));
            if n * s > 1 {
                check("batch_norm", dt, &[x.clone(), w.clone(), b.clone()], |t| {
                    Ok(nn::native_batch_norm(&t[0], Some(&t[1]), Some(&t[2]), None, None, true, 0.1, 1e-5)?.0)
                });
            }
            // |x| up to ~1000: in float16 the composite's x * x overflowed (a zero output, NaN gradients)
            check("rms_norm large", dt, &[x.mul_scalar(400.0).unwrap(), t32(&[s], 6)], |t| nn::rms_norm(&t[0], &[s as i64], Some(&t[1]), Some(1e-3)));
            if s > 1 {
                check("instance_norm", dt, &[x.clone(), w.clone(), b.clone()], |t| nn::instance_norm(&t[0], None, None, Some(&t[1]), Some(&t[2]), true, 0.1, 1e-5));
            }
        }
    }
}

#[test]
fn batch_norm_updates_half_running_stats_in_place() {
    let x = t32(&[4, 3, 7], 7).to_dtype(DType::BF16).unwrap();
    let (rm, rv) = (Tensor::zeros(&[3]).unwrap().to_dtype(DType::BF16).unwrap(), Tensor::ones(&[3]).unwrap().to_dtype(DType::BF16).unwrap());
    nn::native_batch_norm(&x, None, None, Some(&rm), Some(&rv), true, 0.5, 1e-5).unwrap();
    let mean = x.to_dtype(DType::F32).unwrap().mean_dims(Some(&[0, 2]), false, None).unwrap();
    let want = mean.mul_scalar(0.5).unwrap().to_dtype(DType::BF16).unwrap();
    assert_eq!(rm.dtype(), DType::BF16);
    let (a, b) = (vals(&rm), vals(&want));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 0.01 * y.abs() + 1e-3, "running mean {a:?}, expected {b:?}");
    }
    assert!(vals(&rv).iter().all(|&v| v != 1.0), "running var not updated: {:?}", vals(&rv));
}

#[test]
fn pooling_and_resampling_round_once() {
    for dt in HALF {
        for hw in [5usize, 8, 13] {
            let x = t32(&[2, 3, hw, hw + 2], 11);
            check("avg_pool2d", dt, std::slice::from_ref(&x), |t| nn::avg_pool(&t[0], 2, &[3, 2], &[2, 1], &[1, 0], false, true, None));
            check("adaptive_avg_pool2d", dt, std::slice::from_ref(&x), |t| nn::adaptive_avg_pool(&t[0], 2, &[Some(3), Some(4)]));
            for mode in ["bilinear", "bicubic"] {
                check(mode, dt, std::slice::from_ref(&x), |t| nn::interpolate(&t[0], Some(&[7, 9]), None, mode, Some(false), None, false));
            }
        }
    }
}

#[test]
fn products_round_once() {
    let (one, half) = (Scalar::Float(1.0), Scalar::Float(0.5));
    for dt in HALF {
        for (m, k, n) in [(3, 5, 4), (7, 33, 9)] {
            check("addmm", dt, &[t32(&[m, n], 20), t32(&[m, k], 21), t32(&[k, n], 22)], |t| t[0].addmm(&t[1], &t[2], half, one));
            check("baddbmm", dt, &[t32(&[2, m, n], 23), t32(&[2, m, k], 24), t32(&[2, k, n], 25)], |t| t[0].baddbmm(&t[1], &t[2], one, half));
            check("addbmm", dt, &[t32(&[m, n], 26), t32(&[3, m, k], 27), t32(&[3, k, n], 28)], |t| t[0].addbmm(&t[1], &t[2], one, one));
            check("addr", dt, &[t32(&[m, n], 29), t32(&[m], 30), t32(&[n], 31)], |t| t[0].addr(&t[1], &t[2], half, half));
            // on CUDA a bias joins the rounded 16-bit product (as under autocast), CPU only here
            check_cpu("linear", dt, &[t32(&[m, k], 32), t32(&[n, k], 33), t32(&[n], 34)], |t| nn::linear(&t[0], &t[1], Some(&t[2])));
            check("addcmul", dt, &[t32(&[m, n], 35), t32(&[m, n], 36), t32(&[n], 37)], |t| t[0].addcmul(&t[1], &t[2], 0.75));
            check("lerp", dt, &[t32(&[m, n], 38), t32(&[m, n], 39), t32(&[m, n], 40)], |t| t[0].lerp_tensor(&t[1], &t[2]));
            check("addcdiv", dt, &[t32(&[m, n], 41), t32(&[m, n], 42), t32(&[n], 43).abs().unwrap().add_scalar(0.5).unwrap()], |t| t[0].addcdiv(&t[1], &t[2], -0.3));
            check("bilinear", dt, &[t32(&[m, k], 44), t32(&[m, n], 45), t32(&[3, k, n], 46), t32(&[3], 47)], |t| nn::bilinear(&t[0], &t[1], &t[2], Some(&t[3])));
            check("huber_loss", dt, &[t32(&[m, n], 48), t32(&[m, n], 49)], |t| nn::loss::huber_loss(&t[0], &t[1], nn::Reduction::Mean, 0.7));
            check("conv1d", dt, &[t32(&[2, 3, k], 50), t32(&[n, 3, 3], 51), t32(&[n], 52)], |t| {
                nn::conv(&t[0], &t[1], Some(&t[2]), 1, &[1], &nn::Padding::Explicit(vec![1]), &[1], 1)
            });
        }
    }
}

#[test]
fn norms_take_half_inputs() {
    for dt in HALF {
        for shape in [vec![7usize], vec![3, 17]] {
            let x = t32(&shape, 50);
            for ord in [2.0, 1.0, 3.5, f64::INFINITY] {
                check("vector_norm", dt, std::slice::from_ref(&x), |t| linalg::vector_norm(&t[0], ord, None, false, None));
            }
        }
        let a = t32(&[2, 4, 5], 51);
        check("matrix_norm fro", dt, std::slice::from_ref(&a), |t| linalg::matrix_norm(&t[0], &linalg::NormOrd::Fro, (-2, -1), false));
        check("matrix_norm 1", dt, std::slice::from_ref(&a), |t| linalg::matrix_norm(&t[0], &linalg::NormOrd::Num(1.0), (-2, -1), false));
        // the singular-value norms need an SVD, which PyTorch refuses in half precision too
        let e = linalg::matrix_norm(&a.to_dtype(dt).unwrap(), &linalg::NormOrd::Nuc, (-2, -1), false).unwrap_err();
        assert!(e.to_string().contains("Low precision dtypes not supported"), "{e}");
    }
}

#[test]
fn backward_rules_round_once() {
    for dt in HALF {
        for n in [9usize, 64, 101] {
            let x = t32(&[3, n], 60);
            for &dev in devices() {
                softmax_grad_from_rounded_output(dt, &x, dev);
            }
            check_cpu("var", dt, std::slice::from_ref(&x), |t| t[0].var_dims(Some(&[1]), 1.0, false));
            check_cpu("gelu", dt, std::slice::from_ref(&x), |t| t[0].gelu("none"));
            check_cpu("hardswish", dt, &[x.mul_scalar(3.0).unwrap()], |t| t[0].hardswish());
            check_cpu("rsqrt", dt, &[x.abs().unwrap().add_scalar(0.1).unwrap()], |t| t[0].rsqrt());
            check_cpu("hypot", dt, &[x.clone(), t32(&[3, n], 61)], |t| t[0].hypot(&t[1]));
            check_cpu("div", dt, &[x.clone(), t32(&[n], 62).abs().unwrap().add_scalar(0.5).unwrap()], |t| t[0].div(&t[1]));
        }
        let (q, k, v) = (t32(&[2, 5, 8], 63), t32(&[2, 7, 8], 64), t32(&[2, 7, 8], 65));
        check_cpu("sdpa", dt, &[q.clone(), k.clone(), v.clone()], |t| nn::scaled_dot_product_attention(&t[0], &t[1], &t[2], None, 0.0, false, None, false));
        // with a float mask CUDA takes the composite too: in float32, rounded once
        check("sdpa masked", dt, &[q, k, v, t32(&[2, 5, 7], 66)], |t| nn::scaled_dot_product_attention(&t[0], &t[1], &t[2], Some(&t[3]), 0.0, false, None, false));
    }
}

/// Softmax's gradient reads the forward's output, which (as in PyTorch) is the rounded half
/// tensor: the rule computes in float32 from it and rounds once (on CUDA: the kernel for the
/// last dim, float32 copies for another; within one ulp of the float32 rule there).
fn softmax_grad_from_rounded_output(dt: DType, x: &Tensor, dev: Device) {
    use magpie_core::ops::softmax::{log_softmax_backward_data, softmax_backward_data};
    let ulps = if dev.is_cuda() { 1.0 } else { 0.0 };
    for (log, dim) in [(false, 1i64), (true, 0), (false, 0), (true, 1)] {
        let xh = x.to_dtype(dt).unwrap().to_device(dev).unwrap().requires_grad_(true).unwrap();
        let y = if log { xh.log_softmax(dim, None) } else { xh.softmax(dim, None) }.unwrap();
        assert_eq!(y.dtype(), dt);
        let g = t32(y.shape(), 98).to_dtype(dt).unwrap().to_device(dev).unwrap();
        let got = autograd::grad(std::slice::from_ref(&y), &[xh], std::slice::from_ref(&g), false, false, false).unwrap()[0].clone().unwrap();
        let (g32, y32) = (g.to_dtype(DType::F32).unwrap(), y.detach().to_dtype(DType::F32).unwrap());
        let want = if log { log_softmax_backward_data(&g32, &y32, dim, DType::F32) } else { softmax_backward_data(&g32, &y32, dim, DType::F32) };
        let want = want.unwrap().to_dtype(dt).unwrap().to_device(Device::Cpu).unwrap();
        same_within(&format!("softmax (log {log}, dim {dim}) {dt:?} grad on {dev:?}"), &got.to_device(Device::Cpu).unwrap(), &want, ulps);
    }
}

/// The data above is not too easy: rounding to bfloat16 after each step of layer norm (what a
/// chain of bfloat16 ops does) differs from the single rounding the ops above are checked for.
#[test]
fn chained_rounding_differs() {
    let dt = DType::BF16;
    let x = t32(&[3, 4, 33], 1).to_dtype(dt).unwrap();
    let m = x.mean_dims(Some(&[2]), true, None).unwrap();
    let c = x.sub(&m).unwrap();
    let v = c.mul(&c).unwrap().mean_dims(Some(&[2]), true, None).unwrap();
    let chained = c.mul(&v.add_scalar(1e-5).unwrap().pow_scalar(-0.5).unwrap()).unwrap();
    let once = nn::native_layer_norm(&x, &[33], None, None, 1e-5).unwrap().0;
    let differ = vals(&chained).iter().zip(vals(&once)).filter(|(a, b)| **a != *b).count();
    assert!(differ > 0, "bfloat16 chain and single rounding agree everywhere");
}

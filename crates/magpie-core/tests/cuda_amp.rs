//! Mixed precision on the GPU: the loss-scaling kernels (non-finite check with unscale, scale
//! update) against the CPU loops, bit for bit, for float32/float64/float16/bfloat16 gradients of
//! odd sizes with and without inf/NaN, strided gradients, and autocast on CUDA tensors (the
//! CUDA lists: float16 GEMMs by default, float32 softmax and reductions, a CPU-only region
//! leaving CUDA tensors alone). Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1.

mod cuda_util;

use cuda_util::{gpu, rand, Rng};
use magpie_core::{amp, DType, Device, Tensor};

fn scalar(v: f64, dt: DType, dev: Device) -> Tensor {
    Tensor::scalar_tensor(v, dt, dev).unwrap()
}

#[test]
fn unscale_matches_cpu_bit_for_bit() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(5);
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for &n in &[1usize, 7, 1000, 70_001] {
            for poison in [None, Some(f64::INFINITY), Some(f64::NAN), Some(f64::NEG_INFINITY)] {
                let mut grads = [rand(&mut rng, &[n], DType::F64, -1000.0, 1000.0), rand(&mut rng, &[3, 5], DType::F64, -1.0, 1.0)];
                if let Some(p) = poison {
                    let mut v = grads[0].to_vec::<f64>().unwrap();
                    v[n / 2] = p;
                    grads[0] = Tensor::from_vec(v, &[n]).unwrap();
                }
                let grads: Vec<Tensor> = grads.iter().map(|g| g.to_dtype(dt).unwrap()).collect();
                let on_gpu: Vec<Tensor> = grads.iter().map(|g| g.to_device(dev).unwrap()).collect();
                let inv = 1.0 / 65536.0f64;
                let (fc, fg) = (scalar(0.0, DType::F32, Device::Cpu), scalar(0.0, DType::F32, dev));
                amp::non_finite_check_and_unscale_(&grads, &fc, &scalar(inv, DType::F32, Device::Cpu)).unwrap();
                amp::non_finite_check_and_unscale_(&on_gpu, &fg, &scalar(inv, DType::F32, dev)).unwrap();
                let what = format!("{dt} n={n} poison={poison:?}");
                assert_eq!(fg.item().unwrap().to_f64(), fc.item().unwrap().to_f64(), "{what}: found_inf");
                assert_eq!(fc.item().unwrap().to_f64(), if poison.is_some() { 1.0 } else { 0.0 }, "{what}: found_inf value");
                for (c, g) in grads.iter().zip(&on_gpu) {
                    let (c, g) = (c.to_f64_vec().unwrap(), g.to_device(Device::Cpu).unwrap().to_f64_vec().unwrap());
                    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
                        assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{what}: element {i}: gpu {a}, cpu {b}");
                    }
                }
            }
        }
    }
}

#[test]
fn unscale_strided_gradient_and_flag_stays_set() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(9);
    let base = rand(&mut rng, &[6, 8], DType::F32, -4.0, 4.0).to_device(dev).unwrap();
    let g = base.t().unwrap(); // a transposed view: unscaled through a copy, written back
    let want = g.to_device(Device::Cpu).unwrap().mul_scalar(0.25).unwrap();
    let found = scalar(1.0, DType::F32, dev); // already set by an earlier gradient: stays 1
    amp::non_finite_check_and_unscale_(std::slice::from_ref(&g), &found, &scalar(0.25, DType::F32, dev)).unwrap();
    assert_eq!(g.to_device(Device::Cpu).unwrap().to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    assert_eq!(found.item().unwrap().to_f64(), 1.0);
}

#[test]
fn update_scale_matches_cpu() {
    let Some(dev) = gpu() else { return };
    // backoff, growth after the interval, no growth past float32's range, tracker reset
    let finds = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0];
    for (init, gf, bf, interval) in [(65536.0, 2.0, 0.5, 3), (3.0e38, 4.0, 0.25, 1), (1.0, 1.5, 0.125, 2)] {
        let cpu = (scalar(init, DType::F32, Device::Cpu), scalar(0.0, DType::I32, Device::Cpu));
        let cuda = (scalar(init, DType::F32, dev), scalar(0.0, DType::I32, dev));
        for (t, f) in finds.iter().enumerate() {
            amp::update_scale_(&cpu.0, &cpu.1, &scalar(*f, DType::F32, Device::Cpu), gf, bf, interval).unwrap();
            amp::update_scale_(&cuda.0, &cuda.1, &scalar(*f, DType::F32, dev), gf, bf, interval).unwrap();
            let what = format!("init {init} interval {interval} step {t}");
            assert_eq!(cuda.0.item().unwrap().to_f64().to_bits(), cpu.0.item().unwrap().to_f64().to_bits(), "{what}: scale");
            assert_eq!(cuda.1.item().unwrap().to_i64(), cpu.1.item().unwrap().to_i64(), "{what}: tracker");
        }
    }
    // the flag must be on the scale's device, one float32 element
    let e = amp::update_scale_(&scalar(1.0, DType::F32, dev), &scalar(0.0, DType::I32, dev), &scalar(0.0, DType::F32, Device::Cpu), 2.0, 0.5, 1);
    assert!(e.is_err());
}

#[test]
fn autocast_on_cuda_tensors() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(2);
    let a = rand(&mut rng, &[4, 8], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
    let w = rand(&mut rng, &[8, 3], DType::F32, -1.0, 1.0).to_device(dev).unwrap().with_requires_grad().unwrap();
    {
        let _ac = amp::autocast(dev, None, true).unwrap();
        let y = a.matmul(&w).unwrap();
        assert_eq!(y.dtype(), DType::F16, "CUDA autocast's default dtype");
        assert_eq!(y.softmax(1, None).unwrap().dtype(), DType::F32, "softmax runs in float32 on CUDA");
        assert_eq!(y.sum().unwrap().dtype(), DType::F32, "sum runs in float32 on CUDA");
        assert_eq!(y.exp().unwrap().dtype(), DType::F32);
        assert_eq!(y.relu().unwrap().dtype(), DType::F16, "relu is in no list");
        let e = magpie_core::ops::nn::loss::binary_cross_entropy(
            &y.sigmoid().unwrap(),
            &y.sigmoid().unwrap(),
            None,
            magpie_core::ops::nn::Reduction::Mean,
        );
        assert!(e.is_err(), "binary_cross_entropy is refused under CUDA autocast");
        y.to_dtype(DType::F32).unwrap().sum().unwrap().backward().unwrap();
    }
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
    // a CPU region leaves CUDA tensors alone
    let _cpu = amp::autocast(Device::Cpu, None, true).unwrap();
    assert_eq!(a.matmul(&w).unwrap().dtype(), DType::F32);
}

/// `cross_entropy` of 16-bit CUDA logits under autocast reads them without a float32 copy: the
/// float32 loss and the logits' gradient against the explicit path (logits cast to float32, the
/// loss with autocast off, the gradient cast back), for reductions mean/sum/none, ignored rows and
/// an odd class count.
#[test]
fn autocast_cross_entropy_reads_16_bit_logits() {
    use magpie_core::ops::nn::loss::cross_entropy;
    use magpie_core::ops::nn::Reduction;
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(11);
    for dt in [DType::BF16, DType::F16] {
        for (rows, c) in [(37usize, 1001usize), (4, 7), (3, 50257)] {
            for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
                let what = format!("{dt} {rows}x{c} {r:?}");
                let x = rand(&mut rng, &[rows, c], DType::F32, -4.0, 4.0).to_dtype(dt).unwrap().to_device(dev).unwrap();
                let tv: Vec<i64> = (0..rows).map(|i| if i % 5 == 3 { -100 } else { ((i * 7919) % c) as i64 }).collect();
                let t = Tensor::from_vec(tv, &[rows]).unwrap().to_device(dev).unwrap();
                let xa = x.clone().requires_grad_(true).unwrap();
                let la = {
                    let _ac = amp::autocast(dev, Some(dt), true).unwrap();
                    cross_entropy(&xa, &t, None, -100, r, 0.0).unwrap()
                };
                assert_eq!(la.dtype(), DType::F32, "{what}: loss dtype");
                // the loss node takes the 16-bit leaf itself (the cast path has a ToCopy in between)
                let next = la.grad_fn().map(|n| n.next_functions()).unwrap_or_default();
                assert!(next.iter().flatten().all(|n| !n.contains("ToCopy")), "{what}: a cast before the loss: {next:?}");
                let xb = x.clone().requires_grad_(true).unwrap();
                let lb = cross_entropy(&xb.to_dtype(DType::F32).unwrap(), &t, None, -100, r, 0.0).unwrap();
                let g = rand(&mut rng, la.shape(), DType::F32, 0.5, 1.5).to_device(dev).unwrap();
                la.backward_with(Some(&g), false, false).unwrap();
                lb.backward_with(Some(&g), false, false).unwrap();
                let (a, b) = (la.detach().to_f64_vec().unwrap(), lb.detach().to_f64_vec().unwrap());
                for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                    assert!((p - q).abs() <= 1e-6 * q.abs().max(1.0), "{what}: loss {i}: {p} vs {q}");
                }
                let (ga, gb) = (xa.grad().unwrap(), xb.grad().unwrap());
                assert_eq!(ga.dtype(), dt, "{what}: gradient dtype");
                let ulp = if dt == DType::BF16 { 2f64.powi(-8) } else { 2f64.powi(-11) };
                let (ga, gb) = (ga.to_f64_vec().unwrap(), gb.to_f64_vec().unwrap());
                for (i, (p, q)) in ga.iter().zip(&gb).enumerate() {
                    assert!((p - q).abs() <= ulp * q.abs() + 1e-9, "{what}: gradient {i}: {p} vs {q}");
                }
            }
        }
    }
}

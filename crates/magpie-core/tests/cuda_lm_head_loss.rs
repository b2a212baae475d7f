//! The fused `lm_head_cross_entropy` (padded weight, logits read in the padded product, gradient
//! written into zero-padded rows) against its reference, `cross_entropy(linear(x, w), t)`, on the
//! GPU: random inputs at odd vocabularies, under autocast (bfloat16, float16) and on 16-bit
//! leaves, every reduction, ignored rows; the loss and the gradients of `x` and `w`. Its own test
//! binary: it lowers the global size from which products are padded so that small cases take
//! both paths. Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1.

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, Rng};
use magpie_core::backend::cuda;
use magpie_core::ops::nn::lm_head_loss::composite;
use magpie_core::ops::nn::{lm_head_cross_entropy, Reduction};
use magpie_core::{amp, DType, Device, Tensor};

/// One run of `f` on fresh leaves: (loss, grad of x, grad of w, name of the loss's grad_fn).
fn run(f: &dyn Fn(&Tensor, &Tensor) -> Tensor, x: &Tensor, w: &Tensor, gy: &Tensor) -> (Tensor, Tensor, Tensor, String) {
    let (xl, wl) = (x.detach().with_requires_grad().unwrap(), w.detach().with_requires_grad().unwrap());
    let loss = f(&xl, &wl);
    let name = loss.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    let g = if loss.ndim() == 0 { None } else { Some(gy) };
    loss.backward_with(g, false, false).unwrap();
    let cpu = |t: Tensor| t.to_device(Device::Cpu).unwrap().to_dtype(DType::F32).unwrap();
    (cpu(loss.detach()), cpu(xl.grad().unwrap()), cpu(wl.grad().unwrap()), name)
}

#[test]
fn fused_equals_the_composite_forward_and_backward() {
    let Some(dev) = gpu() else { return };
    cuda::blas::set_pad_min_macs(0);
    let mut rng = Rng::new(11);
    // (rows, in features, vocabulary): odd vocabularies, in features a multiple of 8
    for &(n, cin, v) in &[(1usize, 8usize, 3usize), (37, 16, 101), (64, 24, 1001), (130, 40, 257), (9, 64, 50)] {
        // (autocast dtype, leaves' dtype)
        for &(ac, leaf) in &[(Some(DType::BF16), DType::F32), (Some(DType::F16), DType::F32), (None, DType::BF16)] {
            for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
                let x = rand(&mut rng, &[n, cin], leaf, -2.0, 2.0).to_device(dev).unwrap();
                let w = rand(&mut rng, &[v, cin], leaf, -0.5, 0.5).to_device(dev).unwrap();
                // about one row in 8 ignored
                let tv: Vec<i64> = (0..n).map(|_| if rng.next() % 8 == 0 { -100 } else { (rng.next() % v as u64) as i64 }).collect();
                let t = Tensor::from_vec(tv, &[n]).unwrap().to_device(dev).unwrap();
                let gy = rand(&mut rng, &[n], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
                let call = |fused: bool| {
                    let t = t.clone();
                    move |x: &Tensor, w: &Tensor| {
                        let _g = ac.map(|d| amp::autocast(dev, Some(d), true).unwrap());
                        if fused { lm_head_cross_entropy(x, w, &t, -100, r).unwrap() } else { composite(x, w, &t, -100, r).unwrap() }
                    }
                };
                let gyl = if ac.is_none() && r == Reduction::None { gy.to_dtype(DType::BF16).unwrap() } else { gy.clone() };
                let (lf, gxf, gwf, name) = run(&call(true), &x, &w, &gyl);
                let (lc, gxc, gwc, _) = run(&call(false), &x, &w, &gyl);
                let what = format!("n={n} cin={cin} v={v} autocast={ac:?} leaf={leaf:?} {r:?}");
                assert!(name.starts_with("LinearCrossEntropy"), "{what}: the fused path ran ({name})");
                // the same products and kernels up to the GEMMs' summation order and one
                // rounding of the 16-bit gradients
                let (rt, at) = if ac == Some(DType::F16) { (4e-3, 2e-3) } else { (2e-2, 1e-2) };
                assert_close(&format!("{what} loss"), &lf, &lc, rt, at);
                assert_close(&format!("{what} grad x"), &gxf, &gxc, rt, at);
                assert_close(&format!("{what} grad w"), &gwf, &gwc, rt, at);
            }
        }
    }
}

#[test]
fn falls_back_to_the_composite_where_nothing_is_padded() {
    let Some(dev) = gpu() else { return };
    cuda::blas::set_pad_min_macs(0);
    let mut rng = Rng::new(12);
    // a vocabulary of a multiple of 8, in features that are not, float32 products
    for &(cin, v, dt) in &[(16usize, 64usize, DType::BF16), (12, 101, DType::BF16), (16, 101, DType::F32)] {
        let x = rand(&mut rng, &[20, cin], dt, -1.0, 1.0).to_device(dev).unwrap().with_requires_grad().unwrap();
        let w = rand(&mut rng, &[v, cin], dt, -1.0, 1.0).to_device(dev).unwrap();
        let t = Tensor::from_vec((0..20).map(|i| (i * 7 % v) as i64).collect::<Vec<_>>(), &[20]).unwrap().to_device(dev).unwrap();
        let a = lm_head_cross_entropy(&x, &w, &t, -100, Reduction::Mean).unwrap();
        let b = composite(&x, &w, &t, -100, Reduction::Mean).unwrap();
        assert!(!a.grad_fn().is_some_and(|n| n.name().starts_with("LinearCrossEntropy")), "cin={cin} v={v} {dt:?}");
        assert_eq!(a.to_device(Device::Cpu).unwrap().to_f64_vec().unwrap(), b.to_device(Device::Cpu).unwrap().to_f64_vec().unwrap());
    }
}

#[test]
fn errors_name_the_ops_as_the_composite() {
    let Some(dev) = gpu() else { return };
    let x = Tensor::zeros_on(&[4, 8], DType::F32, dev).unwrap();
    let w = Tensor::zeros_on(&[5, 6], DType::F32, dev).unwrap();
    let t = Tensor::zeros_on(&[4], DType::I64, dev).unwrap();
    let e = lm_head_cross_entropy(&x, &w, &t, -100, Reduction::Mean).unwrap_err().to_string();
    assert!(e.contains("mat1 and mat2 shapes cannot be multiplied"), "{e}");
}

/// With a bias (BERT's decoder): the fused op against `cross_entropy(linear(x, w, b), t)`, the
/// loss and the gradients of x, w and b, under bf16 and f16 autocast and on bf16 leaves.
#[test]
fn fused_with_bias_equals_the_composite() {
    use magpie_core::ops::nn::lm_head_loss::{composite_with_bias, lm_head_cross_entropy_with_bias};
    let Some(dev) = gpu() else { return };
    cuda::blas::set_pad_min_macs(0);
    let mut rng = Rng::new(13);
    for &(n, cin, v) in &[(37usize, 16usize, 101usize), (5, 8, 3), (64, 24, 1001)] {
        for &(ac, leaf) in &[(Some(DType::BF16), DType::F32), (Some(DType::F16), DType::F32), (None, DType::BF16)] {
            for r in [Reduction::Mean, Reduction::Sum] {
                let x = rand(&mut rng, &[n, cin], leaf, -2.0, 2.0).to_device(dev).unwrap();
                let w = rand(&mut rng, &[v, cin], leaf, -0.5, 0.5).to_device(dev).unwrap();
                let b = rand(&mut rng, &[v], leaf, -1.0, 1.0).to_device(dev).unwrap();
                let tv: Vec<i64> = (0..n).map(|i| if i % 7 == 2 { -100 } else { (rng.next() % v as u64) as i64 }).collect();
                let t = Tensor::from_vec(tv, &[n]).unwrap().to_device(dev).unwrap();
                let what = format!("n={n} cin={cin} v={v} autocast={ac:?} leaf={leaf:?} {r:?}");
                let mut res = Vec::new();
                for fused in [true, false] {
                    let (xl, wl, bl) = (x.detach().with_requires_grad().unwrap(), w.detach().with_requires_grad().unwrap(), b.detach().with_requires_grad().unwrap());
                    let loss = {
                        let _g = ac.map(|d| amp::autocast(dev, Some(d), true).unwrap());
                        if fused {
                            lm_head_cross_entropy_with_bias(&xl, &wl, Some(&bl), &t, -100, r).unwrap()
                        } else {
                            composite_with_bias(&xl, &wl, Some(&bl), &t, -100, r).unwrap()
                        }
                    };
                    let name = loss.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
                    assert_eq!(name.starts_with("LinearCrossEntropy"), fused, "{what}: {name}");
                    loss.backward().unwrap();
                    let cpu = |t: Tensor| t.to_device(Device::Cpu).unwrap().to_dtype(DType::F32).unwrap();
                    res.push([cpu(loss.detach()), cpu(xl.grad().unwrap()), cpu(wl.grad().unwrap()), cpu(bl.grad().unwrap())]);
                }
                let (rt, at) = if ac == Some(DType::F16) { (4e-3, 2e-3) } else { (2e-2, 1e-2) };
                for (k, part) in ["loss", "grad x", "grad w", "grad b"].iter().enumerate() {
                    assert_close(&format!("{what} {part}"), &res[0][k], &res[1][k], rt, at);
                }
            }
        }
    }
}

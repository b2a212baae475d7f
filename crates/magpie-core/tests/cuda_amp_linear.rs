//! CUDA autocast's `linear` with float32 gradients from the kernels (`ops/nn/linear_amp.rs`)
//! against the composite (linear on explicit 16-bit casts, gradients cast back), and the pieces
//! it is built on: `reduce_acc` (16-bit column and row sums stored as float32),
//! `batched_matmul_to` (16-bit products stored as float32, padded ones included),
//! `amp::cache_casts` and its multi-tensor cast kernel. Random inputs at odd sizes. Skipped where
//! CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1.

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, Rng};
use magpie_core::backend::cuda::{self, blas, reduce};
use magpie_core::ops::nn::linear;
use magpie_core::{amp, DType, Device, Tensor};

fn leaf(t: &Tensor) -> Tensor {
    t.detach().with_requires_grad().unwrap()
}

/// Asserts `got` is within one 16-bit rounding (`rt`) of `want`, plus `at` of want's largest magnitude.
fn near(what: &str, got: &Tensor, want: &Tensor, rt: f64, at: f64) {
    let w = want.to_f64_vec().unwrap();
    let scale = w.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-6);
    assert_close(what, got, want, rt, at * scale);
}

#[test]
fn autocast_linear_matches_the_composite() {
    let Some(dev) = gpu() else { return };
    // padded products for the odd sizes below, as for a vocabulary-sized head
    blas::set_pad_min_macs(0);
    let mut rng = Rng::new(21);
    let cases: &[(&[usize], usize)] = &[(&[37, 24], 40), (&[2, 5, 16], 8), (&[64, 96], 200), (&[9, 40], 257), (&[3, 8], 3)];
    for &(xs, outf) in cases {
        let inf = *xs.last().unwrap();
        for dt in [DType::BF16, DType::F16] {
            for xdt in [DType::F32, dt] {
                for bias in [true, false] {
                    for create_graph in [false, true] {
                        let what = format!("x {xs:?} ({xdt}) out {outf} autocast {dt} bias {bias} create_graph {create_graph}");
                        let x = rand(&mut rng, xs, xdt, -2.0, 2.0).to_device(dev).unwrap();
                        let w = rand(&mut rng, &[outf, inf], DType::F32, -0.5, 0.5).to_device(dev).unwrap();
                        let b = rand(&mut rng, &[outf], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
                        let mut gs = xs[..xs.len() - 1].to_vec();
                        gs.push(outf);
                        let gy = rand(&mut rng, &gs, dt, -1.0, 1.0).to_device(dev).unwrap();
                        // the fused path
                        let (xa, wa, ba) = (leaf(&x), leaf(&w), leaf(&b));
                        let ya = {
                            let _ac = amp::autocast(dev, Some(dt), true).unwrap();
                            linear(&xa, &wa, bias.then_some(&ba)).unwrap()
                        };
                        let name = ya.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
                        assert_eq!(name, "LinearBackward0", "{what}: the fused path ran");
                        ya.backward_with(Some(&gy), false, create_graph).unwrap();
                        // the composite on explicit casts, autocast off
                        let (xb, wb, bb) = (leaf(&x), leaf(&w), leaf(&b));
                        let b16 = bb.to_dtype(dt).unwrap();
                        let yb = linear(&xb.to_dtype(dt).unwrap(), &wb.to_dtype(dt).unwrap(), bias.then_some(&b16)).unwrap();
                        yb.backward_with(Some(&gy), false, false).unwrap();
                        assert_eq!(ya.dtype(), dt, "{what}: output dtype");
                        assert_close(&format!("{what}: output (same kernels)"), &ya.detach(), &yb.detach(), 0.0, 0.0);
                        // one rounding to 16 bits apart, and the products' summation order
                        let rt = if dt == DType::BF16 { 1.0 / 128.0 } else { 1.0 / 1024.0 };
                        let ga = xa.grad().unwrap();
                        assert_eq!(ga.dtype(), xdt, "{what}: grad of x dtype");
                        near(&format!("{what}: grad x"), &ga, &xb.grad().unwrap(), rt, 1e-3);
                        let gw = wa.grad().unwrap();
                        assert_eq!(gw.dtype(), DType::F32, "{what}: grad of w dtype");
                        near(&format!("{what}: grad w"), &gw, &wb.grad().unwrap(), rt, 1e-3);
                        if bias {
                            let gb = ba.grad().unwrap();
                            assert_eq!(gb.dtype(), DType::F32, "{what}: grad of b dtype");
                            near(&format!("{what}: grad b"), &gb, &bb.grad().unwrap(), rt, 1e-3);
                        } else {
                            assert!(ba.grad().is_none(), "{what}: no bias, no gradient");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn autocast_linear_shares_one_cast_of_a_float32_input() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(22);
    let x = leaf(&rand(&mut rng, &[16, 32], DType::F32, -1.0, 1.0).to_device(dev).unwrap());
    let ws: Vec<Tensor> = (0..3).map(|_| leaf(&rand(&mut rng, &[24, 32], DType::F32, -0.5, 0.5).to_device(dev).unwrap())).collect();
    let loss = {
        let _ac = amp::autocast(dev, Some(DType::BF16), true).unwrap();
        let ys: Vec<Tensor> = ws.iter().map(|w| linear(&x, w, None).unwrap()).collect();
        // the three weights cached, the input's cast not counted as one
        assert_eq!(amp::autocast_cache_len(), 3);
        ys[0].add(&ys[1]).unwrap().add(&ys[2]).unwrap().to_dtype(DType::F32).unwrap().sum().unwrap()
    };
    loss.backward().unwrap();
    // reference: the gradient of x through three separate casts
    let xr = leaf(&x);
    let lr = ws.iter().map(|w| xr.to_dtype(DType::BF16).unwrap().matmul(&w.detach().to_dtype(DType::BF16).unwrap().t().unwrap()).unwrap()).reduce(|a, b| a.add(&b).unwrap()).unwrap();
    lr.to_dtype(DType::F32).unwrap().sum().unwrap().backward().unwrap();
    near("grad x", &x.grad().unwrap(), &xr.grad().unwrap(), 1.0 / 64.0, 1e-3);
    // an in-place change of the input between two projections is not hidden by the shared cast
    let x2 = rand(&mut rng, &[16, 32], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
    let w = &ws[0];
    let _ac = amp::autocast(dev, Some(DType::BF16), true).unwrap();
    let a = linear(&x2, w, None).unwrap();
    let v0 = x2.version();
    x2.mul_scalar_(2.0).unwrap();
    assert!(x2.version() > v0, "an in-place write to a CUDA tensor counts as a new version");
    let b = linear(&x2, w, None).unwrap();
    let want = a.to_dtype(DType::F32).unwrap().mul_scalar(2.0).unwrap();
    near("after x *= 2", &b.to_dtype(DType::F32).unwrap().detach(), &want.detach(), 1.0 / 64.0, 1e-3);
}

#[test]
fn cache_casts_fills_the_cache_in_one_launch_with_the_same_bits() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(23);
    let w = leaf(&rand(&mut rng, &[40, 24], DType::F32, -0.5, 0.5).to_device(dev).unwrap());
    let b = leaf(&rand(&mut rng, &[40], DType::F32, -0.5, 0.5).to_device(dev).unwrap());
    let x = rand(&mut rng, &[7, 24], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
    let cpu_w = leaf(&rand(&mut rng, &[4], DType::F32, -1.0, 1.0));
    let no_grad = rand(&mut rng, &[4], DType::F32, -1.0, 1.0).to_device(dev).unwrap();
    assert_eq!(amp::cache_casts(&[w.clone()]).unwrap(), 0, "outside a region: nothing");
    let mut outs = Vec::new();
    for prefill in [false, true] {
        let (wl, bl) = (leaf(&w), leaf(&b));
        let y = {
            let _ac = amp::autocast(dev, Some(DType::BF16), true).unwrap();
            if prefill {
                // duplicates, CPU tensors and tensors without grad are skipped
                let n = amp::cache_casts(&[wl.clone(), bl.clone(), wl.clone(), cpu_w.clone(), no_grad.clone()]).unwrap();
                assert_eq!(n, 2);
                assert_eq!(amp::autocast_cache_len(), 2);
                assert_eq!(amp::cache_casts(&[wl.clone()]).unwrap(), 0, "already cached");
            }
            // the fused linear and a plain matmul (through the cached cast's ToCopy node)
            let y = linear(&x, &wl, Some(&bl)).unwrap().add(&wl.matmul(&x.t().unwrap()).unwrap().t().unwrap()).unwrap();
            assert_eq!(amp::autocast_cache_len(), 2);
            y
        };
        y.to_dtype(DType::F32).unwrap().sum().unwrap().backward().unwrap();
        outs.push((y.detach(), wl.grad().unwrap(), bl.grad().unwrap()));
    }
    assert_close("output", &outs[1].0, &outs[0].0, 0.0, 0.0);
    assert_close("grad w", &outs[1].1, &outs[0].1, 0.0, 0.0);
    assert_close("grad b", &outs[1].2, &outs[0].2, 0.0, 0.0);
}

#[test]
fn multi_tensor_cast_equals_the_single_cast() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(24);
    for to in [DType::BF16, DType::F16] {
        // 50 buffers (two launches), odd lengths, some starting off 16-byte boundaries
        let srcs: Vec<Tensor> = (0..50usize)
            .map(|i| {
                let n = 1 + i * 37 % 301 + if i == 7 { 70_001 } else { 0 };
                let t = rand(&mut rng, &[n + 3], DType::F32, -70_000.0, 70_000.0).to_device(dev).unwrap();
                t.narrow(0, (i % 3) as i64, n as i64).unwrap()
            })
            .collect();
        let outs: Vec<Tensor> = srcs.iter().map(|s| Tensor::zeros_on(s.shape(), to, dev).unwrap()).collect();
        let items: Vec<(u64, u64, usize)> = srcs
            .iter()
            .zip(&outs)
            .map(|(s, o)| (cuda::kern::elem_ptr("test", s).unwrap().0, cuda::kern::elem_ptr("test", o).unwrap().0, s.numel()))
            .collect();
        let d = cuda::device::device("test", 0).unwrap();
        cuda::amp::cast_multi(&d, to, &items).unwrap();
        for (i, (s, o)) in srcs.iter().zip(&outs).enumerate() {
            let want = s.to_dtype(to).unwrap();
            assert_close(&format!("{to} buffer {i}"), o, &want, 0.0, 0.0);
        }
    }
    let d = cuda::device::device("test", 0).unwrap();
    assert!(cuda::amp::cast_multi(&d, DType::F64, &[]).is_err(), "only 16-bit targets");
}

#[test]
fn reduce_acc_sums_16_bit_inputs_in_float32() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(25);
    for dt in [DType::BF16, DType::F16, DType::F32] {
        for &(r, c) in &[(512usize, 768usize), (7, 30522), (1000, 3), (3, 1001), (1, 8), (2047, 130), (333, 4098), (513, 770), (4100, 66)] {
            let x = rand(&mut rng, &[r, c], dt, -1.0, 1.0);
            let xd = x.to_device(dev).unwrap();
            for dim in [0usize, 1] {
                let shape = if dim == 0 { [c] } else { [r] };
                let got = reduce::reduce_acc(&xd, &[dim], reduce::RedOp::Sum, &shape).unwrap().unwrap();
                assert_eq!(got.dtype(), DType::F32, "{dt} {r}x{c} dim {dim}");
                let want = x.to_dtype(DType::F64).unwrap().sum_dims(Some(&[dim as i64]), false, None).unwrap();
                let n = if dim == 0 { r } else { c };
                assert_close(&format!("{dt} {r}x{c} dim {dim}"), &got.to_dtype(DType::F64).unwrap(), &want, 0.0, 1e-6 * n as f64);
            }
        }
    }
}

#[test]
fn batched_matmul_to_float32() {
    let Some(dev) = gpu() else { return };
    blas::set_pad_min_macs(0);
    let mut rng = Rng::new(26);
    for dt in [DType::BF16, DType::F16] {
        for &(m, k, n, ta) in &[(37usize, 24usize, 40usize, false), (257, 9, 40, true), (9, 257, 40, false), (1, 8, 3, true), (64, 96, 200, true)] {
            let a = if ta { rand(&mut rng, &[k, m], dt, -1.0, 1.0).to_device(dev).unwrap().t().unwrap() } else { rand(&mut rng, &[m, k], dt, -1.0, 1.0).to_device(dev).unwrap() };
            let b = rand(&mut rng, &[k, n], dt, -1.0, 1.0).to_device(dev).unwrap();
            let got = blas::batched_matmul_to(&a, &b, DType::F32).unwrap().unwrap();
            assert_eq!(got.shape(), &[m, n]);
            assert_eq!(got.dtype(), DType::F32);
            let want = a.to_dtype(DType::F64).unwrap().to_device(Device::Cpu).unwrap().matmul(&b.to_dtype(DType::F64).unwrap().to_device(Device::Cpu).unwrap()).unwrap();
            assert_close(&format!("{dt} {m}x{k}x{n} ta {ta}"), &got.to_dtype(DType::F64).unwrap().to_device(Device::Cpu).unwrap(), &want, 1e-5, 1e-5 * k as f64);
            // its own dtype: the plain product
            let same = blas::batched_matmul_to(&a, &b, dt).unwrap().unwrap();
            assert_close(&format!("{dt} {m}x{k}x{n} ta {ta} as {dt}"), &same, &blas::batched_matmul(&a, &b).unwrap().unwrap(), 0.0, 0.0);
        }
    }
    let a = Tensor::zeros_on(&[2, 2], DType::F32, dev).unwrap();
    let e = blas::batched_matmul_to(&a, &a, DType::BF16).unwrap_err().to_string();
    assert!(e.contains("matmul"), "{e}");
}

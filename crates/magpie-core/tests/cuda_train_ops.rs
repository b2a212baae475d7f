//! The CUDA kernels of the training step against the CPU on random inputs at several sizes
//! (odd ones included): GELU forward and backward (both forms), layer_norm forward and backward
//! (dx, dw, db; with and without weight), cross_entropy forward and backward (mean / sum /
//! none, ignore_index), the fused SGD / Adam steps and the sum of squares of clip_grad_norm_.
//! Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1 (then they fail).

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, Rng};
use magpie_core::backend::cuda;
use magpie_core::ops::nn::loss::{cross_entropy, Reduction};
use magpie_core::{DType, Device, Tensor};

/// Independent leaf copies of `x` on the CPU and on `dev`, both requiring grad (detached first:
/// a move of a tensor that requires grad would be recorded and the GPU copy would not be a leaf).
fn leaves(x: &Tensor, dev: Device) -> (Tensor, Tensor) {
    let gpu = x.detach().to_device(dev).unwrap().with_requires_grad().unwrap();
    (x.detach().with_requires_grad().unwrap(), gpu)
}

fn grad_cpu(t: &Tensor) -> Tensor {
    t.grad().expect("a gradient").to_device(Device::Cpu).unwrap()
}

#[test]
fn gelu_forward_backward() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(1);
    for &n in &[1usize, 7, 1000, 4097, 65_537] {
        for approx in ["tanh", "none"] {
            for dt in [DType::F32, DType::F64] {
                let x = rand(&mut rng, &[n], dt, -6.0, 6.0);
                let gy = rand(&mut rng, &[n], dt, -1.0, 1.0);
                let (xc, xg) = leaves(&x, dev);
                let yc = xc.gelu(approx).unwrap();
                let yg = xg.gelu(approx).unwrap();
                assert!(yg.device().is_cuda());
                let tol = if dt == DType::F32 { 2e-6 } else { 1e-12 };
                assert_close(&format!("gelu {approx} {dt:?} n={n}"), &yg.to_device(Device::Cpu).unwrap(), &yc, tol, tol);
                yc.backward_with(Some(&gy), false, false).unwrap();
                yg.backward_with(Some(&gy.to_device(dev).unwrap()), false, false).unwrap();
                assert_close(&format!("gelu' {approx} {dt:?} n={n}"), &grad_cpu(&xg), &grad_cpu(&xc), 1e-5, 1e-5);
            }
        }
    }
    // a strided input and 16-bit floats
    let x = rand(&mut rng, &[33, 17], DType::F32, -3.0, 3.0);
    let got = x.to_device(dev).unwrap().transpose(0, 1).unwrap().gelu("tanh").unwrap();
    assert_close("gelu transposed", &got.to_device(Device::Cpu).unwrap(), &x.transpose(0, 1).unwrap().gelu("tanh").unwrap(), 2e-6, 2e-6);
    let xb = x.to_dtype(DType::BF16).unwrap();
    let got = xb.to_device(dev).unwrap().gelu("none").unwrap();
    assert_close("gelu bf16", &got.to_device(Device::Cpu).unwrap(), &xb.gelu("none").unwrap(), 1e-2, 1e-2);
}

#[test]
fn layer_norm_forward_backward() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(2);
    for &(rows, n) in &[(1usize, 1usize), (3, 5), (64, 128), (1025, 129), (17, 3000), (2048, 64)] {
        for affine in [true, false] {
            let x = rand(&mut rng, &[rows, n], DType::F32, -2.0, 3.0);
            let w = rand(&mut rng, &[n], DType::F32, 0.5, 1.5);
            let b = rand(&mut rng, &[n], DType::F32, -0.5, 0.5);
            let gy = rand(&mut rng, &[rows, n], DType::F32, -1.0, 1.0);
            let (xc, xg) = leaves(&x, dev);
            let (wc, wg) = leaves(&w, dev);
            let (bc, bg) = leaves(&b, dev);
            let run = |x: &Tensor, w: &Tensor, b: &Tensor| {
                let (w, b) = if affine { (Some(w), Some(b)) } else { (None, None) };
                magpie_core::ops::nn::norm::native_layer_norm(x, &[n as i64], w, b, 1e-5).unwrap().0
            };
            let yc = run(&xc, &wc, &bc);
            let yg = run(&xg, &wg, &bg);
            let what = format!("layer_norm rows={rows} n={n} affine={affine}");
            assert_close(&what, &yg.to_device(Device::Cpu).unwrap(), &yc, 1e-4, 1e-5);
            yc.backward_with(Some(&gy), false, false).unwrap();
            yg.backward_with(Some(&gy.to_device(dev).unwrap()), false, false).unwrap();
            assert_close(&format!("{what} dx"), &grad_cpu(&xg), &grad_cpu(&xc), 1e-3, 1e-4);
            if affine {
                // column sums over up to 2048 rows: f32 summation order differs
                assert_close(&format!("{what} dw"), &grad_cpu(&wg), &grad_cpu(&wc), 1e-3, 1e-3);
                assert_close(&format!("{what} db"), &grad_cpu(&bg), &grad_cpu(&bc), 1e-3, 1e-3);
            }
        }
    }
    // 3-d input (the model's [B, T, C]) in f64
    let x = rand(&mut rng, &[4, 7, 33], DType::F64, -1.0, 1.0);
    let w = rand(&mut rng, &[33], DType::F64, 0.5, 1.5);
    let (xc, xg) = leaves(&x, dev);
    let (wc, wg) = leaves(&w, dev);
    let yc = magpie_core::ops::nn::norm::native_layer_norm(&xc, &[33], Some(&wc), None, 1e-5).unwrap().0;
    let yg = magpie_core::ops::nn::norm::native_layer_norm(&xg, &[33], Some(&wg), None, 1e-5).unwrap().0;
    let gy = rand(&mut rng, &[4, 7, 33], DType::F64, -1.0, 1.0);
    yc.backward_with(Some(&gy), false, false).unwrap();
    yg.backward_with(Some(&gy.to_device(dev).unwrap()), false, false).unwrap();
    assert_close("layer_norm f64 dx", &grad_cpu(&xg), &grad_cpu(&xc), 1e-9, 1e-10);
    assert_close("layer_norm f64 dw", &grad_cpu(&wg), &grad_cpu(&wc), 1e-9, 1e-10);
}

#[test]
fn cross_entropy_forward_backward() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(3);
    for &(rows, c) in &[(1usize, 1usize), (5, 3), (1024, 97), (77, 5000), (300, 65)] {
        for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            for ignore in [-100i64, 1] {
                let x = rand(&mut rng, &[rows, c], DType::F32, -5.0, 5.0);
                let t = rand(&mut rng, &[rows], DType::I64, 0.0, c as f64);
                let (xc, xg) = leaves(&x, dev);
                let tg = t.to_device(dev).unwrap();
                let lc = cross_entropy(&xc, &t, None, ignore, r, 0.0).unwrap();
                let lg = cross_entropy(&xg, &tg, None, ignore, r, 0.0).unwrap();
                let what = format!("cross_entropy rows={rows} c={c} {r:?} ignore={ignore}");
                assert!(lg.device().is_cuda(), "{what}: result on the GPU");
                assert_close(&what, &lg.to_device(Device::Cpu).unwrap(), &lc, 1e-5, 1e-5);
                let gy = rand(&mut rng, lc.shape(), DType::F32, 0.5, 1.5);
                lc.backward_with(Some(&gy), false, false).unwrap();
                lg.backward_with(Some(&gy.to_device(dev).unwrap()), false, false).unwrap();
                assert_close(&format!("{what} grad"), &grad_cpu(&xg), &grad_cpu(&xc), 1e-5, 1e-6);
            }
        }
    }
}

#[test]
fn fused_optimizer_kernels_and_sum_of_squares() {
    let Some(dev) = gpu() else { return };
    use cuda::optim::{adam_step, sgd_step, sum_of_squares, AdamHyper, SgdHyper};
    let mut rng = Rng::new(4);
    for &n in &[1usize, 5, 1000, 100_003] {
        let p = rand(&mut rng, &[n], DType::F32, -1.0, 1.0);
        let g = rand(&mut rng, &[n], DType::F32, -1.0, 1.0);
        let buf = rand(&mut rng, &[n], DType::F32, -1.0, 1.0);
        // SGD with momentum, dampening, weight decay, nesterov off; then on
        for nesterov in [false, true] {
            let h = SgdHyper { lr: 0.1, momentum: 0.9, dampening: if nesterov { 0.0 } else { 0.1 }, weight_decay: 0.01, nesterov, maximize: false, first: false };
            let (pg, bg) = (p.to_device(dev).unwrap(), buf.to_device(dev).unwrap());
            sgd_step(&pg, &g.to_device(dev).unwrap(), Some(&bg), &h).unwrap();
            let (pv, gv, mut bv): (Vec<f32>, Vec<f32>, Vec<f32>) = (p.to_vec().unwrap(), g.to_vec().unwrap(), buf.to_vec().unwrap());
            let want: Vec<f64> = (0..n)
                .map(|i| {
                    let d = gv[i] + 0.01 * pv[i];
                    bv[i] = 0.9 * bv[i] + (1.0 - h.dampening as f32) * d;
                    let u = if nesterov { d + 0.9 * bv[i] } else { bv[i] };
                    (pv[i] - 0.1 * u) as f64
                })
                .collect();
            assert_close("sgd", &pg.to_device(Device::Cpu).unwrap().to_dtype(DType::F64).unwrap(), &Tensor::from_vec(want, &[n]).unwrap(), 1e-6, 1e-6);
            let wantb: Vec<f64> = bv.iter().map(|&v| v as f64).collect();
            assert_close("sgd buf", &bg.to_device(Device::Cpu).unwrap().to_dtype(DType::F64).unwrap(), &Tensor::from_vec(wantb, &[n]).unwrap(), 1e-6, 1e-6);
        }
        // AdamW with AMSGrad, step 3
        let m = rand(&mut rng, &[n], DType::F32, -0.1, 0.1);
        let v = rand(&mut rng, &[n], DType::F32, 0.0, 0.01);
        let vmax = rand(&mut rng, &[n], DType::F32, 0.0, 0.01);
        let (b1, b2, lr, wd, eps, t) = (0.9f64, 0.95f64, 1e-3f64, 0.1f64, 1e-8f64, 3.0f64);
        let h = AdamHyper { step_size: lr / (1.0 - b1.powf(t)), bc2_sqrt: (1.0 - b2.powf(t)).sqrt(), beta1: b1, beta2: b2, lr, weight_decay: wd, eps, decoupled: true, maximize: false };
        let (pg, mg, vg, xg) = (p.to_device(dev).unwrap(), m.to_device(dev).unwrap(), v.to_device(dev).unwrap(), vmax.to_device(dev).unwrap());
        adam_step(&pg, &g.to_device(dev).unwrap(), &mg, &vg, Some(&xg), &h).unwrap();
        let (pv, gv, mv, vv, xv): (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) =
            (p.to_vec().unwrap(), g.to_vec().unwrap(), m.to_vec().unwrap(), v.to_vec().unwrap(), vmax.to_vec().unwrap());
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let p = pv[i] as f64 * (1.0 - lr * wd);
                let d = gv[i] as f64;
                let m = mv[i] as f64 + (1.0 - b1) * (d - mv[i] as f64);
                let v = vv[i] as f64 * b2 + (1.0 - b2) * d * d;
                let vm = v.max(xv[i] as f64);
                p - h.step_size * m / (vm.sqrt() / h.bc2_sqrt + eps)
            })
            .collect();
        assert_close("adamw amsgrad", &pg.to_device(Device::Cpu).unwrap().to_dtype(DType::F64).unwrap(), &Tensor::from_vec(want, &[n]).unwrap(), 1e-5, 1e-6);
        // sum of squares over several tensors, one of them strided
        let a = rand(&mut rng, &[n], DType::F32, -1.0, 1.0);
        let b = rand(&mut rng, &[7, 3], DType::F32, -1.0, 1.0);
        let bt = b.to_device(dev).unwrap().transpose(0, 1).unwrap();
        let ss = sum_of_squares(&[a.to_device(dev).unwrap(), bt]).unwrap().expect("a kernel");
        let want: f64 = a.to_vec::<f32>().unwrap().iter().chain(b.to_vec::<f32>().unwrap().iter()).map(|&v| (v as f64) * (v as f64)).sum();
        let got = ss.item().unwrap().to_f64();
        assert!((got - want).abs() <= 1e-9 * want.max(1.0), "sum of squares {got} vs {want}");
    }
}

#[test]
fn embedding_backward_sums_rows_in_index_order_like_the_cpu() {
    use magpie_core::ops::nn::embedding;
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(7);
    // (rows, width, lookups): one row, odd widths, many repeats across the counting sort's
    // 1024-index chunks, more rows than lookups, more rows than the sort's 1024 threads; 32 hits
    // a row and more (the column-sliced kernel: token-type-like tables, partial slices and tiles);
    // up to 2048 lookups the many-block plan (a BERT-sized word table), above it the one-block plan
    for &(n, d, l) in &[(1usize, 1usize, 1usize), (7, 33, 257), (300, 1030, 600), (96, 64, 4099), (5, 3, 0), (3, 5, 2500), (5000, 17, 3001), (2, 768, 512), (3, 777, 1029), (30522, 40, 512), (2049, 9, 2048), (4000, 5, 2049)] {
        for pad in [None, Some(2i64)] {
            if pad.is_some_and(|p| p as usize >= n) {
                continue;
            }
            let idx: Vec<i64> = (0..l).map(|_| (rng.next() % n as u64) as i64).collect();
            let idx = Tensor::from_vec(idx, &[l]).unwrap();
            let w = rand(&mut rng, &[n, d], DType::F32, -1.0, 1.0);
            let gy = rand(&mut rng, &[l, d], DType::F32, -1.0, 1.0);
            let (wc, wg) = leaves(&w, dev);
            embedding(&idx, &wc, pad, None, 2.0).unwrap().backward_with(Some(&gy), false, false).unwrap();
            let ig = idx.to_device(dev).unwrap();
            let gyg = gy.to_device(dev).unwrap();
            embedding(&ig, &wg, pad, None, 2.0).unwrap().backward_with(Some(&gyg), false, false).unwrap();
            let (a, b) = (grad_cpu(&wc).to_vec::<f32>().unwrap(), grad_cpu(&wg).to_vec::<f32>().unwrap());
            // the same additions in the same order: the same bits
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b), "embedding backward n={n} d={d} l={l} pad={pad:?}");
        }
    }
}

#[test]
fn sum_of_squares_is_reproducible_across_launches() {
    use cuda::optim::sum_of_squares;
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(9);
    // more than 48 tensors (two launches) of mixed sizes, one large enough for many blocks
    let ts: Vec<Tensor> = (0..61).map(|i| rand(&mut rng, &[if i == 5 { 3_000_001 } else { 1 + 37 * i }], DType::F32, -1.0, 1.0).to_device(dev).unwrap()).collect();
    let first = sum_of_squares(&ts).unwrap().expect("a kernel").item().unwrap().to_f64();
    for _ in 0..5 {
        let again = sum_of_squares(&ts).unwrap().expect("a kernel").item().unwrap().to_f64();
        assert_eq!(first.to_bits(), again.to_bits());
    }
    let want: f64 = ts.iter().map(|t| t.to_vec::<f32>().unwrap().iter().map(|&v| v as f64 * v as f64).sum::<f64>()).sum();
    assert!((first - want).abs() <= 1e-9 * want, "{first} vs {want}");
}

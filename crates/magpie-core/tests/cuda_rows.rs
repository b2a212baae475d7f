//! The native CUDA row gathers, scatter-adds and tap maps (backend/cuda/rows.rs) against the CPU
//! path through the public ops built on them: max pooling with indices and max unpooling (take_rows
//! / put_rows, overlapping windows so that put_rows targets collide), interpolation in every mode
//! incl. align_corners, average and adaptive average pooling (apply_taps), with first- and
//! second-order gradients, on odd sizes in f32, f64, f16 and bf16 plus integer pooling. f32 / f64
//! must match bit for bit (same sums in the same order). Also checks that none of these went
//! through the host. Skipped where CUDA is not available, unless MAGPIE_REQUIRE_CUDA=1.

mod cuda_util;

use cuda_util::{assert_close, gpu, rand, tol, Rng};
use magpie_core::autograd::grad;
use magpie_core::backend::cuda;
use magpie_core::ops::nn::{adaptive_avg_pool, avg_pool, interpolate, max_pool, max_unpool};
use magpie_core::{DType, Device, Tensor};

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

fn host(t: &Tensor) -> Tensor {
    t.to_device(Device::Cpu).unwrap()
}

/// Exact for f32 / f64, the dtype's tolerance for the 16-bit floats.
fn same(what: &str, got: &Tensor, want: &Tensor) {
    let (rt, at) = if matches!(got.dtype(), DType::F32 | DType::F64) { (0.0, 0.0) } else { tol(got.dtype()) };
    assert_close(what, &host(got), want, rt, at);
}

/// Runs `f` on the CPU and on the GPU from the same random input; compares the outputs, the
/// gradient for a random output gradient `u`, and the second-order gradient of that gradient
/// with respect to `u` (which runs the op's adjoint's adjoint on the device).
fn check(what: &str, dev: Device, rng: &mut Rng, dt: DType, shape: &[usize], f: &dyn Fn(&Tensor) -> Tensor) {
    let x = rand(rng, shape, dt, -2.0, 2.0);
    let xc = x.detach().with_requires_grad().unwrap();
    let xg = x.to_device(dev).unwrap().with_requires_grad().unwrap();
    let (yc, yg) = (f(&xc), f(&xg));
    assert!(yg.device().is_cuda(), "{what}: result left the GPU");
    same(&format!("{what} {dt:?}: value"), &yg, &yc);
    let u = rand(rng, yc.shape(), dt, -1.0, 1.0);
    let uc = u.detach().with_requires_grad().unwrap();
    let ug = u.to_device(dev).unwrap().with_requires_grad().unwrap();
    let gc = grad(&[yc], &[xc], &[uc.clone()], true, true, false).unwrap()[0].clone().unwrap();
    let gg = grad(&[yg], &[xg], &[ug.clone()], true, true, false).unwrap()[0].clone().unwrap();
    same(&format!("{what} {dt:?}: grad"), &gg, &gc);
    let w = rand(rng, shape, dt, -1.0, 1.0);
    let wg = w.to_device(dev).unwrap();
    let hc = grad(&[gc], &[uc], &[w], false, false, false).unwrap()[0].clone().unwrap();
    let hg = grad(&[gg], &[ug], &[wg], false, false, false).unwrap()[0].clone().unwrap();
    same(&format!("{what} {dt:?}: grad of grad"), &hg, &hc);
}

/// No call of these ops went through the host kernels.
fn none_on_host() {
    for (op, a, b) in cuda::fallback_counts() {
        assert!(!["host:take_rows", "host:put_rows", "host:apply_taps"].contains(&op.as_str()) || a + b == 0, "{op} ran on the host ({a}, {b})");
    }
}

#[test]
fn max_pool_and_unpool_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(5);
    // (nd, input shape): odd sizes; kernel 3, stride 2 (overlapping windows), padding 1
    let cases: [(usize, Vec<usize>); 4] = [(1, vec![2, 3, 11]), (2, vec![2, 3, 9, 7]), (2, vec![3, 1, 16, 5]), (3, vec![1, 2, 5, 6, 7])];
    for dt in FLOATS {
        for (nd, shape) in &cases {
            let nd = *nd;
            let (k, s, p, d) = (vec![3; nd], vec![2; nd], vec![1; nd], vec![1; nd]);
            check(&format!("max_pool{nd}d {shape:?}"), dev, &mut rng, dt, shape, &|x| max_pool(x, nd, &k, &s, &p, &d, false).unwrap().0);
            // indices must agree exactly; unpooling scatters (last write wins where windows overlap)
            let x = rand(&mut rng, shape, dt, -2.0, 2.0);
            let (vc, ic) = max_pool(&x, nd, &k, &s, &p, &d, true).unwrap();
            let (vg, ig) = max_pool(&x.to_device(dev).unwrap(), nd, &k, &s, &p, &d, true).unwrap();
            assert_close(&format!("max_pool{nd}d {dt:?} indices"), &host(&ig), &ic, 0.0, 0.0);
            same(&format!("max_pool{nd}d {dt:?} ceil values"), &vg, &vc);
            let out: Vec<i64> = shape[2..].iter().map(|&v| v as i64).collect();
            let pooled_shape = vc.shape().to_vec();
            let (icc, igg) = (ic.clone(), ig.clone());
            let unpool = move |v: &Tensor| {
                let i = if v.device().is_cuda() { &igg } else { &icc };
                max_unpool(v, i, nd, &k, &s, &p, Some(&out)).unwrap()
            };
            check(&format!("max_unpool{nd}d {shape:?}"), dev, &mut rng, dt, &pooled_shape, &unpool);
        }
    }
    // the integer path (no gradients)
    for dt in [DType::I64, DType::I32] {
        let x = rand(&mut rng, &[2, 3, 9, 7], dt, -50.0, 50.0);
        let (vc, ic) = max_pool(&x, 2, &[3, 3], &[2, 2], &[1, 1], &[1, 1], false).unwrap();
        let (vg, ig) = max_pool(&x.to_device(dev).unwrap(), 2, &[3, 3], &[2, 2], &[1, 1], &[1, 1], false).unwrap();
        assert_close(&format!("max_pool2d {dt:?}"), &host(&vg), &vc, 0.0, 0.0);
        let uc = max_unpool(&vc, &ic, 2, &[3, 3], &[2, 2], &[1, 1], Some(&[9, 7])).unwrap();
        let ug = max_unpool(&vg, &ig, 2, &[3, 3], &[2, 2], &[1, 1], Some(&[9, 7])).unwrap();
        assert_close(&format!("max_unpool2d {dt:?}"), &host(&ug), &uc, 0.0, 0.0);
    }
    none_on_host();
}

#[test]
fn interpolate_matches_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(7);
    // (mode, align_corners, input shape, output size)
    let cases: Vec<(&str, Option<bool>, Vec<usize>, Vec<i64>)> = vec![
        ("nearest", None, vec![2, 3, 7, 5], vec![11, 3]),
        ("nearest-exact", None, vec![2, 3, 7, 5], vec![4, 9]),
        ("linear", Some(false), vec![2, 3, 13], vec![29]),
        ("linear", Some(true), vec![2, 3, 13], vec![6]),
        ("bilinear", Some(false), vec![1, 2, 9, 7], vec![17, 4]),
        ("bilinear", Some(true), vec![1, 2, 9, 7], vec![5, 12]),
        ("bicubic", Some(false), vec![1, 3, 6, 9], vec![13, 5]),
        ("bicubic", Some(true), vec![1, 3, 6, 9], vec![13, 5]),
        ("trilinear", Some(false), vec![1, 2, 5, 4, 3], vec![7, 9, 2]),
        ("area", None, vec![2, 3, 9, 7], vec![4, 3]),
    ];
    for dt in FLOATS {
        for (mode, align, shape, size) in &cases {
            let f = |x: &Tensor| interpolate(x, Some(size.as_slice()), None, mode, *align, None, false).unwrap();
            check(&format!("interpolate {mode} align={align:?} {shape:?}"), dev, &mut rng, dt, shape, &f);
        }
    }
    none_on_host();
}

#[test]
fn avg_and_adaptive_pool_match_cpu() {
    let Some(dev) = gpu() else { return };
    let mut rng = Rng::new(9);
    for dt in FLOATS {
        check("avg_pool1d", dev, &mut rng, dt, &[2, 3, 13], &|x| avg_pool(x, 1, &[3], &[2], &[1], false, true, None).unwrap());
        check("avg_pool2d", dev, &mut rng, dt, &[2, 3, 9, 7], &|x| avg_pool(x, 2, &[3, 3], &[2, 1], &[1, 0], true, false, None).unwrap());
        check("avg_pool3d", dev, &mut rng, dt, &[1, 2, 5, 6, 7], &|x| avg_pool(x, 3, &[2, 3, 3], &[1, 2, 2], &[0, 1, 1], false, true, None).unwrap());
        check("adaptive_avg_pool2d", dev, &mut rng, dt, &[2, 3, 9, 7], &|x| adaptive_avg_pool(x, 2, &[Some(4), Some(3)]).unwrap());
        check("adaptive_avg_pool3d", dev, &mut rng, dt, &[1, 2, 5, 11, 3], &|x| adaptive_avg_pool(x, 3, &[Some(2), Some(5), Some(3)]).unwrap());
    }
    none_on_host();
}

#[test]
fn inverse_map_keeps_the_cpu_order() {
    // rows of 4 sources into rows of 3 destinations, with collisions
    let idx = [2, 0, 2, 1, 1, 1, 0, 1];
    let (ptr, src) = cuda::rows::inverse_map(2, 4, 3, &idx);
    assert_eq!(ptr, vec![0, 1, 2, 4, 5, 8, 8]);
    assert_eq!(src, vec![1, 3, 0, 2, 6, 4, 5, 7]);
}

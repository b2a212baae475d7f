//! Flash attention backward on CUDA (`backend::cuda::attention_bwd`, reached through
//! `scaled_dot_product_attention` with autograd): dq, dk, dv against the f64 composite's gradients
//! on the CPU from the same (rounded) inputs and output gradient, over f32/f16/bf16, head dims
//! 64/128 (tensor cores) and 40/16 (scalar kernels), odd lengths, causal with q_len != kv_len, GQA,
//! batch dims of several ranks, many blocks of several heads and batches; the double-backward path (`create_graph`) against the CPU; and
//! the forward's log-sum-exp path giving the same output as without autograd.
//! Skipped without CUDA unless MAGPIE_REQUIRE_CUDA=1.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda::attention_bwd::set_scalar_backward_min_scores;
use magpie_core::ops::nn;
use magpie_core::{DType, Device, Tensor};
use util::{gpu, Rng};

const GPU: Device = Device::Cuda(0);

/// The tests set the process-wide composite/flash threshold: one at a time.
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn rnd(rng: &mut Rng, shape: &[usize], dt: DType) -> Tensor {
    util::rand(rng, shape, dt, -1.0, 1.0)
}

/// Max |got - want| over max |want| (elementwise, after checking shapes).
#[track_caller]
fn rel_err(what: &str, got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    // floor: a gradient that is zero in exact arithmetic (one key per query) is rounding noise
    let amax = w.iter().fold(0.0f64, |a, x| a.max(x.abs())).max(1e-3);
    let mut worst = 0.0f64;
    for i in 0..w.len() {
        assert!(g[i].is_finite(), "{what}: element {i} is {}", g[i]);
        worst = worst.max((g[i] - w[i]).abs() / amax);
    }
    worst
}

fn tol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 1e-4,
        DType::F16 => 1e-2,
        _ => 3e-2,
    }
}

/// One case: gradients of the flash path on the GPU vs the f64 composite on the CPU.
fn case(rng: &mut Rng, dt: DType, qs: &[usize], ks: &[usize], causal: bool, gqa: bool) {
    case_on(rng, dt, qs, ks, causal, gqa, "FlashAttentionForCuda")
}

/// [`case`] on the path whose autograd node name contains `node_has` (`!name`: does not contain it).
fn case_on(rng: &mut Rng, dt: DType, qs: &[usize], ks: &[usize], causal: bool, gqa: bool, node_has: &str) {
    let what = format!("{dt:?} q{qs:?} k{ks:?} causal {causal} gqa {gqa}");
    let (q, k, v) = (rnd(rng, qs, dt), rnd(rng, ks, dt), rnd(rng, ks, dt));
    let go = rnd(rng, qs, dt);
    // the GPU flash path
    let leaf = |t: &Tensor| t.to_device(GPU).unwrap().requires_grad_(true).unwrap();
    let (qg, kg, vg) = (leaf(&q), leaf(&k), leaf(&v));
    let y = nn::scaled_dot_product_attention(&qg, &kg, &vg, None, 0.0, causal, None, gqa).unwrap();
    let node = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    match node_has.strip_prefix('!') {
        Some(not) => assert!(!node.contains(not), "{what}: took {node}, expected another path"),
        None => assert!(node.contains(node_has), "{what}: took {node}, not the {node_has} path"),
    }
    y.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
    // the f64 composite on the CPU
    let leaf64 = |t: &Tensor| t.to_dtype(DType::F64).unwrap().requires_grad_(true).unwrap();
    let (q64, k64, v64) = (leaf64(&q), leaf64(&k), leaf64(&v));
    let y64 = nn::scaled_dot_product_attention(&q64, &k64, &v64, None, 0.0, causal, None, gqa).unwrap();
    y64.backward_with(Some(&go.to_dtype(DType::F64).unwrap()), false, false).unwrap();
    let ey = rel_err(&format!("{what}: output"), &y.detach(), &y64.detach());
    assert!(ey <= tol(dt), "{what}: output error {ey}");
    for (name, g, w) in [("dq", &qg, &q64), ("dk", &kg, &k64), ("dv", &vg, &v64)] {
        let (g, w) = (g.grad().unwrap(), w.grad().unwrap());
        assert_eq!(g.dtype(), dt, "{what}: {name} dtype");
        assert_eq!(g.device(), GPU, "{what}: {name} device");
        let e = rel_err(&format!("{what}: {name}"), &g, &w);
        assert!(e <= tol(dt), "{what}: {name} error {e} > {}", tol(dt));
    }
}

#[test]
fn flash_backward_matches_composite() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    // the scalar kernels too (by default small float32 cases take the composite, which is faster)
    set_scalar_backward_min_scores(0);
    let mut rng = Rng::new(41);
    for dt in [DType::BF16, DType::F16, DType::F32] {
        for (qs, ks, gqa) in [
            (vec![2usize, 3, 64, 64], vec![2usize, 3, 64, 64], false),
            (vec![2, 2, 77, 64], vec![2, 2, 130, 64], false),
            (vec![1, 8, 65, 128], vec![1, 2, 65, 128], true),
            (vec![2, 4, 150, 128], vec![2, 4, 33, 128], false),
            (vec![3, 17, 40], vec![3, 29, 40], false),
            (vec![2, 6, 50, 40], vec![2, 3, 50, 40], true),
            (vec![9, 16], vec![9, 16], false),
            (vec![1, 1, 1, 64], vec![1, 1, 1, 64], false),
        ] {
            for causal in [false, true] {
                case(&mut rng, dt, &qs, &ks, causal, gqa);
            }
        }
    }
}

#[test]
fn flash_backward_long_causal() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    set_scalar_backward_min_scores(0);
    let mut rng = Rng::new(42);
    // many key tiles per query tile and the causal skip of whole tiles
    case(&mut rng, DType::BF16, &[1, 2, 1000, 64], &[1, 2, 1000, 64], true, false);
    case(&mut rng, DType::F16, &[1, 4, 700, 128], &[1, 2, 700, 128], true, true);
    case(&mut rng, DType::F32, &[1, 2, 333, 64], &[1, 2, 333, 64], true, false);
}

#[test]
fn flash_backward_many_blocks_longest_first() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    let mut rng = Rng::new(43);
    // several key and query tiles over several heads and batches: the tensor-core kernels take
    // their blocks in another order than the grid's (longest first), and the row sums
    // (delta = rowsum(dO * O)) 16 bytes a load; odd lengths leave partial tiles
    for dt in [DType::BF16, DType::F16] {
        case(&mut rng, dt, &[3, 6, 200, 64], &[3, 2, 200, 64], true, true);
        case(&mut rng, dt, &[2, 5, 131, 64], &[2, 5, 259, 64], true, false);
        case(&mut rng, dt, &[2, 3, 190, 128], &[2, 3, 190, 128], true, false);
        case(&mut rng, dt, &[3, 4, 97, 128], &[3, 2, 161, 128], false, true);
    }
}

#[test]
fn flash_forward_with_grad_equals_without() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    // the flash path for float32 too (by default small float32 cases with autograd take the composite)
    set_scalar_backward_min_scores(0);
    let mut rng = Rng::new(43);
    for dt in [DType::BF16, DType::F32] {
        let (q, k, v) = (rnd(&mut rng, &[2, 4, 70, 64], dt), rnd(&mut rng, &[2, 4, 70, 64], dt), rnd(&mut rng, &[2, 4, 70, 64], dt));
        let (q, k, v) = (q.to_device(GPU).unwrap(), k.to_device(GPU).unwrap(), v.to_device(GPU).unwrap());
        let plain = nn::scaled_dot_product_attention(&q, &k, &v, None, 0.0, true, None, false).unwrap();
        let qg = q.requires_grad_(true).unwrap();
        let with = nn::scaled_dot_product_attention(&qg, &k, &v, None, 0.0, true, None, false).unwrap();
        assert_eq!(plain.to_f64_vec().unwrap(), with.detach().to_f64_vec().unwrap(), "{dt:?}: the lse output changed the result");
    }
}

#[test]
fn flash_double_backward_uses_the_composite() {
    if gpu().is_none() {
        return;
    }
    // d/dq of sum(grad_q(sdpa) * w): needs the gradient's own graph (create_graph)
    let mut rng = Rng::new(44);
    let dt = DType::F32;
    let (q, k, v) = (rnd(&mut rng, &[1, 2, 9, 16], dt), rnd(&mut rng, &[1, 2, 9, 16], dt), rnd(&mut rng, &[1, 2, 9, 16], dt));
    let w = rnd(&mut rng, &[1, 2, 9, 16], dt);
    let run = |dev: Device| -> Vec<f64> {
        let qd = q.to_device(dev).unwrap().requires_grad_(true).unwrap();
        let (kd, vd, wd) = (k.to_device(dev).unwrap(), v.to_device(dev).unwrap(), w.to_device(dev).unwrap());
        let y = nn::scaled_dot_product_attention(&qd, &kd, &vd, None, 0.0, true, None, false).unwrap();
        let gq = magpie_core::autograd::grad(&[y.sum().unwrap()], std::slice::from_ref(&qd), &[], true, true, false).unwrap();
        let gq = gq[0].clone().unwrap();
        let z = gq.mul(&wd).unwrap().sum().unwrap();
        let g2 = magpie_core::autograd::grad(&[z], &[qd], &[], false, false, false).unwrap();
        g2[0].clone().unwrap().to_f64_vec().unwrap()
    };
    let (g, c) = (run(GPU), run(Device::Cpu));
    let amax = c.iter().fold(0.0f64, |a, x| a.max(x.abs())).max(1e-6);
    for i in 0..c.len() {
        assert!((g[i] - c[i]).abs() <= 1e-4 * amax, "double backward element {i}: gpu {} cpu {}", g[i], c[i]);
    }
}

#[test]
fn composite_causal_softmax_on_cuda_matches() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    // float32 with autograd below the threshold: the composite, whose causal softmax runs inside
    // the softmax kernel on CUDA
    set_scalar_backward_min_scores(usize::MAX);
    // and with the tiled float32 kernels off (on, float32 takes them at every size)
    magpie_core::backend::cuda::attention_f32::set_enabled(false);
    let mut rng = Rng::new(45);
    for (qs, ks) in [(vec![2usize, 3, 37, 64], vec![2usize, 3, 37, 64]), (vec![1, 2, 70, 40], vec![1, 2, 33, 40]), (vec![1, 2, 20, 16], vec![1, 2, 50, 16])] {
        case_on(&mut rng, DType::F32, &qs, &ks, true, false, "!Flash");
        case_on(&mut rng, DType::BF16, &qs, &ks, true, false, if qs[3] == 64 { "FlashAttentionForCuda" } else { "!Flash" });
    }
    magpie_core::backend::cuda::attention_f32::set_enabled(true);
    set_scalar_backward_min_scores(1 << 26);
}

/// Heads as GPT-2 makes them from one fused projection (`qkv.split(C, 2)`, each viewed as
/// `[B, S, H, E]` and transposed to `[B, H, S, E]`), attention, heads merged back
/// (`transpose(1, 2).reshape(B, S, C)`): the output and the gradient of the fused `[B, S, 3C]`
/// input against the f64 composite on the CPU. On the GPU the flash kernels read the strided heads
/// in place, write the output in `[B, S, H, E]` memory (so the merge is a view) and the three
/// gradients into one buffer in the layout of the fused input (so the split's backward is a view).
fn packed_case(rng: &mut Rng, dt: DType, (b, s, h, e): (usize, usize, usize, usize), causal: bool) {
    let what = format!("packed {dt:?} b{b} s{s} h{h} e{e} causal {causal}");
    let c = h * e;
    let x = rnd(rng, &[b, s, 3 * c], dt);
    let go = rnd(rng, &[b, s, c], dt);
    let run = |x: &Tensor| -> (Tensor, Tensor) {
        let (bi, si, hi, ei, ci) = (b as i64, s as i64, h as i64, e as i64, c as i64);
        let parts = x.split(ci, 2).unwrap();
        let heads = |t: &Tensor| t.reshape(&[bi, si, hi, ei]).unwrap().transpose(1, 2).unwrap();
        let y = nn::scaled_dot_product_attention(&heads(&parts[0]), &heads(&parts[1]), &heads(&parts[2]), None, 0.0, causal, None, false).unwrap();
        let merged = y.transpose(1, 2).unwrap().reshape(&[bi, si, ci]).unwrap();
        (y, merged)
    };
    let xg = x.to_device(GPU).unwrap().requires_grad_(true).unwrap();
    let (y, merged) = run(&xg);
    let node = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    assert!(node.contains("FlashAttentionForCuda"), "{what}: took {node}");
    assert!(y.transpose(1, 2).unwrap().is_contiguous(), "{what}: the output is not in [B, S, H, E] memory (strides {:?})", y.strides());
    merged.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
    let x64 = x.to_dtype(DType::F64).unwrap().requires_grad_(true).unwrap();
    let (_, merged64) = run(&x64);
    merged64.backward_with(Some(&go.to_dtype(DType::F64).unwrap()), false, false).unwrap();
    let ey = rel_err(&format!("{what}: output"), &merged.detach(), &merged64.detach());
    assert!(ey <= tol(dt), "{what}: output error {ey}");
    let gx = xg.grad().unwrap();
    assert_eq!(gx.dtype(), dt, "{what}: grad dtype");
    let eg = rel_err(&format!("{what}: grad"), &gx, &x64.grad().unwrap());
    assert!(eg <= tol(dt), "{what}: grad error {eg} > {}", tol(dt));
}

#[test]
fn flash_strided_heads_of_a_fused_projection() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    set_scalar_backward_min_scores(0);
    let mut rng = Rng::new(46);
    for dt in [DType::BF16, DType::F16, DType::F32] {
        for shape in [(2usize, 77usize, 3usize, 64usize), (1, 130, 2, 128), (2, 33, 3, 40)] {
            for causal in [false, true] {
                packed_case(&mut rng, dt, shape, causal);
            }
        }
    }
    set_scalar_backward_min_scores(1 << 26);
}

/// Separate `[B, S, H, E]` tensors viewed as `[B, H, S, E]` (transposed, not packed), GQA: the
/// gradients of the leaves against the f64 composite on the CPU.
#[test]
fn flash_transposed_heads_with_gqa() {
    if gpu().is_none() {
        return;
    }
    let _g = lock();
    set_scalar_backward_min_scores(0);
    let mut rng = Rng::new(47);
    for dt in [DType::BF16, DType::F32] {
        let (b, s, h, hk, e) = (2usize, 45usize, 4usize, 2usize, 64usize);
        let (q, k, v) = (rnd(&mut rng, &[b, s, h, e], dt), rnd(&mut rng, &[b, s, hk, e], dt), rnd(&mut rng, &[b, s, hk, e], dt));
        let go = rnd(&mut rng, &[b, h, s, e], dt);
        let run = |q: &Tensor, k: &Tensor, v: &Tensor| {
            let t = |x: &Tensor| x.transpose(1, 2).unwrap();
            nn::scaled_dot_product_attention(&t(q), &t(k), &t(v), None, 0.0, true, None, true).unwrap()
        };
        let leaf = |t: &Tensor| t.to_device(GPU).unwrap().requires_grad_(true).unwrap();
        let (qg, kg, vg) = (leaf(&q), leaf(&k), leaf(&v));
        let y = run(&qg, &kg, &vg);
        assert!(y.transpose(1, 2).unwrap().is_contiguous(), "{dt:?}: output strides {:?}", y.strides());
        y.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
        let leaf64 = |t: &Tensor| t.to_dtype(DType::F64).unwrap().requires_grad_(true).unwrap();
        let (q64, k64, v64) = (leaf64(&q), leaf64(&k), leaf64(&v));
        let y64 = run(&q64, &k64, &v64);
        y64.backward_with(Some(&go.to_dtype(DType::F64).unwrap()), false, false).unwrap();
        let ey = rel_err(&format!("{dt:?} transposed gqa: output"), &y.detach(), &y64.detach());
        assert!(ey <= tol(dt), "{dt:?} transposed gqa: output error {ey}");
        for (name, g, w) in [("dq", &qg, &q64), ("dk", &kg, &k64), ("dv", &vg, &v64)] {
            let e = rel_err(&format!("{dt:?} transposed gqa: {name}"), &g.grad().unwrap(), &w.grad().unwrap());
            assert!(e <= tol(dt), "{dt:?} transposed gqa: {name} error {e}");
        }
    }
    set_scalar_backward_min_scores(1 << 26);
}

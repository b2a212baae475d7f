//! The register-tiled float32 flash attention (`backend::cuda::attention_f32`, reached through
//! `scaled_dot_product_attention` on float32 CUDA tensors): output and dq/dk/dv against the f64
//! composite on the CPU (head dims 16/33/64/80/100/128, odd lengths, causal and not, GQA) and
//! against the float32 composite on the GPU at lengths up to 1000; strided and misaligned views
//! (the kernels' scalar-load path); the inference forward; the dispatch at the GPT's shape. The
//! host-side tile arithmetic is checked without a GPU. GPU tests skip without CUDA unless
//! MAGPIE_REQUIRE_CUDA=1.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda::attention_f32::{applies, padded_head_dim, smem_bytes, MAX_TILED_HEAD_DIM};
use magpie_core::ops::nn;
use magpie_core::{DType, Device, Tensor};
use util::{gpu, Rng};

const GPU: Device = Device::Cuda(0);

fn rnd(rng: &mut Rng, shape: &[usize]) -> Tensor {
    util::rand(rng, shape, DType::F32, -1.0, 1.0)
}

/// Max |got - want| over max |want| (elementwise, after checking shapes; every value finite).
#[track_caller]
fn rel_err(what: &str, got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    let amax = w.iter().fold(0.0f64, |a, x| a.max(x.abs())).max(1e-3);
    let mut worst = 0.0f64;
    for i in 0..w.len() {
        assert!(g[i].is_finite(), "{what}: element {i} is {}", g[i]);
        worst = worst.max((g[i] - w[i]).abs() / amax);
    }
    worst
}

const TOL: f64 = 1e-4;

/// Output and gradients of the GPU flash path for leaves q, k, v (CPU tensors) and output gradient go.
fn gpu_flash(q: &Tensor, k: &Tensor, v: &Tensor, go: &Tensor, causal: bool, gqa: bool, what: &str) -> [Tensor; 4] {
    let leaf = |t: &Tensor| t.to_device(GPU).unwrap().requires_grad_(true).unwrap();
    let (qg, kg, vg) = (leaf(q), leaf(k), leaf(v));
    let y = nn::scaled_dot_product_attention(&qg, &kg, &vg, None, 0.0, causal, None, gqa).unwrap();
    let node = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    assert!(node.contains("FlashAttentionForCuda"), "{what}: took {node}, not the flash path");
    y.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
    [y.detach(), qg.grad().unwrap(), kg.grad().unwrap(), vg.grad().unwrap()]
}

/// The same by the f64 composite on the CPU.
fn cpu_composite(q: &Tensor, k: &Tensor, v: &Tensor, go: &Tensor, causal: bool, gqa: bool) -> [Tensor; 4] {
    let leaf = |t: &Tensor| t.to_dtype(DType::F64).unwrap().requires_grad_(true).unwrap();
    let (q, k, v) = (leaf(q), leaf(k), leaf(v));
    let y = nn::scaled_dot_product_attention(&q, &k, &v, None, 0.0, causal, None, gqa).unwrap();
    y.backward_with(Some(&go.to_dtype(DType::F64).unwrap()), false, false).unwrap();
    [y.detach(), q.grad().unwrap(), k.grad().unwrap(), v.grad().unwrap()]
}

#[track_caller]
fn compare(what: &str, got: &[Tensor; 4], want: &[Tensor; 4]) {
    for (i, name) in ["output", "dq", "dk", "dv"].iter().enumerate() {
        assert_eq!(got[i].dtype(), DType::F32, "{what}: {name} dtype");
        let e = rel_err(&format!("{what}: {name}"), &got[i], &want[i]);
        assert!(e <= TOL, "{what}: {name} error {e} > {TOL}");
    }
}

#[test]
fn tiled_f32_matches_f64_composite() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(141);
    // (q shape, k shape, gqa): head dims 16, 33 (no float4 loads), 64, 80, 100, 128; lengths across
    // the 64-row and 32-row tile edges; q_len != kv_len both ways; GQA groups of 2 and 3
    let cases: [(Vec<usize>, Vec<usize>, bool); 10] = [
        (vec![2, 3, 64, 64], vec![2, 3, 64, 64], false),
        (vec![1, 2, 1, 64], vec![1, 2, 1, 64], false),
        (vec![2, 2, 77, 64], vec![2, 2, 130, 64], false),
        (vec![1, 6, 129, 64], vec![1, 2, 129, 64], true),
        (vec![1, 2, 150, 128], vec![1, 2, 33, 128], false),
        (vec![1, 4, 65, 128], vec![1, 2, 65, 128], true),
        (vec![2, 2, 63, 80], vec![2, 2, 97, 80], false),
        (vec![3, 17, 16], vec![3, 29, 16], false),
        (vec![1, 2, 45, 33], vec![1, 2, 70, 33], false),
        (vec![1, 3, 31, 100], vec![1, 1, 31, 100], true),
    ];
    for (qs, ks, gqa) in cases {
        for causal in [false, true] {
            let what = format!("q{qs:?} k{ks:?} causal {causal} gqa {gqa}");
            let (q, k, v, go) = (rnd(&mut rng, &qs), rnd(&mut rng, &ks), rnd(&mut rng, &ks), rnd(&mut rng, &qs));
            let got = gpu_flash(&q, &k, &v, &go, causal, gqa, &what);
            compare(&what, &got, &cpu_composite(&q, &k, &v, &go, causal, gqa));
        }
    }
}

/// Long sequences (many key tiles per query tile, the causal skip of whole tiles) against the
/// float32 composite on the GPU (an explicit float mask sends `scaled_dot_product_attention` there).
#[test]
fn tiled_f32_long_matches_gpu_composite() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(142);
    for (qs, ks, gqa) in [
        (vec![1usize, 2, 1000, 64], vec![1usize, 2, 1000, 64], false),
        (vec![1, 4, 999, 128], vec![1, 2, 999, 128], true),
        (vec![2, 2, 257, 80], vec![2, 2, 513, 80], false),
        (vec![1, 2, 700, 16], vec![1, 2, 700, 16], false),
    ] {
        for causal in [false, true] {
            let what = format!("long q{qs:?} k{ks:?} causal {causal} gqa {gqa}");
            let (q, k, v, go) = (rnd(&mut rng, &qs), rnd(&mut rng, &ks), rnd(&mut rng, &ks), rnd(&mut rng, &qs));
            let got = gpu_flash(&q, &k, &v, &go, causal, gqa, &what);
            let (l, s) = (qs[2], ks[2]);
            let mut mask = Tensor::zeros_on(&[l, s], DType::F32, Device::Cpu).unwrap();
            if causal {
                let keep = Tensor::ones_on(&[l, s], DType::Bool, Device::Cpu).unwrap().tril(0).unwrap();
                mask = mask.masked_fill(&keep.logical_not().unwrap(), f64::NEG_INFINITY).unwrap();
            }
            let mask = mask.to_device(GPU).unwrap();
            let leaf = |t: &Tensor| t.to_device(GPU).unwrap().requires_grad_(true).unwrap();
            let (qc, kc, vc) = (leaf(&q), leaf(&k), leaf(&v));
            let y = nn::scaled_dot_product_attention(&qc, &kc, &vc, Some(&mask), 0.0, false, None, gqa).unwrap();
            let node = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
            assert!(!node.contains("Flash"), "{what}: the reference took {node}");
            y.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
            compare(&what, &got, &[y.detach(), qc.grad().unwrap(), kc.grad().unwrap(), vc.grad().unwrap()]);
        }
    }
}

/// q, k, v as views of wider rows (`x[..., 1:E+1]` of `[B, H, S, E+1]`): row strides and base
/// addresses that are not 16-byte aligned, so the kernels load element by element.
#[test]
fn tiled_f32_misaligned_views() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(143);
    for (b, h, l, e) in [(2usize, 3usize, 70usize, 64usize), (1, 2, 129, 128), (1, 2, 40, 20)] {
        for causal in [false, true] {
            let what = format!("misaligned b{b} h{h} l{l} e{e} causal {causal}");
            let wide = |rng: &mut Rng| rnd(rng, &[b, h, l, e + 1]);
            let (qw, kw, vw) = (wide(&mut rng), wide(&mut rng), wide(&mut rng));
            let go = rnd(&mut rng, &[b, h, l, e]);
            let leaf = |t: &Tensor| t.to_device(GPU).unwrap().requires_grad_(true).unwrap();
            let (qg, kg, vg) = (leaf(&qw), leaf(&kw), leaf(&vw));
            let cut = |t: &Tensor| t.narrow(3, 1, e as i64).unwrap();
            let y = nn::scaled_dot_product_attention(&cut(&qg), &cut(&kg), &cut(&vg), None, 0.0, causal, None, false).unwrap();
            let node = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
            assert!(node.contains("FlashAttentionForCuda"), "{what}: took {node}");
            y.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
            let got = [y.detach(), cut(&qg.grad().unwrap()), cut(&kg.grad().unwrap()), cut(&vg.grad().unwrap())];
            let (q, k, v) = (cut(&qw).contiguous().unwrap(), cut(&kw).contiguous().unwrap(), cut(&vw).contiguous().unwrap());
            compare(&what, &got, &cpu_composite(&q, &k, &v, &go, causal, false));
        }
    }
}

/// Without autograd (no log-sum-exp saved): the same output as with it, and the f64 composite's.
#[test]
fn tiled_f32_inference_forward() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(144);
    for (qs, ks) in [(vec![2usize, 4, 100, 64], vec![2usize, 4, 100, 64]), (vec![1, 2, 33, 128], vec![1, 2, 90, 128]), (vec![1, 1, 5, 24], vec![1, 1, 5, 24])] {
        for causal in [false, true] {
            let what = format!("inference q{qs:?} k{ks:?} causal {causal}");
            let (q, k, v) = (rnd(&mut rng, &qs), rnd(&mut rng, &ks), rnd(&mut rng, &ks));
            let (qd, kd, vd) = (q.to_device(GPU).unwrap(), k.to_device(GPU).unwrap(), v.to_device(GPU).unwrap());
            let plain = nn::scaled_dot_product_attention(&qd, &kd, &vd, None, 0.0, causal, None, false).unwrap();
            let qg = qd.requires_grad_(true).unwrap();
            let with = nn::scaled_dot_product_attention(&qg, &kd, &vd, None, 0.0, causal, None, false).unwrap();
            assert_eq!(plain.to_f64_vec().unwrap(), with.detach().to_f64_vec().unwrap(), "{what}: the lse output changed the result");
            let (q64, k64, v64) = (q.to_dtype(DType::F64).unwrap(), k.to_dtype(DType::F64).unwrap(), v.to_dtype(DType::F64).unwrap());
            let want = nn::scaled_dot_product_attention(&q64, &k64, &v64, None, 0.0, causal, None, false).unwrap();
            let e = rel_err(&what, &plain, &want);
            assert!(e <= TOL, "{what}: error {e}");
        }
    }
}

/// The GPT's attention (6 heads of 64 from one fused `[B, S, 3C]` projection, causal) takes the
/// tiled kernels at its size with the default thresholds, reading the strided heads in place.
#[test]
fn tiled_f32_taken_for_gpt_heads() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(145);
    let (b, s, h, e) = (2usize, 256usize, 6usize, 64usize);
    let c = h * e;
    let x = rnd(&mut rng, &[b, s, 3 * c]);
    let go = rnd(&mut rng, &[b, s, c]);
    let run = |x: &Tensor| -> (Tensor, Tensor) {
        let (bi, si, hi, ei, ci) = (b as i64, s as i64, h as i64, e as i64, c as i64);
        let parts = x.split(ci, 2).unwrap();
        let heads = |t: &Tensor| t.reshape(&[bi, si, hi, ei]).unwrap().transpose(1, 2).unwrap();
        let y = nn::scaled_dot_product_attention(&heads(&parts[0]), &heads(&parts[1]), &heads(&parts[2]), None, 0.0, true, None, false).unwrap();
        let merged = y.transpose(1, 2).unwrap().reshape(&[bi, si, ci]).unwrap();
        (y, merged)
    };
    let xg = x.to_device(GPU).unwrap().requires_grad_(true).unwrap();
    let (y, merged) = run(&xg);
    let node = y.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    assert!(node.contains("FlashAttentionForCuda"), "gpt heads: took {node}");
    merged.backward_with(Some(&go.to_device(GPU).unwrap()), false, false).unwrap();
    let x64 = x.to_dtype(DType::F64).unwrap().requires_grad_(true).unwrap();
    let (_, merged64) = run(&x64);
    merged64.backward_with(Some(&go.to_dtype(DType::F64).unwrap()), false, false).unwrap();
    let ey = rel_err("gpt heads: output", &merged.detach(), &merged64.detach());
    assert!(ey <= TOL, "gpt heads: output error {ey}");
    let eg = rel_err("gpt heads: grad", &xg.grad().unwrap(), &x64.grad().unwrap());
    assert!(eg <= TOL, "gpt heads: grad error {eg}");
}

/// Host logic, no GPU: the padded head dims, shared memory within the 227 KiB a block may take
/// on sm_80/sm_90, and which params the tiled kernels take.
#[test]
fn tiled_f32_host_arithmetic() {
    use magpie_core::backend::cuda::attention::{Causal, FlashParams};
    for d in 1..=MAX_TILED_HEAD_DIM {
        let dp = padded_head_dim(d);
        assert!(dp >= d && [32, 64, 128].contains(&dp), "head_dim {d} padded to {dp}");
        assert!(dp == 32 || d > dp / 2, "head_dim {d}: {dp} is not the smallest");
    }
    for dp in [32, 64, 128] {
        for k in ["fwd", "kv", "q"] {
            assert!(smem_bytes(k, dp) <= 227 * 1024, "{k} d{dp}: {} bytes", smem_bytes(k, dp));
        }
    }
    // the forward of d64 fits three blocks per multiprocessor (228 KiB, 1 KiB reserved per block)
    assert!(3 * (smem_bytes("fwd", 64) + 1024) <= 228 * 1024);
    let p = FlashParams { dtype: DType::F32, batch: 1, n_heads: 4, n_kv_heads: 2, head_dim: 80, q_len: 7, kv_len: 9, scale: 0.1, causal: Causal::None };
    assert!(applies(&p));
    assert!(!applies(&FlashParams { head_dim: 129, ..p }));
    assert!(!applies(&FlashParams { dtype: DType::BF16, ..p }));
    assert!(!applies(&FlashParams { dtype: DType::F16, ..p }));
}

//! Flash attention on CUDA (`backend::cuda::attention`): `flash_forward` and `flash_decode` against
//! an f64 reference computed on the CPU from the same (rounded) inputs, over f32/f16/bf16, head
//! dims 64/128/40, odd lengths, the three causal modes, GQA, per-sequence key counts and strided
//! (token-major) operands; a long sequence checked on sampled rows; the `scaled_dot_product_attention`
//! hook against the composite; parameter errors. Skipped without CUDA unless MAGPIE_REQUIRE_CUDA=1.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cuda::attention::{decode_workspace_bytes, flash_decode, flash_forward, flash_forward_lse, reset_tc_variants, set_tc_variant_d128, set_tc_variant_d64, tc_kernel_name, AttnOperand, Causal, DecodeParams, FlashParams, TC_D64_VARIANTS};
use magpie_core::backend::cuda::device::{device, CudaDevice};
use magpie_core::backend::cuda::kern::elem_ptr;
use magpie_core::ops::nn;
use magpie_core::{DType, Device, Tensor};
use std::sync::Arc;
use util::{gpu, Rng};

const GPU: Device = Device::Cuda(0);

/// Held by the tests that switch the (process-wide) tensor-core kernel variant.
static VARIANTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn dev() -> Arc<CudaDevice> {
    device("test", 0).unwrap()
}

/// Values in [-1, 1) of `n` elements, rounded to `dt` (returned as the rounded f64 values).
fn data(rng: &mut Rng, n: usize, dt: DType, amp: f64) -> Vec<f64> {
    let v: Vec<f64> = (0..n).map(|_| rng.uniform(-amp, amp)).collect();
    Tensor::from_vec(v, &[n]).unwrap().to_dtype(dt).unwrap().to_f64_vec().unwrap()
}

/// A device tensor holding logical `[b, h, s, d]` values, stored head-major (`[b, h, s, d]`) or
/// token-major (`[b, s, h, d]`), and its operand.
fn upload(vals: &[f64], b: usize, h: usize, s: usize, d: usize, token_major: bool, dt: DType) -> (Tensor, AttnOperand) {
    let t = Tensor::from_vec(vals.to_vec(), &[b, h, s, d]).unwrap().to_dtype(dt).unwrap();
    if token_major {
        let t = t.permute(&[0, 2, 1, 3]).unwrap().contiguous().unwrap().to_device(GPU).unwrap();
        let ptr = elem_ptr("test", &t).unwrap().0;
        (t, AttnOperand { ptr, sb: (s * h * d) as i64, sh: d as i64, ss: (h * d) as i64 })
    } else {
        let t = t.to_device(GPU).unwrap();
        let ptr = elem_ptr("test", &t).unwrap().0;
        (t, AttnOperand { ptr, sb: (h * s * d) as i64, sh: (s * d) as i64, ss: d as i64 })
    }
}

/// The logical `[b, h, s, d]` values of a tensor made by [`upload`] (or allocated the same way).
fn download(t: &Tensor, token_major: bool) -> Vec<f64> {
    let t = t.to_device(Device::Cpu).unwrap();
    let t = if token_major { t.permute(&[0, 2, 1, 3]).unwrap().contiguous().unwrap() } else { t };
    t.to_f64_vec().unwrap()
}

fn zeros_dev(b: usize, h: usize, s: usize, d: usize, token_major: bool, dt: DType) -> (Tensor, AttnOperand) {
    // NaN-filled, so that an output element the kernel forgets to write is caught
    upload(&vec![f64::NAN; b * h * s * d], b, h, s, d, token_major, dt)
}

struct Shape {
    b: usize,
    h: usize,
    kvh: usize,
    d: usize,
    lq: usize,
    lk: usize,
}

/// Output rows `rows` (None: all) of attention in f64; `kvl[b]` keys per sequence.
fn reference(q: &[f64], k: &[f64], v: &[f64], s: &Shape, scale: f64, causal: Causal, kvl: &[usize], rows: Option<&[usize]>) -> Vec<(usize, usize, usize, Vec<f64>)> {
    let all: Vec<usize> = (0..s.lq).collect();
    let rows = rows.unwrap_or(&all);
    let mut out = Vec::new();
    for b in 0..s.b {
        for h in 0..s.h {
            let kh = h / (s.h / s.kvh);
            for &i in rows {
                let n = kvl[b];
                let lim = match causal {
                    Causal::None => n as i64,
                    Causal::TopLeft => (n as i64).min(i as i64 + 1),
                    Causal::BottomRight => (n as i64).min(n as i64 - s.lq as i64 + i as i64 + 1),
                }
                .max(0) as usize;
                let qo = ((b * s.h + h) * s.lq + i) * s.d;
                let mut sc = Vec::with_capacity(lim);
                for j in 0..lim {
                    let ko = ((b * s.kvh + kh) * s.lk + j) * s.d;
                    sc.push((0..s.d).map(|e| q[qo + e] * k[ko + e]).sum::<f64>() * scale);
                }
                let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = sc.iter().map(|x| (x - mx).exp()).collect();
                let z: f64 = w.iter().sum();
                let mut o = vec![0.0; s.d];
                for (j, wj) in w.iter().enumerate() {
                    let vo = ((b * s.kvh + kh) * s.lk + j) * s.d;
                    for e in 0..s.d {
                        o[e] += wj / z * v[vo + e];
                    }
                }
                out.push((b, h, i, o));
            }
        }
    }
    out
}

fn tol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 1e-4,
        _ => 2e-2,
    }
}

/// Checks `got` (logical `[b, h, lq, d]`) against reference rows: max error <= tol * max |ref|.
#[track_caller]
fn check(what: &str, got: &[f64], want: &[(usize, usize, usize, Vec<f64>)], s: &Shape, dt: DType) {
    let amax = want.iter().flat_map(|r| r.3.iter()).fold(0.0f64, |a, x| a.max(x.abs())).max(1e-3);
    let mut worst = 0.0f64;
    for (b, h, i, o) in want {
        let base = ((b * s.h + h) * s.lq + i) * s.d;
        for e in 0..s.d {
            let g = got[base + e];
            let err = (g - o[e]).abs();
            assert!(err.is_finite(), "{what}: (b {b}, h {h}, row {i}, d {e}) got {g}, want {}", o[e]);
            worst = worst.max(err);
            assert!(err <= tol(dt) * amax, "{what}: (b {b}, h {h}, row {i}, d {e}) got {g}, want {} (max |ref| {amax})", o[e]);
        }
    }
    eprintln!("{what}: max error {worst:.2e} (max |ref| {amax:.3})");
}

#[allow(clippy::too_many_arguments)]
fn run_case(rng: &mut Rng, dt: DType, s: &Shape, causal: Causal, kvl: Option<&[usize]>, token_major: bool, sample: Option<&[usize]>) {
    let d = dev();
    let what = format!("{dt:?} b{} h{}/{} d{} lq{} lk{} {causal:?} kvl {kvl:?} token_major {token_major}", s.b, s.h, s.kvh, s.d, s.lq, s.lk);
    let q = data(rng, s.b * s.h * s.lq * s.d, dt, 1.0);
    let k = data(rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
    let v = data(rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
    let (_tq, oq) = upload(&q, s.b, s.h, s.lq, s.d, token_major, dt);
    let (_tk, ok) = upload(&k, s.b, s.kvh, s.lk, s.d, token_major, dt);
    let (_tv, ov) = upload(&v, s.b, s.kvh, s.lk, s.d, token_major, dt);
    let (to, oo) = zeros_dev(s.b, s.h, s.lq, s.d, token_major, dt);
    let full = vec![s.lk; s.b];
    let lens = kvl.unwrap_or(&full);
    let lens_t = kvl.map(|l| Tensor::from_vec(l.iter().map(|&x| x as i32).collect::<Vec<i32>>(), &[s.b]).unwrap().to_device(GPU).unwrap());
    let lens_ptr = lens_t.as_ref().map(|t| elem_ptr("test", t).unwrap().0);
    let scale = 1.0 / (s.d as f64).sqrt();
    let p = FlashParams { dtype: dt, batch: s.b, n_heads: s.h, n_kv_heads: s.kvh, head_dim: s.d, q_len: s.lq, kv_len: s.lk, scale: scale as f32, causal };
    flash_forward(&d, &p, oq, ok, ov, oo, lens_ptr).unwrap();
    let got = download(&to, token_major);
    let want = reference(&q, &k, &v, s, scale, causal, lens, sample);
    check(&what, &got, &want, s, dt);
}

#[test]
fn flash_forward_matches_reference() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(1);
    let lens: [(usize, usize); 7] = [(1, 1), (7, 7), (63, 65), (65, 63), (129, 129), (1, 200), (200, 17)];
    for dt in [DType::BF16, DType::F16, DType::F32] {
        for d in [64, 128, 40] {
            for &(lq, lk) in &lens {
                for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                    let s = Shape { b: 1, h: 2, kvh: 1, d, lq, lk };
                    run_case(&mut rng, dt, &s, causal, None, false, None);
                }
            }
        }
    }
}

/// Every variant of the tensor-core kernels (the defaults are covered everywhere else), each shape's
/// inputs and reference computed once for all of them.
#[test]
fn flash_forward_tc_variants() {
    if gpu().is_none() {
        return;
    }
    let _guard = VARIANTS.lock().unwrap_or_else(|e| e.into_inner());
    let d = dev();
    let mut rng = Rng::new(7);
    for (hd, variants, lens) in [(64usize, TC_D64_VARIANTS, &[(1usize, 1usize), (63, 65), (129, 129), (200, 17), (300, 1000)][..]), (128, 4, &[(1, 1), (63, 65), (200, 17), (300, 1000)][..])] {
        for dt in [DType::BF16, DType::F16] {
            for &(lq, lk) in lens {
                for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                    for tm in [false, true] {
                        // amplitude 3: scores spread over more than 2^8, so stale maxima get replaced
                        let amp = if tm { 3.0 } else { 1.0 };
                        let s = Shape { b: 2, h: 4, kvh: 2, d: hd, lq, lk };
                        let q = data(&mut rng, s.b * s.h * s.lq * s.d, dt, amp);
                        let k = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, amp);
                        let v = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
                        let (_tq, oq) = upload(&q, s.b, s.h, s.lq, s.d, tm, dt);
                        let (_tk, ok) = upload(&k, s.b, s.kvh, s.lk, s.d, tm, dt);
                        let (_tv, ov) = upload(&v, s.b, s.kvh, s.lk, s.d, tm, dt);
                        let lens = [lk, lk / 2];
                        let lens_t = Tensor::from_vec(lens.iter().map(|&x| x as i32).collect::<Vec<i32>>(), &[s.b]).unwrap().to_device(GPU).unwrap();
                        let lens_ptr = elem_ptr("test", &lens_t).unwrap().0;
                        let scale = 1.0 / (s.d as f64).sqrt();
                        let want = reference(&q, &k, &v, &s, scale, causal, &lens, None);
                        let p = FlashParams { dtype: dt, batch: s.b, n_heads: s.h, n_kv_heads: s.kvh, head_dim: s.d, q_len: s.lq, kv_len: s.lk, scale: scale as f32, causal };
                        for variant in 0..variants {
                            if hd == 64 {
                                set_tc_variant_d64(variant);
                            } else {
                                set_tc_variant_d128(variant);
                            }
                            let (to, oo) = zeros_dev(s.b, s.h, s.lq, s.d, tm, dt);
                            flash_forward(&d, &p, oq, ok, ov, oo, Some(lens_ptr)).unwrap();
                            let got = download(&to, tm);
                            let what = format!("variant {variant} ({}) {dt:?} d{hd} lq{lq} lk{lk} {causal:?} token_major {tm}", tc_kernel_name(&d, &p));
                            check(&what, &got, &want, &s, dt);
                        }
                    }
                }
            }
        }
    }
    reset_tc_variants();
}

/// The scale-folding variants take the row max of the unscaled scores: with scale <= 0 the host
/// runs the plain kernel instead (a negative scale turns the max into the min).
#[test]
fn flash_forward_tc_variants_nonpositive_scale() {
    if gpu().is_none() {
        return;
    }
    let _guard = VARIANTS.lock().unwrap_or_else(|e| e.into_inner());
    let d = dev();
    let mut rng = Rng::new(11);
    for (hd, variants) in [(64usize, TC_D64_VARIANTS), (128, 4)] {
        for scale in [-0.3f64, 0.0] {
            let s = Shape { b: 1, h: 2, kvh: 1, d: hd, lq: 70, lk: 130 };
            let dt = DType::BF16;
            let q = data(&mut rng, s.b * s.h * s.lq * s.d, dt, 1.0);
            let k = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
            let v = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
            let (_tq, oq) = upload(&q, s.b, s.h, s.lq, s.d, false, dt);
            let (_tk, ok) = upload(&k, s.b, s.kvh, s.lk, s.d, false, dt);
            let (_tv, ov) = upload(&v, s.b, s.kvh, s.lk, s.d, false, dt);
            let want = reference(&q, &k, &v, &s, scale, Causal::TopLeft, &[s.lk], None);
            let p = FlashParams { dtype: dt, batch: s.b, n_heads: s.h, n_kv_heads: s.kvh, head_dim: s.d, q_len: s.lq, kv_len: s.lk, scale: scale as f32, causal: Causal::TopLeft };
            for variant in 0..variants {
                if hd == 64 {
                    set_tc_variant_d64(variant);
                } else {
                    set_tc_variant_d128(variant);
                }
                let (to, oo) = zeros_dev(s.b, s.h, s.lq, s.d, false, dt);
                flash_forward(&d, &p, oq, ok, ov, oo, None).unwrap();
                check(&format!("variant {variant} d{hd} scale {scale}"), &download(&to, false), &want, &s, dt);
            }
        }
    }
    reset_tc_variants();
}

/// The first Hopper (wgmma) variant number of `set_tc_variant_d64`, and how many there are.
const SM90_FIRST: usize = 7;
const SM90_N: usize = TC_D64_VARIANTS - SM90_FIRST;

/// Worst error of `got` against the reference rows, relative to max |ref|.
fn rel_err(got: &[f64], want: &[(usize, usize, usize, Vec<f64>)], s: &Shape) -> f64 {
    let amax = want.iter().flat_map(|r| r.3.iter()).fold(0.0f64, |a, x| a.max(x.abs())).max(1e-3);
    let mut worst = 0.0f64;
    for (b, h, i, o) in want {
        let base = ((b * s.h + h) * s.lq + i) * s.d;
        for e in 0..s.d {
            let err = (got[base + e] - o[e]).abs();
            worst = worst.max(if err.is_finite() { err } else { f64::INFINITY });
        }
    }
    worst / amax
}

/// The Hopper kernels (head_dim-64 variants 7-11, sm_90 only) against the f64 reference and the
/// mma.sync kernel (variant 3) at odd lengths, GQA (4 query heads per kv head), the three causal
/// modes, bf16 and f16: each variant's worst error relative to max |ref| must stay within a bound
/// 2-10x tighter than the other tests' and within 1.5x (plus one f16 ulp) of variant 3's; the
/// log2-sum-exp rows within 1e-3 of variant 3's.
#[test]
fn flash_forward_sm90_matches_reference() {
    if gpu().is_none() {
        return;
    }
    let d = dev();
    if d.arch != (9, 0) {
        eprintln!("skipped: the Hopper kernels need an sm_90 device, this is sm_{}{}", d.arch.0, d.arch.1);
        return;
    }
    let _guard = VARIANTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng::new(17);
    let lens: [(usize, usize); 9] = [(1, 1), (7, 7), (63, 63), (65, 65), (127, 127), (63, 65), (65, 63), (1, 300), (1000, 1000)];
    for dt in [DType::BF16, DType::F16] {
        let bound = if dt == DType::BF16 { 1e-2 } else { 2e-3 };
        for &(lq, lk) in &lens {
            for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                let s = Shape { b: 1, h: 8, kvh: 2, d: 64, lq, lk };
                let q = data(&mut rng, s.b * s.h * s.lq * s.d, dt, 1.5);
                let k = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 1.5);
                let v = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
                let (_tq, oq) = upload(&q, s.b, s.h, s.lq, s.d, false, dt);
                let (_tk, ok) = upload(&k, s.b, s.kvh, s.lk, s.d, false, dt);
                let (_tv, ov) = upload(&v, s.b, s.kvh, s.lk, s.d, false, dt);
                let scale = 1.0 / 8.0;
                let want = reference(&q, &k, &v, &s, scale, causal, &[lk], None);
                let p = FlashParams { dtype: dt, batch: s.b, n_heads: s.h, n_kv_heads: s.kvh, head_dim: s.d, q_len: s.lq, kv_len: s.lk, scale: scale as f32, causal };
                let nl = s.b * s.h * s.lq;
                let run = |variant: usize| {
                    set_tc_variant_d64(variant);
                    let (to, oo) = zeros_dev(s.b, s.h, s.lq, s.d, false, dt);
                    let lse = Tensor::from_vec(vec![f32::NAN; nl], &[nl]).unwrap().to_device(GPU).unwrap();
                    flash_forward_lse(&d, &p, oq, ok, ov, oo, None, Some(elem_ptr("test", &lse).unwrap().0)).unwrap();
                    (download(&to, false), lse.to_device(Device::Cpu).unwrap().to_f64_vec().unwrap(), tc_kernel_name(&d, &p))
                };
                let (old, old_lse, _) = run(3);
                let old_err = rel_err(&old, &want, &s);
                for variant in SM90_FIRST..SM90_FIRST + SM90_N {
                    let (got, lse, name) = run(variant);
                    assert!(name.starts_with("flash_sm90"), "variant {variant} ran {name}");
                    let err = rel_err(&got, &want, &s);
                    let what = format!("{name} {dt:?} lq{lq} lk{lk} {causal:?}");
                    assert!(err <= bound && err <= 1.5 * old_err + 1e-3, "{what}: error {err:.2e} (variant 3: {old_err:.2e})");
                    for (i, (a, w)) in lse.iter().zip(&old_lse).enumerate() {
                        let ok = (a.is_infinite() && a == w) || (a - w).abs() <= 1e-3 * w.abs().max(1.0);
                        assert!(ok, "{what}: lse row {i} {a}, variant 3 {w}");
                    }
                    eprintln!("{what}: error {err:.2e} (variant 3 {old_err:.2e})");
                }
            }
        }
    }
    reset_tc_variants();
}

/// The Hopper kernels over long sequences, every row against variant 3 and sampled rows against
/// the f64 reference: causal top-left over 8191 tokens and a 1000-query chunk at the end of 9000
/// keys (bottom-right), GQA 8 / 2 heads, bf16 and f16, scores spread over more than 2^8.
#[test]
fn flash_forward_sm90_long() {
    if gpu().is_none() {
        return;
    }
    let d = dev();
    if d.arch != (9, 0) {
        eprintln!("skipped: the Hopper kernels need an sm_90 device, this is sm_{}{}", d.arch.0, d.arch.1);
        return;
    }
    let _guard = VARIANTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng::new(19);
    for dt in [DType::BF16, DType::F16] {
        for (lq, lk, causal) in [(8191usize, 8191usize, Causal::TopLeft), (1000, 9000, Causal::BottomRight)] {
            let s = Shape { b: 1, h: 8, kvh: 2, d: 64, lq, lk };
            let q = data(&mut rng, s.b * s.h * s.lq * s.d, dt, 3.0);
            let k = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 3.0);
            let v = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
            let (_tq, oq) = upload(&q, s.b, s.h, s.lq, s.d, false, dt);
            let (_tk, ok) = upload(&k, s.b, s.kvh, s.lk, s.d, false, dt);
            let (_tv, ov) = upload(&v, s.b, s.kvh, s.lk, s.d, false, dt);
            let scale = 0.125;
            let rows = [0usize, 1, 127, 128, 129, 500, lq / 2, lq - 2, lq - 1];
            let want = reference(&q, &k, &v, &s, scale, causal, &[lk], Some(&rows));
            let p = FlashParams { dtype: dt, batch: s.b, n_heads: s.h, n_kv_heads: s.kvh, head_dim: s.d, q_len: s.lq, kv_len: s.lk, scale: scale as f32, causal };
            let run = |variant: usize| {
                set_tc_variant_d64(variant);
                let (to, oo) = zeros_dev(s.b, s.h, s.lq, s.d, false, dt);
                flash_forward(&d, &p, oq, ok, ov, oo, None).unwrap();
                download(&to, false)
            };
            let old = run(3);
            let amax = old.iter().fold(0.0f64, |a, x| a.max(x.abs())).max(1e-3);
            // one 16-bit rounding of the output either way, and of P on different tile boundaries
            let diff_bound = if dt == DType::BF16 { 1e-2 } else { 2e-3 };
            for variant in SM90_FIRST..SM90_FIRST + SM90_N {
                let got = run(variant);
                let what = format!("variant {variant} {dt:?} lq{lq} lk{lk} {causal:?}");
                check(&what, &got, &want, &s, dt);
                let mut worst = 0.0f64;
                for (i, (g, w)) in got.iter().zip(&old).enumerate() {
                    let err = (g - w).abs();
                    assert!(err.is_finite() && err <= diff_bound * amax, "{what}: element {i} got {g}, variant 3 gives {w}");
                    worst = worst.max(err);
                }
                eprintln!("{what}: max difference to variant 3 {worst:.2e} (max |out| {amax:.3})");
            }
        }
    }
    reset_tc_variants();
}

/// Long sequences (every row): each tensor-core variant against variant 2 / 0 (checked against
/// the f64 reference above), causal top-left over 8191 tokens and a 1000-query chunk at the end of
/// 9000 keys (bottom-right, as a chunked prefill runs), GQA 8 / 2 heads.
#[test]
fn flash_forward_tc_variants_long() {
    if gpu().is_none() {
        return;
    }
    let _guard = VARIANTS.lock().unwrap_or_else(|e| e.into_inner());
    let d = dev();
    let mut rng = Rng::new(13);
    for (hd, variants) in [(64usize, TC_D64_VARIANTS), (128, 4)] {
        for (lq, lk, causal) in [(8191usize, 8191usize, Causal::TopLeft), (1000, 9000, Causal::BottomRight)] {
            let dt = DType::BF16;
            let s = Shape { b: 1, h: 8, kvh: 2, d: hd, lq, lk };
            let q = data(&mut rng, s.b * s.h * s.lq * s.d, dt, 3.0);
            let k = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 3.0);
            let v = data(&mut rng, s.b * s.kvh * s.lk * s.d, dt, 1.0);
            let (_tq, oq) = upload(&q, s.b, s.h, s.lq, s.d, false, dt);
            let (_tk, ok) = upload(&k, s.b, s.kvh, s.lk, s.d, false, dt);
            let (_tv, ov) = upload(&v, s.b, s.kvh, s.lk, s.d, false, dt);
            let p = FlashParams { dtype: dt, batch: s.b, n_heads: s.h, n_kv_heads: s.kvh, head_dim: s.d, q_len: s.lq, kv_len: s.lk, scale: 1.0 / (hd as f32).sqrt(), causal };
            let mut outs = Vec::new();
            for variant in 0..variants {
                if hd == 64 {
                    set_tc_variant_d64(variant);
                } else {
                    set_tc_variant_d128(variant);
                }
                let (to, oo) = zeros_dev(s.b, s.h, s.lq, s.d, false, dt);
                flash_forward(&d, &p, oq, ok, ov, oo, None).unwrap();
                outs.push(download(&to, false));
            }
            let base = if hd == 64 { 2 } else { 0 };
            let amax = outs[base].iter().fold(0.0f64, |a, x| a.max(x.abs())).max(1e-3);
            for (variant, got) in outs.iter().enumerate() {
                let mut worst = 0.0f64;
                for (i, (g, w)) in got.iter().zip(&outs[base]).enumerate() {
                    let err = (g - w).abs();
                    assert!(err.is_finite() && err <= tol(dt) * amax, "variant {variant} d{hd} lq{lq} lk{lk}: element {i} got {g}, variant {base} gives {w}");
                    worst = worst.max(err);
                }
                eprintln!("long d{hd} lq{lq} lk{lk} variant {variant}: max difference to variant {base} {worst:.2e} (max |out| {amax:.3})");
            }
        }
    }
    reset_tc_variants();
}

#[test]
fn flash_forward_gqa_batched_strided() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(2);
    for dt in [DType::BF16, DType::F16, DType::F32] {
        for d in [64, 128, 40] {
            for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                for tm in [false, true] {
                    let s = Shape { b: 2, h: 8, kvh: 2, d, lq: 77, lk: 150 };
                    run_case(&mut rng, dt, &s, causal, Some(&[150, 93]), tm, None);
                    let s = Shape { b: 2, h: 8, kvh: 2, d, lq: 150, lk: 150 };
                    run_case(&mut rng, dt, &s, causal, Some(&[0, 131]), tm, None);
                }
            }
        }
    }
}

#[test]
fn flash_forward_long() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(3);
    // ~1000 long, every row
    for dt in [DType::BF16, DType::F32] {
        for causal in [Causal::TopLeft, Causal::None] {
            let s = Shape { b: 1, h: 2, kvh: 1, d: 64, lq: 1000, lk: 1031 };
            run_case(&mut rng, dt, &s, causal, None, false, None);
        }
    }
    let s = Shape { b: 1, h: 4, kvh: 2, d: 128, lq: 1023, lk: 1023 };
    run_case(&mut rng, DType::BF16, &s, Causal::BottomRight, Some(&[1001]), true, None);
    // 20k keys, sampled rows
    let rows = [0usize, 1, 63, 64, 4097, 12345, 19998, 19999];
    for (dt, d) in [(DType::BF16, 64), (DType::F16, 128), (DType::F32, 64)] {
        let s = Shape { b: 1, h: 1, kvh: 1, d, lq: 20000, lk: 20000 };
        run_case(&mut rng, dt, &s, Causal::TopLeft, None, false, Some(&rows));
    }
    let s = Shape { b: 1, h: 2, kvh: 1, d: 64, lq: 33, lk: 20011 };
    run_case(&mut rng, DType::BF16, &s, Causal::BottomRight, None, false, None);
}

/// flash_decode for one shape: random cache, per-sequence lengths `lens`.
fn decode_case(rng: &mut Rng, dt: DType, b: usize, h: usize, kvh: usize, d: usize, cap: usize, lens: &[usize]) {
    decode_case_pad(rng, dt, b, h, kvh, d, cap, lens, 0)
}

#[allow(clippy::too_many_arguments)]
fn decode_case_pad(rng: &mut Rng, dt: DType, b: usize, h: usize, kvh: usize, d: usize, cap: usize, lens: &[usize], pad: usize) {
    let dv = dev();
    let what = format!("decode {dt:?} b{b} h{h}/{kvh} d{d} cap {cap} lens {lens:?} pad {pad}");
    let q = data(rng, b * h * d, dt, 1.0);
    let k = data(rng, b * kvh * cap * d, dt, 1.0);
    let v = data(rng, b * kvh * cap * d, dt, 1.0);
    let (_tq, mut oq) = upload(&q, b, h, 1, d, false, dt);
    oq.ss = 0;
    // rows padded by `pad` elements (an odd pad misaligns the rows: the fallback kernel)
    let padded = |x: &[f64]| -> Vec<f64> { x.chunks(d).flat_map(|r| r.iter().cloned().chain(std::iter::repeat(7.0).take(pad))).collect() };
    let (_tk, mut ok) = upload(&padded(&k), b, kvh, cap, d + pad, false, dt);
    let (_tv, mut ov) = upload(&padded(&v), b, kvh, cap, d + pad, false, dt);
    for o in [&mut ok, &mut ov] {
        o.ss = (d + pad) as i64;
    }
    let (to, oo) = zeros_dev(b, h, 1, d, false, dt);
    let lt = Tensor::from_vec(lens.iter().map(|&x| x as i32).collect::<Vec<i32>>(), &[b]).unwrap().to_device(GPU).unwrap();
    let scale = 1.0 / (d as f64).sqrt();
    let p = DecodeParams { dtype: dt, batch: b, n_heads: h, n_kv_heads: kvh, head_dim: d, max_kv_len: cap, scale: scale as f32 };
    let ws = Tensor::from_vec(vec![0u8; decode_workspace_bytes(&p).max(16)], &[decode_workspace_bytes(&p).max(16)]).unwrap().to_device(GPU).unwrap();
    flash_decode(&dv, &p, oq, ok, ov, oo, elem_ptr("t", &lt).unwrap().0, elem_ptr("t", &ws).unwrap().0).unwrap();
    let got = download(&to, false);
    let s = Shape { b, h, kvh, d, lq: 1, lk: cap };
    let want = reference(&q, &k, &v, &s, scale, Causal::None, lens, None);
    check(&what, &got, &want, &s, dt);
}

#[test]
fn flash_decode_matches_reference() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(4);
    for dt in [DType::BF16, DType::F16, DType::F32] {
        decode_case(&mut rng, dt, 1, 8, 2, 64, 1000, &[1000]);
        decode_case(&mut rng, dt, 1, 8, 2, 128, 1, &[1]);
        decode_case(&mut rng, dt, 5, 8, 2, 64, 777, &[0, 1, 777, 300, 65]);
        decode_case(&mut rng, dt, 5, 32, 8, 128, 2048, &[2048, 0, 1, 1500, 64]);
        decode_case(&mut rng, dt, 16, 4, 4, 40, 300, &(0..16).map(|i| (i * 37) % 301).collect::<Vec<_>>());
        decode_case(&mut rng, dt, 16, 14, 2, 128, 513, &(0..16).map(|i| 513 - i * 17).collect::<Vec<_>>());
        decode_case(&mut rng, dt, 2, 64, 1, 64, 300, &[300, 299]);
    }
    decode_case(&mut rng, DType::BF16, 1, 32, 8, 64, 20000, &[19999]);
    decode_case(&mut rng, DType::F32, 3, 4, 1, 256, 100, &[100, 50, 0]);
    decode_case(&mut rng, DType::BF16, 2, 4, 2, 100, 100, &[100, 7]);
    // head_dim 256 and wide groups (8 heads per block, 2 head groups)
    decode_case(&mut rng, DType::BF16, 2, 16, 2, 256, 700, &[700, 333]);
    decode_case(&mut rng, DType::F16, 3, 28, 2, 128, 1000, &[1000, 1, 999]);
    decode_case(&mut rng, DType::F32, 2, 6, 2, 128, 300, &[300, 150]);
    decode_case(&mut rng, DType::F32, 2, 2, 1, 64, 300, &[300, 0]);
    // misaligned rows: the shared-memory kernel
    decode_case_pad(&mut rng, DType::BF16, 2, 8, 2, 64, 300, &[300, 77], 1);
    decode_case_pad(&mut rng, DType::F16, 2, 16, 2, 128, 200, &[200, 3], 3);
    decode_case_pad(&mut rng, DType::BF16, 2, 4, 4, 64, 100, &[100, 50], 8);
}

/// The same decode replayed with new lengths in the same buffer (as a captured graph would).
#[test]
fn flash_decode_lengths_read_on_device() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(5);
    let dt = DType::BF16;
    let (b, h, kvh, d, cap) = (3, 8, 2, 64, 500);
    let dv = dev();
    let q = data(&mut rng, b * h * d, dt, 1.0);
    let k = data(&mut rng, b * kvh * cap * d, dt, 1.0);
    let v = data(&mut rng, b * kvh * cap * d, dt, 1.0);
    let (_tq, oq) = upload(&q, b, h, 1, d, false, dt);
    let (_tk, ok) = upload(&k, b, kvh, cap, d, false, dt);
    let (_tv, ov) = upload(&v, b, kvh, cap, d, false, dt);
    let (to, oo) = zeros_dev(b, h, 1, d, false, dt);
    let lt = Tensor::from_vec(vec![0i32; b], &[b]).unwrap().to_device(GPU).unwrap();
    let p = DecodeParams { dtype: dt, batch: b, n_heads: h, n_kv_heads: kvh, head_dim: d, max_kv_len: cap, scale: 0.125 };
    let n = decode_workspace_bytes(&p);
    let ws = Tensor::from_vec(vec![0u8; n], &[n]).unwrap().to_device(GPU).unwrap();
    for lens in [[1usize, 2, 3], [500, 0, 250], [17, 499, 500]] {
        let src = Tensor::from_vec(lens.iter().map(|&x| x as i32).collect::<Vec<i32>>(), &[b]).unwrap().to_device(GPU).unwrap();
        lt.copy_(&src).unwrap();
        flash_decode(&dv, &p, oq, ok, ov, oo, elem_ptr("t", &lt).unwrap().0, elem_ptr("t", &ws).unwrap().0).unwrap();
        let got = download(&to, false);
        let s = Shape { b, h, kvh, d, lq: 1, lk: cap };
        check(&format!("replay {lens:?}"), &got, &reference(&q, &k, &v, &s, 0.125, Causal::None, &lens, None), &s, dt);
    }
}

#[test]
fn sdpa_hook_matches_composite() {
    if gpu().is_none() {
        return;
    }
    let mut rng = Rng::new(6);
    for dt in [DType::BF16, DType::F16, DType::F32] {
        for (qs, ks, gqa) in [
            (vec![2usize, 4, 33, 64], vec![2usize, 4, 40, 64], false),
            (vec![2, 8, 65, 128], vec![2, 2, 65, 128], true),
            (vec![3, 17, 40], vec![3, 29, 40], false),
            (vec![9, 16], vec![9, 16], false),
        ] {
            for causal in [false, true] {
                let n = |s: &[usize]| s.iter().product::<usize>();
                let mk = |s: &[usize], r: &mut Rng| Tensor::from_vec(data(r, n(s), dt, 1.0), s).unwrap().to_dtype(dt).unwrap();
                let (q, k, v) = (mk(&qs, &mut rng), mk(&ks, &mut rng), mk(&ks, &mut rng));
                let got = nn::scaled_dot_product_attention(&q.to_device(GPU).unwrap(), &k.to_device(GPU).unwrap(), &v.to_device(GPU).unwrap(), None, 0.0, causal, None, gqa).unwrap();
                // the composite on the GPU (an explicit mask, here all zeros, skips the flash path)
                let (l, s) = (qs[qs.len() - 2], ks[ks.len() - 2]);
                let mut zero = Tensor::zeros_on(&[l, s], dt, Device::Cpu).unwrap();
                if causal {
                    let keep = Tensor::ones_on(&[l, s], DType::Bool, Device::Cpu).unwrap().tril(0).unwrap();
                    zero = zero.masked_fill(&keep.logical_not().unwrap(), f64::NEG_INFINITY).unwrap();
                }
                let zero = zero.to_device(GPU).unwrap();
                let comp = nn::scaled_dot_product_attention(&q.to_device(GPU).unwrap(), &k.to_device(GPU).unwrap(), &v.to_device(GPU).unwrap(), Some(&zero), 0.0, false, None, gqa).unwrap();
                // and the f32 composite on the CPU
                let f = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
                let want = nn::scaled_dot_product_attention(&f(&q), &f(&k), &f(&v), None, 0.0, causal, None, gqa).unwrap();
                let what = format!("sdpa {dt:?} q{qs:?} k{ks:?} causal {causal}");
                assert_eq!(got.shape(), comp.shape(), "{what}: shape");
                assert_eq!(got.dtype(), comp.dtype(), "{what}: dtype");
                assert_eq!(got.device(), GPU, "{what}: device");
                let (g, w, c) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap(), comp.to_f64_vec().unwrap());
                let amax = w.iter().fold(0.0f64, |a, x| a.max(x.abs())).max(1e-3);
                for i in 0..w.len() {
                    assert!((g[i] - w[i]).abs() <= tol(dt) * amax, "{what}: element {i}: got {}, want {}", g[i], w[i]);
                    assert!((c[i] - w[i]).abs() <= tol(dt) * amax, "{what}: composite element {i}: {} vs {}", c[i], w[i]);
                }
            }
        }
    }
    // a transposed (token-major) view goes through the hook in place
    let dt = DType::BF16;
    let x = Tensor::from_vec(data(&mut rng, 2 * 50 * 4 * 64, dt, 1.0), &[2, 50, 4, 64]).unwrap().to_dtype(dt).unwrap();
    let xg = x.to_device(GPU).unwrap().transpose(1, 2).unwrap();
    let got = nn::scaled_dot_product_attention(&xg, &xg, &xg, None, 0.0, true, Some(0.3), false).unwrap();
    let xf = x.to_dtype(DType::F32).unwrap().transpose(1, 2).unwrap();
    let want = nn::scaled_dot_product_attention(&xf, &xf, &xf, None, 0.0, true, Some(0.3), false).unwrap();
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    let amax = w.iter().fold(0.0f64, |a, x| a.max(x.abs()));
    for i in 0..w.len() {
        assert!((g[i] - w[i]).abs() <= 2e-2 * amax, "sdpa transposed view: element {i}: got {}, want {}", g[i], w[i]);
    }
}

#[test]
fn bad_params_are_errors() {
    if gpu().is_none() {
        return;
    }
    let d = dev();
    let t = Tensor::from_vec(vec![0f32; 64], &[64]).unwrap().to_device(GPU).unwrap();
    let ptr = elem_ptr("t", &t).unwrap().0;
    let o = AttnOperand { ptr, sb: 0, sh: 0, ss: 0 };
    let good = FlashParams { dtype: DType::F32, batch: 1, n_heads: 2, n_kv_heads: 1, head_dim: 8, q_len: 1, kv_len: 1, scale: 1.0, causal: Causal::None };
    for (p, needle) in [
        (FlashParams { dtype: DType::F64, ..good }, "float"),
        (FlashParams { head_dim: 300, ..good }, "head_dim"),
        (FlashParams { head_dim: 0, ..good }, "head_dim"),
        (FlashParams { n_kv_heads: 3, ..good }, "n_kv_heads"),
        (FlashParams { n_kv_heads: 0, ..good }, "n_kv_heads"),
    ] {
        let e = flash_forward(&d, &p, o, o, o, o, None).unwrap_err().to_string();
        assert!(e.contains("flash_attention") && e.contains(needle), "{e}");
    }
    // empty sizes are no-ops
    flash_forward(&d, &FlashParams { q_len: 0, ..good }, o, o, o, o, None).unwrap();
    flash_forward(&d, &FlashParams { batch: 0, ..good }, o, o, o, o, None).unwrap();
    let dp = DecodeParams { dtype: DType::F32, batch: 1, n_heads: 2, n_kv_heads: 1, head_dim: 8, max_kv_len: 4, scale: 1.0 };
    let e = flash_decode(&d, &DecodeParams { dtype: DType::I32, ..dp }, o, o, o, o, ptr, ptr).unwrap_err().to_string();
    assert!(e.contains("flash_decode"), "{e}");
    let e = flash_decode(&d, &dp, o, o, o, o, 0, ptr).unwrap_err().to_string();
    assert!(e.contains("flash_decode"), "{e}");
    flash_decode(&d, &DecodeParams { batch: 0, ..dp }, o, o, o, o, ptr, ptr).unwrap();
    d.synchronize().unwrap();
}

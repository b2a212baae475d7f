//! The prefill products through cuBLASLt (`fused::LtGemm`) against an f64 reference computed on the
//! host and against the legacy cuBLAS call: every candidate algorithm of each shape, and the timed
//! choice, on random inputs at odd sizes (rows 1..300, widths not multiples of 8), f32 and bf16,
//! with no epilogue, bias, bias + tanh-GELU and bias + ReLU. Skips without CUDA unless
//! `MAGPIE_REQUIRE_CUDA=1`.

use magpie_core::backend::cuda;
use magpie_core::backend::cuda::blas;
use magpie_core::backend::cuda::device::{self, CudaDevice};
use magpie_core::backend::cuda::elementwise::storage_of;
use magpie_core::{DType, Device, Tensor};
use magpie_models::fused::{LtEpi, LtGemm};

fn gpu() -> bool {
    if cuda::is_available() {
        return true;
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available: {}", cuda::unavailable("test"));
    }
    eprintln!("skipped: no CUDA");
    false
}

/// Deterministic values in [-1, 1).
fn rand(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A device tensor of `v` in `dt`, and the host values it holds (rounded to `dt`).
fn upload(v: &[f32], dt: DType) -> (Tensor, Vec<f64>) {
    let t = Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap().to_dtype(dt).unwrap();
    let held = t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap().into_iter().map(f64::from).collect();
    (t.to_device(Device::Cuda(0)).unwrap(), held)
}

fn addr(t: &Tensor) -> u64 {
    storage_of("test", t).unwrap().0 + (t.storage_offset() * t.dtype().size()) as u64
}

fn read(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap().into_iter().map(f64::from).collect()
}

fn gelu_tanh(v: f64) -> f64 {
    0.5 * v * (1.0 + (0.797_884_560_802_865_4 * (v + 0.044715 * v * v * v)).tanh())
}

#[derive(Clone, Copy, Debug)]
enum Epi {
    None,
    Bias,
    Gelu,
    GeluBias,
    ReluBias,
}

/// `x wᵀ` in f64.
fn sums(x: &[f64], w: &[f64], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    (0..m * n).map(|e| (0..k).map(|p| x[(e / n) * k + p] * w[(e % n) * k + p]).sum()).collect()
}

/// The epilogue over sums `[m, n]`.
fn epilogue(s: &[f64], bias: &[f64], n: usize, epi: Epi) -> Vec<f64> {
    s.iter()
        .enumerate()
        .map(|(e, &v)| {
            let b = if matches!(epi, Epi::Bias | Epi::GeluBias | Epi::ReluBias) { bias[e % n] } else { 0.0 };
            match epi {
                Epi::None | Epi::Bias => v + b,
                Epi::Gelu | Epi::GeluBias => gelu_tanh(v + b),
                Epi::ReluBias => (v + b).max(0.0),
            }
        })
        .collect()
}

/// max |got - want| over max(1, max |want|).
fn err(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    got.iter().zip(want).fold(0.0f64, |a, (g, w)| a.max((g - w).abs())) / scale
}

fn dev() -> std::sync::Arc<CudaDevice> {
    device::device("test", 0).unwrap()
}

#[test]
fn every_candidate_and_the_timed_choice_match_the_reference() {
    if !gpu() {
        return;
    }
    let d = dev();
    let lt = LtGemm::new(&d, 16 << 20).unwrap();
    let shapes = [(1, 7, 5), (5, 33, 17), (37, 131, 77), (128, 200, 263), (300, 99, 45), (128, 768, 769), (128, 2304, 768), (77, 3072, 768)];
    let (mut timed, mut unsupported) = (0, 0);
    for dt in [DType::F32, DType::BF16] {
        // f32: sums of up to 769 products in f32; bf16: one rounding of the output
        let tol = if dt == DType::F32 { 2e-5 } else { 8e-3 };
        for (si, &(m, n, k)) in shapes.iter().enumerate() {
            let seed = si as u64 * 10;
            let (xt, x) = upload(&rand(m * k, seed), dt);
            let (wt, w) = upload(&rand(n * k, seed + 1), dt);
            let (bt, b) = upload(&rand(n, seed + 2), dt);
            let yt = Tensor::zeros_on(&[m * n], dt, Device::Cuda(0)).unwrap();
            let (xp, wp, yp, bp) = (addr(&xt), addr(&wt), addr(&yt), addr(&bt));
            // the existing cuBLAS path is the first check of the reference itself
            blas::gemm_nt(&d, dt, dt, m, n, k, xp, wp, yp).unwrap();
            let sm = sums(&x, &w, (m, n, k));
            let plain = epilogue(&sm, &b, n, Epi::None);
            let e = err(&read(&yt), &plain);
            assert!(e <= tol, "{dt} {m}x{n}x{k}: cuBLAS differs from the reference by {e}");
            for (epi, lepi) in [(Epi::None, LtEpi::Bias(0)), (Epi::Bias, LtEpi::Bias(bp)), (Epi::Gelu, LtEpi::GeluTanhBias(0)), (Epi::GeluBias, LtEpi::GeluTanhBias(bp)), (Epi::ReluBias, LtEpi::ReluBias(bp))] {
                let want = epilogue(&sm, &b, n, epi);
                let what = format!("{dt} {m}x{n}x{k} {epi:?}");
                // the engine's shapes (widths multiples of 8) must have an algorithm for every
                // epilogue; at odd widths cuBLASLt may offer none for an epilogue (the engine then
                // runs the plain product and its kernel), but the refusal must say so
                let count = match lt.candidates(dt, dt, m, n, k, xp, wp, yp, lepi) {
                    Ok(c) => c,
                    Err(e) if e.is_unsupported() && !matches!(epi, Epi::None) && (n % 8 != 0 || k % 8 != 0) => {
                        eprintln!("{what}: {e}");
                        unsupported += 1;
                        continue;
                    }
                    Err(e) => panic!("{what}: {e}"),
                };
                assert!(count >= 1, "{what}: no candidate");
                timed += 1;
                for i in 0..count {
                    yt.fill_(f32::NAN).unwrap();
                    lt.linear_with(&d, i, dt, dt, m, n, k, xp, wp, yp, lepi).unwrap();
                    let e = err(&read(&yt), &want);
                    assert!(e <= tol, "{what}: candidate {i} of {count} differs from the reference by {e}");
                }
                yt.fill_(f32::NAN).unwrap();
                lt.linear(&d, dt, dt, m, n, k, xp, wp, yp, lepi).unwrap();
                let e = err(&read(&yt), &want);
                assert!(e <= tol, "{what}: the timed choice differs from the reference by {e}");
            }
        }
    }
    // every shape above was timed once; the choice is the fastest candidate that ran
    let rep = lt.report();
    assert_eq!(rep.len(), timed, "one timed plan per dtype, shape and epilogue");
    eprintln!("{timed} products timed, {unsupported} epilogues without an algorithm at odd widths");
    assert!(unsupported < timed, "cuBLASLt served fewer than half the products");
    for (m, n, k, epi, times, best) in rep {
        let min = times.iter().cloned().fold(f32::INFINITY, f32::min);
        assert!(times[best] == min && min.is_finite() && min > 0.0, "{m}x{n}x{k} epilogue {epi}: chose {best} of {times:?}");
    }
}

#[test]
fn bf16_into_f32_and_bad_sizes() {
    if !gpu() {
        return;
    }
    let d = dev();
    let lt = LtGemm::new(&d, 1 << 20).unwrap();
    let (m, n, k) = (19, 45, 37);
    let (xt, x) = upload(&rand(m * k, 7), DType::BF16);
    let (wt, w) = upload(&rand(n * k, 8), DType::BF16);
    let yt = Tensor::zeros_on(&[m * n], DType::F32, Device::Cuda(0)).unwrap();
    lt.linear(&d, DType::BF16, DType::F32, m, n, k, addr(&xt), addr(&wt), addr(&yt), LtEpi::Bias(0)).unwrap();
    let e = err(&read(&yt), &sums(&x, &w, (m, n, k)));
    assert!(e <= 2e-5, "bf16 into f32 differs from the reference by {e}");
    let msg = |r: magpie_core::Result<()>| r.unwrap_err().to_string();
    let bias = LtEpi::Bias(addr(&wt));
    assert!(msg(lt.linear(&d, DType::BF16, DType::F32, m, n, k, addr(&xt), addr(&wt), addr(&yt), bias)).contains("linear"), "a bias of the input dtype into f32 is refused, naming the op");
    assert!(msg(lt.linear(&d, DType::F32, DType::F32, m, n, 0, addr(&yt), addr(&yt), addr(&yt), LtEpi::Bias(0))).contains("size"), "k = 0");
    assert!(msg(lt.linear(&d, DType::I32, DType::I32, m, n, k, addr(&yt), addr(&yt), addr(&yt), LtEpi::Bias(0))).contains("int32"), "integer products");
    // no rows or no columns: nothing to do
    lt.linear(&d, DType::F32, DType::F32, 0, n, k, 0, 0, 0, LtEpi::Bias(0)).unwrap();
}

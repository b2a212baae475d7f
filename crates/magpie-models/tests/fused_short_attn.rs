//! The short-prefill attention kernel (`fused::ShortAttention`) against an f64 reference on the
//! host and the core's flash attention, with the engine's operand layouts (token-major queries and
//! outputs, keys and values in a `[batch, kv_heads, max_len, head_dim]` cache): odd query counts,
//! chunks after earlier keys (kv_len > q_len), GQA, batches, head dims 32/64/128, f32, bf16 and
//! f16. Skips without CUDA unless `MAGPIE_REQUIRE_CUDA=1`.

use magpie_core::backend::cuda;
use magpie_core::backend::cuda::attention::{self, AttnOperand, Causal, FlashParams};
use magpie_core::backend::cuda::device;
use magpie_core::backend::cuda::elementwise::storage_of;
use magpie_core::{DType, Device, Tensor};
use magpie_models::fused::ShortAttention;

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

/// Deterministic values in [-2, 2).
fn rand(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(7);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

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

#[test]
fn short_attention_matches_the_reference_and_flash_attention() {
    if !gpu() {
        return;
    }
    let dev = device::device("test", 0).unwrap();
    // (batch, heads, kv heads, head dim, queries, earlier keys)
    let cases = [(1, 12, 12, 64, 128, 0), (1, 4, 1, 64, 1, 0), (2, 4, 2, 64, 37, 0), (1, 8, 2, 128, 33, 17), (3, 2, 2, 32, 50, 3), (1, 2, 1, 128, 200, 56), (2, 3, 3, 32, 16, 0), (1, 4, 4, 64, 17, 240)];
    for dt in [DType::F32, DType::BF16, DType::F16] {
        let tol = if dt == DType::F32 { 1e-5 } else { 1.6e-2 };
        for (ci, &(b, h, kvh, d, q_len, p0)) in cases.iter().enumerate() {
            let kv_len = p0 + q_len;
            let max_len = kv_len + 5; // cache rows past kv_len hold values no query may see
            let qd = h * d;
            let sa = ShortAttention::new(&dev, dt, d).unwrap();
            let seed = ci as u64 * 100 + dt.size() as u64;
            let (qt, q) = upload(&rand(b * q_len * qd, seed), dt);
            let (kt, k) = upload(&rand(b * kvh * max_len * d, seed + 1), dt);
            let (vt, v) = upload(&rand(b * kvh * max_len * d, seed + 2), dt);
            let ot = Tensor::zeros_on(&[b * q_len * qd], dt, Device::Cuda(0)).unwrap();
            let ft = Tensor::zeros_on(&[b * q_len * qd], dt, Device::Cuda(0)).unwrap();
            let scale = 1.0 / (d as f32).sqrt();
            let p = FlashParams { dtype: dt, batch: b, n_heads: h, n_kv_heads: kvh, head_dim: d, q_len, kv_len, scale, causal: Causal::BottomRight };
            let tok = |t: &Tensor| AttnOperand { ptr: addr(t), sb: (q_len * qd) as i64, sh: d as i64, ss: qd as i64 };
            let (csh, csb) = ((max_len * d) as i64, (kvh * max_len * d) as i64);
            let cache = |t: &Tensor| AttnOperand { ptr: addr(t), sb: csb, sh: csh, ss: d as i64 };
            sa.forward(&dev, &p, tok(&qt), cache(&kt), cache(&vt), tok(&ot)).unwrap();
            attention::flash_forward(&dev, &p, tok(&qt), cache(&kt), cache(&vt), tok(&ft), None).unwrap();
            let (got, flash) = (read(&ot), read(&ft));
            // the f64 reference
            let mut want = vec![0.0f64; got.len()];
            for bi in 0..b {
                for hi in 0..h {
                    let g = hi / (h / kvh);
                    for i in 0..q_len {
                        let qrow = &q[(bi * q_len + i) * qd + hi * d..][..d];
                        let last = i + p0;
                        let kat = |j: usize| (bi * csb as usize) + g * csh as usize + j * d;
                        let s: Vec<f64> = (0..=last).map(|j| qrow.iter().zip(&k[kat(j)..kat(j) + d]).map(|(a, c)| a * c).sum::<f64>() * scale as f64).collect();
                        let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                        let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                        let sum: f64 = e.iter().sum();
                        for dd in 0..d {
                            want[(bi * q_len + i) * qd + hi * d + dd] = (0..=last).map(|j| e[j] * v[kat(j) + dd]).sum::<f64>() / sum;
                        }
                    }
                }
            }
            let what = format!("{dt} batch {b}, {h}/{kvh} heads of {d}, {q_len} queries after {p0} keys");
            let scale_v = want.iter().fold(1.0f64, |a, x| a.max(x.abs()));
            let e_ref = got.iter().zip(&want).fold(0.0f64, |a, (g, w)| a.max((g - w).abs())) / scale_v;
            assert!(e_ref <= tol, "{what}: differs from the f64 reference by {e_ref}");
            let e_flash = got.iter().zip(&flash).fold(0.0f64, |a, (g, w)| a.max((g - w).abs())) / scale_v;
            assert!(e_flash <= tol, "{what}: differs from flash attention by {e_flash}");
        }
    }
}

#[test]
fn short_attention_refuses_what_it_does_not_cover() {
    if !gpu() {
        return;
    }
    let dev = device::device("test", 0).unwrap();
    assert!(ShortAttention::new(&dev, DType::F32, 80).unwrap_err().to_string().contains("head dim 80"));
    assert!(ShortAttention::new(&dev, DType::I32, 64).is_err());
    let sa = ShortAttention::new(&dev, DType::F32, 64).unwrap();
    let op = AttnOperand { ptr: 0, sb: 0, sh: 0, ss: 0 };
    let p = FlashParams { dtype: DType::F32, batch: 1, n_heads: 2, n_kv_heads: 2, head_dim: 64, q_len: 4, kv_len: 4, scale: 1.0, causal: Causal::None };
    assert!(sa.forward(&dev, &p, op, op, op, op).unwrap_err().to_string().contains("causal"));
    let p = FlashParams { causal: Causal::BottomRight, kv_len: 3, ..p };
    assert!(sa.forward(&dev, &p, op, op, op, op).is_err(), "fewer keys than queries");
    let p = FlashParams { kv_len: 4, head_dim: 32, ..p };
    assert!(sa.forward(&dev, &p, op, op, op, op).is_err(), "another head dim");
}

//! The quantized decode GEMV on CUDA (`backend::cuda::quant`) against the CPU quantized matmul
//! (`backend::cpu::quant`, itself tested against the GGUF dequantizer), for Q8_0, Q4_0, Q4_K and
//! Q6_K, f32/f16/bf16 activations, 1..8 rows, odd output counts and K longer than one
//! shared-memory tile; plus the argument errors. Skipped without CUDA unless
//! MAGPIE_REQUIRE_CUDA=1.
//!
//! Bound: both sides multiply the same f32 weights by the same (dtype-rounded) activations in
//! f32, in different orders, so they differ by at most 2 K u Σ|x w| (u = 2^-24, a worst case for
//! two length-K f32 sums) plus the output's rounding to the dtype, ≤ ε(dtype) Σ|x w|
//! (ε = 2^-8 bf16, 2^-11 f16). A wrong weight or a wrong x element changes y by about Σ|x w| / K.

#[path = "cuda_util/mod.rs"]
mod util;

use magpie_core::backend::cpu::quant::{dequantize_rows, quant_matmul, QuantType};
use magpie_core::backend::cuda::device::device;
use magpie_core::backend::cuda::kern::elem_ptr;
use magpie_core::backend::cuda::quant::{quant_gemv_raw, QuantGemv};
use magpie_core::{DType, Tensor};
use util::{gpu, Rng};

/// Random valid blocks: random bytes with finite f16 scale fields of a realistic size.
fn random_blocks(ty: QuantType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let n = ty.matrix_bytes("test", rows, cols).unwrap();
    let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
    let fields: &[usize] = match ty {
        QuantType::Q8_0 | QuantType::Q4_0 => &[0],
        QuantType::Q4_K => &[0, 2],
        QuantType::Q6_K => &[208],
    };
    for blk in b.chunks_exact_mut(ty.block_bytes()) {
        for &o in fields {
            let v = magpie_core::half::f16::from_f64(rng.uniform(0.001, 0.011)).to_bits().to_le_bytes();
            blk[o..o + 2].copy_from_slice(&v);
        }
    }
    b
}

#[test]
fn quant_gemv_matches_the_cpu_kernel() {
    let Some(g) = gpu() else { return };
    let dev = device("test", 0).unwrap();
    let mut rng = Rng::new(17);
    for ty in QuantType::ALL {
        let be = ty.block_elems();
        // K: one block; several tiles for every row count (tiles are 1024..4096 elements); odd n
        for (n, k) in [(77, be), (131, 5120), (33, 4 * be)] {
            let w = random_blocks(ty, n, k, &mut rng);
            let wd = dequantize_rows(ty, &w, n, k).unwrap();
            let wt = Tensor::from_vec(w.clone(), &[w.len()]).unwrap().to_device(g).unwrap();
            let wp = elem_ptr("test", &wt).unwrap().0;
            for dt in [DType::F32, DType::F16, DType::BF16] {
                for m in [1usize, 2, 3, 5, 8] {
                    let x = util::rand(&mut rng, &[m, k], dt, -1.0, 1.0);
                    let xf = x.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
                    let want = quant_matmul(ty, &w, n, k, &xf, m).unwrap();
                    let xg = x.to_device(g).unwrap();
                    let yg = Tensor::zeros(&[m, n]).unwrap().to_dtype(dt).unwrap().to_device(g).unwrap();
                    let spec = QuantGemv { ty, dtype: dt, m, n, k };
                    // SAFETY: the tensors are live, contiguous and sized as the spec says.
                    unsafe { quant_gemv_raw(&dev, &spec, wp, elem_ptr("test", &xg).unwrap().0, k, elem_ptr("test", &yg).unwrap().0, n) }.unwrap();
                    assert_eq!(yg.dtype(), dt);
                    let got = yg.to_f64_vec().unwrap();
                    let eps = match dt {
                        DType::BF16 => 2f64.powi(-8),
                        DType::F16 => 2f64.powi(-11),
                        _ => 0.0,
                    };
                    for i in 0..m {
                        for j in 0..n {
                            let mag: f64 = (0..k).map(|kk| (xf[i * k + kk] as f64 * wd[j * k + kk] as f64).abs()).sum();
                            let bound = (2.0 * k as f64 * 2f64.powi(-24) + eps) * mag + 1e-30;
                            let (a, b) = (got[i * n + j], want[i * n + j] as f64);
                            assert!((a - b).abs() <= bound, "{ty} {dt} m={m} n={n} k={k}: y[{i},{j}] = {a}, CPU {b}, bound {bound}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn quant_gemv_argument_errors() {
    let spec = |ty, dtype, m, n, k| QuantGemv { ty, dtype, m, n, k };
    let e = spec(QuantType::Q4_K, DType::BF16, 1, 8, 300).check().unwrap_err().to_string();
    assert!(e.contains("quant_gemv") && e.contains("blocks of 256"), "{e}");
    let e = spec(QuantType::Q8_0, DType::F32, 9, 8, 64).check().unwrap_err().to_string();
    assert!(e.contains("1 to 8"), "{e}");
    let e = spec(QuantType::Q8_0, DType::F32, 0, 8, 64).check().unwrap_err().to_string();
    assert!(e.contains("1 to 8"), "{e}");
    let e = spec(QuantType::Q4_0, DType::F64, 1, 8, 64).check().unwrap_err().to_string();
    assert!(e.contains("float32"), "{e}");
    assert_eq!(spec(QuantType::Q6_K, DType::F16, 2, 3, 512).check().unwrap(), 3 * 2 * 210);
}

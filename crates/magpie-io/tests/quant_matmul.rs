//! The core's quantized matmul (`y = x Wᵀ` with W in GGUF blocks) against dequantize-then-matmul,
//! with this crate's dequantizer (checked bit-exact against gguf-py by the fixtures) as the
//! independent reference and the product computed in f64.
//!
//! Error bound: the kernel decodes each block to exactly the reference's f32 values and sums
//! `x * w` in f32, so it differs from the exact product only by f32 rounding of the products and
//! sums: |y - y_exact| <= K u Σ|x w| with u = 2^-24 (the standard worst case for a length-K f32
//! dot product, Higham §3.1). One wrongly decoded weight changes y by about Σ|x w| / K, far above
//! that bound for K >= 32, so the test detects decode and indexing errors.

use magpie_core::backend::cpu::quant::{quant_matmul, QuantType};
use magpie_core::quant::QuantMatrix;
use magpie_core::{DType, Tensor};
use magpie_io::gguf::{dequantize, GgmlType, GgufFile};
use std::path::PathBuf;

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// Random but valid blocks: every byte random except the f16 scale fields, which get finite
/// values of a realistic size (a random f16 could be NaN or huge).
fn random_blocks(ty: QuantType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let n = ty.matrix_bytes("test", rows, cols).unwrap();
    let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
    let scale_fields: &[usize] = match ty {
        QuantType::Q8_0 | QuantType::Q4_0 => &[0],
        QuantType::Q4_K => &[0, 2],
        QuantType::Q6_K => &[208],
    };
    for blk in b.chunks_exact_mut(ty.block_bytes()) {
        for &o in scale_fields {
            let v = half::f16::from_f32(0.001 + 0.01 * rng.unit().abs()).to_bits().to_le_bytes();
            blk[o..o + 2].copy_from_slice(&v);
        }
    }
    b
}

fn ggml(ty: QuantType) -> GgmlType {
    GgmlType::from_name(ty.name()).unwrap()
}

/// Checks one product against the f64 reference within the bound of the module comment.
fn check(ty: QuantType, m: usize, n: usize, k: usize, seed: u64) {
    let mut rng = Rng(seed);
    let w = random_blocks(ty, n, k, &mut rng);
    let x: Vec<f32> = (0..m * k).map(|_| rng.unit()).collect();
    let y = quant_matmul(ty, &w, n, k, &x, m).unwrap();
    let wd = dequantize(ggml(ty), &w, n * k).unwrap();
    let u = 2f64.powi(-24);
    for i in 0..m {
        for j in 0..n {
            let (mut exact, mut mag) = (0f64, 0f64);
            for kk in 0..k {
                let p = x[i * k + kk] as f64 * wd[j * k + kk] as f64;
                exact += p;
                mag += p.abs();
            }
            let err = (y[i * n + j] as f64 - exact).abs();
            assert!(err <= k as f64 * u * mag + 1e-30, "{ty} m={m} n={n} k={k}: y[{i},{j}] = {} but exact {exact} (bound {})", y[i * n + j], k as f64 * u * mag);
        }
    }
}

#[test]
fn quant_matmul_matches_dequantize_then_matmul() {
    for ty in QuantType::ALL {
        let be = ty.block_elems();
        // decode shapes (m < 8, one weight row at a time) and prefill shapes (panels through the
        // f32 GEMM), odd m and n, several blocks per row, more rows than one parallel panel
        for (m, n, k) in [(1, 1, be), (1, 67, 2 * be), (3, 131, 3 * be), (7, 5, be), (8, 33, 2 * be), (13, 70, 4 * be), (1, 300, be)] {
            check(ty, m, n, k, 7 + (m * 1000 + n) as u64);
        }
    }
}

#[test]
fn the_kernels_decode_bit_exactly_on_the_fixture_blocks() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf");
    let f = GgufFile::open(dir.join("quant-blocks.gguf")).unwrap();
    for ty in QuantType::ALL {
        let name = format!("{}.weight", ty.name().to_lowercase());
        let info = f.tensor_info(&name).unwrap();
        let [rows, cols] = info.shape()[..] else { panic!("{name} is not 2-D") };
        let q = QuantMatrix::new(ty, rows, cols, f.tensor_bytes(&name).unwrap().to_vec()).unwrap();
        assert_eq!(q.dequantize().unwrap().to_vec::<f32>().unwrap(), f.tensor_data_f32(&name).unwrap(), "{name}");
    }
}

#[test]
fn quant_linear_dtypes_shapes_and_errors() {
    let mut rng = Rng(99);
    let (n, k) = (9, 64);
    let q = QuantMatrix::new(QuantType::Q8_0, n, k, random_blocks(QuantType::Q8_0, n, k, &mut rng)).unwrap();
    let xs: Vec<f32> = (0..2 * 3 * k).map(|_| rng.unit()).collect();
    let x = Tensor::from_vec(xs, &[2, 3, k]).unwrap();
    let y = q.matmul_t(&x).unwrap();
    assert_eq!(y.shape(), [2, 3, n]);
    let want = x.matmul(&q.dequantize().unwrap().t().unwrap()).unwrap();
    let d = y.sub(&want).unwrap().abs().unwrap().max().unwrap().to_vec::<f32>().unwrap()[0];
    assert!(d < 1e-5, "{d}");
    for dt in [DType::BF16, DType::F16] {
        let yb = q.matmul_t(&x.to_dtype(dt).unwrap()).unwrap();
        assert_eq!(yb.dtype(), dt);
    }
    // K not a whole number of blocks, wrong byte count, wrong input width, gradients
    let e = QuantMatrix::new(QuantType::Q4_K, 2, 100, vec![0u8; 288]).unwrap_err().to_string();
    assert!(e.contains("not a whole number of blocks of 256"), "{e}");
    let e = quant_matmul(QuantType::Q4_0, &[0u8; 18], 1, 40, &[0f32; 40], 1).unwrap_err().to_string();
    assert!(e.contains("quant_matmul") && e.contains("blocks of 32"), "{e}");
    let e = QuantMatrix::new(QuantType::Q8_0, 2, 32, vec![0u8; 35]).unwrap_err().to_string();
    assert!(e.contains("68 bytes"), "{e}");
    let e = q.matmul_t(&Tensor::zeros(&[2, 32]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("last dimension"), "{e}");
    // the weight is a constant; the gradient reaching x is g W (W dequantized)
    let xg = x.clone().with_requires_grad().unwrap();
    q.matmul_t(&xg).unwrap().sum().unwrap().backward().unwrap();
    let want = Tensor::ones(&[2, 3, n]).unwrap().matmul(&q.dequantize().unwrap()).unwrap();
    let d = xg.grad().unwrap().sub(&want).unwrap().abs().unwrap().max().unwrap().to_vec::<f32>().unwrap()[0];
    assert!(d < 1e-5, "{d}");
}

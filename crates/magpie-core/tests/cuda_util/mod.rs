//! Shared helpers of the CUDA tests: the device (or a skip), random inputs, comparison with the CPU.
#![allow(dead_code)]

use magpie_core::{backend::cuda, DType, Device, Tensor};

/// `cuda:0`, or None (with a message) where CUDA is absent; panics instead when
/// `MAGPIE_REQUIRE_CUDA=1`.
pub fn gpu() -> Option<Device> {
    if cuda::is_available() {
        return Some(Device::Cuda(0));
    }
    if std::env::var("MAGPIE_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("MAGPIE_REQUIRE_CUDA=1 but CUDA is not available: {}", cuda::unavailable("test"));
    }
    eprintln!("skipped: CUDA is not available ({})", cuda::unavailable("test"));
    None
}

/// A deterministic pseudo-random generator (xorshift) for test inputs.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// A CPU tensor of `shape` and `dtype` with values in [lo, hi) (integers: rounded down).
pub fn rand(rng: &mut Rng, shape: &[usize], dtype: DType, lo: f64, hi: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.uniform(lo, hi)).collect();
    let v: Vec<f64> = if dtype.is_integral() { v.into_iter().map(f64::floor).collect() } else { v };
    Tensor::from_vec(v, shape).unwrap().to_dtype(dtype).unwrap()
}

/// Asserts that two tensors have equal shape and dtype and close values (NaN matches NaN).
pub fn assert_close(what: &str, got: &Tensor, want: &Tensor, rtol: f64, atol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let g = got.to_f64_vec().unwrap();
    let w = want.to_f64_vec().unwrap();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        assert!(ok, "{what}: element {i}: got {a}, want {b}");
    }
}

/// Tolerances for a dtype's results.
pub fn tol(d: DType) -> (f64, f64) {
    match d {
        DType::F16 => (2e-3, 1e-3),
        DType::BF16 => (1.6e-2, 1e-2),
        DType::F32 => (2e-5, 1e-6),
        DType::F64 => (1e-12, 1e-14),
        _ => (0.0, 0.0),
    }
}

//! Every int8 GEMM kernel this CPU runs against the reference triple loop, at odd sizes, with
//! 7-bit and full-range activations and extreme values (saturation cases of `vpmaddubsw`).

use magpie_core::Result;
use magpie_quant::gemm::{gemm_u8i8, gemm_u8i8_reference, Int8Kernel, PackedB};

/// A small deterministic generator (xorshift), so the test needs no RNG crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn run(kernel: Int8Kernel, a: &[u8], w: &[i8], m: usize, n: usize, k: usize, a_7bit: bool) -> Result<Vec<i32>> {
    let b = PackedB::pack(w, n, k)?;
    let kp = b.k_padded();
    // rows longer than kp (lda > kp) with garbage past k: the kernel must read only [0, kp) and
    // padding must be zero where it is read
    let lda = kp + 3;
    let mut ap = vec![0xAAu8; m * lda];
    for i in 0..m {
        ap[i * lda..i * lda + k].copy_from_slice(&a[i * k..(i + 1) * k]);
        ap[i * lda + k..i * lda + kp].fill(0);
    }
    let mut out = vec![i32::MIN; m * n];
    gemm_u8i8(&ap, m, lda, &b, &mut out, a_7bit, kernel)?;
    Ok(out)
}

#[test]
fn kernels_match_the_reference() -> Result<()> {
    let kernels = Int8Kernel::available();
    println!("int8 kernels on this CPU: {kernels:?}");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let sizes = [(1, 1, 1), (1, 17, 3), (3, 5, 7), (4, 16, 4), (5, 33, 65), (7, 31, 129), (13, 48, 250), (64, 100, 257), (2, 300, 1000)];
    for &(m, n, k) in &sizes {
        for a_7bit in [true, false] {
            let amax = if a_7bit { 128 } else { 256 };
            for extreme in [false, true] {
                let a: Vec<u8> = (0..m * k).map(|_| if extreme { (amax - 1) as u8 } else { (rng.next() % amax) as u8 }).collect();
                let w: Vec<i8> = (0..n * k).map(|_| if extreme { -128 } else { (rng.next() % 256) as i64 as u8 as i8 }).collect();
                let want = gemm_u8i8_reference(&a, &w, m, n, k);
                for &kern in &kernels {
                    let got = run(kern, &a, &w, m, n, k, a_7bit)?;
                    assert_eq!(got, want, "{kern:?} m={m} n={n} k={k} 7bit={a_7bit} extreme={extreme}");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn the_reference_is_a_dot_product() {
    // [[1, 2], [255, 0]] x [[3, -4], [-128, 127]]ᵀ
    let out = gemm_u8i8_reference(&[1, 2, 255, 0], &[3, -4, -128, 127], 2, 2, 2);
    assert_eq!(out, vec![3 - 8, -128 + 254, 765, -32640]);
}

#[test]
fn bad_shapes_are_errors() -> Result<()> {
    let b = PackedB::pack(&[1i8; 6], 2, 3)?;
    let mut out = vec![0i32; 4];
    assert!(gemm_u8i8(&[0u8; 3], 2, 4, &b, &mut out, true, Int8Kernel::Scalar).is_err());
    assert!(gemm_u8i8(&[0u8; 8], 2, 4, &b, &mut out[..3], true, Int8Kernel::Scalar).is_err());
    assert!(PackedB::pack(&[1i8; 5], 2, 3).is_err());
    Ok(())
}

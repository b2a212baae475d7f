//! The reference int8 GEMM (a plain triple loop on unpacked data) and the portable kernel on the
//! packed layout.

use super::pack::{PackedB, PANEL};

/// `C[i, j] = Σ_k a[i, k] · w[j, k]` with `a` `[m, k]` u8 and `w` `[n, k]` i8, both row-major:
/// what every kernel is tested against.
pub fn gemm_u8i8_reference(a: &[u8], w: &[i8], m: usize, n: usize, k: usize) -> Vec<i32> {
    let mut out = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|kk| a[i * k + kk] as i32 * w[j * k + kk] as i32).sum();
        }
    }
    out
}

/// The portable kernel on packed B: columns of panels `p0..p1`.
pub(super) fn gemm_packed_scalar(a: &[u8], m: usize, lda: usize, b: &PackedB, out: &mut [i32], p0: usize, p1: usize) {
    let (n, kp) = (b.n(), b.k_padded());
    for p in p0..p1 {
        let panel = b.panel(p);
        let cols = (n - p * PANEL).min(PANEL);
        for i in 0..m {
            let row = &a[i * lda..i * lda + kp];
            let mut acc = [0i32; PANEL];
            for (g, a4) in row.chunks_exact(4).enumerate() {
                let blk = &panel[g * PANEL * 4..(g + 1) * PANEL * 4];
                for (c, acc) in acc.iter_mut().enumerate() {
                    for t in 0..4 {
                        *acc += a4[t] as i32 * blk[c * 4 + t] as i32;
                    }
                }
            }
            out[i * n + p * PANEL..i * n + p * PANEL + cols].copy_from_slice(&acc[..cols]);
        }
    }
}

//! The AVX2 kernel: tiles of up to 4 rows x 16 columns (8 ymm accumulators). `vpmaddubsw`
//! multiplies A's u8 by B's i8 and adds pairs into saturating i16; `vpmaddwd` by ones adds those
//! pairs into i32. Exact for A ≤ 127; for full-range A the low 7 bits and the top bit go through
//! separately (`vpmaddwd` by 128 scales the top-bit sums), so no sum saturates.

use super::pack::{PackedB, PANEL};

/// Columns of panels `p0..p1` of `out = A · Bᵀ`. Callers check the CPU features first.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm(a: &[u8], m: usize, lda: usize, b: &PackedB, out: &mut [i32], p0: usize, p1: usize, a_7bit: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `gemm_u8i8` runs this kernel only when the CPU has AVX2; bounds are checked
        // there and in `tile`.
        unsafe { x86::gemm(a, m, lda, b, out, p0, p1, a_7bit) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = a_7bit;
        super::reference::gemm_packed_scalar(a, m, lda, b, out, p0, p1)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{PackedB, PANEL};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gemm(a: &[u8], m: usize, lda: usize, b: &PackedB, out: &mut [i32], p0: usize, p1: usize, a_7bit: bool) {
        for p in p0..p1 {
            let mut i = 0;
            while i < m {
                let mr = (m - i).min(4);
                let ai = &a[i * lda..];
                match (mr, a_7bit) {
                    (4, true) => tile::<4, false>(ai, lda, b, out, i, p),
                    (3, true) => tile::<3, false>(ai, lda, b, out, i, p),
                    (2, true) => tile::<2, false>(ai, lda, b, out, i, p),
                    (1, true) => tile::<1, false>(ai, lda, b, out, i, p),
                    (4, false) => tile::<4, true>(ai, lda, b, out, i, p),
                    (3, false) => tile::<3, true>(ai, lda, b, out, i, p),
                    (2, false) => tile::<2, true>(ai, lda, b, out, i, p),
                    _ => tile::<1, true>(ai, lda, b, out, i, p),
                }
                i += mr;
            }
        }
    }

    /// Rows `row0..row0 + MR` x panel `p`; `FULL` handles A bytes above 127.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn tile<const MR: usize, const FULL: bool>(a: &[u8], lda: usize, b: &PackedB, out: &mut [i32], row0: usize, p: usize) {
        let groups = b.k_padded() / 4;
        let n = b.n();
        assert!(a.len() >= (MR - 1) * lda + groups * 4);
        let bp = b.panel(p).as_ptr();
        let ones = _mm256_set1_epi16(1);
        let c128 = _mm256_set1_epi16(128);
        let mut acc = [[_mm256_setzero_si256(); 2]; MR];
        for g in 0..groups {
            let b0 = _mm256_loadu_si256(bp.add(g * PANEL * 4) as *const __m256i);
            let b1 = _mm256_loadu_si256(bp.add(g * PANEL * 4 + 32) as *const __m256i);
            for (r, acc) in acc.iter_mut().enumerate() {
                let a4 = (a.as_ptr().add(r * lda + g * 4) as *const u32).read_unaligned();
                if FULL {
                    let lo = _mm256_set1_epi32((a4 & 0x7f7f_7f7f) as i32);
                    let hi = _mm256_set1_epi32(((a4 >> 7) & 0x0101_0101) as i32);
                    for (q, bq) in [b0, b1].into_iter().enumerate() {
                        let s_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, bq), ones);
                        let s_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, bq), c128);
                        acc[q] = _mm256_add_epi32(acc[q], _mm256_add_epi32(s_lo, s_hi));
                    }
                } else {
                    let av = _mm256_set1_epi32(a4 as i32);
                    acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b0), ones));
                    acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b1), ones));
                }
            }
        }
        let col = p * PANEL;
        let cols = (n - col).min(PANEL);
        for (r, acc) in acc.iter().enumerate() {
            let mut tmp = [0i32; PANEL];
            _mm256_storeu_si256(tmp.as_mut_ptr() as *mut __m256i, acc[0]);
            _mm256_storeu_si256(tmp.as_mut_ptr().add(8) as *mut __m256i, acc[1]);
            let o = (row0 + r) * n + col;
            out[o..o + cols].copy_from_slice(&tmp[..cols]);
        }
    }
}

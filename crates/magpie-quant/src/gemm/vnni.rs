//! The AVX-512 VNNI kernel: tiles of up to 4 rows x 32 columns (8 zmm accumulators); per group of
//! 4 `k`, one 64-byte load of B per 16 columns and a broadcast of A's 4 bytes per row feed
//! `vpdpbusd`, which sums four u8 x i8 products into each i32 lane without saturating.

use super::pack::{PackedB, PANEL};

/// Columns of panels `p0..p1` of `out = A · Bᵀ`. Callers check the CPU features first.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm(a: &[u8], m: usize, lda: usize, b: &PackedB, out: &mut [i32], p0: usize, p1: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `gemm_u8i8` runs this kernel only when the CPU has avx512f, avx512bw and
        // avx512vnni; the slice bounds it relies on are checked there and below.
        unsafe { x86::gemm(a, m, lda, b, out, p0, p1) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    super::reference::gemm_packed_scalar(a, m, lda, b, out, p0, p1)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{PackedB, PANEL};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn gemm(a: &[u8], m: usize, lda: usize, b: &PackedB, out: &mut [i32], p0: usize, p1: usize) {
        let mut p = p0;
        while p < p1 {
            let two = p + 1 < p1;
            let mut i = 0;
            while i < m {
                let mr = (m - i).min(4);
                let ai = &a[i * lda..];
                match (mr, two) {
                    (4, true) => tile::<4, 2>(ai, lda, b, out, i, p),
                    (3, true) => tile::<3, 2>(ai, lda, b, out, i, p),
                    (2, true) => tile::<2, 2>(ai, lda, b, out, i, p),
                    (1, true) => tile::<1, 2>(ai, lda, b, out, i, p),
                    (4, false) => tile::<4, 1>(ai, lda, b, out, i, p),
                    (3, false) => tile::<3, 1>(ai, lda, b, out, i, p),
                    (2, false) => tile::<2, 1>(ai, lda, b, out, i, p),
                    _ => tile::<1, 1>(ai, lda, b, out, i, p),
                }
                i += mr;
            }
            p += if two { 2 } else { 1 };
        }
    }

    /// Rows `row0..row0 + MR` x panels `p..p + NP`; `a` starts at row `row0`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn tile<const MR: usize, const NP: usize>(a: &[u8], lda: usize, b: &PackedB, out: &mut [i32], row0: usize, p: usize) {
        let groups = b.k_padded() / 4;
        let n = b.n();
        // bounds of everything read below: MR rows of kp bytes, NP panels
        assert!(a.len() >= (MR - 1) * lda + groups * 4);
        let bp: [&[i8]; NP] = std::array::from_fn(|q| b.panel(p + q));
        let mut acc = [[_mm512_setzero_si512(); NP]; MR];
        for g in 0..groups {
            let bv: [__m512i; NP] = std::array::from_fn(|q| _mm512_loadu_si512(bp[q].as_ptr().add(g * PANEL * 4) as *const _));
            for (r, acc) in acc.iter_mut().enumerate() {
                let a4 = (a.as_ptr().add(r * lda + g * 4) as *const i32).read_unaligned();
                let av = _mm512_set1_epi32(a4);
                for q in 0..NP {
                    acc[q] = _mm512_dpbusd_epi32(acc[q], av, bv[q]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (q, v) in acc.iter().enumerate() {
                let col = (p + q) * PANEL;
                let cols = (n - col).min(PANEL);
                let mut tmp = [0i32; PANEL];
                _mm512_storeu_si512(tmp.as_mut_ptr() as *mut _, *v);
                let o = (row0 + r) * n + col;
                out[o..o + cols].copy_from_slice(&tmp[..cols]);
            }
        }
    }
}

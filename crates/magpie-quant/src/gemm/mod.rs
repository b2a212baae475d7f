//! Int8 GEMM on the CPU: `C[m, n] = Σ_k A[m, k] · B[n, k]` with A unsigned 8-bit (quantized
//! activations), B signed 8-bit (quantized weights, packed once) and exact i32 accumulation.
//!
//! Three kernels over one packed layout (`pack.rs`): AVX-512 VNNI (`vpdpbusd`: four u8 x i8
//! products summed into i32 lanes, never saturating), AVX2 (`vpmaddubsw` + `vpmaddwd`) and a scalar
//! one. `vpmaddubsw` adds two u8 x i8 products into a *saturating* i16, which overflows when A
//! uses all 8 bits (255 · -128 · 2); PyTorch avoids it on x86 by quantizing activations to 7 bits
//! (`reduce_range`), where the sum is at most 127 · 128 · 2 = 32512. The AVX2 kernel here is exact
//! either way: for 7-bit A it is the plain sequence; when A may use bit 7 it splits each byte into
//! its low 7 bits and its top bit and adds `128 · Σ top · B` (two exact sums). `reference.rs` is the
//! plain triple loop every kernel is tested against.

mod avx2;
mod pack;
mod reference;
mod vnni;

pub use pack::PackedB;
pub use reference::gemm_u8i8_reference;

use magpie_core::{Error, Result};

/// Which inner kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int8Kernel {
    /// Portable loops (the fallback on CPUs without AVX2).
    Scalar,
    /// `vpmaddubsw` + `vpmaddwd` on 256-bit registers.
    Avx2,
    /// AVX-512 VNNI `vpdpbusd` on 512-bit registers.
    Avx512Vnni,
}

impl Int8Kernel {
    /// The fastest kernel this CPU runs (`MAGPIE_INT8_KERNEL=scalar|avx2|vnni` narrows the choice,
    /// for measurements; a kernel the CPU lacks is never chosen).
    pub fn best() -> Int8Kernel {
        let want = std::env::var("MAGPIE_INT8_KERNEL").unwrap_or_default();
        let avail = Int8Kernel::available();
        match want.as_str() {
            "scalar" => Int8Kernel::Scalar,
            "avx2" if avail.contains(&Int8Kernel::Avx2) => Int8Kernel::Avx2,
            _ => *avail.last().unwrap_or(&Int8Kernel::Scalar),
        }
    }
    /// Every kernel this CPU can run, slowest first.
    pub fn available() -> Vec<Int8Kernel> {
        let mut v = vec![Int8Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Int8Kernel::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw") && std::arch::is_x86_feature_detected!("avx512vnni") {
                v.push(Int8Kernel::Avx512Vnni);
            }
        }
        v
    }
}

/// A raw pointer to the output that tasks writing disjoint columns share.
#[derive(Clone, Copy)]
struct OutPtr(*mut i32);
// SAFETY: every task writes a disjoint set of columns (its own panels), see `gemm_u8i8`.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}
impl OutPtr {
    /// The pointer (a method, so closures capture the `Send` wrapper, not its raw field).
    fn get(self) -> *mut i32 {
        self.0
    }
}

/// `out[i * n + j] = Σ_k a[i * lda + k] · b[j, k]` for `i < m`, `j < b.n()`. Rows of `a` hold
/// `b.k_padded()` bytes (`lda ≥ k_padded`), zeros past `k`. `a_7bit` promises every byte of `a`
/// is at most 127 (the AVX2 kernel then skips the top-bit pass). Work is split over panels of
/// 16 columns on rayon's pool when the product is large enough to pay for it.
///
/// ```
/// use magpie_quant::gemm::{gemm_u8i8, gemm_u8i8_reference, Int8Kernel, PackedB};
/// let (m, n, k) = (3, 5, 7);
/// let a: Vec<u8> = (0..m * k).map(|i| (i * 37 % 256) as u8).collect();
/// let w: Vec<i8> = (0..n * k).map(|i| (i as i32 * 53 % 256 - 128) as i8).collect();
/// let b = PackedB::pack(&w, n, k)?;
/// let kp = b.k_padded();
/// let mut ap = vec![0u8; m * kp];
/// for i in 0..m { ap[i * kp..i * kp + k].copy_from_slice(&a[i * k..(i + 1) * k]); }
/// let mut out = vec![0i32; m * n];
/// gemm_u8i8(&ap, m, kp, &b, &mut out, false, Int8Kernel::best())?;
/// assert_eq!(out, gemm_u8i8_reference(&a, &w, m, n, k));
/// # Ok::<(), magpie_core::Error>(())
/// ```
pub fn gemm_u8i8(a: &[u8], m: usize, lda: usize, b: &PackedB, out: &mut [i32], a_7bit: bool, kernel: Int8Kernel) -> Result<()> {
    const OP: &str = "gemm_u8i8";
    let (n, kp) = (b.n(), b.k_padded());
    if lda < kp || (m > 0 && a.len() < (m - 1) * lda + kp) {
        return Err(Error::shape(OP, format!("A holds {} bytes, need {m} rows of {kp} (lda {lda})", a.len())));
    }
    if out.len() < m * n {
        return Err(Error::shape(OP, format!("output holds {} values, need {m} x {n}", out.len())));
    }
    if !Int8Kernel::available().contains(&kernel) {
        return Err(Error::unsupported(OP, format!("this CPU cannot run the {kernel:?} kernel")));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let panels = b.panels();
    let work = m * n * kp;
    let threads = if work < (1 << 18) { 1 } else { rayon::current_num_threads().min(panels).max(1) };
    let ptr = OutPtr(out.as_mut_ptr());
    let run = |p0: usize, p1: usize| {
        // SAFETY: `out` holds m * n values (checked above); tasks get disjoint panel ranges, so
        // no two write the same element, and `out` outlives the scope below.
        let out = unsafe { std::slice::from_raw_parts_mut(ptr.get(), m * n) };
        match kernel {
            Int8Kernel::Scalar => reference::gemm_packed_scalar(a, m, lda, b, out, p0, p1),
            Int8Kernel::Avx2 => avx2::gemm(a, m, lda, b, out, p0, p1, a_7bit),
            Int8Kernel::Avx512Vnni => vnni::gemm(a, m, lda, b, out, p0, p1),
        }
    };
    if threads <= 1 {
        run(0, panels);
    } else {
        let per = panels.div_ceil(threads);
        rayon::scope(|s| {
            for t in 0..threads {
                let (p0, p1) = (t * per, ((t + 1) * per).min(panels));
                if p0 < p1 {
                    s.spawn(move |_| run(p0, p1));
                }
            }
        });
    }
    Ok(())
}

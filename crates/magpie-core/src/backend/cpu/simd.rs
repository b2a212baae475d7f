//! Runtime CPU-feature dispatch for hot loops: `with_best(|| loop)` runs the closure inside a
//! function compiled for AVX2 when the CPU has it, so the loop (inlined there) is vectorized
//! 8 lanes wide instead of the 4 of the x86-64 baseline. The same binary runs everywhere.

/// Runs `f` in an AVX2 context when available (x86-64), else as is.
#[inline(always)]
pub fn with_best<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            #[target_feature(enable = "avx2")]
            unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}

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

/// Defines `fn name(args) -> ret { body }` compiled twice: for AVX2 (taken at run time when the
/// CPU has it) and for the baseline. Unlike [`with_best`], whose closure LLVM may decline to
/// inline into the AVX2 context when it is large (it then runs 4 lanes wide or scalar), the
/// body here *is* the AVX2 function, and `#[inline(always)]` helpers it calls are inlined into it.
#[macro_export]
#[doc(hidden)]
macro_rules! simd_kernel {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? $body
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2 (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            #[allow(clippy::too_many_arguments)]
            fn base($($arg: $ty),*) $(-> $ret)? $body
            base($($arg),*)
        }
    };
}

//! `fma_kernel!`: a function compiled twice, for AVX2 + FMA (taken at run time when the CPU has
//! both) and for the baseline, so plain loops in its body vectorize 8 lanes wide and `mul_add`
//! becomes one `vfmadd` instead of a call to the software `fmaf` (both round once: same results).

macro_rules! fma_kernel {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn fast($($arg: $ty),*) $(-> $ret)? $body
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    return unsafe { fast($($arg),*) };
                }
            }
            #[allow(clippy::too_many_arguments)]
            fn base($($arg: $ty),*) $(-> $ret)? $body
            base($($arg),*)
        }
    };
}
pub(crate) use fma_kernel;

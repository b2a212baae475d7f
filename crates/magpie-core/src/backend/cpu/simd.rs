//! Runtime CPU-feature dispatch for hot loops: `simd_kernel!` compiles a kernel for AVX-512,
//! AVX2 with FMA and the baseline and runs the widest the CPU has; `with_best(|| loop)` runs a
//! closure inside a function compiled for AVX2. The same binary runs everywhere.

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

/// The widest variant of [`simd_kernel!`] bodies this CPU runs: 2 for AVX-512 (F, VL, BW, DQ,
/// with AVX2 and FMA), 1 for AVX2 with FMA, 0 for the baseline; checked once. `MAGPIE_SIMD=avx2`
/// or `MAGPIE_SIMD=base` caps it (to compare the variants, or to test the narrower ones on a
/// CPU that has the wider).
#[doc(hidden)]
#[inline]
pub fn level() -> u8 {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<u8> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = match std::env::var("MAGPIE_SIMD").as_deref() {
            Ok("base") => 0,
            Ok("avx2") => 1,
            _ => 2,
        };
        #[cfg(target_arch = "x86_64")]
        let have = {
            use std::arch::is_x86_feature_detected as has;
            if !(has!("avx2") && has!("fma")) {
                0
            } else if has!("avx512f") && has!("avx512vl") && has!("avx512bw") && has!("avx512dq") {
                2
            } else {
                1
            }
        };
        #[cfg(not(target_arch = "x86_64"))]
        let have = 0;
        have.min(cap)
    })
}

/// `a * b + c`, fused (one rounding) when `F`: kernels pass the `FMA` constant that
/// [`simd_kernel!`] defines in each of its variants, so the fused form is used only where the
/// CPU has the instruction (elsewhere `mul_add` would be a libm call per element).
///
/// ```
/// use magpie_core::backend::cpu::simd::fmadd;
/// assert_eq!(fmadd::<false>(2.0, 3.0, 1.0), 7.0);
/// assert_eq!(fmadd::<true>(2.0, 3.0, 1.0), 7.0);
/// ```
#[inline(always)]
pub fn fmadd<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Defines `fn name(args) -> ret { body }` compiled three times: for AVX-512 (F, VL, BW, DQ;
/// flat loops then run 16 lanes wide with 32 registers), for AVX2 with FMA, and for the
/// baseline; the best one the CPU has is taken at run time ([`level`]; `MAGPIE_SIMD` caps it).
/// Unlike [`with_best`], whose closure LLVM may decline to inline into the AVX2 context when it
/// is large (it then runs 4 lanes wide or scalar), the body here *is* the function of each
/// variant, and `#[inline(always)]` helpers it calls are inlined into it. Each variant defines a
/// constant `FMA` (true where the CPU has fused multiply-add) that the body passes to helpers
/// taking `<const F: bool>` (see [`fmadd`]); apart from those fused operations, every variant
/// gives the baseline's results (LLVM does not reassociate float arithmetic).
#[macro_export]
#[doc(hidden)]
macro_rules! simd_kernel {
    // `no_avx512;` first: only the AVX2 + FMA and baseline variants, for kernels that measured
    // slower with AVX-512 (strided streams: each 64-byte load of a 16-byte-aligned row spans two
    // cache lines)
    (no_avx512; $(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    #[allow(dead_code)]
                    const FMA: bool = true;
                    $body
                }
                if $crate::backend::cpu::simd::level() >= 1 {
                    // SAFETY: `level` is 1 or more only when the CPU has AVX2 and FMA.
                    return unsafe { avx2($($arg),*) };
                }
            }
            #[allow(clippy::too_many_arguments)]
            fn base($($arg: $ty),*) $(-> $ret)? {
                #[allow(dead_code)]
                const FMA: bool = false;
                $body
            }
            base($($arg),*)
        }
    };
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                    #[allow(dead_code)]
                    const FMA: bool = true;
                    $body
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    #[allow(dead_code)]
                    const FMA: bool = true;
                    $body
                }
                match $crate::backend::cpu::simd::level() {
                    // SAFETY: `level` is 2 only when the CPU has these features.
                    2 => return unsafe { avx512($($arg),*) },
                    // SAFETY: `level` is 1 or more only when the CPU has AVX2 and FMA.
                    1 => return unsafe { avx2($($arg),*) },
                    _ => {}
                }
            }
            #[allow(clippy::too_many_arguments)]
            fn base($($arg: $ty),*) $(-> $ret)? {
                #[allow(dead_code)]
                const FMA: bool = false;
                $body
            }
            base($($arg),*)
        }
    };
}

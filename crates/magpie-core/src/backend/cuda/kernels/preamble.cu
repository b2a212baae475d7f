// torch-magpie CUDA preamble: storage types of every real dtype, conversions between them with
// PyTorch's cast rules (as the CPU backend's `Element::cast_from`), overloaded math wrappers and
// the strided-index helper. No toolkit header is needed.

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned char u8;
typedef signed char i8;
typedef short i16;
typedef int i32;

struct __align__(2) half_t { unsigned short x; };
struct __align__(2) bf16_t { unsigned short x; };

__device__ __forceinline__ float h2f(half_t h) { float f; asm("{cvt.f32.f16 %0, %1;}" : "=f"(f) : "h"(h.x)); return f; }
__device__ __forceinline__ half_t f2h(float f) { half_t h; asm("{cvt.rn.f16.f32 %0, %1;}" : "=h"(h.x) : "f"(f)); return h; }
__device__ __forceinline__ half_t d2h(double d) { half_t h; asm("{cvt.rn.f16.f64 %0, %1;}" : "=h"(h.x) : "d"(d)); return h; }
__device__ __forceinline__ float b2f(bf16_t b) { return __uint_as_float(((unsigned)b.x) << 16); }
__device__ __forceinline__ bf16_t f2b(float f) {
    unsigned u = __float_as_uint(f);
    bf16_t b;
    if ((u & 0x7fffffffu) > 0x7f800000u) { b.x = (unsigned short)((u >> 16) | 0x40u); return b; }
    u += 0x7fffu + ((u >> 16) & 1u);
    b.x = (unsigned short)(u >> 16);
    return b;
}

// ---- casts: to_<dst>(value) overloaded on the source type ----
#define MP_FROM_INTS(D, NAME, EXPR) \
    __device__ __forceinline__ D NAME(bool x) { return EXPR; } \
    __device__ __forceinline__ D NAME(u8 x) { return EXPR; } \
    __device__ __forceinline__ D NAME(i8 x) { return EXPR; } \
    __device__ __forceinline__ D NAME(i16 x) { return EXPR; } \
    __device__ __forceinline__ D NAME(i32 x) { return EXPR; } \
    __device__ __forceinline__ D NAME(i64 x) { return EXPR; }

// float to integer truncates through i64 (NaN -> 0, saturating), then wraps, as the CPU does
#define MP_TO_INT(D, NAME) \
    MP_FROM_INTS(D, NAME, (D)x) \
    __device__ __forceinline__ D NAME(float x) { return (D)(i64)x; } \
    __device__ __forceinline__ D NAME(double x) { return (D)(i64)x; } \
    __device__ __forceinline__ D NAME(half_t x) { return (D)(i64)h2f(x); } \
    __device__ __forceinline__ D NAME(bf16_t x) { return (D)(i64)b2f(x); }
MP_TO_INT(u8, to_u8)
MP_TO_INT(i8, to_i8)
MP_TO_INT(i16, to_i16)
MP_TO_INT(i32, to_i32)
MP_TO_INT(i64, to_i64)

MP_FROM_INTS(bool, to_bool, x != 0)
__device__ __forceinline__ bool to_bool(float x) { return x != 0.0f; }
__device__ __forceinline__ bool to_bool(double x) { return x != 0.0; }
__device__ __forceinline__ bool to_bool(half_t x) { return h2f(x) != 0.0f; }
__device__ __forceinline__ bool to_bool(bf16_t x) { return b2f(x) != 0.0f; }

#define MP_TO_FLOAT(D, NAME) \
    MP_FROM_INTS(D, NAME, (D)x) \
    __device__ __forceinline__ D NAME(float x) { return (D)x; } \
    __device__ __forceinline__ D NAME(double x) { return (D)x; } \
    __device__ __forceinline__ D NAME(half_t x) { return (D)h2f(x); } \
    __device__ __forceinline__ D NAME(bf16_t x) { return (D)b2f(x); }
MP_TO_FLOAT(float, to_f32)
MP_TO_FLOAT(double, to_f64)

MP_FROM_INTS(half_t, to_f16, d2h((double)x))
__device__ __forceinline__ half_t to_f16(float x) { return f2h(x); }
__device__ __forceinline__ half_t to_f16(double x) { return d2h(x); }
__device__ __forceinline__ half_t to_f16(half_t x) { return x; }
__device__ __forceinline__ half_t to_f16(bf16_t x) { return f2h(b2f(x)); }

MP_FROM_INTS(bf16_t, to_bf16, f2b((float)(double)x))
__device__ __forceinline__ bf16_t to_bf16(float x) { return f2b(x); }
__device__ __forceinline__ bf16_t to_bf16(double x) { return f2b((float)x); }
__device__ __forceinline__ bf16_t to_bf16(half_t x) { return f2b(h2f(x)); }
__device__ __forceinline__ bf16_t to_bf16(bf16_t x) { return x; }

// ---- math on float and double (m_ prefix: no clash with the built-in overloads) ----
#define MP_F1(N, FF, FD) \
    __device__ __forceinline__ float m_##N(float x) { return FF(x); } \
    __device__ __forceinline__ double m_##N(double x) { return FD(x); }
#define MP_F2(N, FF, FD) \
    __device__ __forceinline__ float m_##N(float x, float y) { return FF(x, y); } \
    __device__ __forceinline__ double m_##N(double x, double y) { return FD(x, y); }
MP_F1(exp, expf, exp) MP_F1(exp2, exp2f, exp2) MP_F1(expm1, expm1f, expm1)
MP_F1(log, logf, log) MP_F1(log2, log2f, log2) MP_F1(log10, log10f, log10) MP_F1(log1p, log1pf, log1p)
MP_F1(sqrt, sqrtf, sqrt) MP_F1(rsqrt, rsqrtf, rsqrt) MP_F1(cbrt, cbrtf, cbrt)
MP_F1(sin, sinf, sin) MP_F1(sinpi, sinpif, sinpi) MP_F1(cos, cosf, cos) MP_F1(tan, tanf, tan)
MP_F1(asin, asinf, asin) MP_F1(acos, acosf, acos) MP_F1(atan, atanf, atan)
MP_F1(sinh, sinhf, sinh) MP_F1(cosh, coshf, cosh) MP_F1(tanh, tanhf, tanh)
MP_F1(asinh, asinhf, asinh) MP_F1(acosh, acoshf, acosh) MP_F1(atanh, atanhf, atanh)
MP_F1(erf, erff, erf) MP_F1(erfc, erfcf, erfc) MP_F1(erfinv, erfinvf, erfinv)
MP_F1(lgamma, lgammaf, lgamma) MP_F1(floor, floorf, floor) MP_F1(ceil, ceilf, ceil)
MP_F1(trunc, truncf, trunc) MP_F1(round, rintf, rint) MP_F1(fabs, fabsf, fabs)
MP_F2(pow, powf, pow) MP_F2(atan2, atan2f, atan2) MP_F2(hypot, hypotf, hypot)
MP_F2(fmod, fmodf, fmod) MP_F2(copysign, copysignf, copysign) MP_F2(nextafter, nextafterf, nextafter)
MP_F2(fmax, fmaxf, fmax) MP_F2(fmin, fminf, fmin)
template <class T> __device__ __forceinline__ bool m_isnan(T x) { return x != x; }

// ---- strided indexing ----
#define MP_MAXD 10
// Sizes of the (coalesced) iteration space and, per operand, its strides in elements and offset.
// Operand 0 is the output when the output is strided.
struct Strided {
    int ndim;
    i64 size[MP_MAXD];
    i64 stride[4][MP_MAXD];
    i64 offset[4];
};
// The storage positions of linear index `i` (row-major over `size`) for operands 0..n-1.
template <int N>
__device__ __forceinline__ void mp_offsets(const Strided& s, i64 i, i64* pos) {
#pragma unroll
    for (int k = 0; k < N; k++) pos[k] = s.offset[k];
    for (int d = s.ndim - 1; d >= 0; d--) {
        i64 q = i / s.size[d];
        i64 r = i - q * s.size[d];
        i = q;
#pragma unroll
        for (int k = 0; k < N; k++) pos[k] += r * s.stride[k][d];
    }
}

// ---- vector access: N elements of T as one aligned access of N * sizeof(T) bytes (1 to 16) ----
// Loaded and stored through a plain integer / uint2 / uint4 so that the access is one
// instruction whatever T is; the union gives the elements. The address must be aligned to the
// access size (the host checks before it picks a vector kernel).
template <int B> struct MpRaw;
template <> struct MpRaw<1> { typedef unsigned char t; };
template <> struct MpRaw<2> { typedef unsigned short t; };
template <> struct MpRaw<4> { typedef unsigned int t; };
template <> struct MpRaw<8> { typedef uint2 t; };
template <> struct MpRaw<16> { typedef uint4 t; };
template <class T, int N> union MpVec {
    typename MpRaw<sizeof(T) * N>::t raw;
    T v[N];
};
// Vector j (elements j*N .. j*N+N-1) of p.
template <class T, int N> __device__ __forceinline__ MpVec<T, N> mp_ldv(const T* p, i64 j) {
    MpVec<T, N> r;
    r.raw = reinterpret_cast<const typename MpRaw<sizeof(T) * N>::t*>(p)[j];
    return r;
}
template <class T, int N> __device__ __forceinline__ void mp_stv(T* p, i64 j, const MpVec<T, N>& r) {
    reinterpret_cast<typename MpRaw<sizeof(T) * N>::t*>(p)[j] = r.raw;
}

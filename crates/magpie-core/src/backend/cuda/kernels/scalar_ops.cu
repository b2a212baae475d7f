// Scalar functions of the elementwise ops whose expression is more than one line, written as
// the CPU backend computes them (ops/binary/arith.rs, compare.rs, math.rs) so both devices agree.

template <class T> __device__ __forceinline__ T mp_div_floor(T a, T b) {
    if (b == T(0)) return a / b;
    T m = m_fmod(a, b);
    T div = (a - m) / b;
    if (m != T(0) && ((b < T(0)) != (m < T(0)))) div -= T(1);
    if (div != T(0)) {
        T f = m_floor(div);
        if (div - f > T(0.5)) f += T(1);
        return f;
    }
    return m_copysign(T(0), a / b);
}
template <class T> __device__ __forceinline__ T mp_remainder(T a, T b) {
    T m = m_fmod(a, b);
    return (m != T(0) && ((b < T(0)) != (m < T(0)))) ? m + b : m;
}
__device__ __forceinline__ i64 mp_div_trunc_int(i64 a, i64 b) {
    if (b == 0) return 0;
    if (b == -1) return (i64)(0ull - (u64)a);
    return a / b;
}
__device__ __forceinline__ i64 mp_rem_int(i64 a, i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ i64 mp_div_floor_int(i64 a, i64 b) {
    if (b == 0) return 0;
    i64 q = mp_div_trunc_int(a, b);
    return (mp_rem_int(a, b) != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ i64 mp_remainder_int(i64 a, i64 b) {
    if (b == 0) return 0;
    i64 r = mp_rem_int(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ i64 mp_powi(i64 a, i64 b) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b % 2 == 0) ? 1 : -1) : 0);
    u64 base = (u64)a, acc = 1, e = (u64)b;
    while (e) { if (e & 1) acc *= base; base *= base; e >>= 1; }
    return (i64)acc;
}
template <class T> __device__ __forceinline__ T mp_nan_max(T a, T b) { return (m_isnan(a) || m_isnan(b)) ? a + b : (a > b ? a : b); }
template <class T> __device__ __forceinline__ T mp_nan_min(T a, T b) { return (m_isnan(a) || m_isnan(b)) ? a + b : (a < b ? a : b); }
template <class T> __device__ __forceinline__ T mp_max(T a, T b) { return a > b ? a : b; }
template <class T> __device__ __forceinline__ T mp_min(T a, T b) { return a < b ? a : b; }
template <class T> __device__ __forceinline__ T mp_logaddexp(T a, T b) {
    if (isinf(a) && a == b) return a;
    T m = mp_nan_max(a, b);
    return m + m_log1p(m_exp(-m_fabs(a - b)));
}
template <class T> __device__ __forceinline__ T mp_logaddexp2(T a, T b) {
    if (isinf(a) && a == b) return a;
    T m = mp_nan_max(a, b);
    return m + m_log1p(m_exp2(-m_fabs(a - b))) / T(0.6931471805599453);
}
template <class T> __device__ __forceinline__ T mp_xlogy(T a, T b) { return m_isnan(b) ? b : (a == T(0) ? T(0) : a * m_log(b)); }
template <class T> __device__ __forceinline__ T mp_xlog1py(T a, T b) { return m_isnan(b) ? b : (a == T(0) ? T(0) : a * m_log1p(b)); }
template <class T> __device__ __forceinline__ T mp_sign(T x) { return T((x > T(0)) - (x < T(0))); }
template <class T> __device__ __forceinline__ T mp_sinc(T x) {
    if (x == T(0)) return T(1);
    return m_sinpi(x) / (T(3.141592653589793) * x);
}
__device__ __forceinline__ i64 mp_shl(i64 a, i64 b) { return (b < 0 || b >= 64) ? 0 : (i64)((u64)a << b); }
__device__ __forceinline__ i64 mp_shr(i64 a, i64 b) { return (b < 0 || b >= 64) ? (a >> 63) : (a >> b); }
__device__ __forceinline__ i64 mp_gcd(i64 a, i64 b) {
    a = a < 0 ? -a : a; b = b < 0 ? -b : b;
    while (b != 0) { i64 t = a % b; a = b; b = t; }
    return a;
}

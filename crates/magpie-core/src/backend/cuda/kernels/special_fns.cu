// ---- torch.special functions that loop (orthogonal polynomials, Hurwitz zeta, polygamma) ----
// The algorithms of ops/special/polynomial.rs and ops/special/gamma.rs, one element per thread,
// in double (callers cast their inputs); templates so that a kernel compiles only what it uses.

// One step of the three-term recurrence of family `kind`: p_(k+1) from p_(k-1) = p, p_k = q.
template <class T> __device__ T mp_poly_next(int kind, long long k, T x, T p, T q) {
    T kf = T(k);
    switch (kind) {
        case 4: return T(2) * x * q - T(2) * kf * p;                          // Hermite H
        case 5: return x * q - kf * p;                                         // Hermite He
        case 6: return ((T(2) * kf + T(1) - x) * q - kf * p) / (kf + T(1));    // Laguerre L
        case 7: return ((T(2) * kf + T(1)) * x * q - kf * p) / (kf + T(1));    // Legendre P
        default: return T(2) * x * q - p;                                      // Chebyshev T U V W
    }
}

// p_n from p_0 = 1 and p_1; stops once two terms in a row are not finite (as the CPU loop).
template <class T> __device__ T mp_poly_run(int kind, long long n, T x, T p1) {
    if (n == 0) return T(1);
    T p = T(1), q = p1;
    for (long long k = 1; k < n; k++) {
        T r = mp_poly_next(kind, k, x, p, q);
        p = q;
        q = r;
        if (!isfinite(q) && !isfinite(p)) break;
    }
    return q;
}

// P_n(x) of family `kind`: 0..3 Chebyshev T, U, V, W; 4 Hermite H; 5 Hermite He; 6 Laguerre L;
// 7 Legendre P. `nv` is truncated toward zero (saturating); a NaN degree gives NaN, n < 0 gives 0.
template <class T> __device__ T mp_orth_poly(int kind, T x, T nv) {
    if (m_isnan(nv)) return nv;
    long long n = nv >= T(9.2e18) ? 9223372036854775807ll : nv <= T(-9.2e18) ? (-9223372036854775807ll - 1) : (long long)nv;
    if (n < 0) return T(0);
    T ax = m_fabs(x), nf = T(n);
    bool even = n % 2 == 0;
    switch (kind) {
        case 0:
            if (ax == T(1)) return (x > T(0) || even) ? T(1) : T(-1);
            if (n > 6 && ax < T(1)) return m_cos(nf * m_acos(x));
            return mp_poly_run(kind, n, x, x);
        case 1:
            if (ax == T(1)) return (x > T(0) || even) ? nf + T(1) : -(nf + T(1));
            if (n > 8 && ax < T(1)) {
                T t = m_acos(x);
                return m_sin(t) != T(0) ? m_sin((nf + T(1)) * t) / m_sin(t) : (nf + T(1)) * m_cos((nf + T(1)) * t) / x;
            }
            return mp_poly_run(kind, n, x, T(2) * x);
        case 2:
            if (ax == T(1)) return x > T(0) ? T(1) : (even ? T(2) * nf + T(1) : -(T(2) * nf + T(1)));
            if (n > 8 && ax < T(1)) {
                T t = m_acos(x);
                if (m_sin(t / T(2)) != T(1)) return m_cos((nf + T(0.5)) * t) / m_cos(t / T(2));
                return even ? T(2) * nf + T(1) : -(T(2) * nf + T(1));
            }
            return mp_poly_run(kind, n, x, T(2) * x - T(1));
        case 3:
            if (ax == T(1)) return x > T(0) ? T(2) * nf + T(1) : (even ? T(1) : T(-1));
            if (n > 8 && ax < T(1)) {
                T t = m_acos(x);
                if (m_cos(t / T(2)) != T(1)) return m_sin((nf + T(0.5)) * t) / m_sin(t / T(2));
                return x > T(0) ? T(2) * nf + T(1) : (even ? T(1) : T(-1));
            }
            return mp_poly_run(kind, n, x, T(2) * x + T(1));
        case 4: return mp_poly_run(kind, n, x, T(2) * x);
        case 5: return mp_poly_run(kind, n, x, x);
        case 6:
            if (x == T(0)) return T(1);
            return mp_poly_run(kind, n, x, T(1) - x);
        default:
            if (ax == T(1)) return (x > T(0) || even) ? T(1) : T(-1);
            return mp_poly_run(kind, n, x, x);
    }
}

// The Hurwitz zeta function zeta(s, q) for s > 1 by Euler-Maclaurin summation (gamma.rs `zeta`).
template <class T> __device__ T mp_zeta(T s, T q) {
    const T bern[12] = {1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0, -691.0 / 2730.0,
                        7.0 / 6.0, -3617.0 / 510.0, 43867.0 / 798.0, -174611.0 / 330.0, 854513.0 / 138.0,
                        -236364091.0 / 2730.0};
    if (m_isnan(s) || m_isnan(q)) return s + q;
    if (s == T(1)) return T(__longlong_as_double(0x7ff0000000000000LL));
    if (s < T(1)) return T(__longlong_as_double(0x7ff8000000000000LL));
    if (q <= T(0)) {
        if (q == m_floor(q)) return T(__longlong_as_double(0x7ff0000000000000LL));
        if (s != m_floor(s)) return T(__longlong_as_double(0x7ff8000000000000LL));
    }
    if (isinf(q)) return T(0);
    T start = T(12) + (s < T(60) ? s : T(60));
    T sum = T(0), a = q;
    int n = 0;
    while (a < start && n < 100000) {
        sum += m_pow(a, -s);
        a += T(1);
        n++;
    }
    T tail = m_pow(a, T(1) - s) / (s - T(1)) + T(0.5) * m_pow(a, -s);
    T fac = s * m_pow(a, -s - T(1));
    T fact = T(2);
    for (int j = 0; j < 12; j++) {
        T term = bern[j] / fact * fac;
        tail += term;
        if (m_fabs(term) < T(1e-17) * m_fabs(sum + tail)) break;
        T m = T(2 * j);
        fac *= (s + m + T(1)) * (s + m + T(2)) / (a * a);
        fact *= (m + T(3)) * (m + T(4));
    }
    return sum + tail;
}

// psi^(n)(x) for n >= 1: (-1)^(n+1) n! zeta(n + 1, x) (gamma.rs `polygamma`).
template <class T> __device__ T mp_polygamma(long long n, T x) {
    T nf = T(n);
    T sign = n % 2 == 1 ? T(1) : T(-1);
    return sign * m_exp(m_lgamma(nf + T(1))) * mp_zeta(nf + T(1), x);
}

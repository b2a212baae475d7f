// Residual add + layer_norm over contiguous [rows, n] tensors, T the dtype of the normalized
// input h, the output, the statistics and the affine parameters; x, the residual, the bias and
// dx have dtypes known only at run time (codes: 0 f32, 1 bf16, 2 f16, 3 f64), so one module per
// T serves every mix that autocast hands over (a bf16 projection, a float32 residual):
//   h = round_h(round_xb(x + bias) + residual)          (the composite's roundings)
//   y = (h - mean(h)) * rstd * w + lnb                 (add_ln_fwd, a block per row; h saved)
//   dh = rstd * (gw - mean(gw) - hhat * mean(gw * hhat)) (+ gh), gw = g * w   (add_ln_bwd_dx)
//   dw = sum g * hhat, dlnb = sum g, dbias = sum dh    (add_ln_bwd_cols, 32 columns a block;
//                                                      rows split over blocks, add_ln_bwd_fin)
// Rows of up to AL_MAXK * blockDim.x elements are held in registers (read once, written once);
// longer rows are re-read by the thread that wrote each element.

typedef Ty<T>::acc A;

__device__ __forceinline__ A ld_any(const void* p, i64 i, int code) {
    switch (code) {
        case 1: return (A)b2f(((const bf16_t*)p)[i]);
        case 2: return (A)h2f(((const half_t*)p)[i]);
        case 3: return (A)((const double*)p)[i];
        default: return (A)((const float*)p)[i];
    }
}

__device__ __forceinline__ void st_any(void* p, i64 i, int code, A v) {
    switch (code) {
        case 1: ((bf16_t*)p)[i] = f2b((float)v); break;
        case 2: ((half_t*)p)[i] = f2h((float)v); break;
        case 3: ((double*)p)[i] = (double)v; break;
        default: ((float*)p)[i] = (float)v;
    }
}

// v rounded to the dtype of `code` (an intermediate of the composite held in that dtype)
__device__ __forceinline__ A round_to(A v, int code) {
    switch (code) {
        case 1: return (A)b2f(f2b((float)v));
        case 2: return (A)h2f(f2h((float)v));
        case 3: return v;
        default: return (A)(float)v;
    }
}

#define AL_MAXK 4

extern "C" __global__ void __launch_bounds__(1024) add_ln_fwd(const void* __restrict__ x, int cx, const void* __restrict__ res, int cr,
                                                              const void* __restrict__ bias, int cb, int cxb, int ch,
                                                              const T* __restrict__ w, const T* __restrict__ lnb, T* __restrict__ h,
                                                              T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, i64 n,
                                                              double eps) {
    __shared__ A sm[32];
    const i64 row = blockIdx.x, o = row * n;
    T* hr = h + o;
    T* yr = y + o;
    A mu, rs;
    if (n <= (i64)blockDim.x * AL_MAXK) {
        // all loads of a thread issued before the first reduction
        A v[AL_MAXK];
        A s = 0;
#pragma unroll
        for (int k = 0; k < AL_MAXK; k++) {
            const i64 i = threadIdx.x + (i64)k * blockDim.x;
            v[k] = 0;
            if (i < n) {
                A t = ld_any(x, o + i, cx);
                if (bias) t = round_to(t + ld_any(bias, i, cb), cxb);
                v[k] = Ty<T>::ld(Ty<T>::st(round_to(t + ld_any(res, o + i, cr), ch)));
                s += v[k];
            }
        }
        mu = block_reduce<OpSum<A> >(s, sm) / (A)n;
        A q = 0;
#pragma unroll
        for (int k = 0; k < AL_MAXK; k++) {
            if (threadIdx.x + (i64)k * blockDim.x < n) {
                const A d = v[k] - mu;
                q += d * d;
            }
        }
        rs = m_rsqrt(block_reduce<OpSum<A> >(q, sm) / (A)n + (A)eps);
#pragma unroll
        for (int k = 0; k < AL_MAXK; k++) {
            const i64 i = threadIdx.x + (i64)k * blockDim.x;
            if (i < n) {
                A r = (v[k] - mu) * rs;
                if (w) r *= Ty<T>::ld(w[i]);
                if (lnb) r += Ty<T>::ld(lnb[i]);
                hr[i] = Ty<T>::st(v[k]);
                yr[i] = Ty<T>::st(r);
            }
        }
    } else {
        A s = 0;
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            A v = ld_any(x, o + i, cx);
            if (bias) v = round_to(v + ld_any(bias, i, cb), cxb);
            v = Ty<T>::ld(Ty<T>::st(round_to(v + ld_any(res, o + i, cr), ch)));
            hr[i] = Ty<T>::st(v);
            s += v;
        }
        mu = block_reduce<OpSum<A> >(s, sm) / (A)n;
        // the row is re-read from h by the thread that wrote each element
        A q = 0;
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            A d = Ty<T>::ld(hr[i]) - mu;
            q += d * d;
        }
        rs = m_rsqrt(block_reduce<OpSum<A> >(q, sm) / (A)n + (A)eps);
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            A v = (Ty<T>::ld(hr[i]) - mu) * rs;
            if (w) v *= Ty<T>::ld(w[i]);
            if (lnb) v += Ty<T>::ld(lnb[i]);
            yr[i] = Ty<T>::st(v);
        }
    }
    if (threadIdx.x == 0) {
        mean[row] = Ty<T>::st(mu);
        rstd[row] = Ty<T>::st(rs);
    }
}

// add_ln_fwd with 16- or 8-byte loads: four consecutive elements a load, the operand dtypes fixed
// at compile time (one dispatch a block instead of a switch an element). For rows of n % 4 == 0
// elements, every operand aligned to 4 elements, codes 0-2 and T not double (the host checks);
// a row of up to 4 * AL_VK * blockDim.x elements is held in registers.
#define AL_VK 2

template <class X> struct FaIsBfAl { static constexpr bool v = false; };
template <> struct FaIsBfAl<bf16_t> { static constexpr bool v = true; };

template <int C> struct AlTy;
template <> struct AlTy<0> { typedef float t; };
template <> struct AlTy<1> { typedef bf16_t t; };
template <> struct AlTy<2> { typedef half_t t; };

// Elements [i, i + 4) of an array of element type E (4-element aligned) as floats.
template <class E>
__device__ __forceinline__ void al_ld4(const E* p, i64 i, float* v) {
    if constexpr (sizeof(E) == 4) {
        const float4 f = *(const float4*)(p + i);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
        const uint2 u = *(const uint2*)(p + i);
        const E* e = (const E*)&u;
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = (float)Ty<E>::ld(e[j]);
    }
}

__device__ __forceinline__ void al_st4(T* p, i64 i, const float* v) {
    if constexpr (sizeof(T) == 4) {
        *(float4*)(p + i) = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (sizeof(T) == 2) {
        uint2 u;
        T* e = (T*)&u;
#pragma unroll
        for (int j = 0; j < 4; j++) e[j] = Ty<T>::st(v[j]);
        *(uint2*)(p + i) = u;
    }
}

template <int CX, int CR, int CB>
__device__ __forceinline__ void add_ln_fwd_v4_row(const void* __restrict__ x, const void* __restrict__ res, const void* __restrict__ bias, int cxb,
                                                  int ch, const T* __restrict__ w, const T* __restrict__ lnb, T* __restrict__ h, T* __restrict__ y,
                                                  T* __restrict__ mean, T* __restrict__ rstd, i64 n, double eps, float* sm) {
    typedef typename AlTy<CX>::t EX;
    typedef typename AlTy<CR>::t ER;
    typedef typename AlTy<CB>::t EB;
    const i64 row = blockIdx.x, o = row * n;
    float v[AL_VK][4];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < AL_VK; k++) {
        const i64 i = ((i64)threadIdx.x + (i64)k * blockDim.x) * 4;
        v[k][0] = v[k][1] = v[k][2] = v[k][3] = 0.f;
        if (i < n) {
            float xv[4], rv[4], bv[4];
            al_ld4((const EX*)x, o + i, xv);
            al_ld4((const ER*)res, o + i, rv);
            if (bias) al_ld4((const EB*)bias, i, bv);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float t = xv[j];
                if (bias) t = (float)round_to(t + bv[j], cxb);
                v[k][j] = (float)Ty<T>::ld(Ty<T>::st(round_to(t + rv[j], ch)));
                s += v[k][j];
            }
        }
    }
    const float mu = block_reduce<OpSum<float> >(s, sm) / (float)n;
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < AL_VK; k++) {
        if (((i64)threadIdx.x + (i64)k * blockDim.x) * 4 < n) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float d = v[k][j] - mu;
                q += d * d;
            }
        }
    }
    const float rs = m_rsqrt(block_reduce<OpSum<float> >(q, sm) / (float)n + (float)eps);
#pragma unroll
    for (int k = 0; k < AL_VK; k++) {
        const i64 i = ((i64)threadIdx.x + (i64)k * blockDim.x) * 4;
        if (i < n) {
            float wv[4] = {1.f, 1.f, 1.f, 1.f}, bv[4] = {0.f, 0.f, 0.f, 0.f}, r[4];
            if (w) al_ld4(w, i, wv);
            if (lnb) al_ld4(lnb, i, bv);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                r[j] = (v[k][j] - mu) * rs;
                if (w) r[j] *= wv[j];
                if (lnb) r[j] += bv[j];
            }
            al_st4(h, o + i, v[k]);
            al_st4(y, o + i, r);
        }
    }
    if (threadIdx.x == 0) {
        mean[row] = Ty<T>::st(mu);
        rstd[row] = Ty<T>::st(rs);
    }
}

extern "C" __global__ void __launch_bounds__(1024) add_ln_fwd_v4(const void* __restrict__ x, int cx, const void* __restrict__ res, int cr,
                                                                 const void* __restrict__ bias, int cb, int cxb, int ch,
                                                                 const T* __restrict__ w, const T* __restrict__ lnb, T* __restrict__ h,
                                                                 T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, i64 n,
                                                                 double eps) {
    __shared__ float sm[32];
    if (sizeof(T) == 8) return;  // never launched for double (the host takes add_ln_fwd)
    // the mixes autocast and plain 16-bit or float32 models hand over: x of any of the three
    // dtypes, the residual and the bias in T or float32
    constexpr int CT = sizeof(T) == 4 ? 0 : (FaIsBfAl<T>::v ? 1 : 2);
    switch ((cx * 2 + (cr != 0)) * 2 + (bias && cb != 0)) {
#define AL_CASE(a, b, c) \
    case (a * 2 + b) * 2 + c: add_ln_fwd_v4_row<a, b ? CT : 0, c ? CT : 0>(x, res, bias, cxb, ch, w, lnb, h, y, mean, rstd, n, eps, sm); break;
#define AL_CASES(a) AL_CASE(a, 0, 0) AL_CASE(a, 0, 1) AL_CASE(a, 1, 0) AL_CASE(a, 1, 1)
        AL_CASES(0) AL_CASES(1) AL_CASES(2)
#undef AL_CASES
#undef AL_CASE
        default: break;
    }
}

// dh (dtype T, or null) and dx (dtype code cdx, or null) of one row per block. gh (dtype T, or
// null): a gradient of h itself (h also an output, a pre-LayerNorm residual stream), added to
// the norm's gradient after its rounding to T, as the composite's sum of the two gradients.
extern "C" __global__ void __launch_bounds__(1024) add_ln_bwd_dx(const T* __restrict__ g, const T* __restrict__ h, const T* __restrict__ mean,
                                                                 const T* __restrict__ rstd, const T* __restrict__ w, const T* __restrict__ gh,
                                                                 T* __restrict__ dh, void* __restrict__ dx, int cdx, i64 n) {
    __shared__ A sm[32];
    const i64 r = blockIdx.x, o = r * n;
    const A mu = Ty<T>::ld(mean[r]), rs = Ty<T>::ld(rstd[r]);
    if (n <= (i64)blockDim.x * AL_MAXK) {
        A gw[AL_MAXK], hh[AL_MAXK];
        A sa = 0, sb = 0;
#pragma unroll
        for (int k = 0; k < AL_MAXK; k++) {
            const i64 i = threadIdx.x + (i64)k * blockDim.x;
            gw[k] = 0;
            hh[k] = 0;
            if (i < n) {
                gw[k] = Ty<T>::ld(g[o + i]);
                if (w) gw[k] *= Ty<T>::ld(w[i]);
                hh[k] = (Ty<T>::ld(h[o + i]) - mu) * rs;
                sa += gw[k];
                sb += gw[k] * hh[k];
            }
        }
        sa = block_reduce<OpSum<A> >(sa, sm);
        sb = block_reduce<OpSum<A> >(sb, sm);
        const A a = sa / (A)n, b = sb / (A)n;
#pragma unroll
        for (int k = 0; k < AL_MAXK; k++) {
            const i64 i = threadIdx.x + (i64)k * blockDim.x;
            if (i < n) {
                A d = rs * (gw[k] - a - hh[k] * b);
                if (gh) d = Ty<T>::ld(Ty<T>::st(d)) + Ty<T>::ld(gh[o + i]);
                if (dh) dh[o + i] = Ty<T>::st(d);
                if (dx) st_any(dx, o + i, cdx, Ty<T>::ld(Ty<T>::st(d)));
            }
        }
        return;
    }
    A sa = 0, sb = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A gw = Ty<T>::ld(g[o + i]);
        if (w) gw *= Ty<T>::ld(w[i]);
        A hh = (Ty<T>::ld(h[o + i]) - mu) * rs;
        sa += gw;
        sb += gw * hh;
    }
    sa = block_reduce<OpSum<A> >(sa, sm);
    sb = block_reduce<OpSum<A> >(sb, sm);
    const A a = sa / (A)n, b = sb / (A)n;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A gw = Ty<T>::ld(g[o + i]);
        if (w) gw *= Ty<T>::ld(w[i]);
        A hh = (Ty<T>::ld(h[o + i]) - mu) * rs;
        A d = rs * (gw - a - hh * b);
        if (gh) d = Ty<T>::ld(Ty<T>::st(d)) + Ty<T>::ld(gh[o + i]);
        if (dh) dh[o + i] = Ty<T>::st(d);
        if (dx) st_any(dx, o + i, cdx, Ty<T>::ld(Ty<T>::st(d)));
    }
}

// Block (32, 16) at (blockIdx.x, blockIdx.y): thread (tx, ty) sums column blockIdx.x * 32 + tx
// over rows r0 + ty, r0 + ty + 16, ... below r1, the block's slice [r0, r1) of `chunk` rows;
// the 16 partial sums meet in shared memory in a fixed order (deterministic). With one slice
// (part null) dw / dlnb (dtype T) and dbias (code cb, from dh) are written when non-null; with
// several, the block writes its three sums to part[(blockIdx.y * 3 + k) * n + j] (k: w, lnb,
// bias) and add_ln_bwd_fin folds the slices in order. Many slices put more loads in flight than
// the 24 blocks of a 768-wide row would.
extern "C" __global__ void add_ln_bwd_cols(const T* __restrict__ g, const T* __restrict__ h, const T* __restrict__ mean,
                                           const T* __restrict__ rstd, const T* __restrict__ dh, T* dw, T* dlnb, void* dbias, int cb,
                                           i64 rows, i64 n, A* __restrict__ part, i64 chunk) {
    __shared__ A s0[16][33];
    __shared__ A s1[16][33];
    __shared__ A s2[16][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const i64 j = (i64)blockIdx.x * 32 + tx;
    const i64 r0 = (i64)blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    const bool want_w = dw || part, want_b = dbias || part;
    A aw = 0, ab = 0, ad = 0;
    if (j < n) {
        for (i64 r = r0 + ty; r < r1; r += 16) {
            A gv = Ty<T>::ld(g[r * n + j]);
            if (want_w) aw += gv * ((Ty<T>::ld(h[r * n + j]) - Ty<T>::ld(mean[r])) * Ty<T>::ld(rstd[r]));
            ab += gv;
            if (want_b && dh) ad += Ty<T>::ld(dh[r * n + j]);
        }
    }
    s0[ty][tx] = aw;
    s1[ty][tx] = ab;
    s2[ty][tx] = ad;
    __syncthreads();
    if (ty == 0 && j < n) {
        for (int k = 1; k < 16; k++) {
            aw += s0[k][tx];
            ab += s1[k][tx];
            ad += s2[k][tx];
        }
        if (part) {
            A* p = part + (i64)blockIdx.y * 3 * n;
            p[j] = aw;
            p[n + j] = ab;
            p[2 * n + j] = ad;
        } else {
            if (dw) dw[j] = Ty<T>::st(aw);
            if (dlnb) dlnb[j] = Ty<T>::st(ab);
            if (dbias) st_any(dbias, j, cb, ad);
        }
    }
}

// The second pass of a split add_ln_bwd_cols: a thread per (sum k, column j), k = 0 weight,
// 1 LayerNorm bias, 2 bias, adding the `slices` partials in slice order; four loads are issued
// before their adds, as the chain of one thread is what this pass waits on.
extern "C" __global__ void add_ln_bwd_fin(const A* __restrict__ part, i64 slices, T* dw, T* dlnb, void* dbias, int cb, i64 n) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 3 * n) return;
    const int k = (int)(t / n);
    const i64 j = t - (i64)k * n;
    if ((k == 0 && !dw) || (k == 1 && !dlnb) || (k == 2 && !dbias)) return;
    const A* q = part + (i64)k * n + j;
    const i64 st = 3 * n;
    A s = 0;
    i64 p = 0;
    for (; p + 4 <= slices; p += 4) {
        const A a0 = q[p * st], a1 = q[(p + 1) * st], a2 = q[(p + 2) * st], a3 = q[(p + 3) * st];
        s += a0;
        s += a1;
        s += a2;
        s += a3;
    }
    for (; p < slices; p++) s += q[p * st];
    if (k == 0) dw[j] = Ty<T>::st(s);
    else if (k == 1) dlnb[j] = Ty<T>::st(s);
    else st_any(dbias, j, cb, s);
}

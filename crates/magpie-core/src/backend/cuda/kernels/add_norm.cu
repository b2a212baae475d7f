// Residual add + layer_norm over contiguous [rows, n] tensors, T the dtype of the normalized
// input h, the output, the statistics and the affine parameters; x, the residual, the bias and
// dx have dtypes known only at run time (codes: 0 f32, 1 bf16, 2 f16, 3 f64), so one module per
// T serves every mix that autocast hands over (a bf16 projection, a float32 residual):
//   h = round_h(round_xb(x + bias) + residual)          (the composite's roundings)
//   y = (h - mean(h)) * rstd * w + lnb                 (add_ln_fwd, a block per row; h saved)
//   dh = rstd * (gw - mean(gw) - hhat * mean(gw * hhat)), gw = g * w   (add_ln_bwd_dx)
//   dw = sum g * hhat, dlnb = sum g, dbias = sum dh    (add_ln_bwd_cols, 32 columns a block)

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

extern "C" __global__ void __launch_bounds__(1024) add_ln_fwd(const void* __restrict__ x, int cx, const void* __restrict__ res, int cr,
                                                              const void* __restrict__ bias, int cb, int cxb, int ch,
                                                              const T* __restrict__ w, const T* __restrict__ lnb, T* __restrict__ h,
                                                              T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, i64 n,
                                                              double eps) {
    __shared__ A sm[32];
    const i64 row = blockIdx.x, o = row * n;
    T* hr = h + o;
    T* yr = y + o;
    A s = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A v = ld_any(x, o + i, cx);
        if (bias) v = round_to(v + ld_any(bias, i, cb), cxb);
        v = Ty<T>::ld(Ty<T>::st(round_to(v + ld_any(res, o + i, cr), ch)));
        hr[i] = Ty<T>::st(v);
        s += v;
    }
    const A mu = block_reduce<OpSum<A> >(s, sm) / (A)n;
    // the row is re-read from h by the thread that wrote each element
    A q = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A d = Ty<T>::ld(hr[i]) - mu;
        q += d * d;
    }
    const A rs = m_rsqrt(block_reduce<OpSum<A> >(q, sm) / (A)n + (A)eps);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A v = (Ty<T>::ld(hr[i]) - mu) * rs;
        if (w) v *= Ty<T>::ld(w[i]);
        if (lnb) v += Ty<T>::ld(lnb[i]);
        yr[i] = Ty<T>::st(v);
    }
    if (threadIdx.x == 0) {
        mean[row] = Ty<T>::st(mu);
        rstd[row] = Ty<T>::st(rs);
    }
}

// dh (dtype T, or null) and dx (dtype code cdx, or null) of one row per block.
extern "C" __global__ void __launch_bounds__(1024) add_ln_bwd_dx(const T* __restrict__ g, const T* __restrict__ h, const T* __restrict__ mean,
                                                                 const T* __restrict__ rstd, const T* __restrict__ w, T* __restrict__ dh,
                                                                 void* __restrict__ dx, int cdx, i64 n) {
    __shared__ A sm[32];
    const i64 r = blockIdx.x, o = r * n;
    const A mu = Ty<T>::ld(mean[r]), rs = Ty<T>::ld(rstd[r]);
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
        if (dh) dh[o + i] = Ty<T>::st(d);
        if (dx) st_any(dx, o + i, cdx, Ty<T>::ld(Ty<T>::st(d)));
    }
}

// Block (32, 16): thread (tx, ty) sums column blockIdx.x * 32 + tx over rows ty, ty + 16, ...;
// the 16 partial sums meet in shared memory in a fixed order (deterministic). dw / dlnb (dtype
// T) and dbias (code cb, from dh) are each written when non-null.
extern "C" __global__ void add_ln_bwd_cols(const T* __restrict__ g, const T* __restrict__ h, const T* __restrict__ mean,
                                           const T* __restrict__ rstd, const T* __restrict__ dh, T* dw, T* dlnb, void* dbias, int cb,
                                           i64 rows, i64 n) {
    __shared__ A s0[16][33];
    __shared__ A s1[16][33];
    __shared__ A s2[16][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const i64 j = (i64)blockIdx.x * 32 + tx;
    A aw = 0, ab = 0, ad = 0;
    if (j < n) {
        for (i64 r = ty; r < rows; r += 16) {
            A gv = Ty<T>::ld(g[r * n + j]);
            if (dw) aw += gv * ((Ty<T>::ld(h[r * n + j]) - Ty<T>::ld(mean[r])) * Ty<T>::ld(rstd[r]));
            ab += gv;
            if (dbias) ad += Ty<T>::ld(dh[r * n + j]);
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
        if (dw) dw[j] = Ty<T>::st(aw);
        if (dlnb) dlnb[j] = Ty<T>::st(ab);
        if (dbias) st_any(dbias, j, cb, ad);
    }
}

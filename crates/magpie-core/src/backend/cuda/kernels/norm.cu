// layer_norm and rms_norm over the last n elements of each row of a contiguous [rows, n]
// tensor: a block per row. The register path reads the row once and writes it once (mean and
// variance are two passes over registers, exact like Welford without its divisions); the loop
// path for longer rows re-reads the row. Statistics accumulate in f32 (f64 for double).
// w and b are contiguous [n] of the same dtype, or null. mean / rstd outputs may be null.

typedef Ty<T>::acc A;
#define VEC (16 / sizeof(T))
#define MAXV 4

template <int V> __device__ __forceinline__ void load_v(const T* p, i64 j, A* dst) {
    if (V == 1) {
        dst[0] = Ty<T>::ld(p[j]);
    } else {
        uint4 u = __ldg(reinterpret_cast<const uint4*>(p) + j);
        const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
        for (int k = 0; k < V; k++) dst[k] = Ty<T>::ld(e[k]);
    }
}
template <int V> __device__ __forceinline__ void store_v(T* p, i64 j, const A* src) {
    if (V == 1) {
        p[j] = Ty<T>::st(src[0]);
    } else {
        uint4 u;
        T* e = reinterpret_cast<T*>(&u);
#pragma unroll
        for (int k = 0; k < V; k++) e[k] = Ty<T>::st(src[k]);
        reinterpret_cast<uint4*>(p)[j] = u;
    }
}

// rms: 0 layer_norm (subtract the mean), 1 rms_norm.
template <int V>
__device__ void norm_reg(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                         T* mean_out, T* rstd_out, i64 n, double eps, int rms) {
    __shared__ A sm[32];
    const T* xr = x + (i64)blockIdx.x * n;
    T* yr = y + (i64)blockIdx.x * n;
    i64 nv = n / V;
    A v[MAXV][V];
    A s = 0;
#pragma unroll
    for (int k = 0; k < MAXV; k++) {
        i64 j = threadIdx.x + (i64)k * blockDim.x;
        if (j < nv) {
            load_v<V>(xr, j, v[k]);
#pragma unroll
            for (int e = 0; e < V; e++) s += rms ? v[k][e] * v[k][e] : v[k][e];
        }
    }
    s = block_reduce<OpSum<A> >(s, sm);
    A mean = rms ? (A)0 : s / (A)n;
    A var;
    if (rms) {
        var = s / (A)n;
    } else {
        A q = 0;
#pragma unroll
        for (int k = 0; k < MAXV; k++) {
            i64 j = threadIdx.x + (i64)k * blockDim.x;
            if (j < nv) {
#pragma unroll
                for (int e = 0; e < V; e++) {
                    A d = v[k][e] - mean;
                    q += d * d;
                }
            }
        }
        var = block_reduce<OpSum<A> >(q, sm) / (A)n;
    }
    A rstd = m_rsqrt(var + (A)eps);
#pragma unroll
    for (int k = 0; k < MAXV; k++) {
        i64 j = threadIdx.x + (i64)k * blockDim.x;
        if (j < nv) {
            A wv[V], bv[V];
            if (w) load_v<V>(w, j, wv);
            if (b) load_v<V>(b, j, bv);
#pragma unroll
            for (int e = 0; e < V; e++) {
                A r = (v[k][e] - mean) * rstd;
                if (w) r *= wv[e];
                if (b) r += bv[e];
                v[k][e] = r;
            }
            store_v<V>(yr, j, v[k]);
        }
    }
    if (threadIdx.x == 0) {
        if (mean_out) mean_out[blockIdx.x] = Ty<T>::st(mean);
        if (rstd_out) rstd_out[blockIdx.x] = Ty<T>::st(rstd);
    }
}

__device__ void norm_loop(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                          T* mean_out, T* rstd_out, i64 n, double eps, int rms) {
    __shared__ A sm[32];
    const T* xr = x + (i64)blockIdx.x * n;
    T* yr = y + (i64)blockIdx.x * n;
    A s = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A v = Ty<T>::ld(xr[i]);
        s += rms ? v * v : v;
    }
    s = block_reduce<OpSum<A> >(s, sm);
    A mean = rms ? (A)0 : s / (A)n;
    A var;
    if (rms) {
        var = s / (A)n;
    } else {
        A q = 0;
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            A d = Ty<T>::ld(xr[i]) - mean;
            q += d * d;
        }
        var = block_reduce<OpSum<A> >(q, sm) / (A)n;
    }
    A rstd = m_rsqrt(var + (A)eps);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A r = (Ty<T>::ld(xr[i]) - mean) * rstd;
        if (w) r *= Ty<T>::ld(w[i]);
        if (b) r += Ty<T>::ld(b[i]);
        yr[i] = Ty<T>::st(r);
    }
    if (threadIdx.x == 0) {
        if (mean_out) mean_out[blockIdx.x] = Ty<T>::st(mean);
        if (rstd_out) rstd_out[blockIdx.x] = Ty<T>::st(rstd);
    }
}

extern "C" __global__ void __launch_bounds__(1024) norm_fwd_vec(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                                                                i64 n, double eps, int rms) {
    norm_reg<VEC>(x, w, b, y, mean, rstd, n, eps, rms);
}
extern "C" __global__ void __launch_bounds__(1024) norm_fwd_reg(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                                                                i64 n, double eps, int rms) {
    norm_reg<1>(x, w, b, y, mean, rstd, n, eps, rms);
}
extern "C" __global__ void __launch_bounds__(1024) norm_fwd_loop(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                                                                 i64 n, double eps, int rms) {
    norm_loop(x, w, b, y, mean, rstd, n, eps, rms);
}

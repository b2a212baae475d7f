// softmax / log_softmax / safe softmax over the last dim of a contiguous [rows, n] tensor, and
// their backward from the output. A block per row. The register path (n up to
// blockDim * MAXV vectors) reads the row once and writes it once: the floor of the op;
// the loop path for longer rows reads it three times (the re-reads mostly hit L2).
// mode: 0 softmax, 1 log_softmax, 2 softmax whose all -inf rows give zeros.
// causal > 0: the rows are [causal, n] matrices stacked; row r sees columns 0..=(r % causal) only
// (the others count as -inf: attention's top-left causal mask without a masked copy of the scores).

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

template <int V>
__device__ void fwd_reg(const T* __restrict__ x, T* __restrict__ y, i64 n, int mode, i64 causal) {
    __shared__ A sm[32];
    const i64 vis = causal > 0 ? min(n, (i64)blockIdx.x % causal + 1) : n;
    const T* xr = x + (i64)blockIdx.x * n;
    T* yr = y + (i64)blockIdx.x * n;
    i64 nv = n / V;
    A v[MAXV][V];
    A mx = lowest_of<A>();
#pragma unroll
    for (int k = 0; k < MAXV; k++) {
        i64 j = threadIdx.x + (i64)k * blockDim.x;
        if (j < nv) {
            load_v<V>(xr, j, v[k]);
#pragma unroll
            for (int e = 0; e < V; e++) {
                if (j * V + e >= vis) v[k][e] = (A)__int_as_float(0xff800000);
                mx = OpMax<A>::comb(mx, v[k][e]);
            }
        }
    }
    mx = block_reduce<OpMax<A> >(mx, sm);
    if (mode == 2 && mx == lowest_of<A>()) {
#pragma unroll
        for (int k = 0; k < MAXV; k++) {
            i64 j = threadIdx.x + (i64)k * blockDim.x;
            if (j < nv) {
#pragma unroll
                for (int e = 0; e < V; e++) v[k][e] = 0;
                store_v<V>(yr, j, v[k]);
            }
        }
        return;
    }
    A s = 0;
#pragma unroll
    for (int k = 0; k < MAXV; k++) {
        i64 j = threadIdx.x + (i64)k * blockDim.x;
        if (j < nv) {
#pragma unroll
            for (int e = 0; e < V; e++) {
                A ex = m_exp(v[k][e] - mx);
                s += ex;
                if (mode != 1) v[k][e] = ex;
            }
        }
    }
    s = block_reduce<OpSum<A> >(s, sm);
    A sh = mx + m_log(s), inv = (A)1 / s;
#pragma unroll
    for (int k = 0; k < MAXV; k++) {
        i64 j = threadIdx.x + (i64)k * blockDim.x;
        if (j < nv) {
#pragma unroll
            for (int e = 0; e < V; e++) v[k][e] = mode == 1 ? v[k][e] - sh : v[k][e] * inv;
            store_v<V>(yr, j, v[k]);
        }
    }
}

__device__ void fwd_loop(const T* __restrict__ x, T* __restrict__ y, i64 n, int mode, i64 causal) {
    __shared__ A sm[32];
    const i64 vis = causal > 0 ? min(n, (i64)blockIdx.x % causal + 1) : n;
    const T* xr = x + (i64)blockIdx.x * n;
    T* yr = y + (i64)blockIdx.x * n;
    A mx = lowest_of<A>();
    for (i64 i = threadIdx.x; i < vis; i += blockDim.x) mx = OpMax<A>::comb(mx, Ty<T>::ld(xr[i]));
    mx = block_reduce<OpMax<A> >(mx, sm);
    if (mode == 2 && mx == lowest_of<A>()) {
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) yr[i] = Ty<T>::st((A)0);
        return;
    }
    A s = 0;
    for (i64 i = threadIdx.x; i < vis; i += blockDim.x) s += m_exp(Ty<T>::ld(xr[i]) - mx);
    s = block_reduce<OpSum<A> >(s, sm);
    A sh = mx + m_log(s), inv = (A)1 / s;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A v = i < vis ? (A)Ty<T>::ld(xr[i]) : (A)__int_as_float(0xff800000);
        yr[i] = Ty<T>::st(mode == 1 ? v - sh : m_exp(v - mx) * inv);
    }
}

extern "C" __global__ void __launch_bounds__(1024) softmax_fwd_vec(const T* x, T* y, i64 n, int mode, i64 causal) { fwd_reg<VEC>(x, y, n, mode, causal); }
extern "C" __global__ void __launch_bounds__(1024) softmax_fwd_reg(const T* x, T* y, i64 n, int mode, i64 causal) { fwd_reg<1>(x, y, n, mode, causal); }
extern "C" __global__ void __launch_bounds__(1024) softmax_fwd_loop(const T* x, T* y, i64 n, int mode, i64 causal) { fwd_loop(x, y, n, mode, causal); }

// Backward from the output y. mode 0 (softmax): dx = y * (g - sum(g * y));
// mode 1 (log_softmax): dx = g - exp(y) * sum(g).
extern "C" __global__ void __launch_bounds__(1024) softmax_bwd(const T* g, const T* y, T* dx, i64 n, int mode) {
    __shared__ A sm[32];
    i64 off = (i64)blockIdx.x * n;
    const T* gr = g + off;
    const T* yr = y + off;
    T* dr = dx + off;
    A s = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A gv = Ty<T>::ld(gr[i]);
        s += mode == 1 ? gv : gv * Ty<T>::ld(yr[i]);
    }
    s = block_reduce<OpSum<A> >(s, sm);
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A gv = Ty<T>::ld(gr[i]), yv = Ty<T>::ld(yr[i]);
        dr[i] = Ty<T>::st(mode == 1 ? gv - m_exp(yv) * s : yv * (gv - s));
    }
}

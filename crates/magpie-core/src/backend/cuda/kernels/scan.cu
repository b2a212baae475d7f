// Inclusive scans along one dim of a contiguous [outer, n, inner] tensor of T: cumsum, cumprod,
// logcumsumexp, cummax, cummin (values and the position of the running extreme). Floating
// inputs accumulate in double and integers in wrapping int64, as the CPU path does, so the
// results equal it up to the order of the additions. Lines along the last dim (inner == 1) take
// a block per line chunk: per-thread sequential scans of SCAN_IT elements, a block scan of the
// thread totals and a carry across chunks; long lines are split over several blocks with a
// reduce-then-scan pass (scan_part_* then scan_rows with the parts). Lines along another dim
// take a thread per line (coalesced across the inner dim). `rev` scans from the end.

#define SCAN_IT 4

template <class X> struct ScanAcc { typedef i64 t; };
template <> struct ScanAcc<float> { typedef double t; };
template <> struct ScanAcc<double> { typedef double t; };
template <> struct ScanAcc<half_t> { typedef double t; };
template <> struct ScanAcc<bf16_t> { typedef double t; };
typedef ScanAcc<T>::t ACC;

__device__ __forceinline__ void scan_put(float* p, double a) { *p = (float)a; }
__device__ __forceinline__ void scan_put(double* p, double a) { *p = a; }
__device__ __forceinline__ void scan_put(half_t* p, double a) { *p = d2h(a); }
__device__ __forceinline__ void scan_put(bf16_t* p, double a) { *p = to_bf16(a); }
__device__ __forceinline__ void scan_put(bool* p, i64 a) { *p = a != 0; }
__device__ __forceinline__ void scan_put(u8* p, i64 a) { *p = (u8)a; }
__device__ __forceinline__ void scan_put(i8* p, i64 a) { *p = (i8)a; }
__device__ __forceinline__ void scan_put(i16* p, i64 a) { *p = (i16)a; }
__device__ __forceinline__ void scan_put(i32* p, i64 a) { *p = (i32)a; }
__device__ __forceinline__ void scan_put(i64* p, i64 a) { *p = a; }

__device__ __forceinline__ i64 scan_shfl_up(i64 v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
__device__ __forceinline__ double scan_shfl_up(double v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }

// Wrapping integer arithmetic (signed overflow is undefined in C++); exact in double for floats.
__device__ __forceinline__ i64 scan_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ double scan_add(double a, double b) { return a + b; }
__device__ __forceinline__ i64 scan_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
__device__ __forceinline__ double scan_mul(double a, double b) { return a * b; }

// An op: state S, identity, the state of element `v` at line position `i`, combine(left, right),
// the value written for a state, and a warp shuffle of states.
struct ScanSum {
    typedef ACC S;
    static __device__ __forceinline__ S id() { return (S)0; }
    static __device__ __forceinline__ S of(T v, long long) { return (S)Ty<T>::ld(v); }
    static __device__ __forceinline__ S comb(S a, S b) { return scan_add(a, b); }
    static __device__ __forceinline__ S up(S v, int d) { return scan_shfl_up(v, d); }
};
struct ScanProd {
    typedef ACC S;
    static __device__ __forceinline__ S id() { return (S)1; }
    static __device__ __forceinline__ S of(T v, long long) { return (S)Ty<T>::ld(v); }
    static __device__ __forceinline__ S comb(S a, S b) { return scan_mul(a, b); }
    static __device__ __forceinline__ S up(S v, int d) { return scan_shfl_up(v, d); }
};
// log(exp(a) + exp(b)) with the CPU path's handling of infinities and NaN.
struct ScanLse {
    typedef double S;
    static __device__ __forceinline__ S id() { return __longlong_as_double(0xfff0000000000000LL); }
    static __device__ __forceinline__ S of(T v, long long) { return (S)Ty<T>::ld(v); }
    static __device__ __forceinline__ S comb(S a, S b) {
        double hi = a > b ? a : b, lo = a > b ? b : a;
        double ninf = __longlong_as_double(0xfff0000000000000LL);
        if (hi == ninf || (lo == ninf && hi == hi)) return hi;
        if (hi != hi || lo != lo) return __longlong_as_double(0x7ff8000000000000LL);
        if (hi == -ninf) return hi;
        return hi + log1p(exp(lo - hi));
    }
    static __device__ __forceinline__ S up(S v, int d) { return scan_shfl_up(v, d); }
};
// The running extreme and the last position where it was reached (PyTorch's `>=` / `<=`; a NaN
// is taken at once and only a later NaN replaces it). `i < 0` is the identity.
struct ScanExt {
    ACC v;
    long long i;
};
template <int MAX> struct ScanMaxMin {
    typedef ScanExt S;
    static __device__ __forceinline__ S id() { S s; s.v = (ACC)0; s.i = -1; return s; }
    static __device__ __forceinline__ S of(T v, long long i) { S s; s.v = (ACC)Ty<T>::ld(v); s.i = i; return s; }
    static __device__ __forceinline__ S comb(S a, S b) {
        if (a.i < 0) return b;
        if (b.i < 0) return a;
        bool take = (b.v != b.v) || (a.v == a.v && (MAX ? b.v >= a.v : b.v <= a.v));
        return take ? b : a;
    }
    static __device__ __forceinline__ S up(S s, int d) {
        S r;
        r.v = scan_shfl_up(s.v, d);
        r.i = scan_shfl_up((i64)s.i, d);
        return r;
    }
};

// Writes the state of position `p` (an offset from the line's base, whose elements are `stride`
// apart): the value (sum, prod, lse) or the extreme's value and position.
template <class Op> struct ScanOut {
    static __device__ __forceinline__ void put(T* out, i64*, const T*, long long p, long long, typename Op::S s) { scan_put(out + p, s); }
};
template <int MAX> struct ScanOut<ScanMaxMin<MAX> > {
    static __device__ __forceinline__ void put(T* out, i64* idx, const T* x, long long p, long long stride, ScanExt s) {
        out[p] = x[s.i * stride];
        idx[p] = s.i;
    }
};

// Exclusive block scan of one state per thread (blockDim.x a multiple of 32, at most 1024);
// `total` gets the block's combination. `sm` holds 32 states.
template <class Op> __device__ __forceinline__ typename Op::S scan_block(typename Op::S v, typename Op::S* sm, typename Op::S& total) {
    typedef typename Op::S S;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    S x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        S y = Op::up(x, o);
        if (lane >= o) x = Op::comb(y, x);
    }
    S ex = Op::up(x, 1);
    if (lane == 0) ex = Op::id();
    __syncthreads();
    if (lane == 31) sm[w] = x;
    __syncthreads();
    if (w == 0) {
        S s = lane < nw ? sm[lane] : Op::id();
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            S y = Op::up(s, o);
            if (lane >= o) s = Op::comb(y, s);
        }
        if (lane < nw) sm[lane] = s;
    }
    __syncthreads();
    total = sm[nw - 1];
    return w > 0 ? Op::comb(sm[w - 1], ex) : ex;
}

// Positions [c0, c1) of one line (base pointers already at the line), starting from `carry`.
// Position p of the scan order is element rev ? n - 1 - p : p.
template <class Op> __device__ void scan_span(const T* x, T* out, i64* idx, long long n, long long c0, long long c1, int rev, typename Op::S carry, typename Op::S* sm) {
    typedef typename Op::S S;
    long long step = (long long)blockDim.x * SCAN_IT;
    for (long long b = c0; b < c1; b += step) {
        S loc[SCAN_IT];
        S a = Op::id();
        long long p0 = b + (long long)threadIdx.x * SCAN_IT;
#pragma unroll
        for (int k = 0; k < SCAN_IT; k++) {
            long long p = p0 + k;
            if (p < c1) {
                long long e = rev ? n - 1 - p : p;
                a = Op::comb(a, Op::of(x[e], e));
            }
            loc[k] = a;
        }
        S tot;
        S ex = scan_block<Op>(a, sm, tot);
        S pre = Op::comb(carry, ex);
#pragma unroll
        for (int k = 0; k < SCAN_IT; k++) {
            long long p = p0 + k;
            if (p < c1) {
                long long e = rev ? n - 1 - p : p;
                ScanOut<Op>::put(out, idx, x, e, 1, Op::comb(pre, loc[k]));
            }
        }
        carry = Op::comb(carry, tot);
    }
}

// The combination of positions [c0, c1) of one line (every thread gets it).
template <class Op> __device__ typename Op::S scan_reduce_span(const T* x, long long n, long long c0, long long c1, int rev, typename Op::S* sm) {
    typedef typename Op::S S;
    long long step = (long long)blockDim.x * SCAN_IT;
    S carry = Op::id();
    for (long long b = c0; b < c1; b += step) {
        S a = Op::id();
        long long p0 = b + (long long)threadIdx.x * SCAN_IT;
#pragma unroll
        for (int k = 0; k < SCAN_IT; k++) {
            long long p = p0 + k;
            if (p < c1) {
                long long e = rev ? n - 1 - p : p;
                a = Op::comb(a, Op::of(x[e], e));
            }
        }
        S tot;
        scan_block<Op>(a, sm, tot);
        carry = Op::comb(carry, tot);
    }
    return carry;
}

// Lines along the last dim: block b scans chunk b % chunks (of `chunk` positions) of line
// b / chunks, starting from the combination of the line's earlier chunks in `parts` (none when
// chunks == 1).
template <class Op> __device__ void scan_rows_t(const T* x, T* out, i64* idx, long long n, long long chunk, long long chunks, const typename Op::S* parts, int rev) {
    typedef typename Op::S S;
    __shared__ S sm[32];
    long long line = blockIdx.x / chunks, c = blockIdx.x - line * chunks;
    S carry = Op::id();
    if (chunks > 1) {
        // the earlier chunks' combination, in order: each thread folds a contiguous run of the
        // parts, then the block combines the runs
        const S* pl = parts + line * chunks;
        long long per = (c + blockDim.x - 1) / blockDim.x;
        long long q0 = (long long)threadIdx.x * per, q1 = q0 + per < c ? q0 + per : c;
        S a = Op::id();
        for (long long q = q0; q < q1; q++) a = Op::comb(a, pl[q]);
        scan_block<Op>(a, sm, carry);
    }
    long long c0 = c * chunk, c1 = c0 + chunk < n ? c0 + chunk : n;
    scan_span<Op>(x + line * n, out + line * n, idx ? idx + line * n : idx, n, c0, c1, rev, carry, sm);
}

// The combination of each chunk of each line into `parts` (first pass of long lines).
template <class Op> __device__ void scan_parts_t(const T* x, long long n, long long chunk, long long chunks, typename Op::S* parts, int rev) {
    typedef typename Op::S S;
    __shared__ S sm[32];
    long long line = blockIdx.x / chunks, c = blockIdx.x - line * chunks;
    long long c0 = c * chunk, c1 = c0 + chunk < n ? c0 + chunk : n;
    S r = scan_reduce_span<Op>(x + line * n, n, c0, c1, rev, sm);
    if (threadIdx.x == 0) parts[blockIdx.x] = r;
}

// Lines along another dim: a thread per (outer, inner) line, sequential along n.
template <class Op> __device__ void scan_cols_t(const T* x, T* out, i64* idx, long long outer, long long n, long long inner, int rev) {
    typedef typename Op::S S;
    long long lines = outer * inner;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < lines; g += (long long)gridDim.x * blockDim.x) {
        long long o = g / inner, j = g - o * inner;
        const T* xl = x + o * n * inner + j;
        T* ol = out + o * n * inner + j;
        i64* il = idx ? idx + o * n * inner + j : idx;
        S a = Op::id();
        for (long long p = 0; p < n; p++) {
            long long e = rev ? n - 1 - p : p;
            a = Op::comb(a, Op::of(xl[e * inner], e));
            ScanOut<Op>::put(ol, il, xl, e * inner, inner, a);
        }
    }
}

#define SCAN_KERNELS(NAME, OP)                                                                                      \
    extern "C" __global__ void scan_rows_##NAME(const T* x, T* out, i64* idx, long long n, long long chunk,          \
                                                long long chunks, const void* parts, int rev) {                     \
        scan_rows_t<OP>(x, out, idx, n, chunk, chunks, (const OP::S*)parts, rev);                                    \
    }                                                                                                               \
    extern "C" __global__ void scan_parts_##NAME(const T* x, long long n, long long chunk, long long chunks,          \
                                                 void* parts, int rev) {                                            \
        scan_parts_t<OP>(x, n, chunk, chunks, (OP::S*)parts, rev);                                                   \
    }                                                                                                               \
    extern "C" __global__ void scan_cols_##NAME(const T* x, T* out, i64* idx, long long outer, long long n,          \
                                                long long inner, int rev) {                                         \
        scan_cols_t<OP>(x, out, idx, outer, n, inner, rev);                                                          \
    }

SCAN_KERNELS(sum, ScanSum)
SCAN_KERNELS(prod, ScanProd)
SCAN_KERNELS(lse, ScanLse)
SCAN_KERNELS(max, ScanMaxMin<1>)
SCAN_KERNELS(min, ScanMaxMin<0>)

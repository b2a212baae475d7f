// Shared prelude of the reduction / softmax / norm / index / RNG kernels, after the backend's
// preamble.cu (types, casts, m_ math): per-type load/store traits with the accumulation type,
// warp/block reductions, the dims helper and the indexing iteration space. The host defines `T`
// (one module per dtype).

// Ty<X>::acc is the type X is computed in (f32 for the 16-bit floats, i64 for integers and bool);
// ld widens, st narrows with PyTorch's rounding (round to nearest even, NaN kept).
template <class X> struct Ty;
template <> struct Ty<float> {
    typedef float acc;
    static __device__ __forceinline__ float ld(float v) { return v; }
    static __device__ __forceinline__ float st(float a) { return a; }
};
template <> struct Ty<double> {
    typedef double acc;
    static __device__ __forceinline__ double ld(double v) { return v; }
    static __device__ __forceinline__ double st(double a) { return a; }
};
template <> struct Ty<bf16_t> {
    typedef float acc;
    static __device__ __forceinline__ float ld(bf16_t v) { return b2f(v); }
    static __device__ __forceinline__ bf16_t st(float a) { return f2b(a); }
};
template <> struct Ty<half_t> {
    typedef float acc;
    static __device__ __forceinline__ float ld(half_t v) { return h2f(v); }
    static __device__ __forceinline__ half_t st(float a) { return f2h(a); }
};
#define MP_INT_TY(X)                                                            \
    template <> struct Ty<X> {                                                  \
        typedef i64 acc;                                                        \
        static __device__ __forceinline__ i64 ld(X v) { return (i64)v; }        \
        static __device__ __forceinline__ X st(i64 a) { return (X)a; }          \
    };
MP_INT_TY(i64)
MP_INT_TY(i32)
MP_INT_TY(i16)
MP_INT_TY(i8)
MP_INT_TY(u8)
template <> struct Ty<bool> {
    typedef i64 acc;
    static __device__ __forceinline__ i64 ld(bool v) { return v ? 1 : 0; }
    static __device__ __forceinline__ bool st(i64 a) { return a != 0; }
};

// Limits of the accumulation types (identities of max / min).
template <class A> __device__ __forceinline__ A lowest_of();
template <class A> __device__ __forceinline__ A highest_of();
template <> __device__ __forceinline__ float lowest_of<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ float highest_of<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double lowest_of<double>() { return __longlong_as_double(0xfff0000000000000ULL); }
template <> __device__ __forceinline__ double highest_of<double>() { return __longlong_as_double(0x7ff0000000000000ULL); }
template <> __device__ __forceinline__ i64 lowest_of<i64>() { return (i64)0x8000000000000000ULL; }
template <> __device__ __forceinline__ i64 highest_of<i64>() { return 0x7fffffffffffffffLL; }

// Warp and block reductions. `Op` has `static A comb(A, A)`.
template <class A> __device__ __forceinline__ A shfl_xor(A v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

template <class Op, class A> __device__ __forceinline__ A warp_reduce(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = Op::comb(v, shfl_xor(v, o));
    return v;
}

// Reduces `v` over the block (blockDim.x a multiple of 32); every thread gets the result.
// `sm` is 32 slots of shared memory; the leading barrier lets callers reuse it back to back.
template <class Op, class A> __device__ __forceinline__ A block_reduce(A v, A* sm) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_reduce<Op>(v);
    __syncthreads();
    if (lane == 0) sm[w] = v;
    __syncthreads();
    A r = sm[0];
    for (int i = 1; i < nw; i++) r = Op::comb(r, sm[i]);
    return r;
}

template <class A> struct OpSum { static __device__ __forceinline__ A comb(A a, A b) { return a + b; } };
template <class A> struct OpProd { static __device__ __forceinline__ A comb(A a, A b) { return a * b; } };
// max / min propagate NaN as PyTorch does (`a != a` is false for integers).
template <class A> struct OpMax {
    static __device__ __forceinline__ A comb(A a, A b) { return (a != a || a > b) ? a : b; }
};
template <class A> struct OpMin {
    static __device__ __forceinline__ A comb(A a, A b) { return (a != a || a < b) ? a : b; }
};

// Up to MP_RMAXD dims of (size, stride) that map a linear index to an element offset
// (row-major: dim 0 varies slowest).
#define MP_RMAXD 8
struct Dims {
    int n;
    int pad;
    i64 size[MP_RMAXD];
    i64 stride[MP_RMAXD];
};
__device__ __forceinline__ i64 dims_offset(const Dims& d, i64 i) {
    i64 off = 0;
    for (int k = d.n - 1; k >= 0; k--) {
        i64 s = d.size[k];
        i64 q = i / s;
        off += (i - q * s) * d.stride[k];
        i = q;
    }
    return off;
}

// The indexing kernels' (index.cu, scatter.cu) iteration space (row-major over `size`) and, per
// operand, its strides. The indexed dim's stride is zero in the indexed operand's strides;
// `dstride` is its real stride and `lim` its size.
struct IdxIter {
    int n;
    int pad;
    i64 size[MP_RMAXD];
    i64 s_idx[MP_RMAXD];
    i64 s_src[MP_RMAXD];
    i64 s_out[MP_RMAXD];
    i64 lim;
    i64 dstride;
};

__device__ __forceinline__ void iter_offsets(const IdxIter& it, i64 i, i64& oi, i64& os, i64& oo) {
    oi = 0; os = 0; oo = 0;
    for (int d = it.n - 1; d >= 0; d--) {
        i64 q = i / it.size[d];
        i64 r = i - q * it.size[d];
        i = q;
        oi += r * it.s_idx[d];
        os += r * it.s_src[d];
        oo += r * it.s_out[d];
    }
}

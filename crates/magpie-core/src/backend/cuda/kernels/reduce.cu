// Reductions over any dims (sum / prod / max / min, mean through `scale`, argmax / argmin).
// The host folds the input's dims into kept dims (the outputs, row-major) and reduced dims,
// then picks one of two layouts:
//  - rrow_*: the reduced elements of each output are one contiguous run (row reductions): a warp
//    per row for short rows, a block per row (split over gridDim.y for long ones) otherwise;
//    16-byte loads when the host says the rows are aligned.
//  - rgen_*: anything else (column reductions, strided views): the 32 lanes of a warp take 32
//    neighbouring outputs (coalesced when the outputs are contiguous in the input) and the 8
//    warps of a block, and gridDim.y blocks, split the reduced elements.
// With gridDim.y > 1 each block writes a partial in the accumulation type to `out` laid out
// [split][outer], and rfin_* folds the partials (deterministic: no atomics).
// Floating point accumulates in f32 (f64 for double), integers in i64.

typedef Ty<T>::acc A;

template <class Op> __device__ __forceinline__ A op_init();
template <> __device__ __forceinline__ A op_init<OpSum<A> >() { return (A)0; }
template <> __device__ __forceinline__ A op_init<OpProd<A> >() { return (A)1; }
template <> __device__ __forceinline__ A op_init<OpMax<A> >() { return lowest_of<A>(); }
template <> __device__ __forceinline__ A op_init<OpMin<A> >() { return highest_of<A>(); }

// Stores one result: a partial in A, or the final value (times `scale` for means) in T.
__device__ __forceinline__ void put(void* out, i64 i, A v, int to_acc, double scale) {
    if (to_acc) {
        ((A*)out)[i] = v;
    } else {
        if (scale != 1.0) v = (A)(v * scale);
        ((T*)out)[i] = Ty<T>::st(v);
    }
}

#define VEC (16 / sizeof(T))

template <class Op>
__device__ __forceinline__ A fold_run(const T* __restrict__ p, i64 n, int vec, int lane, int nthreads) {
    A acc = op_init<Op>();
    if (vec) {
        const uint4* pv = reinterpret_cast<const uint4*>(p);
        i64 nv = n / VEC;
        i64 i = lane;
        for (; i + 3 * (i64)nthreads < nv; i += 4 * (i64)nthreads) {
            uint4 u[4];
#pragma unroll
            for (int k = 0; k < 4; k++) u[k] = __ldg(pv + i + k * nthreads);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const T* e = reinterpret_cast<const T*>(&u[k]);
#pragma unroll
                for (int j = 0; j < (int)VEC; j++) acc = Op::comb(acc, Ty<T>::ld(e[j]));
            }
        }
        for (; i < nv; i += nthreads) {
            uint4 u = __ldg(pv + i);
            const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
            for (int j = 0; j < (int)VEC; j++) acc = Op::comb(acc, Ty<T>::ld(e[j]));
        }
    } else {
        i64 i = lane;
        for (; i + 3 * (i64)nthreads < n; i += 4 * (i64)nthreads) {
            A v0 = Ty<T>::ld(p[i]), v1 = Ty<T>::ld(p[i + nthreads]);
            A v2 = Ty<T>::ld(p[i + 2 * nthreads]), v3 = Ty<T>::ld(p[i + 3 * nthreads]);
            acc = Op::comb(acc, Op::comb(Op::comb(v0, v1), Op::comb(v2, v3)));
        }
        for (; i < n; i += nthreads) acc = Op::comb(acc, Ty<T>::ld(p[i]));
    }
    return acc;
}

// mode 0: a warp per row (8 rows a block). mode 1: a block per row, gridDim.y chunks of it.
template <class Op>
__device__ void rrow(const T* __restrict__ in, void* out, Dims kept, i64 rows, i64 n, int mode, int vec,
                     int to_acc, double scale) {
    __shared__ A sm[32];
    if (mode == 0) {
        i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        if (row >= rows) return;  // whole warps leave together; no block barrier below
        const T* p = in + dims_offset(kept, row);
        A acc = fold_run<Op>(p, n, vec, threadIdx.x & 31, 32);
        acc = warp_reduce<Op>(acc);
        if ((threadIdx.x & 31) == 0) put(out, row, acc, to_acc, scale);
    } else {
        i64 row = blockIdx.x;
        i64 chunk = (n + gridDim.y - 1) / gridDim.y;
        if (vec) chunk = (chunk + VEC - 1) / VEC * VEC;
        i64 start = chunk * blockIdx.y;
        i64 len = n - start < chunk ? n - start : chunk;
        if (len < 0) len = 0;
        const T* p = in + dims_offset(kept, row) + start;
        A acc = fold_run<Op>(p, len, vec, threadIdx.x, blockDim.x);
        acc = block_reduce<Op>(acc, sm);
        if (threadIdx.x == 0) put(out, (i64)blockIdx.y * rows + row, acc, to_acc, scale);
    }
}

// 256 threads: lane = output within a group of 32, warp = slice of the reduced elements.
template <class Op>
__device__ void rgen(const T* __restrict__ in, void* out, Dims kept, Dims red, i64 outer, i64 inner, int to_acc,
                     double scale) {
    __shared__ A sm[8][33];
    int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    i64 o = (i64)blockIdx.x * 32 + tx;
    A acc = op_init<Op>();
    if (o < outer) {
        const T* p = in + dims_offset(kept, o);
        i64 step = 8 * (i64)gridDim.y;
        i64 r = (i64)blockIdx.y * 8 + ty;
        if (red.n == 1) {
            i64 s = red.stride[0];
            for (; r + 3 * step < inner; r += 4 * step) {
                A v0 = Ty<T>::ld(p[r * s]), v1 = Ty<T>::ld(p[(r + step) * s]);
                A v2 = Ty<T>::ld(p[(r + 2 * step) * s]), v3 = Ty<T>::ld(p[(r + 3 * step) * s]);
                acc = Op::comb(acc, Op::comb(Op::comb(v0, v1), Op::comb(v2, v3)));
            }
            for (; r < inner; r += step) acc = Op::comb(acc, Ty<T>::ld(p[r * s]));
        } else {
            for (; r < inner; r += step) acc = Op::comb(acc, Ty<T>::ld(p[dims_offset(red, r)]));
        }
    }
    sm[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && o < outer) {
#pragma unroll
        for (int k = 1; k < 8; k++) acc = Op::comb(acc, sm[k][tx]);
        put(out, (i64)blockIdx.y * outer + o, acc, to_acc, scale);
    }
}

// Column reductions of a [inner, outer] view whose outputs are contiguous (stride 1) and rows
// `rs` apart: each thread folds VEC neighbouring outputs with 16-byte loads (a warp reads 512
// contiguous bytes a row), the 8 warps of a block and gridDim.y blocks split the rows.
template <class Op>
__device__ void rcol(const T* __restrict__ in, void* out, i64 rs, i64 outer, i64 inner, int to_acc, double scale) {
    __shared__ A sm[8][32 * VEC + 1];
    int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    i64 o0 = ((i64)blockIdx.x * 32 + tx) * VEC;
    A acc[VEC];
#pragma unroll
    for (int j = 0; j < (int)VEC; j++) acc[j] = op_init<Op>();
    if (o0 < outer) {
        i64 step = 8 * (i64)gridDim.y;
        i64 r = (i64)blockIdx.y * 8 + ty;
        for (; r + step < inner; r += 2 * step) {
            uint4 u0 = __ldg(reinterpret_cast<const uint4*>(in + r * rs + o0));
            uint4 u1 = __ldg(reinterpret_cast<const uint4*>(in + (r + step) * rs + o0));
            const T* e0 = reinterpret_cast<const T*>(&u0);
            const T* e1 = reinterpret_cast<const T*>(&u1);
#pragma unroll
            for (int j = 0; j < (int)VEC; j++) acc[j] = Op::comb(acc[j], Op::comb(Ty<T>::ld(e0[j]), Ty<T>::ld(e1[j])));
        }
        for (; r < inner; r += step) {
            uint4 u0 = __ldg(reinterpret_cast<const uint4*>(in + r * rs + o0));
            const T* e0 = reinterpret_cast<const T*>(&u0);
#pragma unroll
            for (int j = 0; j < (int)VEC; j++) acc[j] = Op::comb(acc[j], Ty<T>::ld(e0[j]));
        }
    }
#pragma unroll
    for (int j = 0; j < (int)VEC; j++) sm[ty][tx * VEC + j] = acc[j];
    __syncthreads();
    // 256 threads fold the 8 partial rows of the block's 32 * VEC outputs
    for (int c = threadIdx.x; c < 32 * (int)VEC; c += 256) {
        i64 o = (i64)blockIdx.x * 32 * VEC + c;
        if (o >= outer) continue;
        A a = sm[0][c];
#pragma unroll
        for (int k = 1; k < 8; k++) a = Op::comb(a, sm[k][c]);
        put(out, (i64)blockIdx.y * outer + o, a, to_acc, scale);
    }
}

template <class Op>
__device__ void rfin(const A* __restrict__ part, T* out, i64 outer, int split, double scale) {
    i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= outer) return;
    A acc = part[o];
    for (int s = 1; s < split; s++) acc = Op::comb(acc, part[(i64)s * outer + o]);
    put(out, o, acc, 0, scale);
}

#define MP_REDUCE(name, Op)                                                                             \
    extern "C" __global__ void __launch_bounds__(256) rrow_##name(const T* in, void* out, Dims kept,      \
            i64 rows, i64 n, int mode, int vec, int to_acc, double scale) {                               \
        rrow<Op<A> >(in, out, kept, rows, n, mode, vec, to_acc, scale);                                   \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(256) rgen_##name(const T* in, void* out, Dims kept,      \
            Dims red, i64 outer, i64 inner, int to_acc, double scale) {                                   \
        rgen<Op<A> >(in, out, kept, red, outer, inner, to_acc, scale);                                    \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(256) rcol_##name(const T* in, void* out, i64 rs, i64 outer,  \
            i64 inner, int to_acc, double scale) {                                                        \
        rcol<Op<A> >(in, out, rs, outer, inner, to_acc, scale);                                           \
    }                                                                                                     \
    extern "C" __global__ void rfin_##name(const A* part, T* out, i64 outer, int split, double scale) {   \
        rfin<Op<A> >(part, out, outer, split, scale);                                                     \
    }
// One-pass column sums stored in A (the bias gradients of 16-bit products: [inner, outer] rows
// `rs` apart, outputs contiguous, a few hundred rows). A block owns 64 neighbouring outputs (a
// lane two of them: 4-byte loads, 128 contiguous bytes a warp a row); its 16 warps split all the
// rows, 8 loads in flight a lane, and are folded in warp order: no partials, no second launch.
// The host keeps it to 16-bit types, an even `outer` and `rs`, and a 4-byte aligned `in`.
extern "C" __global__ void __launch_bounds__(512) rcol1_sum(const T* __restrict__ in, A* __restrict__ out, i64 rs, i64 outer, i64 inner) {
    __shared__ A sm[16][65];
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const i64 o0 = (i64)blockIdx.x * 64 + 2 * tx;
    A a0 = (A)0, a1 = (A)0;
    if (sizeof(T) == 2 && o0 < outer) {
        i64 r = ty;
        for (; r + 7 * 16 < inner; r += 8 * 16) {
            unsigned int u[8];
#pragma unroll
            for (int k = 0; k < 8; k++) u[k] = __ldg(reinterpret_cast<const unsigned int*>(in + (r + 16 * k) * rs + o0));
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const T* e = reinterpret_cast<const T*>(&u[k]);
                a0 += (A)Ty<T>::ld(e[0]);
                a1 += (A)Ty<T>::ld(e[1]);
            }
        }
        for (; r < inner; r += 16) {
            const unsigned int u = __ldg(reinterpret_cast<const unsigned int*>(in + r * rs + o0));
            const T* e = reinterpret_cast<const T*>(&u);
            a0 += (A)Ty<T>::ld(e[0]);
            a1 += (A)Ty<T>::ld(e[1]);
        }
    }
    sm[ty][2 * tx] = a0;
    sm[ty][2 * tx + 1] = a1;
    __syncthreads();
    if (threadIdx.x < 64) {
        const i64 o = (i64)blockIdx.x * 64 + threadIdx.x;
        if (o < outer) {
            A s = sm[0][threadIdx.x];
#pragma unroll
            for (int k = 1; k < 16; k++) s += sm[k][threadIdx.x];
            out[o] = s;
        }
    }
}

MP_REDUCE(sum, OpSum)
MP_REDUCE(prod, OpProd)
MP_REDUCE(max, OpMax)
MP_REDUCE(min, OpMin)

// ---- argmax / argmin: (value, index) pairs; NaN wins (first NaN), ties take the first index.
struct VI {
    A v;
    i64 i;
};
template <bool MAX> __device__ __forceinline__ VI vi_comb(VI a, VI b) {
    bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) {
        if (an && bn) return a.i <= b.i ? a : b;
        return an ? a : b;
    }
    if (a.v == b.v) return a.i <= b.i ? a : b;
    return (MAX ? a.v > b.v : a.v < b.v) ? a : b;
}
template <bool MAX> __device__ __forceinline__ VI vi_warp(VI x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        VI y;
        y.v = shfl_xor(x.v, o);
        y.i = shfl_xor(x.i, o);
        x = vi_comb<MAX>(x, y);
    }
    return x;
}
template <bool MAX> __device__ __forceinline__ VI vi_init() {
    VI r;
    r.v = MAX ? lowest_of<A>() : highest_of<A>();
    r.i = 0x7fffffffffffffffLL;
    return r;
}

// A block per output (mode 1) or a warp per output (mode 0) over a contiguous run.
template <bool MAX>
__device__ void arow(const T* __restrict__ in, T* vals, i64* idx, Dims kept, i64 rows, i64 n, int mode) {
    __shared__ VI sm[32];
    int lane, nthreads;
    i64 row;
    if (mode == 0) {
        row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        if (row >= rows) return;
        lane = threadIdx.x & 31;
        nthreads = 32;
    } else {
        row = blockIdx.x;
        lane = threadIdx.x;
        nthreads = blockDim.x;
    }
    const T* p = in + dims_offset(kept, row);
    VI acc = vi_init<MAX>();
    for (i64 i = lane; i < n; i += nthreads) {
        VI c;
        c.v = Ty<T>::ld(p[i]);
        c.i = i;
        acc = vi_comb<MAX>(acc, c);
    }
    acc = vi_warp<MAX>(acc);
    if (mode == 1) {
        int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        if ((threadIdx.x & 31) == 0) sm[w] = acc;
        __syncthreads();
        acc = sm[0];
        for (int k = 1; k < nw; k++) acc = vi_comb<MAX>(acc, sm[k]);
    }
    if (lane == 0) {
        if (vals) vals[row] = Ty<T>::st(acc.v);
        idx[row] = acc.i;
    }
}

template <bool MAX>
__device__ void agen(const T* __restrict__ in, T* vals, i64* idx, Dims kept, Dims red, i64 outer, i64 inner) {
    __shared__ VI sm[8][33];
    int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    i64 o = (i64)blockIdx.x * 32 + tx;
    VI acc = vi_init<MAX>();
    if (o < outer) {
        const T* p = in + dims_offset(kept, o);
        for (i64 r = ty; r < inner; r += 8) {
            VI c;
            c.v = Ty<T>::ld(p[red.n == 1 ? r * red.stride[0] : dims_offset(red, r)]);
            c.i = r;
            acc = vi_comb<MAX>(acc, c);
        }
    }
    sm[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && o < outer) {
        for (int k = 1; k < 8; k++) acc = vi_comb<MAX>(acc, sm[k][tx]);
        if (vals) vals[o] = Ty<T>::st(acc.v);
        idx[o] = acc.i;
    }
}

extern "C" __global__ void __launch_bounds__(256) arow_max(const T* in, T* vals, i64* idx, Dims kept, i64 rows, i64 n, int mode) {
    arow<true>(in, vals, idx, kept, rows, n, mode);
}
extern "C" __global__ void __launch_bounds__(256) arow_min(const T* in, T* vals, i64* idx, Dims kept, i64 rows, i64 n, int mode) {
    arow<false>(in, vals, idx, kept, rows, n, mode);
}
extern "C" __global__ void __launch_bounds__(256) agen_max(const T* in, T* vals, i64* idx, Dims kept, Dims red, i64 outer, i64 inner) {
    agen<true>(in, vals, idx, kept, red, outer, inner);
}
extern "C" __global__ void __launch_bounds__(256) agen_min(const T* in, T* vals, i64* idx, Dims kept, Dims red, i64 outer, i64 inner) {
    agen<false>(in, vals, idx, kept, red, outer, inner);
}

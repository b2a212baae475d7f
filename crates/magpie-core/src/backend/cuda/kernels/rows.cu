// Fixed-index row gathers, their deterministic adjoint and sparse tap maps along one dim
// (host side: rows.rs). Every index here was built on the host in range, so none is checked.
// Sums run in Ty<T>::acc (f32 for the 16-bit floats) in the CPU path's order, with explicit
// round-to-nearest multiply and add so that NVRTC's FMA contraction cannot change the bits.

typedef Ty<T>::acc A;

__device__ __forceinline__ float rows_madd(float acc, float w, float x) { return __fadd_rn(acc, __fmul_rn(w, x)); }
__device__ __forceinline__ double rows_madd(double acc, double w, double x) { return __dadd_rn(acc, __dmul_rn(w, x)); }
// Integer modules compile the tap kernel too (it is only launched for floats).
__device__ __forceinline__ i64 rows_madd(i64 acc, i64 w, i64 x) { return (i64)((u64)acc + (u64)w * (u64)x); }
__device__ __forceinline__ float rows_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double rows_add(double a, double b) { return __dadd_rn(a, b); }
// Integers wrap as the CPU path's wrapping_add.
__device__ __forceinline__ i64 rows_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }

// out[r, j] = x[r, idx[r, j]] with x rows of n_src elements and out rows of per_row.
extern "C" __global__ void take_rows_k(const T* __restrict__ x, T* __restrict__ out, const i64* __restrict__ idx,
                                       i64 per_row, i64 n_src, i64 total) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        out[i] = x[(i / per_row) * n_src + idx[i]];
    }
}

// The adjoint through the inverse map: destination p receives g[src[k]] for k in ptr[p]..ptr[p+1]
// (its sources in the CPU loop's order), summed, or the last one kept when `assign`.
extern "C" __global__ void put_rows_k(const T* __restrict__ g, T* __restrict__ out, const i64* __restrict__ ptr,
                                      const i64* __restrict__ src, int assign, i64 total) {
    for (i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (i64)gridDim.x * blockDim.x) {
        i64 b = ptr[p], e = ptr[p + 1];
        A acc = (A)0;
        if (assign) {
            if (e > b) acc = Ty<T>::ld(g[src[e - 1]]);
        } else {
            for (i64 k = b; k < e; k++) acc = rows_add(acc, Ty<T>::ld(g[src[k]]));
        }
        out[p] = Ty<T>::st(acc);
    }
}

// out[b, o, j] = sum over k in ptr[o]..ptr[o+1] of w[k] * x[b, idx[k], j], x of shape
// [outer, n_in, inner] and out of [outer, n_out, inner], weights already in A.
extern "C" __global__ void apply_taps_k(const T* __restrict__ x, T* __restrict__ out, const i64* __restrict__ ptr,
                                        const i64* __restrict__ idx, const A* __restrict__ w, i64 n_in, i64 n_out,
                                        i64 inner, i64 total) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        i64 j = i % inner, bo = i / inner;
        i64 o = bo % n_out, b = bo / n_out;
        const T* xb = x + b * n_in * inner + j;
        A acc = (A)0;
        for (i64 k = ptr[o]; k < ptr[o + 1]; k++) acc = rows_madd(acc, w[k], Ty<T>::ld(xb[idx[k] * inner]));
        out[i] = Ty<T>::st(acc);
    }
}

// Indexing kernels: gather (also index_select / embedding in general layouts) and contiguous row
// takes (embedding fast path, 16-byte copies). scatter.cu adds into tensors with atomics.
// Out-of-range indices are not read or written: they set *bad, which the host reads back
// (one 4-byte read per call) to raise PyTorch's IndexError.

typedef Ty<T>::acc A;
#define VEC (16 / sizeof(T))

// out[i] (contiguous over the iteration space) = src[base(i) + idx[i] * dstride].
extern "C" __global__ void gather_k(const T* __restrict__ src, T* __restrict__ out, const i64* __restrict__ idx, IdxIter it,
                                    i64 total, int* bad) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        i64 oi, os, oo;
        iter_offsets(it, i, oi, os, oo);
        i64 k = idx[oi];
        if (k < 0 || k >= it.lim) {
            *bad = 1;
            continue;
        }
        out[i] = src[os + k * it.dstride];
    }
}

// out[r, :] = w[idx[r], :] for a contiguous [rows_w, d] table; one warp-strided row per block
// row slot, 16-byte copies when `vec`.
extern "C" __global__ void take_rows(const T* __restrict__ w, T* __restrict__ out, const i64* __restrict__ idx, i64 nidx,
                                     i64 d, i64 rows_w, int vec, int* bad) {
    for (i64 r = blockIdx.x; r < nidx; r += gridDim.x) {
        i64 k = idx[r];
        if (k < 0 || k >= rows_w) {
            if (threadIdx.x == 0) *bad = 1;
            continue;
        }
        if (vec) {
            const uint4* s = reinterpret_cast<const uint4*>(w + k * d);
            uint4* o = reinterpret_cast<uint4*>(out + r * d);
            for (i64 j = threadIdx.x; j < d / (i64)VEC; j += blockDim.x) o[j] = __ldg(s + j);
        } else {
            for (i64 j = threadIdx.x; j < d; j += blockDim.x) out[r * d + j] = w[k * d + j];
        }
    }
}


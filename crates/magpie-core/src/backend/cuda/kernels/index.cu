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


// Embedding backward without atomics: out[r, :] = sum of g[i, :] over the positions i with
// idx[i] == r, added in index order (bitwise reproducible run to run, and the CPU kernel's order),
// zeros for rows without hits and for the row `skip` (padding_idx; -1 for none). Block b owns
// rows b, b + gridDim.x, ...; per row it walks the indices in chunks of 256, collects the
// matching positions of a chunk in order (warp ballots), then every thread adds them for its
// columns. Needs blockDim.x == 256.
extern "C" __global__ void embedding_bwd_rows(const T* __restrict__ g, const i64* __restrict__ idx, i64 nidx, i64 d,
                                              i64 rows, i64 skip, T* __restrict__ out) {
    __shared__ int hits[256];
    __shared__ int wcount[8];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        for (i64 c0 = 0; c0 < d; c0 += 4 * 256) {
            A acc[4] = {(A)0, (A)0, (A)0, (A)0};
            if (r != skip) {
                for (i64 k0 = 0; k0 < nidx; k0 += 256) {
                    const i64 k = k0 + t;
                    const bool m = k < nidx && idx[k] == r;
                    const unsigned mask = __ballot_sync(0xffffffffu, m);
                    if (lane == 0) wcount[w] = __popc(mask);
                    __syncthreads();
                    int before = 0, total = 0;
                    for (int j = 0; j < 8; j++) {
                        before += j < w ? wcount[j] : 0;
                        total += wcount[j];
                    }
                    if (m) hits[before + __popc(mask & ((1u << lane) - 1u))] = (int)t;
                    __syncthreads();
                    for (int j = 0; j < total; j++) {
                        const i64 row = k0 + hits[j];
#pragma unroll
                        for (int q = 0; q < 4; q++) {
                            const i64 c = c0 + q * 256 + t;
                            if (c < d) acc[q] += (A)Ty<T>::ld(g[row * d + c]);
                        }
                    }
                    __syncthreads();
                }
            }
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const i64 c = c0 + q * 256 + t;
                if (c < d) out[r * d + c] = Ty<T>::st(acc[q]);
            }
        }
    }
}

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


// Embedding backward without atomics, in two launches. Both sum each table row's gradient rows
// in index order (bitwise reproducible run to run, and the CPU kernel's order); the first groups
// the positions by row so that the second reads only the hits of its row (the n_indices x
// n_rows scan of a one-pass kernel is gone).
//
// Step 1 for many indices, in two launches: a stable counting sort of the positions by index.
// cnt[r] = hits of row r; off[r] = their exclusive prefix sum (off[rows] = hits in range);
// pos[off[idx[k]] + rank[k]] = k, where rank[k] counts the earlier positions with the same index.
// Out-of-range indices are dropped (the forward reported them). All scratch arrays are int32.
//
// embedding_bwd_rank, one thread a position over many blocks: the thread counts the positions
// with its index before and after its own (all indices staged 1024 at a time in shared memory,
// read as broadcasts); rank[k] = those before, and the last position of an index writes its
// row's count. Each count has one writer, so no atomics; cnt starts zeroed (the host's memset).
extern "C" __global__ void __launch_bounds__(256) embedding_bwd_rank(const i64* __restrict__ idx, int nidx, int rows, int* cnt, int* rank) {
    __shared__ int vals[1024];
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    int mine = -1;
    if (k < nidx) {
        const i64 x = idx[k];
        mine = (x >= 0 && x < rows) ? (int)x : -1;
    }
    int before = 0, after = 0;
    for (int c0 = 0; c0 < nidx; c0 += 1024) {
        const int nc = min(1024, nidx - c0);
        __syncthreads();
        for (int j = threadIdx.x; j < nc; j += blockDim.x) {
            const i64 x = idx[c0 + j];
            vals[j] = (x >= 0 && x < rows) ? (int)x : -1;
        }
        __syncthreads();
        if (mine >= 0) {
            for (int j = 0; j < nc; j++) {
                const int same = vals[j] == mine;
                before += same & (c0 + j < k);
                after += same & (c0 + j > k);
            }
        }
    }
    if (mine >= 0) {
        rank[k] = before;
        if (after == 0) cnt[mine] = before + 1;
    }
}

// embedding_bwd_offsets, one block of 1024 threads: off = the exclusive prefix sum of cnt (a
// contiguous segment of rows per thread, scanned across the block), then each position's slot.
extern "C" __global__ void __launch_bounds__(1024) embedding_bwd_offsets(const i64* __restrict__ idx, int nidx, int rows,
                                                                         const int* __restrict__ cnt, int* off, const int* __restrict__ rank,
                                                                         int* pos) {
    __shared__ int wsum[32];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    const int per = (rows + 1023) / 1024;
    const int r0 = min(rows, t * per), r1 = min(rows, r0 + per);
    int s = 0;
    for (int r = r0; r < r1; r++) s += cnt[r];
    int incl = s;
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
    }
    if (lane == 31) wsum[w] = incl;
    __syncthreads();
    if (w == 0) {
        const int z = wsum[lane];
        int zi = z;
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xffffffffu, zi, o);
            if (lane >= o) zi += y;
        }
        wsum[lane] = zi - z;
    }
    __syncthreads();
    int run = wsum[w] + incl - s;
    for (int r = r0; r < r1; r++) {
        off[r] = run;
        run += cnt[r];
    }
    if (t == 1023) off[rows] = run;
    __syncthreads();
    for (int k = t; k < nidx; k += 1024) {
        const i64 x = idx[k];
        if (x >= 0 && x < rows) pos[off[(int)x] + rank[k]] = k;
    }
}

// Step 1 for few indices (the host picks it up to PLAN_SMALL_MAX of them), over many blocks and
// without cnt or rank: thread i computes off[i] (the in-range indices below row i) for i <= rows,
// and for i < nidx its own position's slot, off[idx[i]] + (earlier positions with the same
// index), which it writes into pos. Each thread scans all indices (staged 1024 at a time in
// shared memory, read as broadcasts), so the work is (rows + nidx) x nidx comparisons with no
// dependence between threads; off and pos are those of the two-launch plan above, value for value.
extern "C" __global__ void __launch_bounds__(256) embedding_bwd_plan_small(const i64* __restrict__ idx, int nidx, int rows, int* off,
                                                                          int* pos) {
    __shared__ int vals[1024];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    int mine = -1;
    if (i < nidx) {
        const i64 x = idx[i];
        mine = (x >= 0 && x < rows) ? (int)x : -1;
    }
    int below_row = 0, below_mine = 0, rank = 0;
    for (int c0 = 0; c0 < nidx; c0 += 1024) {
        const int nc = min(1024, nidx - c0);
        __syncthreads();
        for (int j = threadIdx.x; j < nc; j += blockDim.x) {
            const i64 x = idx[c0 + j];
            vals[j] = (x >= 0 && x < rows) ? (int)x : -1;
        }
        __syncthreads();
        for (int j = 0; j < nc; j++) {
            const int v = vals[j];
            if (v >= 0) {
                below_row += v < i;
                below_mine += v < mine;
                rank += (v == mine) & (c0 + j < i);
            }
        }
    }
    if (i <= rows) off[i] = below_row;
    if (mine >= 0) pos[below_mine + rank] = i;
}

// Step 2: out[r, :] = sum of g[pos[j], :] for j in [off[r], off[r + 1]) in that order (index
// order), zeros for rows without hits and for the row `skip` (padding_idx; -1 for none). Block b
// owns rows b, b + gridDim.x, ...; a thread keeps 4 columns 256 apart and loads 4 hits ahead
// of its additions (a row with many hits, as a token-type row, is a chain of dependent adds:
// the loads in flight hide their latency; the order of the additions is unchanged).
extern "C" __global__ void embedding_bwd_sum(const T* __restrict__ g, const int* __restrict__ off, const int* __restrict__ pos, i64 d,
                                             i64 rows, i64 skip, T* __restrict__ out) {
    const int t = threadIdx.x;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const int a = off[r], b = r == skip ? a : off[r + 1];
        for (i64 c0 = 0; c0 < d; c0 += 4 * 256) {
            A acc[4] = {(A)0, (A)0, (A)0, (A)0};
            bool in[4];
#pragma unroll
            for (int q = 0; q < 4; q++) in[q] = c0 + q * 256 + t < d;
            int j = a;
            for (; j + 4 <= b; j += 4) {
                A v[4][4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const T* gr = g + (i64)pos[j + u] * d + c0 + t;
#pragma unroll
                    for (int q = 0; q < 4; q++) v[u][q] = in[q] ? (A)Ty<T>::ld(gr[q * 256]) : (A)0;
                }
#pragma unroll
                for (int u = 0; u < 4; u++) {
#pragma unroll
                    for (int q = 0; q < 4; q++) acc[q] += v[u][q];
                }
            }
            for (; j < b; j++) {
                const T* gr = g + (i64)pos[j] * d + c0 + t;
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (in[q]) acc[q] += (A)Ty<T>::ld(gr[q * 256]);
            }
#pragma unroll
            for (int q = 0; q < 4; q++)
                if (in[q]) out[r * d + c0 + q * 256 + t] = Ty<T>::st(acc[q]);
        }
    }
}

// Step 2 for tables with many hits a row (the token-type table: 2 rows, hundreds of hits each),
// where one block a row would walk each row's hits 4 loads at a time on one SM. Block
// (x, y) owns the 32 columns 32y.. of rows x, x + gridDim.x, ...: its 16 warps stage 128 hit rows
// at a time in shared memory (8 loads in flight a lane), then lane c of warp 0 adds the staged
// values of its column in index order. The additions and their order are embedding_bwd_sum's
// (and the CPU kernel's), so the bits are the same; only the loads run ahead.
extern "C" __global__ void __launch_bounds__(512) embedding_bwd_sum_cols(const T* __restrict__ g, const int* __restrict__ off,
                                                                         const int* __restrict__ pos, i64 d, i64 rows, i64 skip,
                                                                         T* __restrict__ out) {
    __shared__ A tile[128][33];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const i64 c = (i64)blockIdx.y * 32 + lane;
    const bool in = c < d;
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const int a = off[r], b = r == skip ? a : off[r + 1];
        A acc = (A)0;
        for (int j0 = a; j0 < b; j0 += 128) {
            const int nh = min(128, b - j0);
            A v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int h = w + 16 * u;
                v[u] = (h < nh && in) ? (A)Ty<T>::ld(g[(i64)pos[j0 + h] * d + c]) : (A)0;
            }
#pragma unroll
            for (int u = 0; u < 8; u++) tile[w + 16 * u][lane] = v[u];
            __syncthreads();
            if (w == 0)
                for (int h = 0; h < nh; h++) acc += tile[h][lane];
            __syncthreads();
        }
        if (w == 0 && in) out[r * d + c] = Ty<T>::st(acc);
    }
}

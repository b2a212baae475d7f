// Segmented sorts of rows (`rows` rows of `n` contiguous elements of T) and what is picked from
// them: the sorted prefix (sort, argsort, topk), the k-th smallest (kthvalue), the lower median
// (median, nanmedian) and the most frequent value (mode). Each element becomes an unsigned key
// whose integer order is PyTorch's sort order (NaN greatest, -0 equal to +0, inverted for
// descending), paired with its position; pairs compare by (key, position), so the bitonic
// networks below, which are not stable by themselves, give the stable order. Rows of up to
// SORT_TILE elements sort in shared memory (one block per row); longer rows are padded to a power
// of two in a global scratch buffer and sorted by tile sorts, global merge steps and shared-memory
// merges. The host picks the path (sort.rs).

#define SORT_TILE 4096
#define SORT_PAD_POS 0x7fffffff

// The key type: 32 bits for the types of up to 4 bytes, 64 bits for double and int64.
template <int B> struct SortKeyOf { typedef unsigned int t; };
template <> struct SortKeyOf<8> { typedef u64 t; };
typedef SortKeyOf<sizeof(T)>::t K;

// Floating types have NaN keys (all ones); the key of an integer's maximum is all ones too, so
// NaN counting is done only for these.
template <class X> struct SortIsFloat { enum { v = 0 }; };
template <> struct SortIsFloat<float> { enum { v = 1 }; };
template <> struct SortIsFloat<double> { enum { v = 1 }; };
template <> struct SortIsFloat<half_t> { enum { v = 1 }; };
template <> struct SortIsFloat<bf16_t> { enum { v = 1 }; };

__device__ __forceinline__ unsigned sort_fkey(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;  // NaN, any payload
    if ((u & 0x7fffffffu) == 0u) u = 0u;                     // -0 sorts as +0
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ u64 sort_dkey(double f) {
    u64 u = (u64)__double_as_longlong(f);
    if ((u & 0x7fffffffffffffffULL) > 0x7ff0000000000000ULL) return ~0ULL;
    if ((u & 0x7fffffffffffffffULL) == 0ULL) u = 0ULL;
    return (u & 0x8000000000000000ULL) ? ~u : (u | 0x8000000000000000ULL);
}
__device__ __forceinline__ unsigned sort_key(float v) { return sort_fkey(v); }
__device__ __forceinline__ unsigned sort_key(half_t v) { return sort_fkey(h2f(v)); }
__device__ __forceinline__ unsigned sort_key(bf16_t v) { return sort_fkey(b2f(v)); }
__device__ __forceinline__ u64 sort_key(double v) { return sort_dkey(v); }
__device__ __forceinline__ unsigned sort_key(bool v) { return v ? 1u : 0u; }
__device__ __forceinline__ unsigned sort_key(u8 v) { return (unsigned)v; }
__device__ __forceinline__ unsigned sort_key(i8 v) { return (unsigned)(int)v ^ 0x80000000u; }
__device__ __forceinline__ unsigned sort_key(i16 v) { return (unsigned)(int)v ^ 0x80000000u; }
__device__ __forceinline__ unsigned sort_key(i32 v) { return (unsigned)v ^ 0x80000000u; }
__device__ __forceinline__ u64 sort_key(i64 v) { return (u64)v ^ 0x8000000000000000ULL; }

// The key of element `i` of a row (padding past `n`), inverted for descending order.
__device__ __forceinline__ K sort_load(const T* xr, long long i, long long n, int desc) {
    if (i >= n) return ~(K)0;
    K k = sort_key(xr[i]);
    return desc ? ~k : k;
}

// One compare-exchange of the bitonic network: positions i < l, ascending when `up`.
__device__ __forceinline__ void sort_cx(K* sk, int* sp, long long i, long long l, bool up) {
    K a = sk[i], b = sk[l];
    int pa = sp[i], pb = sp[l];
    bool gt = a > b || (a == b && pa > pb);
    if (gt == up) {
        sk[i] = b; sk[l] = a;
        sp[i] = pb; sp[l] = pa;
    }
}

// Writes what `mode` picks from one sorted row (keys `sk`, positions `sp`, ascending for every
// mode but 0): mode 0 the first `m` (values and positions), 1 the k-th smallest (`param` = k - 1;
// the first position holding its value), 2 the lower median (`param` = 1 to ignore NaN; without,
// the first NaN when there is one), 3 the most frequent value (the smallest on ties, at its last
// position). All threads of the block call it after a barrier.
__device__ void sort_emit(const K* sk, const int* sp, const T* xr, long long n, T* vo, i64* io, long long m, int mode, long long param) {
    if (mode == 0) {
        for (long long j = threadIdx.x; j < m; j += blockDim.x) {
            int s = sp[j];
            vo[j] = xr[s];
            io[j] = s;
        }
        return;
    }
    if (threadIdx.x != 0) return;
    long long p = 0;
    if (mode == 1) {
        p = param;
        while (p > 0 && sk[p - 1] == sk[p]) p--;
    } else if (mode == 2) {
        long long valid = n;
        if (SortIsFloat<T>::v) {
            // NaN keys (all ones) come last: binary search for the first
            long long lo = 0, hi = n;
            while (lo < hi) {
                long long mid = (lo + hi) >> 1;
                if (sk[mid] == ~(K)0) hi = mid; else lo = mid + 1;
            }
            valid = lo;
        }
        if (param == 0 && valid < n) p = valid;
        else p = valid > 0 ? (valid - 1) / 2 : 0;
    } else {
        long long f = 0, best_f = 0;
        for (long long i = 0; i < n; i++) {
            f++;
            if (i + 1 == n || sk[i] != sk[i + 1]) {
                if (f > best_f) { best_f = f; p = i; }
                f = 0;
            }
        }
    }
    int s = sp[p];
    vo[0] = xr[s];
    io[0] = s;
}

// Rows of n <= SORT_TILE elements: one block per row, the row padded to `P` (a power of two)
// in dynamic shared memory (P keys, then P positions).
extern "C" __global__ void sort_rows_smem(const T* x, T* vals, i64* idx, long long n, int P, int desc, int mode, long long m, long long param) {
    extern __shared__ __align__(16) unsigned char sort_smem[];
    K* sk = (K*)sort_smem;
    int* sp = (int*)(sk + P);
    long long row = blockIdx.x;
    const T* xr = x + row * n;
    for (int i = threadIdx.x; i < P; i += blockDim.x) {
        sk[i] = sort_load(xr, i, n, desc);
        sp[i] = i < n ? i : SORT_PAD_POS;
    }
    __syncthreads();
    for (int k = 2; k <= P; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int t = threadIdx.x; t < (P >> 1); t += blockDim.x) {
                int i = 2 * t - (t & (j - 1));
                sort_cx(sk, sp, i, i + j, (i & k) == 0);
            }
            __syncthreads();
        }
    }
    sort_emit(sk, sp, xr, n, vals + row * m, idx + row * m, m, mode, param);
}

// Long rows, step 1: each SORT_TILE tile of the padded row (P elements, grid (P / SORT_TILE,
// rows)) sorted in shared memory, in the direction the global network wants for it.
extern "C" __global__ void sort_tiles(const T* x, K* gk, int* gp, long long n, long long P, int desc) {
    __shared__ K sk[SORT_TILE];
    __shared__ int sp[SORT_TILE];
    long long row = blockIdx.y;
    long long base = (long long)blockIdx.x * SORT_TILE;
    const T* xr = x + row * n;
    for (int i = threadIdx.x; i < SORT_TILE; i += blockDim.x) {
        long long g = base + i;
        sk[i] = sort_load(xr, g, n, desc);
        sp[i] = g < n ? (int)g : SORT_PAD_POS;
    }
    __syncthreads();
    for (long long k = 2; k <= SORT_TILE; k <<= 1) {
        for (int j = (int)(k >> 1); j > 0; j >>= 1) {
            for (int t = threadIdx.x; t < SORT_TILE / 2; t += blockDim.x) {
                int i = 2 * t - (t & (j - 1));
                sort_cx(sk, sp, i, i + j, ((base + i) & k) == 0);
            }
            __syncthreads();
        }
    }
    K* rk = gk + row * P + base;
    int* rp = gp + row * P + base;
    for (int i = threadIdx.x; i < SORT_TILE; i += blockDim.x) {
        rk[i] = sk[i];
        rp[i] = sp[i];
    }
}

// Long rows, step 2: one compare-exchange step (distance j >= SORT_TILE) of stage k of the
// network over every row, a thread per pair.
extern "C" __global__ void sort_global_step(K* gk, int* gp, long long rows, long long P, long long k, long long j) {
    long long pairs = rows * (P >> 1);
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < pairs; q += (long long)gridDim.x * blockDim.x) {
        long long row = q / (P >> 1), t = q - row * (P >> 1);
        long long i = 2 * t - (t & (j - 1));
        sort_cx(gk + row * P, gp + row * P, i, i + j, (i & k) == 0);
    }
}

// Long rows, step 3: the steps of stage k with distances below SORT_TILE, each tile in shared
// memory (grid (P / SORT_TILE, rows)).
extern "C" __global__ void sort_tile_merge(K* gk, int* gp, long long P, long long k) {
    __shared__ K sk[SORT_TILE];
    __shared__ int sp[SORT_TILE];
    long long row = blockIdx.y;
    long long base = (long long)blockIdx.x * SORT_TILE;
    K* rk = gk + row * P + base;
    int* rp = gp + row * P + base;
    for (int i = threadIdx.x; i < SORT_TILE; i += blockDim.x) {
        sk[i] = rk[i];
        sp[i] = rp[i];
    }
    __syncthreads();
    bool up = ((base & k) == 0);  // k > SORT_TILE: one direction per tile
    for (int j = SORT_TILE / 2; j > 0; j >>= 1) {
        for (int t = threadIdx.x; t < SORT_TILE / 2; t += blockDim.x) {
            int i = 2 * t - (t & (j - 1));
            sort_cx(sk, sp, i, i + j, up);
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < SORT_TILE; i += blockDim.x) {
        rk[i] = sk[i];
        rp[i] = sp[i];
    }
}

// Long rows, step 4: what `mode` picks from each sorted row (one block per row).
extern "C" __global__ void sort_emit_rows(const T* x, const K* gk, const int* gp, T* vals, i64* idx, long long n, long long P, int mode, long long m, long long param) {
    long long row = blockIdx.x;
    sort_emit(gk + row * P, gp + row * P, x + row * n, n, vals + row * m, idx + row * m, m, mode, param);
}

// Long rows, step 4 for a prefix: the first m of each sorted row, a thread per element (a block
// per row would leave a single SM gathering a whole long row).
extern "C" __global__ void sort_emit_prefix(const T* x, const int* gp, T* vals, i64* idx, long long rows, long long n, long long P, long long m) {
    long long total = rows * m;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += (long long)gridDim.x * blockDim.x) {
        long long row = q / m, j = q - row * m;
        int s = gp[row * P + j];
        vals[q] = x[row * n + s];
        idx[q] = s;
    }
}

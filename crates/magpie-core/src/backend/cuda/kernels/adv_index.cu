// Advanced indexing (aten::index, index_put, scatter with reductions) on storage offsets: every
// indexed position is a storage offset `base[b]` (the index tensors' contribution) plus the offset
// `rest[r]` of a position of the dims that are not indexed. Scatters sort the bases first (a stable
// sort: equal destinations keep index order) and reduce each run of equal bases in that order, one
// thread per (run, rest position): no atomics, so results are the same run to run and follow the
// CPU kernel's order (last write wins for assignment, as on the CPU). Out-of-range indices set
// *bad, read back by the host.

typedef Ty<T>::acc A;

// base[i] += wrap(idx[i]) * stride for one index tensor (contiguous i64, broadcast to the index
// shape): negative indices count from the end, out-of-range ones set *bad and add nothing.
extern "C" __global__ void adv_base_add(const i64* __restrict__ idx, i64 n, i64 size, i64 stride, i64* base, int* bad) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 k = idx[i];
        if (k < -size || k >= size) {
            *bad = 1;
            continue;
        }
        if (k < 0) k += size;
        base[i] += k * stride;
    }
}

// out[b * rn + r] = src[base[b] + rest[r]] (out contiguous in front form [B..., rest...]).
extern "C" __global__ void adv_gather(const T* __restrict__ src, T* __restrict__ out, const i64* __restrict__ base,
                                      const i64* __restrict__ rest, i64 rn, i64 total) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        const i64 b = i / rn;
        out[i] = src[base[b] + rest[i - b * rn]];
    }
}

// Reduction modes (Reduce in ops/indexing.rs).
#define ADV_ASSIGN 0
#define ADV_SUM 1
#define ADV_PROD 2
#define ADV_MEAN 3
#define ADV_AMAX 4
#define ADV_AMIN 5

__device__ __forceinline__ A adv_combine(int mode, A x, A y) {
    switch (mode) {
        case ADV_PROD: return x * y;
        case ADV_AMAX: return (x != x) ? x : ((y != y) ? y : (y > x ? y : x));  // NaN propagates
        case ADV_AMIN: return (x != x) ? x : ((y != y) ? y : (y < x ? y : x));
        default: return x + y;  // sum, mean
    }
}

// Floor division for integer means (the CPU's div_euclid with a positive count), plain for floats.
__device__ __forceinline__ float adv_div(float a, i64 n) { return a / (float)n; }
__device__ __forceinline__ double adv_div(double a, i64 n) { return a / (double)n; }
__device__ __forceinline__ i64 adv_div(i64 a, i64 n) {
    i64 q = a / n;
    if (a % n != 0 && a < 0) q -= 1;
    return q;
}

// dst[key[j] + rest[r]] combined with vals[perm[k] * rn + r] for every k of the run of equal keys
// that starts at j, in order (perm is the stable sort's permutation, so index order). One thread
// per (j, r); threads whose j is not a run start return at once.
extern "C" __global__ void adv_scatter_runs(T* dst, const T* __restrict__ vals, const i64* __restrict__ key,
                                            const i64* __restrict__ perm, i64 nb, const i64* __restrict__ rest, i64 rn,
                                            int mode, int include_self) {
    const i64 total = nb * rn;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        const i64 j = i / rn, r = i - j * rn;
        const i64 kj = key[j];
        if (j > 0 && key[j - 1] == kj) continue;
        const i64 pos = kj + rest[r];
        if (mode == ADV_ASSIGN) {
            i64 e = j;
            while (e + 1 < nb && key[e + 1] == kj) e++;
            dst[pos] = vals[perm[e] * rn + r];
            continue;
        }
        i64 k = j, cnt = 1;
        A acc;
        if (include_self) {
            acc = Ty<T>::ld(dst[pos]);
        } else {
            acc = Ty<T>::ld(vals[perm[k] * rn + r]);
            k++;
        }
        for (; k < nb && key[k] == kj; k++) {
            acc = adv_combine(mode, acc, Ty<T>::ld(vals[perm[k] * rn + r]));
            cnt++;
        }
        if (mode == ADV_MEAN) acc = adv_div(acc, cnt);
        dst[pos] = Ty<T>::st(acc);
    }
}

// nonzero: out[(csum[i] - 1) * nd + d] = coordinate d of flat position i, for every i with
// mask[i] != 0 (mask and csum, its inclusive prefix sum, are contiguous i64). `dims` holds the
// shape; coordinates come out in row-major order, as the CPU kernel's.
extern "C" __global__ void adv_nonzero(const i64* __restrict__ mask, const i64* __restrict__ csum, i64 n, Dims dims,
                                       i64* __restrict__ out) {
    const int nd = dims.n;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        if (mask[i] == 0) continue;
        const i64 row = csum[i] - 1;
        i64 rem = i;
        for (int d = nd - 1; d >= 0; d--) {
            const i64 s = dims.size[d];
            out[row * nd + d] = rem % s;
            rem /= s;
        }
    }
}

// searchsorted: out[i] = the first position p of its sorted line with line[p] >= v (> v when
// `right`), NaN greatest, by binary search. `seq` holds `lines` lines of m (one line for all
// values when lines == 1, else line i / per); seq and vals are contiguous f64 or i64 (T).
__device__ __forceinline__ bool adv_lt(A a, A b) { return (a < b) || (b != b && a == a); }
extern "C" __global__ void adv_searchsorted(const T* __restrict__ seq, const T* __restrict__ vals, i64 lines, i64 m, i64 per,
                                            i64 total, int right, i64* __restrict__ out) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        const T* line = seq + (lines == 1 ? 0 : (i / per) * m);
        const A v = Ty<T>::ld(vals[i]);
        i64 lo = 0, hi = m;
        while (lo < hi) {
            const i64 mid = (lo + hi) / 2;
            const A s = Ty<T>::ld(line[mid]);
            const bool go_right = right ? !adv_lt(v, s) : adv_lt(s, v);
            if (go_right) lo = mid + 1;
            else hi = mid;
        }
        out[i] = lo;
    }
}

// Kernels beside the cuSOLVER linear algebra (linalg_perm.rs): LAPACK pivots to permutations and
// determinants from LU factors. T is float or double; one thread per matrix where the work is
// a sequence (pivot swaps, a product along the diagonal), grid-stride over elements otherwise.

// order[b][j]: the row of A that row j of P^T A comes from, after applying the 1-based pivots
// piv[b][0..k) (row j swapped with row piv-1, in turn) to 0..m.
extern "C" __global__ void lu_order(const i64* __restrict__ piv, i64 count, int k, int m, i64* __restrict__ order) {
    for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < count; b += (i64)gridDim.x * blockDim.x) {
        i64* o = order + b * m;
        for (int i = 0; i < m; ++i) o[i] = i;
        const i64* p = piv + b * k;
        for (int j = 0; j < k; ++j) {
            i64 q = p[j] - 1;
            q = q < 0 ? 0 : (q > m - 1 ? m - 1 : q);
            const i64 t = o[j];
            o[j] = o[q];
            o[q] = t;
        }
    }
}

// The permutation matrices P (count x m x m, row-major) with A = P L U: P[order[j]][j] = 1.
extern "C" __global__ void lu_perm(const i64* __restrict__ order, i64 count, int m, T* __restrict__ p) {
    const i64 mm = (i64)m * m, total = count * mm;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        const i64 b = i / mm, r = (i % mm) / m, j = i % m;
        p[i] = (T)(order[b * m + j] == r ? 1 : 0);
    }
}

// det, sign and log|det| of count n x n LU factorizations (only the diagonal is read, so either
// storage order works), as the CPU path computes them: the sign flips per swapped row and takes
// the sign of each pivot (NaN for a NaN pivot, 0 once a pivot is 0).
extern "C" __global__ void lu_dets(const T* __restrict__ lu, const i64* __restrict__ piv, i64 count, int n, T* __restrict__ det, T* __restrict__ sign, T* __restrict__ logabs) {
    for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < count; b += (i64)gridDim.x * blockDim.x) {
        const T* a = lu + b * (i64)n * n;
        double d = 1.0, s = 1.0, la = 0.0;
        for (int j = 0; j < n; ++j) {
            const double x = (double)a[(i64)j * n + j];
            if (piv[b * n + j] != j + 1) { s = -s; d = -d; }
            d *= x;
            s *= (x != x) ? x : copysign(1.0, x);
            if (x == 0.0) s = 0.0;
            la += log(fabs(x));
        }
        det[b] = (T)d;
        sign[b] = (T)s;
        logabs[b] = (T)la;
    }
}

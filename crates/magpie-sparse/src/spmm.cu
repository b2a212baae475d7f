// CSR sparse @ dense: out[r, j] = sum over e in row r of vals[e] * dense[col[e], j].
// One thread per output element; blockIdx.x walks the rows, blockIdx.y * blockDim.x + threadIdx.x
// the output columns, so the threads of a block read one dense row's consecutive elements.
// T is defined by the host (float or double) before this text.
extern "C" __global__ void SPMM_NAME(const long long* __restrict__ crow, const long long* __restrict__ col,
                                     const T* __restrict__ vals, const T* __restrict__ dense,
                                     T* __restrict__ out, long long m, long long n) {
    long long r = blockIdx.x;
    long long j = (long long)blockIdx.y * blockDim.x + threadIdx.x;
    if (r >= m || j >= n) return;
    T acc = (T)0;
    long long end = crow[r + 1];
    for (long long e = crow[r]; e < end; ++e) {
        acc += vals[e] * dense[col[e] * n + j];
    }
    out[r * n + j] = acc;
}

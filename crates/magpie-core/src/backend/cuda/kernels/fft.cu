// FFT helpers on interleaved complex buffers (T = float or double, typedef'd before this text):
// normalization and conjugation after cuFFT (which never scales), and the half-spectrum weights
// of the real transforms' gradients.

extern "C" __global__ void KNAME(scale_conj)(T* z, i64 n, double scale, int conj) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        T re = (T)(z[2 * i] * scale);
        T im = (T)(z[2 * i + 1] * scale);
        z[2 * i] = re;
        z[2 * i + 1] = conj ? -im : im;
    }
}

// multiplies positions 1..=count along a dim of size m (elements `inner` apart) by w
extern "C" __global__ void KNAME(weight)(T* z, i64 n, i64 m, i64 inner, i64 count, double w) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        i64 k = (i / inner) % m;
        if (k >= 1 && k <= count) {
            z[2 * i] = (T)(z[2 * i] * w);
            z[2 * i + 1] = (T)(z[2 * i + 1] * w);
        }
    }
}

// Loss scaling for mixed precision (PyTorch's _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_). found_inf, inv_scale and scale are float32 device scalars and
// growth_tracker an int32 one, so a training step never reads them on the host until the
// optimizer step decides (one read per step, as in PyTorch).

typedef Ty<T>::acc A;

// g *= inv_scale in place over n contiguous elements of type T; any non-finite element sets
// *found_inf to 1 (several threads may store the same 1: no atomics needed). The product is
// taken in the accumulation type (float for the 16-bit floats, double for double), as PyTorch's opmath.
extern "C" __global__ void amp_unscale(T* __restrict__ g, i64 n, float* __restrict__ found_inf, const float* __restrict__ inv_scale) {
    const float inv = *inv_scale;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const A v = Ty<T>::ld(g[i]);
        if (!isfinite(v)) *found_inf = 1.0f;
        g[i] = Ty<T>::st(inv == 1.0f ? v : v * (A)inv);
    }
}

// One thread: back off after an overflow, else count the step and grow the scale every
// growth_interval successful steps (unless the grown scale is not finite).
extern "C" __global__ void amp_update_scale(float* __restrict__ scale, int* __restrict__ growth_tracker, const float* __restrict__ found_inf,
                                            double growth_factor, double backoff_factor, int growth_interval) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (*found_inf != 0.0f) {
        *scale = (float)((double)*scale * backoff_factor);
        *growth_tracker = 0;
    } else {
        const int successful = *growth_tracker + 1;
        if (successful == growth_interval) {
            const float grown = (float)((double)*scale * growth_factor);
            if (isfinite(grown)) *scale = grown;
            *growth_tracker = 0;
        } else {
            *growth_tracker = successful;
        }
    }
}

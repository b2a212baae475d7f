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

// Autocast's weight casts as one launch: up to MP_CAST_N float32 buffers cast to 16-bit ones
// (bf != 0: bfloat16, else float16), rounded as the single cast kernel rounds (to_bf16 /
// to_f16). blockIdx.y picks the buffer; the blocks along x stride over it, four elements per
// thread where both buffers allow 16- and 8-byte accesses.
#define MP_CAST_N 48
struct CastList {
    u64 src[MP_CAST_N];
    u64 dst[MP_CAST_N];
    i64 n[MP_CAST_N];
};

__device__ __forceinline__ unsigned short amp_cv16(float f, int bf) { return bf ? to_bf16(f).x : to_f16(f).x; }

extern "C" __global__ void amp_cast_multi(const CastList l, int bf) {
    const int j = blockIdx.y;
    const float* __restrict__ s = reinterpret_cast<const float*>(l.src[j]);
    unsigned short* __restrict__ d = reinterpret_cast<unsigned short*>(l.dst[j]);
    const i64 n = l.n[j];
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x, stride = (i64)gridDim.x * blockDim.x;
    const i64 nv = ((l.src[j] & 15) == 0 && (l.dst[j] & 7) == 0) ? n / 4 : 0;
    for (i64 v = tid; v < nv; v += stride) {
        const float4 x = reinterpret_cast<const float4*>(s)[v];
        ushort4 o;
        o.x = amp_cv16(x.x, bf);
        o.y = amp_cv16(x.y, bf);
        o.z = amp_cv16(x.z, bf);
        o.w = amp_cv16(x.w, bf);
        reinterpret_cast<ushort4*>(d)[v] = o;
    }
    for (i64 i = nv * 4 + tid; i < n; i += stride) d[i] = amp_cv16(s[i], bf);
}

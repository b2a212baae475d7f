// Kernels of the fused inference engine (crates/magpie-models/src/fused). The host prepends the
// core's preamble and `typedef <storage type> T;` (float, bf16_t or half_t) and, for the GEMV,
// `typedef <output type> OT;`. Every kernel reads what changes between decode steps (token ids,
// positions, lengths, sampling counters) from device memory, so one captured CUDA graph serves
// every step. Math is f32; values are rounded to T where the module path rounds them. Kernel names
// end in the host's MP_SUFFIX (one compiled module per storage / output dtype).

#define MP_CAT2(a, b) a##b
#define MP_CAT(a, b) MP_CAT2(a, b)
#define MP_K(n) MP_CAT(n, MP_SUFFIX)

// Programmatic dependent launch: every kernel waits for the previous kernel's grid (and its
// memory) before touching memory, then lets the next kernel be scheduled. Both are no-ops in a
// plain launch.
__device__ __forceinline__ void mp_pdl() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// ---- L2 prefetch of what later kernels read ----
//
// The weights do not change during a step, so a kernel may ask the L2 cache for the bytes a later
// kernel reads (the host's prefetch plan, `prefetch.rs`): the HBM keeps streaming through each
// kernel's tail, the gap between kernels and the next one's ramp. cp.async.bulk.prefetch hands a
// range to the SM's copy engine (TMA): one instruction per PF_CHUNK bytes, nothing comes back to
// registers. Ranges are 16-byte aligned multiples of 16 bytes (the host checks).
#define MP_PF 4
#define PF_CHUNK 16384
__device__ __forceinline__ void mp_bulk_prefetch(const unsigned char* p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
// Block `blk` of `nblk` prefetches its share (a 256-byte multiple) of the concatenation of the
// ranges (p[i], n[i] bytes); warp 0 issues it.
__device__ __forceinline__ void pf_share(const unsigned char* const* p, const i64* n, i64 blk, i64 nblk) {
    if (threadIdx.x >= 32) return;
    const i64 lane = threadIdx.x;
    i64 tot = 0;
#pragma unroll
    for (int k = 0; k < MP_PF; k++) tot += n[k];
    if (tot <= 0) return;
    const i64 share = ((tot + nblk - 1) / nblk + 255) & ~(i64)255;
    const i64 a = blk * share, e = min(a + share, tot);
    i64 base = 0;
#pragma unroll
    for (int k = 0; k < MP_PF; k++) {
        const i64 lo = max(a, base), hi = min(e, base + n[k]);
        for (i64 o = lo + lane * PF_CHUNK; o < hi; o += 32 * PF_CHUNK) mp_bulk_prefetch(p[k] + (o - base), (unsigned)min((i64)PF_CHUNK, hi - o));
        base += n[k];
    }
}

// Order-preserving map of a float to an unsigned integer (larger float, larger key).
__device__ __forceinline__ unsigned fkey(float f) {
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float funkey(unsigned k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

template <class X> __device__ __forceinline__ X cvt(float v);
template <> __device__ __forceinline__ float cvt<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16_t cvt<bf16_t>(float v) { return f2b(v); }
template <> __device__ __forceinline__ half_t cvt<half_t>(float v) { return f2h(v); }
__device__ __forceinline__ float rnd(float v) { return to_f32(cvt<T>(v)); }
#define MP_INF __int_as_float(0x7f800000)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); `red` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    float t = lane < nw ? red[lane] : 0.0f;
    return warp_sum(t);
}

// x[m] = wte[tok[m]] (+ wpe[pos[m]]) (+ tte[types[m]], row 0 when `types` is null), one block per
// token, summed in f32 and rounded once. With `kvlen`, also kvlen[m] = pos[m] + 1 (a decode step: row
// m is sequence m, whose cache holds pos[m] tokens before this one).
extern "C" __global__ void MP_K(fused_embed)(const int* __restrict__ tok, const int* __restrict__ pos, const T* __restrict__ wte, const T* __restrict__ wpe, T* __restrict__ x, int dim, int* __restrict__ kvlen, const T* __restrict__ tte, const int* __restrict__ types) {
    mp_pdl();
    int m = blockIdx.x;
    const T* e = wte + (i64)tok[m] * dim;
    const T* p = wpe ? wpe + (i64)pos[m] * dim : nullptr;
    const T* tt = tte ? tte + (types ? (i64)types[m] * dim : 0) : nullptr;
    T* o = x + (i64)m * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = to_f32(e[i]);
        if (tt) v += to_f32(tt[i]);
        if (p) v += to_f32(p[i]);
        o[i] = cvt<T>(v);
    }
    if (kvlen && threadIdx.x == 0) kvlen[m] = pos[m] + 1;
}

// The residual step and the next norm, one block per row: x[m] += delta[m] + dbias (each nullable;
// the sum rounded to T like the module path's `x + o`), then h[m] = norm(x[m]): RMSNorm
// (`rms != 0`: w * round(x * rsqrt(mean(x^2) + eps)), as transformers' LlamaRMSNorm) or LayerNorm
// ((x - mean) * rsqrt(var + eps) * w + b). Dynamic shared memory: dim floats.
extern "C" __global__ void MP_K(fused_add_norm)(T* __restrict__ x, const T* __restrict__ delta, const T* __restrict__ dbias, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ h, int dim, float eps, int rms) {
    mp_pdl();
    extern __shared__ float row[];
    __shared__ float red[32];
    int m = blockIdx.x;
    T* xr = x + (i64)m * dim;
    const T* dr = delta ? delta + (i64)m * dim : nullptr;
    float s = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = to_f32(xr[i]);
        if (dr) {
            float d = to_f32(dr[i]);
            if (dbias) d = rnd(d + to_f32(dbias[i]));
            v = rnd(v + d);
            xr[i] = cvt<T>(v);
        }
        row[i] = v;
        s += rms ? v * v : v;
    }
    float tot = block_sum(s, red);
    float mean = tot / dim;
    if (rms) {
        float r = rsqrtf(mean + eps);
        for (int i = threadIdx.x; i < dim; i += blockDim.x) h[(i64)m * dim + i] = cvt<T>(to_f32(w[i]) * rnd(row[i] * r));
    } else {
        float q = 0.0f;
        for (int i = threadIdx.x; i < dim; i += blockDim.x) {
            float d = row[i] - mean;
            q += d * d;
        }
        float var = block_sum(q, red) / dim;
        float r = rsqrtf(var + eps);
        for (int i = threadIdx.x; i < dim; i += blockDim.x) h[(i64)m * dim + i] = cvt<T>((row[i] - mean) * r * to_f32(w[i]) + (b ? to_f32(b[i]) : 0.0f));
    }
}

// Splits one token's projected q|k|v (row m of qkv [M, (H + 2 KVH) D], plus `bias`), applies the
// rotary embedding (`cos_t`/`sin_t` [positions, D/2] in f32; null: none) to q and k at position
// pos[m], writes q to q_out [M, H, D] and k, v into the caches at (sequence, kv head, pos[m]).
// Token m belongs to sequence seq0 + m / per_seq (prefill of equal-length rows), or to sequence m
// when per_seq is 0 (a decode step). Grid (M, H + 2 KVH), D/2 threads.
extern "C" __global__ void MP_K(fused_rope_kv)(const T* __restrict__ qkv, const T* __restrict__ bias, const int* __restrict__ pos, int seq0, int per_seq, T* __restrict__ q_out, T* __restrict__ kc, T* __restrict__ vc, const float* __restrict__ cos_t, const float* __restrict__ sin_t, int H, int KVH, int D, i64 cache_sb, i64 cache_sh) {
    mp_pdl();
    int m = blockIdx.x, hh = blockIdx.y, half = D >> 1;
    int width = (H + 2 * KVH) * D;
    int p = pos[m];
    i64 sq = per_seq > 0 ? seq0 + m / per_seq : m;
    const T* src = qkv + (i64)m * width + (i64)hh * D;
    const T* bs = bias ? bias + (i64)hh * D : nullptr;
    T* dst;
    if (hh < H) dst = q_out + ((i64)m * H + hh) * D;
    else if (hh < H + KVH) dst = kc + sq * cache_sb + (i64)(hh - H) * cache_sh + (i64)p * D;
    else dst = vc + sq * cache_sb + (i64)(hh - H - KVH) * cache_sh + (i64)p * D;
    bool rot = cos_t && hh < H + KVH;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float a = to_f32(src[i]), b = to_f32(src[i + half]);
        if (bs) {
            a = rnd(a + to_f32(bs[i]));
            b = rnd(b + to_f32(bs[i + half]));
        }
        if (rot) {
            float c = cos_t[(i64)p * half + i], s = sin_t[(i64)p * half + i];
            float a2 = a * c - b * s, b2 = b * c + a * s;
            a = a2;
            b = b2;
        }
        dst[i] = cvt<T>(a);
        dst[i + half] = cvt<T>(b);
    }
    if (D & 1) {  // odd head dims carry no rotation in their last element
        if (threadIdx.x == 0) dst[D - 1] = cvt<T>(to_f32(src[D - 1]) + (bs ? to_f32(bs[D - 1]) : 0.0f));
    }
}

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }
__device__ __forceinline__ float gelu_tanh(float v) { return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); }
// The MLP activations by `kind` (see fused_act); shared by fused_act and the GEMV epilogues so
// both give the same values.
__device__ __forceinline__ float act_fn(int kind, float g) {
    return kind == 0 ? g / (1.0f + expf(-g)) : kind == 1 ? gelu_erf(g) : kind == 2 ? gelu_tanh(g) : kind == 3 ? fmaxf(g, 0.0f) : kind == 4 ? g : tanhf(g);
}

// out[m, i] = act(in[m, i] + bias[i]) (kind 0 silu, 1 gelu, 2 gelu tanh, 3 relu, 4 none, 5 tanh), times
// in[m, I + i] (+ bias[I + i]) when `gated` (the gate | up halves of a fused projection).
// Without `gated`, `in` and `out` may be the same buffer (each element is read, then written, by one
// thread).
extern "C" __global__ void MP_K(fused_act)(const T* in, const T* __restrict__ bias, T* out, i64 M, int I, int kind, int gated) {
    mp_pdl();
    i64 n = M * I;
    int w = gated ? 2 * I : I;
    for (i64 j = blockIdx.x * (i64)blockDim.x + threadIdx.x; j < n; j += (i64)gridDim.x * blockDim.x) {
        i64 m = j / I;
        int i = (int)(j - m * I);
        float g = to_f32(in[m * w + i]);
        if (bias) g = rnd(g + to_f32(bias[i]));
        float a = act_fn(kind, g);
        if (gated) {
            float u = to_f32(in[m * w + I + i]);
            if (bias) u = rnd(u + to_f32(bias[I + i]));
            a = rnd(a) * u;
        }
        out[j] = cvt<T>(a);
    }
}

// y[j] = x[j] as f32 for j < n: a quantized LM head's outputs (storage dtype) into the f32 logits.
extern "C" __global__ void MP_K(fused_widen)(const T* __restrict__ x, float* __restrict__ y, i64 n) {
    mp_pdl();
    for (i64 j = blockIdx.x * (i64)blockDim.x + threadIdx.x; j < n; j += (i64)gridDim.x * blockDim.x) y[j] = to_f32(x[j]);
}

// y[m, n] = sum_k x[m, k] w[n, k] for the MB rows of a decode batch: one warp per output row n,
// 16-byte loads of the weight row (the whole cost: the weights are read once per step), x from
// L1/L2. Needs k % (16 / sizeof(T)) == 0 and 16-byte aligned rows (the host checks).
template <int MB>
__device__ __forceinline__ void gemv_rows(const T* __restrict__ x, const T* __restrict__ w, OT* __restrict__ y, int N, int K) {
    const int V = 16 / sizeof(T);
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (n >= N) return;
    const uint4* wr = reinterpret_cast<const uint4*>(w + (i64)n * K);
    int chunks = K / V;
    float acc[MB];
#pragma unroll
    for (int b = 0; b < MB; b++) acc[b] = 0.0f;
#pragma unroll 4
    for (int c = lane; c < chunks; c += 32) {
        MpVec<T, V> wv;
        wv.raw = __ldg(wr + c);
#pragma unroll
        for (int b = 0; b < MB; b++) {
            MpVec<T, V> xv;
            xv.raw = __ldg(reinterpret_cast<const uint4*>(x + (i64)b * K) + c);
#pragma unroll
            for (int e = 0; e < V; e++) acc[b] += to_f32(wv.v[e]) * to_f32(xv.v[e]);
        }
    }
#pragma unroll
    for (int b = 0; b < MB; b++) {
        float s = warp_sum(acc[b]);
        if (lane == 0) y[(i64)b * N + n] = cvt<OT>(s);
    }
}
extern "C" __global__ void MP_K(fused_gemv1)(const T* x, const T* w, OT* y, int N, int K) { mp_pdl(); gemv_rows<1>(x, w, y, N, K); }
extern "C" __global__ void MP_K(fused_gemv2)(const T* x, const T* w, OT* y, int N, int K) { mp_pdl(); gemv_rows<2>(x, w, y, N, K); }
extern "C" __global__ void MP_K(fused_gemv3)(const T* x, const T* w, OT* y, int N, int K) { mp_pdl(); gemv_rows<3>(x, w, y, N, K); }
extern "C" __global__ void MP_K(fused_gemv4)(const T* x, const T* w, OT* y, int N, int K) { mp_pdl(); gemv_rows<4>(x, w, y, N, K); }

// ---- decode GEMV with the neighbouring small kernels folded in ----
//
// y = x W^T for the MB (1..4) rows of a decode batch, where the steps around the product run inside
// it instead of as kernels of their own:
// - NORM (1 RMSNorm, 2 LayerNorm; 0 none): x is the residual stream and the product is taken with
//   norm(x). Nothing waits for the norm: the warp multiplies W by (norm weight * x) while it sums
//   x (and x^2) over the same chunks, and applies the statistics at the end: RMSNorm
//   y = rsqrt(mean(x^2) + eps) sum W w x; LayerNorm y = r (sum W w x - mean sum W w) + sum W b
//   with r = rsqrt(var + eps). The same as normalizing first up to f32 rounding, except that h is
//   not rounded to T before the product (within the bf16/f16 tolerance of the module path).
// - epilogue `epi`: 0 store y (OT); 1 the residual add of fused_add_norm (res += round(round(y) +
//   bias)); 2 act(round(y) + bias) into `out`; 3 the gated MLP: a unit is the row pair (gate i,
//   up i) of a [2 I, K] weight, out[i] = round(act(gate)) * up; 4 the attention input: a unit is
//   the row pair (i, i + D/2) of one head of a [(H + 2 KVH) D, K] weight; bias, the rotary
//   embedding at pos[m] (q and k heads, when cos_t is set) and the scatter of q to `out`
//   [MB, H, D] and of k / v into the caches at (sequence m, kv head, pos[m]), as fused_rope_kv.
// Each unit's K range is split over `ks` warps (1, 2, 4; more loads in flight for short outputs),
// whose partial sums add in a fixed order. The weights are prefetched to L2 before the wait on the
// previous kernel (they never change during a step), so with programmatic dependent launch the
// first weight reads overlap the previous kernel's tail. Each block also prefetches its share of
// what later kernels read (`pfp`/`pfn`, see pf_share): when it starts (`pf_early`: its own rows
// are already in L2, so the HBM would idle) or when it is done with its rows. With `evict_first`
// the weight rows are read with the L2 evict-first policy (read once; the prefetched rows of the
// next kernels stay). With `amax` (epilogue 0, f32 output) each row also folds (logit, row) into
// amax[b], the packed key `fkey(y) << 32 | ~row` (largest logit, then lowest row; NaN skipped),
// so the greedy selection needs no pass over the logits.
// Field order: pointers, then 64-bit, then 32-bit values (the host's repr(C) mirror, GemvArgs).
struct GemvArgs {
    const T* x;
    const T* w;
    OT* y;
    const T* nw;
    const T* nb;
    const T* bias;
    T* res;
    T* out;
    T* kc;
    T* vc;
    const int* pos;
    const float* cos_t;
    const float* sin_t;
    u64* amax;
    const unsigned char* pfp[MP_PF];
    i64 pfn[MP_PF];
    i64 cache_sb, cache_sh;
    int N, K, units, ks, norm, epi, act, H, KVH, D;
    float eps;
    int pf_early, evict_first, pad;
};

// A 16-byte weight load under an L2 eviction policy (createpolicy), not kept in L1.
__device__ __forceinline__ uint4 ld_w(const uint4* p, u64 pol) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(pol));
    return r;
}
__device__ __forceinline__ u64 l2_policy(int evict_first) {
    u64 pol;
    if (evict_first) asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    else asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

// 16 bytes of an activation row. CO (the persistent chain, gemv_chain): a plain (weak) load, since
// other blocks of the same kernel wrote the row before a grid barrier and the non-coherent path
// (__ldg) is only valid for data that no thread changes during the kernel; the barrier's acquire
// makes the weak load see those writes (PTX memory model), and the L1 still serves the row's reuse.
// (A first version read through L2 with ld.global.cg; benchmark/NOTES.md has both.)
template <int CO>
__device__ __forceinline__ uint4 ld_act(const uint4* p) {
    if (!CO) return __ldg(p);
    return *p;
}

// Weight rows of unit u: one row, or the pair of the gated / attention epilogues.
template <int R>
__device__ __forceinline__ void unit_rows(const GemvArgs& a, int u, i64& r0, i64& r1) {
    if (R == 1) { r0 = u; r1 = u; return; }
    if (a.epi == 3) { r0 = u; r1 = (i64)a.units + u; return; }
    int half = a.D >> 1, hh = u / half, i = u - hh * half;
    r0 = (i64)hh * a.D + i;
    r1 = r0 + half;
}

// Chunks of weight loads in flight per lane (R rows each).
#define GU (8 / R)

// One 16-byte chunk c of the unit's weight rows (already loaded) into the sums v:
// v[r * MB + b]: products; v[R MB + b]: sum x^2; v[(R + 1) MB + b]: sum x;
// v[(R + 2) MB + r]: sum W w; v[(R + 2) MB + R + r]: sum W b
template <int MB, int R, int NORM, int CO>
__device__ __forceinline__ void gemv_chunk(const GemvArgs& a, int c, const MpVec<T, 16 / sizeof(T)>* wv, float* v) {
    const int V = 16 / sizeof(T), K = a.K;
    float g[V], bb[V];
    if (NORM) {
        MpVec<T, V> t;
        t.raw = __ldg(reinterpret_cast<const uint4*>(a.nw) + c);
#pragma unroll
        for (int e = 0; e < V; e++) g[e] = to_f32(t.v[e]);
    }
    if (NORM == 2) {
        MpVec<T, V> t;
        if (a.nb) t.raw = __ldg(reinterpret_cast<const uint4*>(a.nb) + c);
#pragma unroll
        for (int e = 0; e < V; e++) bb[e] = a.nb ? to_f32(t.v[e]) : 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int e = 0; e < V; e++) {
                float wf = to_f32(wv[r].v[e]);
                v[(R + 2) * MB + r] += wf * g[e];
                v[(R + 2) * MB + R + r] += wf * bb[e];
            }
    }
#pragma unroll
    for (int b = 0; b < MB; b++) {
        MpVec<T, V> xv;
        xv.raw = ld_act<CO>(reinterpret_cast<const uint4*>(a.x + (i64)b * K) + c);
#pragma unroll
        for (int e = 0; e < V; e++) {
            float xf = to_f32(xv.v[e]);
            if (NORM) v[R * MB + b] += xf * xf;
            if (NORM == 2) v[(R + 1) * MB + b] += xf;
            float xw = NORM ? xf * g[e] : xf;
#pragma unroll
            for (int r = 0; r < R; r++) v[r * MB + b] += to_f32(wv[r].v[e]) * xw;
        }
    }
}

// G chunks of the unit's weight rows from chunk c on (`step` apart): the G R loads are issued
// together, then the chunks are summed in order.
template <int MB, int R, int NORM, int G, int CO>
__device__ __forceinline__ void gemv_batch(const GemvArgs& a, const uint4* w0, const uint4* w1, int c, int step, u64 pol, float* v) {
    MpVec<T, 16 / sizeof(T)> wv[G][R];
#pragma unroll
    for (int u = 0; u < G; u++) {
        wv[u][0].raw = ld_w(w0 + c + u * step, pol);
        if (R == 2) wv[u][R - 1].raw = ld_w(w1 + c + u * step, pol);
    }
#pragma unroll
    for (int u = 0; u < G; u++) gemv_chunk<MB, R, NORM, CO>(a, c + u * step, wv[u], v);
}

// One unit group `ub` of the block: each warp's unit (or its K part), the partial sums of a split
// unit, the epilogue.
template <int MB, int R, int NORM, int CO>
__device__ __forceinline__ void gemv_group(const GemvArgs& a, int ub, u64 pol, float (*part)[R * MB + (NORM ? MB : 0) + (NORM == 2 ? MB + 2 * R : 0)]) {
    const int NV = R * MB + (NORM ? MB : 0) + (NORM == 2 ? MB + 2 * R : 0);
    const int K = a.K, chunks = K / (16 / sizeof(T));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int ks = a.ks, upb = nwarps / ks, kpart = warp % ks;
    int u = ub * upb + warp / ks;
    bool live = u < a.units;
    i64 r0 = 0, r1 = 0;
    if (live) unit_rows<R>(a, u, r0, r1);
    float v[NV];
#pragma unroll
    for (int j = 0; j < NV; j++) v[j] = 0.0f;
    if (live) {
        const uint4* w0 = reinterpret_cast<const uint4*>(a.w + r0 * K);
        const uint4* w1 = reinterpret_cast<const uint4*>(a.w + r1 * K);
        // GU chunks' weight loads are issued together before any is used (GU R loads of 16 bytes
        // in flight per lane: a loop with a run-time stride is not unrolled that way by the
        // compiler, which left one chunk in flight); the rest (fewer than GU chunks) in batches of
        // halving size, so a short row also keeps several loads in flight. Chunks are summed in
        // order whatever the batches (the same sums bit for bit).
        const int step = 32 * ks;
        int c = kpart * 32 + lane;
        for (; c + (GU - 1) * step < chunks; c += GU * step) gemv_batch<MB, R, NORM, GU, CO>(a, w0, w1, c, step, pol, v);
        if (GU >= 8 && c + 3 * step < chunks) {
            gemv_batch<MB, R, NORM, (GU >= 8 ? 4 : 1), CO>(a, w0, w1, c, step, pol, v);
            c += 4 * step;
        }
        if (GU >= 4 && c + step < chunks) {
            gemv_batch<MB, R, NORM, (GU >= 4 ? 2 : 1), CO>(a, w0, w1, c, step, pol, v);
            c += 2 * step;
        }
        for (; c < chunks; c += step) gemv_batch<MB, R, NORM, 1, CO>(a, w0, w1, c, step, pol, v);
    }
#pragma unroll
    for (int j = 0; j < NV; j++) v[j] = warp_sum(v[j]);
    if (ks > 1) {
        // the partial sums of a unit's warps, added in warp order
        if (lane == 0)
#pragma unroll
            for (int j = 0; j < NV; j++) part[warp][j] = v[j];
        __syncthreads();
        if (kpart == 0)
#pragma unroll
            for (int j = 0; j < NV; j++) {
                float t = 0.0f;
                for (int q = 0; q < ks; q++) t += part[warp + q][j];
                v[j] = t;
            }
        __syncthreads();  // `part` is reused by the next unit group
    }
    if (!live || kpart != 0 || lane >= MB) return;
    // lane b writes batch row b's outputs (the sums are in every lane)
    int b = lane;
    float s0 = 0.0f, s1 = 0.0f, sq = 0.0f, sx = 0.0f;
#pragma unroll
    for (int j = 0; j < MB; j++)
        if (j == b) {
            s0 = v[j];
            s1 = v[(R - 1) * MB + j];
            if (NORM) sq = v[R * MB + j];
            if (NORM == 2) sx = v[(R + 1) * MB + j];
        }
    if (NORM == 1) {
        float r = rsqrtf(sq / K + a.eps);
        s0 *= r;
        s1 *= r;
    } else if (NORM == 2) {
        float mean = sx / K;
        float r = rsqrtf(fmaxf(sq / K - mean * mean, 0.0f) + a.eps);
        s0 = r * (s0 - mean * v[(R + 2) * MB]) + v[(R + 2) * MB + R];
        s1 = r * (s1 - mean * v[(R + 2) * MB + R - 1]) + v[(R + 2) * MB + 2 * R - 1];
    }
    if (a.epi == 0) {
        const OT yv = cvt<OT>(s0);
        a.y[(i64)b * a.N + r0] = yv;
        const float lv = to_f32(yv);
        if (a.amax && !(lv != lv)) {
            const u64 key = ((u64)fkey(lv) << 32) | (u64)(0xffffffffu - (unsigned)r0);
            u64* slot = a.amax + b;
            // most rows lose against the key already there: read before the atomic
            if (key > *(volatile u64*)slot) atomicMax((unsigned long long*)slot, (unsigned long long)key);
        }
    } else if (a.epi == 1) {
        float d = rnd(s0);
        if (a.bias) d = rnd(d + to_f32(a.bias[r0]));
        T* xr = a.res + (i64)b * a.N + r0;
        *xr = cvt<T>(to_f32(*xr) + d);
    } else if (a.epi == 2) {
        float g = rnd(s0);
        if (a.bias) g = rnd(g + to_f32(a.bias[r0]));
        a.out[(i64)b * a.units + u] = cvt<T>(act_fn(a.act, g));
    } else if (a.epi == 3) {
        float g = rnd(s0), up = rnd(s1);
        if (a.bias) {
            g = rnd(g + to_f32(a.bias[r0]));
            up = rnd(up + to_f32(a.bias[r1]));
        }
        a.out[(i64)b * a.units + u] = cvt<T>(rnd(act_fn(a.act, g)) * up);
    } else {
        int D = a.D, half = D >> 1, hh = u / half, i = u - hh * half, H = a.H, KVH = a.KVH;
        float x0 = rnd(s0), x1 = rnd(s1);
        if (a.bias) {
            x0 = rnd(x0 + to_f32(a.bias[r0]));
            x1 = rnd(x1 + to_f32(a.bias[r1]));
        }
        int p = a.pos[b];
        if (a.cos_t && hh < H + KVH) {
            float c = a.cos_t[(i64)p * half + i], sn = a.sin_t[(i64)p * half + i];
            float y0 = x0 * c - x1 * sn, y1 = x1 * c + x0 * sn;
            x0 = y0;
            x1 = y1;
        }
        T* dst;
        if (hh < H) dst = a.out + ((i64)b * H + hh) * D;
        else if (hh < H + KVH) dst = a.kc + (i64)b * a.cache_sb + (i64)(hh - H) * a.cache_sh + (i64)p * D;
        else dst = a.vc + (i64)b * a.cache_sb + (i64)(hh - H - KVH) * a.cache_sh + (i64)p * D;
        dst[i] = cvt<T>(x0);
        dst[i + half] = cvt<T>(x1);
    }
}

// Asks L2 for the first rows this block reads (its first unit group; weights only, so safe before
// waiting on the previous kernel or at a grid barrier).
template <int R>
__device__ __forceinline__ void gemv_l2_first(const GemvArgs& a) {
    const int K = a.K, chunks = K / (16 / (int)sizeof(T));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int ks = a.ks, upb = nwarps / ks, kpart = warp % ks;
    const int step = 32 * ks;
    int u = blockIdx.x * upb + warp / ks;
    if (u < a.units) {
        i64 r0, r1;
        unit_rows<R>(a, u, r0, r1);
        const uint4* w0 = reinterpret_cast<const uint4*>(a.w + r0 * K);
        const uint4* w1 = reinterpret_cast<const uint4*>(a.w + r1 * K);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int c = kpart * 32 + lane + j * step;
            if (c < chunks) {
                asm volatile("prefetch.global.L2 [%0];" :: "l"(w0 + c));
                if (R == 2) asm volatile("prefetch.global.L2 [%0];" :: "l"(w1 + c));
            }
        }
    }
}

template <int MB, int R, int NORM>
__device__ __forceinline__ void gemv_fused(const GemvArgs& a) {
    // per warp: R x MB products, then (NORM) MB sums of x^2, (LayerNorm) MB sums of x and R sums
    // of W w and of W b
    const int NV = R * MB + (NORM ? MB : 0) + (NORM == 2 ? MB + 2 * R : 0);
    __shared__ float part[4][NV];
    int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int ks = a.ks, upb = nwarps / ks;
    const u64 pol = l2_policy(a.evict_first);
    gemv_l2_first<R>(a);
    if (a.pf_early) pf_share(a.pfp, a.pfn, blockIdx.x, gridDim.x);
    mp_pdl();
    for (int ub = blockIdx.x; ub * upb < a.units; ub += gridDim.x) gemv_group<MB, R, NORM, 0>(a, ub, pol, part);
    if (!a.pf_early) pf_share(a.pfp, a.pfn, blockIdx.x, gridDim.x);
}
#define MP_GEMVX(MB, R, N) \
    extern "C" __global__ void __launch_bounds__(128) MP_K(fused_gemvx##MB##r##R##n##N)(const GemvArgs a) { gemv_fused<MB, R, N>(a); }
#define MP_GEMVX_MB(MB) MP_GEMVX(MB, 1, 0) MP_GEMVX(MB, 1, 1) MP_GEMVX(MB, 1, 2) MP_GEMVX(MB, 2, 1) MP_GEMVX(MB, 2, 2)
#ifndef MP_CHAIN_MODULE
MP_GEMVX_MB(1)
MP_GEMVX_MB(2)
MP_GEMVX_MB(3)
MP_GEMVX_MB(4)
#endif

// ---- the persistent chain: consecutive fused GEMVs in one kernel, grid barriers between them ----
//
// After a block's attention, the decode step's products (o with the residual add, gate|up or fc,
// down, the next block's q|k|v) each need the whole output of the one before (the norm reads the
// whole residual row, down the whole activation row), so as kernels of their own each pays a
// launch, a ramp and a tail. The chain runs up to CH_MAX of them in one kernel whose blocks all
// stay resident (the host sizes the grid by the kernel's __launch_bounds__ minimum of blocks per
// SM, CH_MINB) and meet at a grid barrier between products; before arriving, each block asks L2
// for its first rows of the next product (weights never change), so its first loads after the
// barrier hit L2. Each product runs its unit groups as gemv_fused does (same groups, same split,
// the same sums bit for bit); activations are read through L2 (ld_act). No L2 prefetch plan.
#define CH_MAX 4
// blocks of 128 threads resident per SM that the compiler must allow (registers <= 65536 / (128 x
// this)): room for the largest of the chain's GEMV variants (kernels.rs, CHAIN_MIN_BLOCKS, says the
// same to the host)
#define CH_MINB(MB, NORM) ((NORM) == 1 ? ((MB) == 1 ? 8 : (MB) == 2 ? 7 : (MB) == 3 ? 6 : 5) : 4)
struct ChainArgs {
    GemvArgs p[CH_MAX];
    // {arrivals, generation}: zeroed once at allocation; every barrier leaves arrivals at zero
    unsigned* bar;
    int n;
    // per product: 0 no norm, one row a unit; 1 the norm, one row; 2 the norm, row pairs
    int var[CH_MAX];
    int pad;
};

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
// Every block of the grid arrives before any leaves; writes before it are visible after it. The
// last block to arrive resets the count and then publishes the next generation, so the next
// barrier (of this kernel or a later one) starts from zero arrivals.
__device__ __forceinline__ void grid_barrier(unsigned* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        // the generation cannot move before this block arrives
        unsigned gen = ld_acquire(bar + 1);
        __threadfence();
        if (atomicAdd(bar, 1u) == gridDim.x - 1) {
            atomicExch(bar, 0u);
            __threadfence();
            asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(bar + 1), "r"(gen + 1) : "memory");
        } else {
            while (ld_acquire(bar + 1) == gen) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

template <int MB, int R, int NORM>
__device__ __forceinline__ void chain_run(const GemvArgs& a, float* part) {
    const int NV = R * MB + (NORM ? MB : 0) + (NORM == 2 ? MB + 2 * R : 0);
    const u64 pol = l2_policy(a.evict_first);
    int upb = (blockDim.x >> 5) / a.ks;
    for (int ub = blockIdx.x; ub * upb < a.units; ub += gridDim.x) gemv_group<MB, R, NORM, 1>(a, ub, pol, reinterpret_cast<float (*)[NV]>(part));
}

template <int MB, int NORM>
__device__ __forceinline__ void gemv_chain(const ChainArgs& c) {
    __shared__ float part[4 * (3 * MB + (NORM == 2 ? MB + 4 : 0))];
    // the product's arguments, copied by one thread: a kernel parameter indexed by a run-time value
    // would be copied to local memory by every thread
    __shared__ GemvArgs sa;
    for (int p = 0; p < c.n && p < CH_MAX; p++) {
        if (threadIdx.x == 0) {
            switch (p) {
                case 0: sa = c.p[0]; break;
                case 1: sa = c.p[1]; break;
                case 2: sa = c.p[2]; break;
                default: sa = c.p[3]; break;
            }
        }
        const int var = p == 0 ? c.var[0] : p == 1 ? c.var[1] : p == 2 ? c.var[2] : c.var[3];
        __syncthreads();
        if (var == 2) gemv_l2_first<2>(sa);
        else gemv_l2_first<1>(sa);
        if (p == 0) mp_pdl();
        else grid_barrier(c.bar);
        if (var == 0) chain_run<MB, 1, 0>(sa, part);
        else if (var == 1) chain_run<MB, 1, NORM>(sa, part);
        else chain_run<MB, 2, NORM>(sa, part);
        __syncthreads();  // `sa` is rewritten for the next product
    }
}
#define MP_CHAIN(MB, N) \
    extern "C" __global__ void __launch_bounds__(128, CH_MINB(MB, N)) MP_K(fused_chain##MB##n##N)(const ChainArgs c) { gemv_chain<MB, N>(c); }
// compiled as a module of their own (MP_CHAIN_MODULE), only for an engine that runs the chain
#ifdef MP_CHAIN_MODULE
MP_CHAIN(1, 1) MP_CHAIN(1, 2) MP_CHAIN(2, 1) MP_CHAIN(2, 2) MP_CHAIN(3, 1) MP_CHAIN(3, 2) MP_CHAIN(4, 1) MP_CHAIN(4, 2)
#endif

// ---- decode attention in one kernel (a cluster of ATT_SPLITS blocks per head group) ----
//
// One query per sequence (row b of q [B, H, D]) over keys 0..kvlen[b] of the caches. Block
// (split s, kv head x head group, sequence b) takes the s-th quarter of the keys for G query heads
// of one kv head (K and V are read once). Each key's row goes straight to registers, LK lanes a key
// (16 bytes each), every lane holding its q chunk of the G heads; a key's scores are summed over
// its lanes with shuffles and each key slot keeps an online softmax (max, sum, output chunk). The
// slots are merged by shuffles, the warps through shared memory, and the blocks of the cluster
// through distributed shared memory: every block writes its (max, sum, output) into block 0's
// shared memory and block 0 writes o. So one launch replaces the split and combine kernels, and
// nothing goes through global memory but q, K, V and o. All merges run in a fixed order.
#define ATT_WARPS 8
#define ATT_SPLITS 4
// Before the wait on the previous kernel (the q|k|v GEMV) every block asks L2 for its keys and
// values (`kv_prefetch`; all rows but the newest were written steps ago, and kvlen was written by
// the step's embedding kernel, which the q|k|v GEMV waited for) and for its share of the weights
// of the next kernels (`pfp`/`pfn`, see pf_share).
struct AttnArgs {
    const T* q;
    const T* kc;
    const T* vc;
    T* o;
    const int* kvlen;
    const unsigned char* pfp[MP_PF];
    i64 pfn[MP_PF];
    i64 cache_sb, cache_sh;
    int H, KVH, hgroups, max_len;
    float scale_log2;
    int kv_prefetch;
};

__device__ __forceinline__ unsigned cl_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
// Stores v at `p` (a __shared__ address of this block) in the shared memory of cluster block `rank`.
__device__ __forceinline__ void cl_store(float* p, unsigned rank, float v) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(r), "f"(v) : "memory");
}

// exp2 with exp2(-inf) = 0 and a -inf reference point treated as 0 (an empty state)
__device__ __forceinline__ float att_scale(float m, float ref) { return exp2f(m - (ref == -MP_INF ? 0.0f : ref)); }

template <int LK, int G>
__device__ __forceinline__ void attn_decode(const AttnArgs& a) {
    constexpr int V = 16 / (int)sizeof(T), D = LK * V, GD = G * D;
    constexpr int KPW = 32 / LK, NS = KPW * ATT_WARPS, U = 4;
    __shared__ float w_acc[ATT_WARPS][GD];
    __shared__ float w_m[ATT_WARPS][G], w_l[ATT_WARPS][G];
    __shared__ float c_acc[ATT_SPLITS][GD];  // block 0's: every split's merged output
    __shared__ float c_m[ATT_SPLITS][G], c_l[ATT_SPLITS][G];
    // cluster barrier, first half: every block of the cluster has started before any writes
    // into block 0's shared memory
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = lane % LK, slot = warp * KPW + lane / LK;
    const unsigned rank = cl_rank();
    const int b = blockIdx.z, kvh = blockIdx.y / a.hgroups, hg = blockIdx.y % a.hgroups;
    const i64 kv0 = (i64)b * a.cache_sb + (i64)kvh * a.cache_sh;
    if (a.kv_prefetch && tid == 0) {
        // a hint only: a stale count would prefetch other rows of the same caches
        const int Lp = max(0, min(*(volatile const int*)(a.kvlen + b), a.max_len));
        const int ch = (Lp + ATT_SPLITS - 1) / ATT_SPLITS, b0 = (int)rank * ch, e0 = min(b0 + ch, Lp);
        if (e0 > b0) {
            const unsigned bytes = (unsigned)((e0 - b0) * D * (int)sizeof(T));
            mp_bulk_prefetch(reinterpret_cast<const unsigned char*>(a.kc + kv0 + (i64)b0 * D), bytes);
            mp_bulk_prefetch(reinterpret_cast<const unsigned char*>(a.vc + kv0 + (i64)b0 * D), bytes);
        }
    }
    pf_share(a.pfp, a.pfn, blockIdx.x + (i64)gridDim.x * (blockIdx.y + (i64)gridDim.y * blockIdx.z), (i64)gridDim.x * gridDim.y * gridDim.z);
    mp_pdl();
    const int g = a.H / a.KVH, h0 = kvh * g + hg * G, nh = min(G, g - hg * G);
    const int L = max(0, min(a.kvlen[b], a.max_len));
    const int chunk = (L + ATT_SPLITS - 1) / ATT_SPLITS;
    const int kb = (int)rank * chunk, ke = min(kb + chunk, L);
    const T* K = a.kc + kv0 + c * V;
    const T* Vv = a.vc + kv0 + c * V;
    float qf[G][V], acc[G][V], m[G], l[G];
#pragma unroll
    for (int gi = 0; gi < G; gi++) {
        MpVec<T, V> t;
        t.raw = gi < nh ? __ldg(reinterpret_cast<const uint4*>(a.q + ((i64)b * a.H + h0 + gi) * D) + c) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int e = 0; e < V; e++) {
            qf[gi][e] = to_f32(t.v[e]) * a.scale_log2;
            acc[gi][e] = 0.0f;
        }
        m[gi] = -MP_INF;
        l[gi] = 0.0f;
    }
    for (int t0 = kb; t0 < ke; t0 += NS * U) {
        uint4 kr[U], vr[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int j = t0 + slot + u * NS;
            if (j < ke) {
                kr[u] = *reinterpret_cast<const uint4*>(K + (i64)j * D);
                vr[u] = *reinterpret_cast<const uint4*>(Vv + (i64)j * D);
            } else {
                kr[u] = make_uint4(0, 0, 0, 0);
                vr[u] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            MpVec<T, V> kv, vv;
            kv.raw = kr[u];
            vv.raw = vr[u];
            float sc[G];
#pragma unroll
            for (int gi = 0; gi < G; gi++) {
                float t = 0.0f;
#pragma unroll
                for (int e = 0; e < V; e++) t = fmaf(qf[gi][e], to_f32(kv.v[e]), t);
                sc[gi] = t;
            }
#pragma unroll
            for (int o = LK / 2; o > 0; o >>= 1)
#pragma unroll
                for (int gi = 0; gi < G; gi++) sc[gi] += __shfl_xor_sync(0xffffffffu, sc[gi], o);
            if (t0 + slot + u * NS < ke) {
#pragma unroll
                for (int gi = 0; gi < G; gi++) {
                    float mn = fmaxf(m[gi], sc[gi]);
                    float al = att_scale(m[gi], mn), p = att_scale(sc[gi], mn);
                    l[gi] = l[gi] * al + p;
#pragma unroll
                    for (int e = 0; e < V; e++) acc[gi][e] = fmaf(p, to_f32(vv.v[e]), acc[gi][e] * al);
                    m[gi] = mn;
                }
            }
        }
    }
    // merge the key slots of the warp (lanes c, c + LK, ...), then the warps
#pragma unroll
    for (int o = LK; o < 32; o <<= 1)
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            float om = __shfl_xor_sync(0xffffffffu, m[gi], o), ol = __shfl_xor_sync(0xffffffffu, l[gi], o);
            float mn = fmaxf(m[gi], om);
            float a1 = att_scale(m[gi], mn), a2 = att_scale(om, mn);
            l[gi] = l[gi] * a1 + ol * a2;
#pragma unroll
            for (int e = 0; e < V; e++) {
                float oa = __shfl_xor_sync(0xffffffffu, acc[gi][e], o);
                acc[gi][e] = acc[gi][e] * a1 + oa * a2;
            }
            m[gi] = mn;
        }
    if (lane < LK) {
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
#pragma unroll
            for (int e = 0; e < V; e++) w_acc[warp][gi * D + c * V + e] = acc[gi][e];
            if (lane == 0) {
                w_m[warp][gi] = m[gi];
                w_l[warp][gi] = l[gi];
            }
        }
    }
    __syncthreads();
    // cluster barrier, second half (block 0's shared memory is live from here on)
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    for (int i = tid; i < GD; i += blockDim.x) {
        const int gi = i / D;
        float mx = -MP_INF;
#pragma unroll
        for (int w = 0; w < ATT_WARPS; w++) mx = fmaxf(mx, w_m[w][gi]);
        float sl = 0.0f, sa = 0.0f;
#pragma unroll
        for (int w = 0; w < ATT_WARPS; w++) {
            float f = att_scale(w_m[w][gi], mx);
            sl += w_l[w][gi] * f;
            sa += w_acc[w][i] * f;
        }
        cl_store(&c_acc[rank][i], 0, sa);
        if (i % D == 0) {
            cl_store(&c_m[rank][gi], 0, mx);
            cl_store(&c_l[rank][gi], 0, sl);
        }
    }
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (rank != 0) return;
    for (int i = tid; i < nh * D; i += blockDim.x) {
        const int gi = i / D;
        float mx = -MP_INF;
#pragma unroll
        for (int s = 0; s < ATT_SPLITS; s++) mx = fmaxf(mx, c_m[s][gi]);
        float sl = 0.0f, sa = 0.0f;
#pragma unroll
        for (int s = 0; s < ATT_SPLITS; s++) {
            float f = att_scale(c_m[s][gi], mx);
            sl += c_l[s][gi] * f;
            sa += c_acc[s][i] * f;
        }
        a.o[((i64)b * a.H + h0) * D + i] = cvt<T>(sl > 0.0f ? sa / sl : 0.0f);
    }
}
#define MP_ATTN(LK, G) \
    extern "C" __global__ void __cluster_dims__(ATT_SPLITS, 1, 1) __launch_bounds__(ATT_WARPS * 32) MP_K(fused_attn_l##LK##g##G)(const AttnArgs a) { attn_decode<LK, G>(a); }
#define MP_ATTN_LK(LK) MP_ATTN(LK, 1) MP_ATTN(LK, 2) MP_ATTN(LK, 4)
MP_ATTN_LK(2)
MP_ATTN_LK(4)
MP_ATTN_LK(8)
MP_ATTN_LK(16)
MP_ATTN(32, 1) MP_ATTN(32, 2)  // G = 4 would pass the 48 KB of static shared memory at 16-bit D = 256

// ---- token selection: one block (1024 threads) per sequence, over f32 logits [B, V] ----

__device__ __forceinline__ u64 splitmix(u64 z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct SampleArgs {
    float temperature;  // <= 0: greedy
    int top_k;          // 0: off
    float top_p;        // >= 1: off
    float penalty;      // 1: off
    u64 seed;
};

// Largest unsigned key t with count(key >= t) >= need (the need-th largest key), by bisection on
// the bits: 32 passes over the row.
__device__ unsigned kth_key(const float* __restrict__ l, int V, int need, unsigned* shu) {
    unsigned lo = 0, hi = 0xffffffffu;
    __shared__ float red[32];
    while (lo < hi) {
        unsigned mid = (unsigned)(((u64)lo + (u64)hi + 1) >> 1);  // no overflow at lo = 0, hi = ~0
        float c = 0.0f;
        for (int i = threadIdx.x; i < V; i += blockDim.x) c += fkey(l[i]) >= mid ? 1.0f : 0.0f;
        float tot = block_sum(c, red);
        if (tot >= (float)need) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// Picks row b's next token from logits[b] (after the repetition penalty over seen[b]): the
// argmax (first on ties) when greedy, else a draw from softmax(logits / temperature) restricted to
// the top-k and then to the smallest top set whose mass reaches top_p (thresholds found by
// bisection on the logit values; ties at a threshold stay in). Writes tok[b], marks seen[b, tok],
// advances pos[b] and the draw counter ctr[b]. Row b is sequence row0 + b (its draws' stream).
// With `hist` (host-mapped memory), the token also goes to hist[sequence][ctr[b]], where the host
// reads it while the next step runs.
// With `amax` (the LM head's fused argmax, see gemv_fused), a greedy selection without penalty
// takes row b's token from amax[b] instead of a pass over the logits; amax[b] is reset to 0 for
// the next step either way.
extern "C" __global__ void MP_K(fused_select_token)(float* __restrict__ logits, int V, unsigned char* __restrict__ seen, int* __restrict__ tok, int* __restrict__ pos, u64* __restrict__ ctr, const SampleArgs* __restrict__ sargs, int row0, int* __restrict__ hist, int hist_stride, u64* __restrict__ amax) {
    mp_pdl();
    const SampleArgs a = *sargs;
    __shared__ float red[32];
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ unsigned shu[2];
    int b = blockIdx.x;
    float* l = logits + (i64)b * V;
    unsigned char* sn = seen + (i64)b * V;
    if (amax && a.temperature <= 0.0f && a.penalty == 1.0f) {
        if (threadIdx.x == 0) {
            const u64 k = amax[b];
            amax[b] = 0;
            // no key: every logit was NaN (the scan's answer is then 0 as well)
            const int pick = k ? (int)(0xffffffffu - (unsigned)(k & 0xffffffffu)) : 0;
            if (hist && ctr[b] < (u64)hist_stride) hist[(i64)(row0 + b) * hist_stride + (i64)ctr[b]] = pick;
            tok[b] = pick;
            sn[pick] = 1;
            pos[b] += 1;
            ctr[b] += 1;
        }
        return;
    }
    if (a.penalty != 1.0f) {
        for (int i = threadIdx.x; i < V; i += blockDim.x)
            if (sn[i]) l[i] = l[i] < 0.0f ? l[i] * a.penalty : l[i] / a.penalty;
        __syncthreads();
    }
    // argmax (first index on ties; NaN never wins)
    float best = -MP_INF;
    int bi = 0x7fffffff;
    // 8 loads in flight per thread, compared in index order (a plain loop waits for each load)
    for (int i0 = threadIdx.x; i0 < V; i0 += 8 * blockDim.x) {
        float lv[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int i = i0 + j * blockDim.x;
            lv[j] = i < V ? l[i] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int i = i0 + j * blockDim.x;
            float v = lv[j];
            if (i < V && (v > best || (bi == 0x7fffffff && !(v != v)))) { best = v; bi = i; }
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { sv[w] = best; si[w] = bi; }
    __syncthreads();
    if (w == 0) {
        best = lane < nw ? sv[lane] : -MP_INF;
        bi = lane < nw ? si[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, best, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
        }
        if (lane == 0) { si[0] = bi == 0x7fffffff ? 0 : bi; sv[0] = best; }
    }
    __syncthreads();
    int pick = si[0];
    float mx = sv[0];
    if (a.temperature > 0.0f && mx > -MP_INF) {
        float inv_t = 1.0f / a.temperature;
        // top-k: keep keys >= the k-th largest
        unsigned lo_key = 0;
        if (a.top_k > 0 && a.top_k < V) lo_key = kth_key(l, V, a.top_k, shu);
        // softmax mass of the kept set
        float z = 0.0f;
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            float v = l[i];
            if (fkey(v) >= lo_key && v > -MP_INF) z += expf((v - mx) * inv_t);
        }
        z = block_sum(z, red);
        // top-p: the largest threshold whose kept mass still reaches top_p * z
        if (a.top_p < 1.0f) {
            unsigned lo = lo_key, hi = fkey(mx);
            float need = a.top_p * z;
            while (lo < hi) {
                unsigned mid = (unsigned)(((u64)lo + (u64)hi + 1) >> 1);  // no overflow at lo = 0, hi = ~0
                float s = 0.0f;
                for (int i = threadIdx.x; i < V; i += blockDim.x) {
                    float v = l[i];
                    if (fkey(v) >= mid && v > -MP_INF) s += expf((v - mx) * inv_t);
                }
                s = block_sum(s, red);
                if (s >= need) lo = mid; else hi = mid - 1;
            }
            lo_key = lo;
            z = 0.0f;
            for (int i = threadIdx.x; i < V; i += blockDim.x) {
                float v = l[i];
                if (fkey(v) >= lo_key && v > -MP_INF) z += expf((v - mx) * inv_t);
            }
            z = block_sum(z, red);
        }
        // draw u in [0, 1) from (seed, row, counter), then find the token where the running mass
        // (in index order) passes u * z: each thread owns a contiguous chunk.
        u64 r = splitmix(a.seed ^ splitmix(((u64)(row0 + b) << 40) ^ ctr[b]));
        float target = (float)((r >> 40) * (1.0 / 16777216.0)) * z;
        int chunk = (V + blockDim.x - 1) / blockDim.x;
        int i0 = threadIdx.x * chunk, i1 = min(V, i0 + chunk);
        float mine = 0.0f;
        for (int i = i0; i < i1; i++) {
            float v = l[i];
            if (fkey(v) >= lo_key && v > -MP_INF) mine += expf((v - mx) * inv_t);
        }
        // exclusive prefix over threads (warp scan, then over warps)
        float inc = mine;
        for (int o = 1; o < 32; o <<= 1) {
            float t = __shfl_up_sync(0xffffffffu, inc, o);
            if (lane >= o) inc += t;
        }
        __syncthreads();
        if (lane == 31) red[w] = inc;
        __syncthreads();
        float before = 0.0f;
        for (int j = 0; j < w; j++) before += red[j];
        float start = before + inc - mine;
        if (threadIdx.x == 0) shu[0] = 0xffffffffu;
        __syncthreads();
        if (mine > 0.0f && target >= start && target < start + mine) {
            float acc = start;
            int got = -1, last = -1;
            for (int i = i0; i < i1; i++) {
                float v = l[i];
                if (fkey(v) >= lo_key && v > -MP_INF) {
                    last = i;
                    acc += expf((v - mx) * inv_t);
                    if (target < acc) { got = i; break; }
                }
            }
            if (got < 0) got = last;
            atomicMin(&shu[0], (unsigned)got);
        }
        __syncthreads();
        if (shu[0] != 0xffffffffu) pick = (int)shu[0];
    }
    if (threadIdx.x == 0) {
        if (amax) amax[b] = 0;
        if (hist && ctr[b] < (u64)hist_stride) hist[(i64)(row0 + b) * hist_stride + (i64)ctr[b]] = pick;
        tok[b] = pick;
        sn[pick] = 1;
        pos[b] += 1;
        ctr[b] += 1;
    }
}

// Causal attention of a short prefill pass (crates/magpie-models/src/fused/short_attn.rs): few
// keys per query, so the work is spread over many small blocks (16 queries of one head each)
// rather than a few big tensor-core tiles. The host prepends the core's preamble, `typedef
// <storage type> T;`, `#define SA_D <head dim>` (32, 64 or 128) and `#define SA_NAME <kernel name>`. Math is f32, exponentials in
// base 2 with the scale folded in.

#define SA_QT 16   // queries per block: 4 warps x 4
#define SA_QW 4    // queries per warp
#define SA_KT 32   // keys per shared-memory tile: one per lane
#define SA_DPL (SA_D / 32)
#define SA_NEG_INF __int_as_float(0xff800000)

template <class X> __device__ __forceinline__ X sa_cvt(float v);
template <> __device__ __forceinline__ float sa_cvt<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16_t sa_cvt<bf16_t>(float v) { return f2b(v); }
template <> __device__ __forceinline__ half_t sa_cvt<half_t>(float v) { return f2h(v); }

// o[b, i, h] = softmax_j(scale q[b, i, h] . k[b, j, kvh]) v[b, j, kvh] over the keys j <= i +
// kv_len - q_len (bottom-right causal), kvh = h / (H / KVH). Operands by (batch, head, row)
// strides in elements. grid (ceil(q_len / 16), H, batch), 128 threads.
extern "C" __global__ void __launch_bounds__(128) SA_NAME(const T* __restrict__ q, i64 q_sb, i64 q_sh, i64 q_ss,
        const T* __restrict__ k, const T* __restrict__ v, i64 c_sb, i64 c_sh, i64 c_ss,
        T* __restrict__ o, i64 o_sb, i64 o_sh, i64 o_ss, int q_len, int kv_len, int H, int KVH, float scale_log2) {
    __shared__ float qs[SA_QT][SA_D];
    __shared__ float ks[SA_KT][SA_D + 1];
    __shared__ float vs[SA_KT][SA_D];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.y, b = blockIdx.z, kvh = h / (H / KVH);
    const int q0 = blockIdx.x * SA_QT;
    const int off = kv_len - q_len;
    const T* qb = q + (i64)b * q_sb + (i64)h * q_sh;
    const T* kb = k + (i64)b * c_sb + (i64)kvh * c_sh;
    const T* vb = v + (i64)b * c_sb + (i64)kvh * c_sh;
    for (int e = threadIdx.x; e < SA_QT * SA_D; e += blockDim.x) {
        int r = e / SA_D, dd = e % SA_D;
        qs[r][dd] = q0 + r < q_len ? to_f32(qb[(i64)(q0 + r) * q_ss + dd]) * scale_log2 : 0.0f;
    }
    float m[SA_QW], l[SA_QW], acc[SA_QW][SA_DPL];
#pragma unroll
    for (int r = 0; r < SA_QW; r++) {
        m[r] = SA_NEG_INF;
        l[r] = 0.0f;
#pragma unroll
        for (int j = 0; j < SA_DPL; j++) acc[r][j] = 0.0f;
    }
    // the last key any query of the block sees
    const int kend = min(kv_len, min(q0 + SA_QT, q_len) + off);
    for (int t0 = 0; t0 < kend; t0 += SA_KT) {
        __syncthreads();
        for (int e = threadIdx.x; e < SA_KT * SA_D; e += blockDim.x) {
            int t = e / SA_D, dd = e % SA_D;
            bool in = t0 + t < kend;
            ks[t][dd] = in ? to_f32(kb[(i64)(t0 + t) * c_ss + dd]) : 0.0f;
            vs[t][dd] = in ? to_f32(vb[(i64)(t0 + t) * c_ss + dd]) : 0.0f;
        }
        __syncthreads();
        // scores of this lane's key for the warp's queries
        float s[SA_QW];
#pragma unroll
        for (int r = 0; r < SA_QW; r++) s[r] = 0.0f;
        for (int dd = 0; dd < SA_D; dd++) {
            float kv = ks[lane][dd];
#pragma unroll
            for (int r = 0; r < SA_QW; r++) s[r] += qs[warp * SA_QW + r][dd] * kv;
        }
        const int key = t0 + lane;
#pragma unroll
        for (int r = 0; r < SA_QW; r++) {
            const int qi = q0 + warp * SA_QW + r;
            const bool vis = qi < q_len && key < kend && key <= qi + off;
            float sc = vis ? s[r] : SA_NEG_INF;
            float mx = sc;
#pragma unroll
            for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
            const float mn = fmaxf(m[r], mx);
            if (mn == SA_NEG_INF) {
                s[r] = 0.0f;
                continue;
            }
            const float corr = exp2f(m[r] - mn);  // 0 while m is -inf
            const float p = vis ? exp2f(sc - mn) : 0.0f;
            float ps = p;
#pragma unroll
            for (int w = 16; w > 0; w >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, w);
            l[r] = l[r] * corr + ps;
            m[r] = mn;
#pragma unroll
            for (int j = 0; j < SA_DPL; j++) acc[r][j] *= corr;
            s[r] = p;
        }
        // acc += p . V over the tile's keys (each lane holds dims lane + 32 j)
        for (int t = 0; t < SA_KT; t++) {
            float vv[SA_DPL];
#pragma unroll
            for (int j = 0; j < SA_DPL; j++) vv[j] = vs[t][lane + 32 * j];
#pragma unroll
            for (int r = 0; r < SA_QW; r++) {
                const float pt = __shfl_sync(0xffffffffu, s[r], t);
#pragma unroll
                for (int j = 0; j < SA_DPL; j++) acc[r][j] += pt * vv[j];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < SA_QW; r++) {
        const int qi = q0 + warp * SA_QW + r;
        if (qi >= q_len) continue;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        T* ob = o + (i64)b * o_sb + (i64)h * o_sh + (i64)qi * o_ss;
#pragma unroll
        for (int j = 0; j < SA_DPL; j++) ob[lane + 32 * j] = sa_cvt<T>(acc[r][j] * inv);
    }
}

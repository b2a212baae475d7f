// The fused engine's Q4_K decode GEMV with the neighbouring small kernels folded in (host:
// quant_fold.rs). The host prepends the core's preamble, `typedef <bf16_t | half_t> T;` and
// MP_SUFFIX. y = norm(x) W^T for the MB (1..4) rows of a decode batch, W [N, K] in Q4_K blocks, x
// coded to 8 bits per 32 values as the core's `quant_gemv_q4_k_q8_r*` codes it (same codes, same
// integer dot products, same per-sub-block scales), plus:
// - NORM (RMSNorm, `norm` = 1): x is the residual stream. The block codes w * x (the norm's weight
//   times the raw row) and sums x^2 over the same pass; the codes of a 32-value group do not depend
//   on the row's scale, so rsqrt(mean(x^2) + eps) multiplies the finished sums. No add+norm kernel,
//   no normalized copy of x.
// - epilogue `epi` (as the dense `gemv_fused` of kernels.cu, same roundings): 0 store y (T); 1 the
//   residual add (res += round(round(y) + bias)); 3 the gated MLP: a warp's row pair is (gate i,
//   up i) of a [2 I, K] weight, out[i] = round(act(round(gate))) * round(up); 4 the attention
//   input: the row pair (i, i + D/2) of one head of a [(H + 2 KVH) D, K] weight, bias, the rotary
//   embedding at pos[m] for q and k heads, q to `out` [MB, H, D], k and v into the caches.
// Launch: a persistent grid of at most two blocks of 8 warps per SM; a warp takes one row pair
// (a "unit") at a time, its lanes the pair's 64-weight pieces; the next step's weights are
// loaded before the current step's arithmetic, and the first step's before waiting on the
// previous kernel (programmatic dependent launch), since weights never change during a step.
// Shared memory: MB * K / 64 records of 80 bytes (64 codes, then s and sum(x) of the two
// 32-value groups), then 8 x 4 floats of the norm's partial sums.

#define MP_CAT2(a, b) a##b
#define MP_CAT(a, b) MP_CAT2(a, b)
#define MP_K(n) MP_CAT(n, MP_SUFFIX)

#define QF_WARPS 8
#define QF_REC 80

extern __shared__ uint4 qf_smem[];

__device__ __forceinline__ void qf_pdl_start() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void qf_pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class X> __device__ __forceinline__ X qf_cvt(float v);
template <> __device__ __forceinline__ bf16_t qf_cvt<bf16_t>(float v) { return f2b(v); }
template <> __device__ __forceinline__ half_t qf_cvt<half_t>(float v) { return f2h(v); }
__device__ __forceinline__ float qf_rnd(float v) { return to_f32(qf_cvt<T>(v)); }

__device__ __forceinline__ float qf_f16(unsigned v) {
    half_t h;
    h.x = (unsigned short)(v & 0xffffu);
    return h2f(h);
}

// 8 consecutive values of a row of T as f32 (16-byte aligned)
__device__ __forceinline__ void qf_x8(const bf16_t* p, float (&o)[8]) {
    const uint4 v = *(const uint4*)p;
    o[0] = __uint_as_float(v.x << 16); o[1] = __uint_as_float(v.x & 0xffff0000u);
    o[2] = __uint_as_float(v.y << 16); o[3] = __uint_as_float(v.y & 0xffff0000u);
    o[4] = __uint_as_float(v.z << 16); o[5] = __uint_as_float(v.z & 0xffff0000u);
    o[6] = __uint_as_float(v.w << 16); o[7] = __uint_as_float(v.w & 0xffff0000u);
}
__device__ __forceinline__ void qf_x8(const half_t* p, float (&o)[8]) {
    const uint4 v = *(const uint4*)p;
    o[0] = qf_f16(v.x); o[1] = qf_f16(v.x >> 16); o[2] = qf_f16(v.y); o[3] = qf_f16(v.y >> 16);
    o[4] = qf_f16(v.z); o[5] = qf_f16(v.z >> 16); o[6] = qf_f16(v.w); o[7] = qf_f16(v.w >> 16);
}

__device__ __forceinline__ int qf_dp4a(unsigned a, unsigned b, int c) {
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// 4 codes (ints in -127..127) as the bytes of one word
__device__ __forceinline__ unsigned qf_pack(int a, int b, int c, int d) {
    return __byte_perm(__byte_perm((unsigned)a, (unsigned)b, 0x0040u), __byte_perm((unsigned)c, (unsigned)d, 0x0040u), 0x5410u);
}

__device__ __forceinline__ float qf_act(int kind, float g) {
    return kind == 0 ? g / (1.0f + expf(-g)) : kind == 1 ? 0.5f * g * (1.0f + erff(g * 0.70710678118654752f)) : kind == 2 ? 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g))) : kind == 3 ? fmaxf(g, 0.0f) : kind == 4 ? g : tanhf(g);
}

// Field order: pointers, then 64-bit, then 32-bit values (the host's repr(C) mirror, QfArgs).
struct QfArgs {
    const u8* w;
    const T* x;
    const T* nw;
    const T* bias;
    T* out;
    T* res;
    T* kc;
    T* vc;
    const int* pos;
    const float* cos_t;
    const float* sin_t;
    long long cache_sb, cache_sh;
    int N, K, units, norm, epi, act, H, KVH, D;
    float eps;
};

// The two weight rows of unit u: (2u, 2u + 1) for the plain epilogues (the second clamped to
// the last row), (u, I + u) for the gated MLP, (i, i + D/2) of head u / (D/2) for q|k|v.
__device__ __forceinline__ void qf_rows(const QfArgs& a, int u, int& r0, int& r1) {
    if (a.epi == 3) { r0 = u; r1 = a.units + u; return; }
    if (a.epi == 4) {
        const int half = a.D >> 1, hh = u / half, i = u - hh * half;
        r0 = hh * a.D + i;
        r1 = r0 + half;
        return;
    }
    r0 = 2 * u;
    r1 = min(2 * u + 1, a.N - 1);
}

// 64-weight piece p (super-block p / 4, its 32-byte nibble slice p % 4, and the header) of rows r0, r1
struct QfW {
    uint4 h[2], qa[2], qb[2];
    __device__ __forceinline__ void load(const u8* w, long long row_bytes, int r0, int r1, int p) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const u8* q = w + (long long)(i == 0 ? r0 : r1) * row_bytes + (long long)(p >> 2) * 144;
            h[i] = __ldg((const uint4*)q);
            qa[i] = __ldg((const uint4*)(q + 16 + 32 * (p & 3)));
            qb[i] = __ldg((const uint4*)(q + 32 + 32 * (p & 3)));
        }
    }
};

// The 8-bit codes of one 64-value piece of x: the codes of its two 32-value groups (4 per word),
// then s and sum(x) of each group, as a shared-memory record holds them.
struct QfX {
    unsigned c[16];
    float4 f;
};

// acc[r][i] += piece p of row i . x row r: the codes in the shared-memory records (XR null) or in
// XR[r] (the lane's own piece, coded in registers)
template <int MB>
__device__ __forceinline__ void qf_dot(const QfW& L, const u8* sm, const QfX* XR, int U, int p, float (&acc)[MB][2]) {
    const int j = p & 3;
    // byte selectors of sub-blocks 2j, 2j + 1 within the packed scale words, as 2^23 + byte
    const unsigned s0 = 0x7440u | (unsigned)(2 * (j & 1)), s1 = s0 + 1;
    float d1[2], d2[2], m1[2], m2[2];
    unsigned lo[2][8], hi[2][8];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const uint4 h = L.h[i];
        const float d = qf_f16(h.x), dmin = qf_f16(h.x >> 16);
        const unsigned sw = j < 2 ? (h.y & 0x3f3f3f3fu) : ((h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u));
        const unsigned mw = j < 2 ? (h.z & 0x3f3f3f3fu) : (((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u));
        d1[i] = d * (__uint_as_float(__byte_perm(sw, 0x4b000000u, s0)) - 8388608.f);
        d2[i] = d * (__uint_as_float(__byte_perm(sw, 0x4b000000u, s1)) - 8388608.f);
        m1[i] = dmin * (__uint_as_float(__byte_perm(mw, 0x4b000000u, s0)) - 8388608.f);
        m2[i] = dmin * (__uint_as_float(__byte_perm(mw, 0x4b000000u, s1)) - 8388608.f);
        const unsigned q[8] = {L.qa[i].x, L.qa[i].y, L.qa[i].z, L.qa[i].w, L.qb[i].x, L.qb[i].y, L.qb[i].z, L.qb[i].w};
#pragma unroll
        for (int t = 0; t < 8; t++) {
            lo[i][t] = q[t] & 0x0f0f0f0fu;
            hi[i][t] = (q[t] >> 4) & 0x0f0f0f0fu;
        }
    }
#pragma unroll
    for (int r = 0; r < MB; r++) {
        unsigned xl[8], xh[8];
        float4 f;
        if (XR) {
#pragma unroll
            for (int t = 0; t < 8; t++) {
                xl[t] = XR[r].c[t];
                xh[t] = XR[r].c[8 + t];
            }
            f = XR[r].f;
        } else {
            const uint4* rec = (const uint4*)(sm + ((long long)r * U + p) * QF_REC);
            const uint4 x0 = rec[0], x1 = rec[1], x2 = rec[2], x3 = rec[3];
            f = *(const float4*)(rec + 4);
            xl[0] = x0.x; xl[1] = x0.y; xl[2] = x0.z; xl[3] = x0.w; xl[4] = x1.x; xl[5] = x1.y; xl[6] = x1.z; xl[7] = x1.w;
            xh[0] = x2.x; xh[1] = x2.y; xh[2] = x2.z; xh[3] = x2.w; xh[4] = x3.x; xh[5] = x3.y; xh[6] = x3.z; xh[7] = x3.w;
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int s = 0, t2 = 0;
#pragma unroll
            for (int t = 0; t < 8; t++) {
                s = qf_dp4a(lo[i][t], xl[t], s);
                t2 = qf_dp4a(hi[i][t], xh[t], t2);
            }
            acc[r][i] += ((d1[i] * f.x) * (float)s - m1[i] * f.z) + ((d2[i] * f.y) * (float)t2 - m2[i] * f.w);
        }
    }
}

// The epilogue of unit u for batch row b: s0, s1 the (normed) sums of its two rows.
__device__ __forceinline__ void qf_epilogue(const QfArgs& a, int u, int b, int r0, int r1, float s0, float s1) {
    if (a.epi == 0 || a.epi == 1) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int n = 2 * u + i;
            if (n >= a.N) break;
            float d = qf_rnd(i == 0 ? s0 : s1);
            if (a.epi == 0) {
                a.out[(long long)b * a.N + n] = qf_cvt<T>(d);
            } else {
                if (a.bias) d = qf_rnd(d + to_f32(a.bias[n]));
                T* xr = a.res + (long long)b * a.N + n;
                *xr = qf_cvt<T>(to_f32(*xr) + d);
            }
        }
    } else if (a.epi == 3) {
        float g = qf_rnd(s0), up = qf_rnd(s1);
        if (a.bias) {
            g = qf_rnd(g + to_f32(a.bias[r0]));
            up = qf_rnd(up + to_f32(a.bias[r1]));
        }
        a.out[(long long)b * a.units + u] = qf_cvt<T>(qf_rnd(qf_act(a.act, g)) * up);
    } else {
        const int D = a.D, half = D >> 1, hh = u / half, i = u - hh * half, H = a.H, KVH = a.KVH;
        float x0 = qf_rnd(s0), x1 = qf_rnd(s1);
        if (a.bias) {
            x0 = qf_rnd(x0 + to_f32(a.bias[r0]));
            x1 = qf_rnd(x1 + to_f32(a.bias[r1]));
        }
        const int p = a.pos[b];
        if (a.cos_t && hh < H + KVH) {
            const float c = a.cos_t[(long long)p * half + i], sn = a.sin_t[(long long)p * half + i];
            const float y0 = x0 * c - x1 * sn, y1 = x1 * c + x0 * sn;
            x0 = y0;
            x1 = y1;
        }
        T* dst;
        if (hh < H) dst = a.out + ((long long)b * H + hh) * D;
        else if (hh < H + KVH) dst = a.kc + (long long)b * a.cache_sb + (long long)(hh - H) * a.cache_sh + (long long)p * D;
        else dst = a.vc + (long long)b * a.cache_sb + (long long)(hh - H - KVH) * a.cache_sh + (long long)p * D;
        dst[i] = qf_cvt<T>(x0);
        dst[i + half] = qf_cvt<T>(x1);
    }
}

// 32 values of x row `xr` from element e (times the norm's weight with `nw`) coded into
// c[0..7] (s, sum) = (*s, *sum); *sq += sum of the raw values' squares
__device__ __forceinline__ void qf_code32(const T* xr, const T* nw, int e, unsigned* c, float* s, float* sum, float* sq) {
    float v[32];
#pragma unroll
    for (int j = 0; j < 4; j++) qf_x8(xr + e + 8 * j, *(float(*)[8])(v + 8 * j));
    if (nw) {
        float wv[32];
#pragma unroll
        for (int j = 0; j < 4; j++) qf_x8(nw + e + 8 * j, *(float(*)[8])(wv + 8 * j));
#pragma unroll
        for (int k = 0; k < 32; k++) {
            *sq += v[k] * v[k];
            v[k] *= wv[k];
        }
    }
    float am = 0.f;
#pragma unroll
    for (int k = 0; k < 32; k++) am = fmaxf(am, fabsf(v[k]));
    // the same sum order as the block path's (pieces of 8, then the 4 pieces pairwise)
    float p8[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float* q = v + 8 * j;
        p8[j] = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
    }
    const float inv = am > 0.f ? 127.f / am : 0.f;
#pragma unroll
    for (int t = 0; t < 8; t++) c[t] = qf_pack(__float2int_rn(v[4 * t] * inv), __float2int_rn(v[4 * t + 1] * inv), __float2int_rn(v[4 * t + 2] * inv), __float2int_rn(v[4 * t + 3] * inv));
    const float tot = (p8[0] + p8[1]) + (p8[2] + p8[3]);
    *s = am / 127.f + (tot - tot);  // NaN unless the 32 values are finite
    *sum = tot;
}

// WX: x coded per lane in registers (one 64-value piece per lane: K <= 2048), the norm's sum of
// squares met by warp shuffles: no shared memory and no block barrier between the wait on the
// previous kernel and the first product. Otherwise the block codes x into shared memory.
template <int MB, int WX>
__device__ __forceinline__ void qf_gemv(const QfArgs& a) {
    u8* sm = (u8*)qf_smem;
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const int K = a.K, U = K >> 6, C = (U + 31) >> 5, G = a.units;
    const int TW = gridDim.x * QF_WARPS, gw = blockIdx.x * QF_WARPS + wib;
    const int steps = gw < G ? ((G - 1 - gw) / TW + 1) * C : 0;  // warp-uniform
    const long long row_bytes = (long long)(K >> 8) * 144;
    qf_pdl_start();
    // the first step's weights are in flight while the previous kernel finishes and x is coded
    int g = gw, c = 0, r0 = 0, r1 = 0;
    QfW cur;
    if (steps > 0) {
        qf_rows(a, g, r0, r1);
        cur.load(a.w, row_bytes, r0, r1, min(lane, U - 1));
    }
    qf_pdl_wait();
    float rs[MB];
    QfX xr[WX ? MB : 1];
    if (WX) {
#pragma unroll
        for (int r = 0; r < MB; r++) {
            float sq = 0.f;
            if (lane < U) {
                const T* row = a.x + (long long)r * K;
                const T* nw = a.norm ? a.nw : nullptr;
                qf_code32(row, nw, 64 * lane, xr[r].c, &xr[r].f.x, &xr[r].f.z, &sq);
                qf_code32(row, nw, 64 * lane + 32, xr[r].c + 8, &xr[r].f.y, &xr[r].f.w, &sq);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
            rs[r] = a.norm ? rsqrtf(sq / K + a.eps) : 1.f;
        }
    } else {
    // x's codes (of w * x with the norm): 8-value pieces; a row's pieces are a multiple of 32, so
    // warps stay whole and a 32-value group is 4 consecutive lanes
    const int per_row = K >> 3;
    float sq[MB];
#pragma unroll
    for (int r = 0; r < MB; r++) sq[r] = 0.f;
    for (int it = threadIdx.x; it < MB * per_row; it += blockDim.x) {
        const int r = it / per_row, e = (it - r * per_row) << 3;
        float v[8];
        qf_x8(a.x + (long long)r * K + e, v);
        if (a.norm) {
            float wv[8];
            qf_x8(a.nw + e, wv);
            float q2 = 0.f;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                q2 += v[k] * v[k];
                v[k] *= wv[k];
            }
#pragma unroll
            for (int rr = 0; rr < MB; rr++)
                if (rr == r) sq[rr] += q2;
        }
        float am = 0.f;
#pragma unroll
        for (int k = 0; k < 8; k++) am = fmaxf(am, fabsf(v[k]));
        float s = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
        am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 1));
        am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 2));
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        const float inv = am > 0.f ? 127.f / am : 0.f;
        int q[8];
#pragma unroll
        for (int k = 0; k < 8; k++) q[k] = __float2int_rn(v[k] * inv);
        u8* rec = sm + ((long long)r * U + (e >> 6)) * QF_REC;
        *(uint2*)(rec + (e & 63)) = make_uint2(qf_pack(q[0], q[1], q[2], q[3]), qf_pack(q[4], q[5], q[6], q[7]));
        if ((e & 31) == 0) {
            const int h = (e >> 5) & 1;
            ((float*)(rec + 64))[h] = am / 127.f + (s - s);  // NaN unless the 32 values are finite
            ((float*)(rec + 72))[h] = s;
        }
    }
    // the norm's statistics: per-warp sums, added in warp order (deterministic)
    float* red = (float*)(sm + (long long)MB * U * QF_REC);
    if (a.norm) {
#pragma unroll
        for (int r = 0; r < MB; r++) {
            float t = sq[r];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
            if (lane == 0) red[wib * 4 + r] = t;
        }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < MB; r++) {
        rs[r] = 1.f;
        if (a.norm) {
            float t = 0.f;
            for (int o = 0; o < QF_WARPS; o++) t += red[o * 4 + r];
            rs[r] = rsqrtf(t / K + a.eps);
        }
    }
    }
    float acc[MB][2];
#pragma unroll
    for (int r = 0; r < MB; r++) acc[r][0] = acc[r][1] = 0.f;
    for (int st = 0; st < steps; st++) {
        int gn = g, cn = c + 1, n0 = r0, n1 = r1;
        if (cn == C) { cn = 0; gn += TW; }
        QfW nxt;
        if (gn < G) {
            if (gn != g) qf_rows(a, gn, n0, n1);
            nxt.load(a.w, row_bytes, n0, n1, min(32 * cn + lane, U - 1));
        }
        const int p = 32 * c + lane;
        if (p < U) qf_dot<MB>(cur, sm, WX ? xr : nullptr, U, p, acc);
        if (c == C - 1) {
            float s0 = 0.f, s1 = 0.f;
#pragma unroll
            for (int r = 0; r < MB; r++) {
                float t0 = acc[r][0], t1 = acc[r][1];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) {
                    t0 += __shfl_xor_sync(0xffffffffu, t0, o);
                    t1 += __shfl_xor_sync(0xffffffffu, t1, o);
                }
                if (lane == r) { s0 = t0 * rs[r]; s1 = t1 * rs[r]; }
                acc[r][0] = acc[r][1] = 0.f;
            }
            if (lane < MB) qf_epilogue(a, g, lane, r0, r1, s0, s1);
        }
        if (gn < G) cur = nxt;
        g = gn; c = cn; r0 = n0; r1 = n1;
    }
}

// fused_qfold<MB>: x coded by the block; fused_qfold1w: x coded per lane (one row, K <= 2048; with
// two rows the lane's codes spill registers)
#define QF_KERNEL(MB) \
    extern "C" __global__ void __launch_bounds__(32 * QF_WARPS, 2) MP_K(fused_qfold##MB)(const QfArgs a) { qf_gemv<MB, 0>(a); }
#define QF_KERNEL_W(MB) \
    extern "C" __global__ void __launch_bounds__(32 * QF_WARPS, 2) MP_K(fused_qfold##MB##w)(const QfArgs a) { qf_gemv<MB, 1>(a); }
QF_KERNEL(1) QF_KERNEL(2) QF_KERNEL(3) QF_KERNEL(4) QF_KERNEL_W(1)

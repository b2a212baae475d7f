// Quantized GEMV for decode: y[r, n] = sum_k x[r, k] * W[n, k] for R = 1..8 activation rows,
// W [N, K] in ggml blocks (Q8_0, Q4_0, Q4_K, Q6_K: rows of whole blocks, as GGUF stores them),
// x and y of type T (f32, f16, bf16), f32 accumulation. After the preamble and kcommon.cuh.
//
// Layout of the work:
// - a block has QG_WARPS warps, each owning QG_NR consecutive weight rows; the block's x rows are
//   staged tile by tile (QG_KT(R) elements, a multiple of 256 so tiles hold whole blocks of every
//   type) in shared memory as f32;
// - a lane takes one "unit" of a weight row at a time (Q4_K: 16 bytes of nibbles, 32 weights;
//   Q6_K: 16 weights; Q8_0 / Q4_0: one block of 32), lanes of a warp take consecutive units, so a
//   warp's loads of one row are contiguous; Q4_K units are single 16-byte loads;
// - the x values a lane needs depend only on the unit, not on the weight row, so each x value
//   read from shared memory serves the QG_NR rows of the warp;
// - shared x rows are padded by 4 floats every 64 (`qg_xi`): the lanes of a quarter-warp then
//   read Q4_K's x in distinct banks (without the padding, 4-way conflicts);
// - partial sums are reduced with warp shuffles; lane 0 writes y in T.

#define QG_WARPS 8
#define QG_NR 2
#define QG_KT(R) ((R) <= 2 ? 4096 : (R) <= 4 ? 2048 : 1024)
#define QG_PAD(n) ((n) + ((n) >> 4))

__device__ __forceinline__ int qg_xi(int e) { return e + ((e >> 6) << 2); }

__device__ __forceinline__ float qg_f16(unsigned v) {
    half_t h;
    h.x = (unsigned short)(v & 0xffffu);
    return h2f(h);
}

// 16 bytes from a 2-byte-aligned address (Q8_0, Q4_0 and Q6_K blocks are only 2-aligned): four
// 4-byte loads where the address allows, else eight 2-byte loads.
__device__ __forceinline__ uint4 qg_ld16(const u8* p) {
    uint4 r;
    if ((((unsigned long long)p) & 3ull) == 0) {
        const unsigned* q = (const unsigned*)p;
        r.x = __ldg(q); r.y = __ldg(q + 1); r.z = __ldg(q + 2); r.w = __ldg(q + 3);
    } else {
        const unsigned short* q = (const unsigned short*)p;
        r.x = (unsigned)__ldg(q) | ((unsigned)__ldg(q + 1) << 16);
        r.y = (unsigned)__ldg(q + 2) | ((unsigned)__ldg(q + 3) << 16);
        r.z = (unsigned)__ldg(q + 4) | ((unsigned)__ldg(q + 5) << 16);
        r.w = (unsigned)__ldg(q + 6) | ((unsigned)__ldg(q + 7) << 16);
    }
    return r;
}

__device__ __forceinline__ unsigned qg_word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// ---- per-type units. Each adds its unit's contribution for the QG_NR rows at `w[i]` (the block
// start of row i) to acc[r][i], reading x from xs (R padded rows of `stride` floats, tile-local
// element index `e0` = the block's first element in the tile).

struct Q4K {
    static const int ELEMS = 256, BYTES = 144, UNITS = 8;
    template <int R>
    static __device__ __forceinline__ void unit(const u8* const* w, int j, const float* xs, int stride, int e0, float (&acc)[R][QG_NR]) {
        const int c = j >> 1, l0 = (j & 1) << 4;
        uint4 q[QG_NR];
        float d1[QG_NR], m1[QG_NR], d2[QG_NR], m2[QG_NR];
#pragma unroll
        for (int i = 0; i < QG_NR; i++) {
            const uint4 h = __ldg((const uint4*)w[i]);
            q[i] = __ldg((const uint4*)(w[i] + 16 + 16 * j));
            const float d = qg_f16(h.x), dmin = qg_f16(h.x >> 16);
            // the 12 scale bytes are h.y, h.z, h.w (picked by selects: c is not a compile-time
            // constant, and an indexed array would go to local memory); sub-blocks 2c (low
            // nibbles) and 2c+1 (high)
#define QG_SB(k) ((((k) < 4 ? h.y : (k) < 8 ? h.z : h.w) >> (8 * ((k) & 3))) & 0xffu)
            unsigned sc_lo, mn_lo, sc_hi, mn_hi;
            const int a = 2 * c, b = 2 * c + 1;
            if (a < 4) { sc_lo = QG_SB(a) & 63; mn_lo = QG_SB(a + 4) & 63; }
            else { sc_lo = (QG_SB(a + 4) & 0xF) | ((QG_SB(a - 4) >> 6) << 4); mn_lo = (QG_SB(a + 4) >> 4) | ((QG_SB(a) >> 6) << 4); }
            if (b < 4) { sc_hi = QG_SB(b) & 63; mn_hi = QG_SB(b + 4) & 63; }
            else { sc_hi = (QG_SB(b + 4) & 0xF) | ((QG_SB(b - 4) >> 6) << 4); mn_hi = (QG_SB(b + 4) >> 4) | ((QG_SB(b) >> 6) << 4); }
#undef QG_SB
            d1[i] = d * (float)sc_lo; m1[i] = dmin * (float)mn_lo;
            d2[i] = d * (float)sc_hi; m2[i] = dmin * (float)mn_hi;
        }
        const int elo = e0 + 64 * c + l0, ehi = elo + 32;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float* xr = xs + r * stride;
            float slo[QG_NR], shi[QG_NR], sxl = 0.f, sxh = 0.f;
#pragma unroll
            for (int i = 0; i < QG_NR; i++) { slo[i] = 0.f; shi[i] = 0.f; }
#pragma unroll
            for (int t4 = 0; t4 < 4; t4++) {
                const float4 xl = *(const float4*)(xr + qg_xi(elo + 4 * t4));
                const float4 xh = *(const float4*)(xr + qg_xi(ehi + 4 * t4));
                sxl += (xl.x + xl.y) + (xl.z + xl.w);
                sxh += (xh.x + xh.y) + (xh.z + xh.w);
#pragma unroll
                for (int i = 0; i < QG_NR; i++) {
                    const unsigned v = qg_word(q[i], t4);
                    slo[i] += xl.x * (float)(v & 15) + xl.y * (float)((v >> 8) & 15) + xl.z * (float)((v >> 16) & 15) + xl.w * (float)((v >> 24) & 15);
                    shi[i] += xh.x * (float)((v >> 4) & 15) + xh.y * (float)((v >> 12) & 15) + xh.z * (float)((v >> 20) & 15) + xh.w * (float)(v >> 28);
                }
            }
#pragma unroll
            for (int i = 0; i < QG_NR; i++) acc[r][i] += (d1[i] * slo[i] - m1[i] * sxl) + (d2[i] * shi[i] - m2[i] * sxh);
        }
    }
};

struct Q6K {
    static const int ELEMS = 256, BYTES = 210, UNITS = 16;
    // unit j: weights 16j .. 16j+15 = 128c + 32s + 16h + t (j = 8c + 2s + h)
    template <int R>
    static __device__ __forceinline__ void unit(const u8* const* w, int j, const float* xs, int stride, int e0, float (&acc)[R][QG_NR]) {
        const int c = j >> 3, s = (j >> 1) & 3, h = j & 1;
        const int shl = 4 * (s >> 1), shh = 2 * s;
        uint4 lo[QG_NR], hi[QG_NR];
        float dl[QG_NR];
#pragma unroll
        for (int i = 0; i < QG_NR; i++) {
            lo[i] = qg_ld16(w[i] + 64 * c + 32 * (s & 1) + 16 * h);
            hi[i] = qg_ld16(w[i] + 128 + 32 * c + 16 * h);
            const unsigned short dd = __ldg((const unsigned short*)(w[i] + 208));
            const signed char sc = (signed char)__ldg(w[i] + 192 + 8 * c + 2 * s + h);
            dl[i] = qg_f16(dd) * (float)sc;
        }
        const int e = e0 + 16 * j;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float* xr = xs + r * stride;
            float sum[QG_NR];
#pragma unroll
            for (int i = 0; i < QG_NR; i++) sum[i] = 0.f;
#pragma unroll
            for (int t4 = 0; t4 < 4; t4++) {
                const float4 xv = *(const float4*)(xr + qg_xi(e + 4 * t4));
#pragma unroll
                for (int i = 0; i < QG_NR; i++) {
                    const unsigned a = qg_word(lo[i], t4) >> shl, b = qg_word(hi[i], t4) >> shh;
                    const float q0 = (float)((int)((a & 15) | ((b & 3) << 4)) - 32);
                    const float q1 = (float)((int)(((a >> 8) & 15) | (((b >> 8) & 3) << 4)) - 32);
                    const float q2 = (float)((int)(((a >> 16) & 15) | (((b >> 16) & 3) << 4)) - 32);
                    const float q3 = (float)((int)(((a >> 24) & 15) | (((b >> 24) & 3) << 4)) - 32);
                    sum[i] += xv.x * q0 + xv.y * q1 + xv.z * q2 + xv.w * q3;
                }
            }
#pragma unroll
            for (int i = 0; i < QG_NR; i++) acc[r][i] += dl[i] * sum[i];
        }
    }
};

struct Q80 {
    static const int ELEMS = 32, BYTES = 34, UNITS = 1;
    template <int R>
    static __device__ __forceinline__ void unit(const u8* const* w, int, const float* xs, int stride, int e0, float (&acc)[R][QG_NR]) {
        uint4 q[QG_NR][2];
        float d[QG_NR];
#pragma unroll
        for (int i = 0; i < QG_NR; i++) {
            d[i] = qg_f16(__ldg((const unsigned short*)w[i]));
            q[i][0] = qg_ld16(w[i] + 2);
            q[i][1] = qg_ld16(w[i] + 18);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float* xr = xs + r * stride;
            float sum[QG_NR];
#pragma unroll
            for (int i = 0; i < QG_NR; i++) sum[i] = 0.f;
#pragma unroll
            for (int t4 = 0; t4 < 8; t4++) {
                const float4 xv = *(const float4*)(xr + qg_xi(e0 + 4 * t4));
#pragma unroll
                for (int i = 0; i < QG_NR; i++) {
                    const unsigned v = qg_word(q[i][t4 >> 2], t4 & 3);
                    sum[i] += xv.x * (float)(signed char)(v & 0xff) + xv.y * (float)(signed char)((v >> 8) & 0xff)
                            + xv.z * (float)(signed char)((v >> 16) & 0xff) + xv.w * (float)(signed char)(v >> 24);
                }
            }
#pragma unroll
            for (int i = 0; i < QG_NR; i++) acc[r][i] += d[i] * sum[i];
        }
    }
};

struct Q40 {
    static const int ELEMS = 32, BYTES = 18, UNITS = 1;
    template <int R>
    static __device__ __forceinline__ void unit(const u8* const* w, int, const float* xs, int stride, int e0, float (&acc)[R][QG_NR]) {
        uint4 q[QG_NR];
        float d[QG_NR];
#pragma unroll
        for (int i = 0; i < QG_NR; i++) {
            d[i] = qg_f16(__ldg((const unsigned short*)w[i]));
            q[i] = qg_ld16(w[i] + 2);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float* xr = xs + r * stride;
            float sum[QG_NR];
#pragma unroll
            for (int i = 0; i < QG_NR; i++) sum[i] = 0.f;
#pragma unroll
            for (int t4 = 0; t4 < 4; t4++) {
                const float4 xl = *(const float4*)(xr + qg_xi(e0 + 4 * t4));
                const float4 xh = *(const float4*)(xr + qg_xi(e0 + 16 + 4 * t4));
#pragma unroll
                for (int i = 0; i < QG_NR; i++) {
                    const unsigned v = qg_word(q[i], t4);
                    sum[i] += xl.x * (float)((int)(v & 15) - 8) + xl.y * (float)((int)((v >> 8) & 15) - 8)
                            + xl.z * (float)((int)((v >> 16) & 15) - 8) + xl.w * (float)((int)((v >> 24) & 15) - 8)
                            + xh.x * (float)((int)((v >> 4) & 15) - 8) + xh.y * (float)((int)((v >> 12) & 15) - 8)
                            + xh.z * (float)((int)((v >> 20) & 15) - 8) + xh.w * (float)((int)(v >> 28) - 8);
                }
            }
#pragma unroll
            for (int i = 0; i < QG_NR; i++) acc[r][i] += d[i] * sum[i];
        }
    }
};

// x: R rows of K values of T, row stride ldx; y: R rows of N values of T, row stride ldy;
// w: N rows of K / Q::ELEMS blocks. Grid: ceil(N / (QG_WARPS * QG_NR)) blocks of 32 * QG_WARPS.
template <class Q, int R>
__device__ __forceinline__ void quant_gemv(const u8* __restrict__ w, const T* __restrict__ x, T* __restrict__ y, int N, int K, long long ldx, long long ldy) {
    const int KT = QG_KT(R);
    const int stride = QG_PAD(KT);
    __shared__ __align__(16) float xs[R * QG_PAD(QG_KT(R))];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = (blockIdx.x * QG_WARPS + warp) * QG_NR;
    const long long row_bytes = (long long)(K / Q::ELEMS) * Q::BYTES;
    const u8* rows[QG_NR];
#pragma unroll
    for (int i = 0; i < QG_NR; i++) rows[i] = w + (long long)min(n0 + i, N - 1) * row_bytes;  // past-the-end rows repeat row N-1, unwritten
    float acc[R][QG_NR];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < QG_NR; i++) acc[r][i] = 0.f;

    for (int k0 = 0; k0 < K; k0 += KT) {
        const int kt = min(KT, K - k0);
        __syncthreads();
        for (int r = 0; r < R; r++)
            for (int e = threadIdx.x; e < kt; e += blockDim.x) xs[r * stride + qg_xi(e)] = Ty<T>::ld(x[r * ldx + k0 + e]);
        __syncthreads();
        if (n0 < N) {
            const int units = (kt / Q::ELEMS) * Q::UNITS;
            const int b0 = k0 / Q::ELEMS;
            for (int u = lane; u < units; u += 32) {
                const int b = u / Q::UNITS, j = u - b * Q::UNITS;
                const u8* blk[QG_NR];
#pragma unroll
                for (int i = 0; i < QG_NR; i++) blk[i] = rows[i] + (long long)(b0 + b) * Q::BYTES;
                Q::template unit<R>(blk, j, xs, stride, b * Q::ELEMS, acc);
            }
        }
    }
    if (n0 >= N) return;
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < QG_NR; i++) {
            float v = acc[r][i];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0 && n0 + i < N) y[r * ldy + n0 + i] = Ty<T>::st(v);
        }
}

#define QG_KERNEL(NAME, Q, R) \
    extern "C" __global__ void __launch_bounds__(32 * QG_WARPS, 2) NAME##_r##R(const u8* w, const T* x, T* y, int N, int K, long long ldx, long long ldy) { \
        quant_gemv<Q, R>(w, x, y, N, K, ldx, ldy); \
    }
#define QG_KERNELS(NAME, Q) \
    QG_KERNEL(NAME, Q, 1) QG_KERNEL(NAME, Q, 2) QG_KERNEL(NAME, Q, 3) QG_KERNEL(NAME, Q, 4) \
    QG_KERNEL(NAME, Q, 5) QG_KERNEL(NAME, Q, 6) QG_KERNEL(NAME, Q, 7) QG_KERNEL(NAME, Q, 8)

QG_KERNELS(quant_gemv_q4_k, Q4K)
QG_KERNELS(quant_gemv_q6_k, Q6K)
QG_KERNELS(quant_gemv_q8_0, Q80)
QG_KERNELS(quant_gemv_q4_0, Q40)

// Quantized GEMV for decode: y[r, n] = sum_k x[r, k] * W[n, k] for R = 1..8 activation rows,
// W [N, K] in ggml blocks (Q8_0, Q4_0, Q4_K, Q6_K: rows of whole blocks, as GGUF stores them),
// x and y of type T (f32, f16, bf16), f32 accumulation; and the dequantization of W to T (for
// prefill, whose product then runs on cuBLAS). After the preamble and kcommon.cuh.
//
// Layout of the GEMV (chosen to keep enough bytes in flight per SM and few instructions per
// weight; the memory floor of Q4_K asks ~25 weights per clock per SM of an H100):
// - a thread block owns NR consecutive weight rows (NR = 4 for 1-2 activation rows, else 2; 8
//   for one row of a tall matrix, where blocks are plentiful) and all of K; its threads (a
//   multiple of 32, at most 256, set by the host to cover a row's units in one or a few passes)
//   take the row's "units" in turn: Q4_K 32 bytes of nibbles (64 weights, two 16-byte loads, one
//   scale unpacking), Q6_K 32 weights, Q8_0 / Q4_0 one block of 32. A thread loads its unit of
//   all NR rows before using any, so 2-3 NR independent loads are in flight per thread;
// - x is read straight from global memory (L1/L2-resident, 16-byte loads, converted to f32 in
//   registers) once per unit and used for the NR rows; no shared-memory staging, no barriers
//   but the final one;
// - weights become floats without int->float conversions (a quarter-rate instruction): a byte
//   perm puts the code q (4 or 6 bits) in mantissa bits 16..21 of 128.0f, giving 128 + q
//   exactly, and the sums take the 128 back out through the sum of x (per unit, so the
//   cancellation is over 16-32 terms); Q8_0's signed bytes use the 2^23 magic with one add;
// - the per-thread sums are reduced with warp shuffles, then across warps in shared memory.

#define QG_MAXW 8
#define QG_NR(R) ((R) <= 2 ? 4 : 2)  // weight rows per block; one-row launches of tall matrices take 8 (`_w8`)

// 128 + q for the byte `i` (0..3) of `v` holding q < 64
#define QG_B(v, i) __uint_as_float(__byte_perm((v), 0x43000000u, 0x7044u | ((i) << 8)))

// Programmatic dependent launch (host: `quant_gemv_raw_pdl`): let the next kernel on the stream be
// scheduled once every block of this one runs, and wait for the previous kernel's grid (and its
// memory) before reading what it may have written. No-ops in a plain launch and before sm_90.
__device__ __forceinline__ void qg_pdl_start() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void qg_pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ float qg_f16(unsigned v) {
    half_t h;
    h.x = (unsigned short)(v & 0xffffu);
    return h2f(h);
}

// 8 consecutive x values as f32 (p 16-byte aligned)
__device__ __forceinline__ void qg_x8(const float* p, float (&o)[8]) {
    const float4 a = __ldg((const float4*)p), b = __ldg((const float4*)p + 1);
    o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
}
__device__ __forceinline__ void qg_x8(const bf16_t* p, float (&o)[8]) {
    const uint4 v = __ldg((const uint4*)p);
    o[0] = __uint_as_float(v.x << 16); o[1] = __uint_as_float(v.x & 0xffff0000u);
    o[2] = __uint_as_float(v.y << 16); o[3] = __uint_as_float(v.y & 0xffff0000u);
    o[4] = __uint_as_float(v.z << 16); o[5] = __uint_as_float(v.z & 0xffff0000u);
    o[6] = __uint_as_float(v.w << 16); o[7] = __uint_as_float(v.w & 0xffff0000u);
}
__device__ __forceinline__ void qg_x8(const half_t* p, float (&o)[8]) {
    const uint4 v = __ldg((const uint4*)p);
    o[0] = qg_f16(v.x); o[1] = qg_f16(v.x >> 16); o[2] = qg_f16(v.y); o[3] = qg_f16(v.y >> 16);
    o[4] = qg_f16(v.z); o[5] = qg_f16(v.z >> 16); o[6] = qg_f16(v.w); o[7] = qg_f16(v.w >> 16);
}

// a 4-byte word from a 2-byte-aligned address (Q8_0, Q4_0, Q6_K blocks are only 2-aligned)
__device__ __forceinline__ unsigned qg_w2(const u8* p) {
    const unsigned short* q = (const unsigned short*)p;
    return (unsigned)__ldg(q) | ((unsigned)__ldg(q + 1) << 16);
}

// S += x . (128 + q) over the 4 bytes of v (x[0..3]); X is summed by the caller
__device__ __forceinline__ float qg_dot4(unsigned v, const float* x, float s) {
    s = fmaf(x[0], QG_B(v, 0), s);
    s = fmaf(x[1], QG_B(v, 1), s);
    s = fmaf(x[2], QG_B(v, 2), s);
    s = fmaf(x[3], QG_B(v, 3), s);
    return s;
}

__device__ __forceinline__ float qg_sum8(const float (&x)[8]) {
    return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
}

// Each type: `load` fetches unit (b, j) of the NR rows into registers, `dot` adds its products
// with the R x rows to acc. Element indices are within the row.

// Q4_K: unit j (0..3) of super-block b = qs bytes 32j..32j+31: low nibbles are elements
// 256b + 64j + (0..31) of sub-block 2j, high nibbles 256b + 64j + 32 + (0..31) of sub-block
// 2j + 1. W = (d * sc) * q - dmin * m. A thread's j is fixed (tid % 4), and the 6-bit scales
// are unpacked four at a time in registers (no branch on j), once per 64 weights and row.
template <int NR>
struct Q4K {
    static const int ELEMS = 256, BYTES = 144, UNITS = 4;
    uint4 h[NR], qa[NR], qb[NR];
    __device__ __forceinline__ void load(const u8* const* rows, int b, int j) {
#pragma unroll
        for (int i = 0; i < NR; i++) {
            const u8* p = rows[i] + (long long)b * BYTES;
            h[i] = __ldg((const uint4*)p);
            qa[i] = __ldg((const uint4*)(p + 16 + 32 * j));
            qb[i] = __ldg((const uint4*)(p + 32 + 32 * j));
        }
    }
    template <int R>
    __device__ __forceinline__ void dot(const T* const* xr, int b, int j, float (&acc)[R][NR]) const {
        const int e = 256 * b + 64 * j;
        // byte selectors of sub-blocks 2j, 2j + 1 within the packed scale words, as 2^23 + byte
        const unsigned s0 = 0x7440u | (unsigned)(2 * (j & 1)), s1 = s0 + 1;
        float d1[NR], d2[NR], m1[NR], m2[NR];
#pragma unroll
        for (int i = 0; i < NR; i++) {
            const float d = qg_f16(h[i].x), dmin = qg_f16(h[i].x >> 16);
            // scales 0..3 / 4..7 and minimums 0..3 / 4..7 (ggml's get_scale_min_k4, bytewise)
            const unsigned sw = j < 2 ? (h[i].y & 0x3f3f3f3fu) : ((h[i].w & 0x0f0f0f0fu) | ((h[i].y >> 2) & 0x30303030u));
            const unsigned mw = j < 2 ? (h[i].z & 0x3f3f3f3fu) : (((h[i].w >> 4) & 0x0f0f0f0fu) | ((h[i].z >> 2) & 0x30303030u));
            const float sl = __uint_as_float(__byte_perm(sw, 0x4b000000u, s0)) - 8388608.f;
            const float sh = __uint_as_float(__byte_perm(sw, 0x4b000000u, s1)) - 8388608.f;
            const float ml = __uint_as_float(__byte_perm(mw, 0x4b000000u, s0)) - 8388608.f;
            const float mh = __uint_as_float(__byte_perm(mw, 0x4b000000u, s1)) - 8388608.f;
            d1[i] = d * sl; d2[i] = d * sh;
            m1[i] = dmin * ml + 128.f * d1[i];
            m2[i] = dmin * mh + 128.f * d2[i];
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            float sl[NR], sh[NR], xl = 0.f, xh = 0.f;
#pragma unroll
            for (int i = 0; i < NR; i++) { sl[i] = 0.f; sh[i] = 0.f; }
#pragma unroll
            for (int g = 0; g < 4; g++) {
                float a[8], z[8];
                qg_x8(xr[r] + e + 8 * g, a);
                qg_x8(xr[r] + e + 32 + 8 * g, z);
                xl += qg_sum8(a);
                xh += qg_sum8(z);
#pragma unroll
                for (int i = 0; i < NR; i++) {
                    const uint4& q = g < 2 ? qa[i] : qb[i];
                    const unsigned w0 = (g & 1) ? q.z : q.x, w1 = (g & 1) ? q.w : q.y;
                    sl[i] = qg_dot4(w0 & 0x0f0f0f0fu, a, sl[i]);
                    sl[i] = qg_dot4(w1 & 0x0f0f0f0fu, a + 4, sl[i]);
                    sh[i] = qg_dot4((w0 >> 4) & 0x0f0f0f0fu, z, sh[i]);
                    sh[i] = qg_dot4((w1 >> 4) & 0x0f0f0f0fu, z + 4, sh[i]);
                }
            }
#pragma unroll
            for (int i = 0; i < NR; i++) acc[r][i] += (d1[i] * sl[i] - m1[i] * xl) + (d2[i] * sh[i] - m2[i] * xh);
        }
    }
};

// Q6_K: unit j of super-block b: c = j / 4 (128-element half), l0 = 8 (j % 4); its 32 weights are
// elements 256b + 128c + 32s + l0 + (0..7), s = 0..3, with
// q = ((ql[64c + 32(s%2) + l] >> 4(s/2)) & 15) | (((qh[32c + l] >> 2s) & 3) << 4),
// W = (d * scales[8c + 2s + l0/16]) * (q - 32).
template <int NR>
struct Q6K {
    static const int ELEMS = 256, BYTES = 210, UNITS = 8;
    unsigned lo[NR][2], hi[NR][2], qh[NR][2];
    float dl[NR][4];
    __device__ __forceinline__ void load(const u8* const* rows, int b, int j) {
        const int c = j >> 2, l0 = 8 * (j & 3);
#pragma unroll
        for (int i = 0; i < NR; i++) {
            const u8* p = rows[i] + (long long)b * BYTES;
            lo[i][0] = qg_w2(p + 64 * c + l0); lo[i][1] = qg_w2(p + 64 * c + l0 + 4);
            hi[i][0] = qg_w2(p + 64 * c + 32 + l0); hi[i][1] = qg_w2(p + 64 * c + 32 + l0 + 4);
            qh[i][0] = qg_w2(p + 128 + 32 * c + l0); qh[i][1] = qg_w2(p + 128 + 32 * c + l0 + 4);
            const float d = qg_f16(__ldg((const unsigned short*)(p + 208)));
            const u8* sc = p + 192 + 8 * c + (l0 >> 4);
#pragma unroll
            for (int s = 0; s < 4; s++) dl[i][s] = d * (float)(signed char)__ldg(sc + 2 * s);
        }
    }
    template <int R>
    __device__ __forceinline__ void dot(const T* const* xr, int b, int j, float (&acc)[R][NR]) const {
        const int e = 256 * b + 128 * (j >> 2) + 8 * (j & 3);
#pragma unroll
        for (int r = 0; r < R; r++) {
#pragma unroll
            for (int s = 0; s < 4; s++) {
                float a[8];
                qg_x8(xr[r] + e + 32 * s, a);
                const float xs = qg_sum8(a);
#pragma unroll
                for (int i = 0; i < NR; i++) {
                    float sum = 0.f;
#pragma unroll
                    for (int t = 0; t < 2; t++) {
                        const unsigned l = (s & 1) ? hi[i][t] : lo[i][t];
                        const unsigned v = ((l >> (4 * (s >> 1))) & 0x0f0f0f0fu) | (((qh[i][t] >> (2 * s)) & 0x03030303u) << 4);
                        sum = qg_dot4(v, a + 4 * t, sum);
                    }
                    acc[r][i] += dl[i][s] * (sum - 160.f * xs);
                }
            }
        }
    }
};

// Q8_0: a unit is a block: f16 d, 32 signed bytes; W = q * d.
template <int NR>
struct Q80 {
    static const int ELEMS = 32, BYTES = 34, UNITS = 1;
    unsigned q[NR][8];
    float d[NR];
    __device__ __forceinline__ void load(const u8* const* rows, int b, int) {
#pragma unroll
        for (int i = 0; i < NR; i++) {
            const u8* p = rows[i] + (long long)b * BYTES;
            d[i] = qg_f16(__ldg((const unsigned short*)p));
#pragma unroll
            for (int t = 0; t < 8; t++) q[i][t] = qg_w2(p + 2 + 4 * t);
        }
    }
    template <int R>
    __device__ __forceinline__ void dot(const T* const* xr, int b, int, float (&acc)[R][NR]) const {
#pragma unroll
        for (int r = 0; r < R; r++) {
            float sum[NR];
#pragma unroll
            for (int i = 0; i < NR; i++) sum[i] = 0.f;
#pragma unroll
            for (int g = 0; g < 4; g++) {
                float a[8];
                qg_x8(xr[r] + 32 * b + 8 * g, a);
#pragma unroll
                for (int i = 0; i < NR; i++) {
#pragma unroll
                    for (int t = 0; t < 2; t++) {
                        // 2^23 + 128 + q exactly (q's sign bit flipped into the mantissa), minus the magic
                        const unsigned v = q[i][2 * g + t] ^ 0x80808080u;
#pragma unroll
                        for (int k = 0; k < 4; k++) {
                            const float f = __uint_as_float(__byte_perm(v, 0x4b000000u, 0x7440u | k)) - 8388736.f;
                            sum[i] = fmaf(a[4 * t + k], f, sum[i]);
                        }
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < NR; i++) acc[r][i] += d[i] * sum[i];
        }
    }
};

// Q4_0: a unit is a block: f16 d, 16 bytes; byte l holds elements l (low nibble) and l + 16;
// W = (q - 8) * d.
template <int NR>
struct Q40 {
    static const int ELEMS = 32, BYTES = 18, UNITS = 1;
    unsigned q[NR][4];
    float d[NR];
    __device__ __forceinline__ void load(const u8* const* rows, int b, int) {
#pragma unroll
        for (int i = 0; i < NR; i++) {
            const u8* p = rows[i] + (long long)b * BYTES;
            d[i] = qg_f16(__ldg((const unsigned short*)p));
#pragma unroll
            for (int t = 0; t < 4; t++) q[i][t] = qg_w2(p + 2 + 4 * t);
        }
    }
    template <int R>
    __device__ __forceinline__ void dot(const T* const* xr, int b, int, float (&acc)[R][NR]) const {
#pragma unroll
        for (int r = 0; r < R; r++) {
            float sum[NR], xs = 0.f;
#pragma unroll
            for (int i = 0; i < NR; i++) sum[i] = 0.f;
#pragma unroll
            for (int g = 0; g < 2; g++) {
                float a[8], z[8];
                qg_x8(xr[r] + 32 * b + 8 * g, a);
                qg_x8(xr[r] + 32 * b + 16 + 8 * g, z);
                xs += qg_sum8(a) + qg_sum8(z);
#pragma unroll
                for (int i = 0; i < NR; i++) {
                    const unsigned w0 = q[i][2 * g], w1 = q[i][2 * g + 1];
                    sum[i] = qg_dot4(w0 & 0x0f0f0f0fu, a, sum[i]);
                    sum[i] = qg_dot4(w1 & 0x0f0f0f0fu, a + 4, sum[i]);
                    sum[i] = qg_dot4((w0 >> 4) & 0x0f0f0f0fu, z, sum[i]);
                    sum[i] = qg_dot4((w1 >> 4) & 0x0f0f0f0fu, z + 4, sum[i]);
                }
            }
#pragma unroll
            for (int i = 0; i < NR; i++) acc[r][i] += d[i] * (sum[i] - 136.f * xs);
        }
    }
};

// x: R rows of K values of T, row stride ldx (16-byte-aligned rows); y: R rows of N values of T,
// row stride ldy; w: N rows of K / ELEMS blocks. Grid: ceil(N / NR) blocks of up to 256 threads.
template <template <int> class Q, int R, int NR>
__device__ __forceinline__ void quant_gemv(const u8* __restrict__ w, const T* __restrict__ x, T* __restrict__ y, int N, int K, long long ldx, long long ldy) {
    typedef Q<NR> U;
    __shared__ float red[QG_MAXW][R * NR];
    qg_pdl_start();
    qg_pdl_wait();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const int n0 = blockIdx.x * NR;
    const long long row_bytes = (long long)(K / U::ELEMS) * U::BYTES;
    const u8* rows[NR];
#pragma unroll
    for (int i = 0; i < NR; i++) rows[i] = w + (long long)min(n0 + i, N - 1) * row_bytes;  // rows past N repeat row N-1, unwritten
    const T* xr[R];
#pragma unroll
    for (int r = 0; r < R; r++) xr[r] = x + r * ldx;
    float acc[R][NR];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < NR; i++) acc[r][i] = 0.f;

    const int units = (K / U::ELEMS) * U::UNITS;
    for (int u = tid; u < units; u += blockDim.x) {
        const int b = u / U::UNITS, j = u - b * U::UNITS;
        U unit;
        unit.load(rows, b, j);
        unit.template dot<R>(xr, b, j, acc);
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < NR; i++) {
            float v = acc[r][i];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) red[warp][r * NR + i] = v;
        }
    __syncthreads();
    if (tid < R * NR) {
        const int r = tid / NR, i = tid - r * NR;
        float v = 0.f;
        for (int k = 0; k < nw; k++) v += red[k][tid];
        if (n0 + i < N) y[r * ldy + n0 + i] = Ty<T>::st(v);
    }
}

#define QG_KERNEL(NAME, Q, R) \
    extern "C" __global__ void __launch_bounds__(32 * QG_MAXW) NAME##_r##R(const u8* w, const T* x, T* y, int N, int K, long long ldx, long long ldy) { \
        quant_gemv<Q, R, QG_NR(R)>(w, x, y, N, K, ldx, ldy); \
    }
#define QG_KERNELS(NAME, Q) \
    extern "C" __global__ void __launch_bounds__(32 * QG_MAXW) NAME##_r1w8(const u8* w, const T* x, T* y, int N, int K, long long ldx, long long ldy) { \
        quant_gemv<Q, 1, 8>(w, x, y, N, K, ldx, ldy); \
    } \
    QG_KERNEL(NAME, Q, 1) QG_KERNEL(NAME, Q, 2) QG_KERNEL(NAME, Q, 3) QG_KERNEL(NAME, Q, 4) \
    QG_KERNEL(NAME, Q, 5) QG_KERNEL(NAME, Q, 6) QG_KERNEL(NAME, Q, 7) QG_KERNEL(NAME, Q, 8)

QG_KERNELS(quant_gemv_q4_k, Q4K)
QG_KERNELS(quant_gemv_q6_k, Q6K)
QG_KERNELS(quant_gemv_q8_0, Q80)
QG_KERNELS(quant_gemv_q4_0, Q40)

// ---- Q4_K with 8-bit activations (f16 / bf16 x; f32 x keeps the exact products above).
// llama.cpp's arithmetic, in this file's layout: each thread block first rounds x to 8-bit codes
// per 32 values (scale s = amax / 127, code = rint(x * 127 / amax)) in shared memory, with the
// f32 sum of the 32 values (for the minimum term); then 4 weights x 4 codes per `dp4a`, an integer
// dot product per 32-weight sub-block, and per sub-block
//   y += (d * sc) * s * sum(q_w * q_x) - (dmin * m) * sum(x),
// ~1.2 instructions per weight instead of ~3.3 (3 logic ops per 8 weights to split the nibbles,
// no float per weight). Error: |x - s * q_x| <= s / 2 per activation (docs/gguf.md).
// Grid: persistent (the host sizes it: 1-2 blocks per SM). Warps form teams of S (1, 2 or 4; split
// K): a team takes QK_NR = 2 weight rows at a time (a "row group"; groups strided over the grid's
// teams), its warps the row's 2048-weight chunks in turn (chunk c to warp c % S), each lane a
// chunk's 64-weight unit; the team's partial sums meet in shared memory behind a named barrier,
// in a fixed order (deterministic). S > 1 gives every warp work when the matrix has fewer row
// groups than the grid has warps (the K = 8192 `down` shape). The next step's weights are loaded
// before the current step's arithmetic, and the first step's before waiting for the previous
// kernel (PDL), so that in a chain of GEMVs one kernel's weight fetch overlaps the previous one's
// tail. Up to three matrices of the same K share one launch (and one coding of x): q|k|v,
// gate|up; their row groups are numbered one after the other.
// Shared memory: R x K / 64 records of 80 bytes (64 codes, then s and sum(x) of the unit's two
// sub-blocks); the 20-word stride keeps the 16-byte reads of 8 consecutive lanes on distinct banks.

#define QK_NR 2
#define QK_WARPS 8
#define QK_REC 80

extern __shared__ uint4 qk_smem[];

__device__ __forceinline__ int qk_dp4a(unsigned a, unsigned b, int c) {
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// 4 codes (ints in -127..127) as the bytes of one word
__device__ __forceinline__ unsigned qk_pack(int a, int b, int c, int d) {
    return __byte_perm(__byte_perm((unsigned)a, (unsigned)b, 0x0040u), __byte_perm((unsigned)c, (unsigned)d, 0x0040u), 0x5410u);
}

// unit u (super-block u / 4, its 32-byte nibble slice u % 4, and the header) of the rows
// row0, row0 + 1 of a matrix of n rows, clamped to it (callers ignore what they did not ask for)
struct QKW {
    uint4 h[QK_NR], qa[QK_NR], qb[QK_NR];
    __device__ __forceinline__ void load(const u8* w, long long row_bytes, int n, int row0, int u) {
#pragma unroll
        for (int i = 0; i < QK_NR; i++) {
            const long long row = min(row0 + i, n - 1);
            const u8* p = w + row * row_bytes + (long long)(u >> 2) * 144;
            h[i] = __ldg((const uint4*)p);
            qa[i] = __ldg((const uint4*)(p + 16 + 32 * (u & 3)));
            qb[i] = __ldg((const uint4*)(p + 32 + 32 * (u & 3)));
        }
    }
};

// QKW for one matrix of N rows, row group g (rows 2g, 2g + 1)
struct QKW1 {
    uint4 h[QK_NR], qa[QK_NR], qb[QK_NR];
    __device__ __forceinline__ void load(const u8* w, long long row_bytes, int N, int g, int u) {
#pragma unroll
        for (int i = 0; i < QK_NR; i++) {
            const long long row = min((long long)QK_NR * g + i, (long long)N - 1);
            const u8* p = w + row * row_bytes + (long long)(u >> 2) * 144;
            h[i] = __ldg((const uint4*)p);
            qa[i] = __ldg((const uint4*)(p + 16 + 32 * (u & 3)));
            qb[i] = __ldg((const uint4*)(p + 32 + 32 * (u & 3)));
        }
    }
};

// The (up to three) matrices of one launch: W_i [n_i, K] and y_i (R rows, stride ldy); row group g
// is group g of matrix 0, then of matrix 1 from g0 = ceil(n_0 / 2) on, then of matrix 2 from g1.
struct QKParts {
    const u8 *w0, *w1, *w2;
    T *y0, *y1, *y2;
    int n0, n1, n2;
    int g0, g1;
    // matrix of group g (selected without indexing, which would put the fields in local memory)
    // and its first row
    __device__ __forceinline__ int find(int g, int& row0) const {
        const int p = g < g0 ? 0 : (g < g1 ? 1 : 2);
        row0 = QK_NR * (g - (p == 0 ? 0 : (p == 1 ? g0 : g1)));
        return p;
    }
    __device__ __forceinline__ const u8* w(int p) const { return p == 0 ? w0 : (p == 1 ? w1 : w2); }
    __device__ __forceinline__ T* y(int p) const { return p == 0 ? y0 : (p == 1 ? y1 : y2); }
    __device__ __forceinline__ int n(int p) const { return p == 0 ? n0 : (p == 1 ? n1 : n2); }
};

// acc[r][i] += unit u of row i . x row r (its codes in the shared-memory records)
template <int R, class W>
__device__ __forceinline__ void qk_dot(const W& L, const u8* sm, int U, int u, float (&acc)[R][QK_NR]) {
    const int j = u & 3;
    // byte selectors of sub-blocks 2j, 2j + 1 within the packed scale words, as 2^23 + byte
    const unsigned s0 = 0x7440u | (unsigned)(2 * (j & 1)), s1 = s0 + 1;
    float d1[QK_NR], d2[QK_NR], m1[QK_NR], m2[QK_NR];
    unsigned lo[QK_NR][8], hi[QK_NR][8];
#pragma unroll
    for (int i = 0; i < QK_NR; i++) {
        const uint4 h = L.h[i];
        const float d = qg_f16(h.x), dmin = qg_f16(h.x >> 16);
        const unsigned sw = j < 2 ? (h.y & 0x3f3f3f3fu) : ((h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u));
        const unsigned mw = j < 2 ? (h.z & 0x3f3f3f3fu) : (((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u));
        d1[i] = d * (__uint_as_float(__byte_perm(sw, 0x4b000000u, s0)) - 8388608.f);
        d2[i] = d * (__uint_as_float(__byte_perm(sw, 0x4b000000u, s1)) - 8388608.f);
        m1[i] = dmin * (__uint_as_float(__byte_perm(mw, 0x4b000000u, s0)) - 8388608.f);
        m2[i] = dmin * (__uint_as_float(__byte_perm(mw, 0x4b000000u, s1)) - 8388608.f);
        const unsigned q[8] = {L.qa[i].x, L.qa[i].y, L.qa[i].z, L.qa[i].w, L.qb[i].x, L.qb[i].y, L.qb[i].z, L.qb[i].w};
#pragma unroll
        for (int t = 0; t < 8; t++) {
            lo[i][t] = q[t] & 0x0f0f0f0fu;         // sub-block 2j, elements 4t..4t+3
            hi[i][t] = (q[t] >> 4) & 0x0f0f0f0fu;  // sub-block 2j + 1
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const uint4* rec = (const uint4*)(sm + ((long long)r * U + u) * QK_REC);
        const uint4 x0 = rec[0], x1 = rec[1], x2 = rec[2], x3 = rec[3];
        const float4 f = *(const float4*)(rec + 4);  // s of 2j, 2j + 1; sum(x) of 2j, 2j + 1
        const unsigned xl[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const unsigned xh[8] = {x2.x, x2.y, x2.z, x2.w, x3.x, x3.y, x3.z, x3.w};
#pragma unroll
        for (int i = 0; i < QK_NR; i++) {
            int a = 0, b = 0;
#pragma unroll
            for (int t = 0; t < 8; t++) {
                a = qk_dp4a(lo[i][t], xl[t], a);
                b = qk_dp4a(hi[i][t], xh[t], b);
            }
            acc[r][i] += ((d1[i] * f.x) * (float)a - m1[i] * f.z) + ((d2[i] * f.y) * (float)b - m2[i] * f.w);
        }
    }
}

// One matrix, no split: the form before the parts and the split, kept as it was (the general
// form, compiled for one matrix, takes 465 instructions per step of the one-row LM head against
// 299 here, and measured 20% slower there).
// x: R rows of K values of T (f16 / bf16), row stride ldx (16-byte-aligned rows); y: R rows of N
// values, row stride ldy; w: N rows of K / 256 Q4_K blocks (16-byte aligned). Grid: at most two
// blocks of 256 threads per SM; R * K / 64 * 80 bytes of dynamic shared memory.
template <int R>
__device__ __forceinline__ void qk8_gemv1(const u8* __restrict__ w, const T* __restrict__ x, T* __restrict__ y, int N, int K, long long ldx, long long ldy) {
    u8* sm = (u8*)qk_smem;
    const int lane = threadIdx.x & 31;
    const int U = K >> 6, C = (U + 31) >> 5, G = (N + QK_NR - 1) / QK_NR;
    const int TW = gridDim.x * QK_WARPS, gw = blockIdx.x * QK_WARPS + (threadIdx.x >> 5);
    const int steps = gw < G ? ((G - 1 - gw) / TW + 1) * C : 0;  // warp-uniform
    const long long row_bytes = (long long)(K >> 8) * 144;
    qg_pdl_start();
    // the first step's weights are in flight while the previous kernel finishes and x is coded
    int g = gw, c = 0;
    QKW1 cur;
    cur.load(w, row_bytes, N, g, min(lane, U - 1));
    qg_pdl_wait();
    const int per_row = K >> 3;  // 8-value pieces per x row; a multiple of 32, so warps stay whole
    for (int it = threadIdx.x; it < R * per_row; it += blockDim.x) {
        const int r = it / per_row, e = (it - r * per_row) << 3;
        float v[8];
        qg_x8(x + r * ldx + e, v);
        float a = 0.f;
#pragma unroll
        for (int k = 0; k < 8; k++) a = fmaxf(a, fabsf(v[k]));
        float s = qg_sum8(v);
        // the 4 lanes of a 32-value group
        a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
        a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        const float inv = a > 0.f ? 127.f / a : 0.f;
        int q[8];
#pragma unroll
        for (int k = 0; k < 8; k++) q[k] = __float2int_rn(v[k] * inv);
        u8* rec = sm + ((long long)r * U + (e >> 6)) * QK_REC;
        *(uint2*)(rec + (e & 63)) = make_uint2(qk_pack(q[0], q[1], q[2], q[3]), qk_pack(q[4], q[5], q[6], q[7]));
        if ((e & 31) == 0) {
            const int h = (e >> 5) & 1;
            ((float*)(rec + 64))[h] = a / 127.f + (s - s);  // NaN unless the 32 values are finite
            ((float*)(rec + 72))[h] = s;
        }
    }
    __syncthreads();
    float acc[R][QK_NR];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < QK_NR; i++) acc[r][i] = 0.f;
    for (int st = 0; st < steps; st++) {
        int gn = g, cn = c + 1;
        if (cn == C) { cn = 0; gn += TW; }
        QKW1 nxt;
        nxt.load(w, row_bytes, N, gn, min(32 * cn + lane, U - 1));
        const int u = 32 * c + lane;
        if (u < U) qk_dot<R>(cur, sm, U, u, acc);
        if (c == C - 1) {
            float v = 0.f;
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < QK_NR; i++) {
                    float t = acc[r][i];
#pragma unroll
                    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
                    if (lane == r * QK_NR + i) v = t;
                    acc[r][i] = 0.f;
                }
            const int r = lane / QK_NR, n = QK_NR * g + (lane - r * QK_NR);
            if (lane < R * QK_NR && n < N) y[r * ldy + n] = Ty<T>::st(v);
        }
        cur = nxt; g = gn; c = cn;
    }
}

__device__ __forceinline__ void qk_team_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// x: R rows of K values of T (f16 / bf16), row stride ldx (16-byte-aligned rows); y_i: R rows of
// n_i values, row stride ldy; w_i: n_i rows of K / 256 Q4_K blocks (16-byte aligned). Block: a
// multiple of S warps, at most QK_WARPS; S divides ceil(K / 2048). Dynamic shared memory: R * K /
// 64 * 80 bytes of codes, then 64 bytes per warp for the split-K partial sums.
template <int R>
__device__ __forceinline__ void qk8_gemv(const QKParts& P, const T* __restrict__ x, int K, long long ldx, long long ldy, int S) {
    u8* sm = (u8*)qk_smem;
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, NW = blockDim.x >> 5;
    const int U = K >> 6, C = (U + 31) >> 5, G = P.g1 + (P.n2 + QK_NR - 1) / QK_NR;
    const int TB = NW / S, team = wib / S, ws = wib - team * S, CW = C / S;
    const int TT = gridDim.x * TB, gt = blockIdx.x * TB + team;
    const int steps = gt < G ? ((G - 1 - gt) / TT + 1) * CW : 0;  // team-uniform
    const long long row_bytes = (long long)(K >> 8) * 144;
    qg_pdl_start();
    // the first step's weights are in flight while the previous kernel finishes and x is coded
    int g = gt, cc = 0, row0 = 0, p = 0;
    QKW cur;
    if (steps > 0) {
        p = P.find(g, row0);
        cur.load(P.w(p), row_bytes, P.n(p), row0, min(32 * ws + lane, U - 1));
    }
    qg_pdl_wait();
    // x's codes: 8-value pieces, XB per thread loaded before any is used (one round trip for
    // K <= 8192 with one row); a row's pieces are a multiple of 32, so warps stay whole
    constexpr int XB = R == 1 ? 4 : 1;
    const int per_row = K >> 3, total = R * per_row;
    for (int base = threadIdx.x; base < total; base += XB * blockDim.x) {
        float v[XB][8];
#pragma unroll
        for (int j = 0; j < XB; j++) {
            const int it = base + j * blockDim.x;
            if (it < total) {
                const int r = it / per_row;
                qg_x8(x + r * ldx + ((it - r * per_row) << 3), v[j]);
            }
        }
#pragma unroll
        for (int j = 0; j < XB; j++) {
            const int it = base + j * blockDim.x;
            if (it >= total) break;  // warp-uniform
            const int r = it / per_row, e = (it - r * per_row) << 3;
            float a = 0.f;
#pragma unroll
            for (int k = 0; k < 8; k++) a = fmaxf(a, fabsf(v[j][k]));
            float s = qg_sum8(v[j]);
            // the 4 lanes of a 32-value group
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            const float inv = a > 0.f ? 127.f / a : 0.f;
            int q[8];
#pragma unroll
            for (int k = 0; k < 8; k++) q[k] = __float2int_rn(v[j][k] * inv);
            u8* rec = sm + ((long long)r * U + (e >> 6)) * QK_REC;
            *(uint2*)(rec + (e & 63)) = make_uint2(qk_pack(q[0], q[1], q[2], q[3]), qk_pack(q[4], q[5], q[6], q[7]));
            if ((e & 31) == 0) {
                const int h = (e >> 5) & 1;
                ((float*)(rec + 64))[h] = a / 127.f + (s - s);  // NaN unless the 32 values are finite
                ((float*)(rec + 72))[h] = s;
            }
        }
    }
    __syncthreads();
    float* red = (float*)(sm + (long long)R * U * QK_REC);  // [warp][R * QK_NR] partial sums
    float acc[R][QK_NR];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < QK_NR; i++) acc[r][i] = 0.f;
    for (int st = 0; st < steps; st++) {
        int gn = g, cn = cc + 1, pn = p, rn = row0;
        if (cn == CW) {
            cn = 0;
            gn += TT;
            if (gn < G) pn = P.find(gn, rn);
        }
        QKW nxt;
        if (gn < G) nxt.load(P.w(pn), row_bytes, P.n(pn), rn, min(32 * (ws + S * cn) + lane, U - 1));
        const int u = 32 * (ws + S * cc) + lane;
        if (u < U) qk_dot<R>(cur, sm, U, u, acc);
        if (cc == CW - 1) {
            float v = 0.f;
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < QK_NR; i++) {
                    float t = acc[r][i];
#pragma unroll
                    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
                    if (lane == r * QK_NR + i) v = t;
                    acc[r][i] = 0.f;
                }
            if (S > 1) {
                // the team's S partial sums, added in warp order by its first warp
                if (lane < R * QK_NR) red[wib * 16 + lane] = v;
                qk_team_sync(1 + team, 32 * S);
                if (ws == 0 && lane < R * QK_NR) {
                    v = 0.f;
                    for (int o = 0; o < S; o++) v += red[(wib + o) * 16 + lane];
                }
            }
            const int r = lane / QK_NR, n = row0 + (lane - r * QK_NR);
            if (ws == 0 && lane < R * QK_NR && n < P.n(p)) {
                P.y(p)[r * ldy + n] = Ty<T>::st(v);
            }
            if (S > 1) qk_team_sync(1 + team, 32 * S);  // red is reused by the next group
        }
        if (gn < G) cur = nxt;
        g = gn; cc = cn; p = pn; row0 = rn;
    }
}

// quant_gemv_q4_k_q8_r<R>: one matrix, S = 1; quant_gemv_q4_k_q8m_r<R>: up to three, any S
#define QK_KERNEL(R) \
    extern "C" __global__ void __launch_bounds__(32 * QK_WARPS, 2) quant_gemv_q4_k_q8_r##R(const u8* w, const T* x, T* y, int N, int K, long long ldx, long long ldy) { \
        qk8_gemv1<R>(w, x, y, N, K, ldx, ldy); \
    } \
    extern "C" __global__ void __launch_bounds__(32 * QK_WARPS, 2) quant_gemv_q4_k_q8m_r##R(const u8* w0, const u8* w1, const u8* w2, T* y0, T* y1, T* y2, int n0, int n1, int n2, const T* x, int K, long long ldx, long long ldy, int S) { \
        QKParts P; \
        P.w0 = w0; P.w1 = w1; P.w2 = w2; P.y0 = y0; P.y1 = y1; P.y2 = y2; \
        P.n0 = n0; P.n1 = n1; P.n2 = n2; \
        P.g0 = (n0 + QK_NR - 1) / QK_NR; P.g1 = P.g0 + (n1 + QK_NR - 1) / QK_NR; \
        qk8_gemv<R>(P, x, K, ldx, ldy, S); \
    }
QK_KERNEL(1) QK_KERNEL(2) QK_KERNEL(3) QK_KERNEL(4) QK_KERNEL(5) QK_KERNEL(6) QK_KERNEL(7) QK_KERNEL(8)

// ---- dequantization: out[n, k] = W[n, k] as T, bit-exact with the CPU dequantizer (and ggml)
// before the rounding to T. One thread per run of 32 elements (a Q8_0 / Q4_0 block, a K-quant
// sub-block); products and differences are explicitly rounded (no FMA contraction), in the
// CPU's order.

__device__ __forceinline__ float qd_mul(float a, float b) { return __fmul_rn(a, b); }

extern "C" __global__ void quant_dequant_q8_0(const u8* __restrict__ w, T* __restrict__ out, long long runs) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= runs) return;
    const u8* p = w + t * 34;
    const float d = qg_f16((unsigned)p[0] | ((unsigned)p[1] << 8));
    T* o = out + t * 32;
    for (int l = 0; l < 32; l++) o[l] = Ty<T>::st(qd_mul((float)(signed char)p[2 + l], d));
}

extern "C" __global__ void quant_dequant_q4_0(const u8* __restrict__ w, T* __restrict__ out, long long runs) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= runs) return;
    const u8* p = w + t * 18;
    const float d = qg_f16((unsigned)p[0] | ((unsigned)p[1] << 8));
    T* o = out + t * 32;
    for (int l = 0; l < 16; l++) {
        o[l] = Ty<T>::st(qd_mul((float)((int)(p[2 + l] & 15) - 8), d));
        o[l + 16] = Ty<T>::st(qd_mul((float)((int)(p[2 + l] >> 4) - 8), d));
    }
}

// run t: super-block t / 8, sub-block s = t % 8 (elements 32s..32s+31)
extern "C" __global__ void quant_dequant_q4_k(const u8* __restrict__ w, T* __restrict__ out, long long runs) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= runs) return;
    const int s = (int)(t & 7);
    const u8* p = w + (t >> 3) * 144;
    const float d = qg_f16((unsigned)p[0] | ((unsigned)p[1] << 8)), dmin = qg_f16((unsigned)p[2] | ((unsigned)p[3] << 8));
    const u8* sc = p + 4;
    unsigned scale, mn;
    if (s < 4) { scale = sc[s] & 63; mn = sc[s + 4] & 63; }
    else { scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4); mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4); }
    const float d1 = qd_mul(d, (float)scale), m1 = qd_mul(dmin, (float)mn);
    const u8* q = p + 16 + 32 * (s >> 1);
    const int sh = 4 * (s & 1);
    T* o = out + t * 32;
    for (int l = 0; l < 32; l++) o[l] = Ty<T>::st(__fsub_rn(qd_mul(d1, (float)((q[l] >> sh) & 15)), m1));
}

// run t: super-block t / 8, c = (t % 8) / 4, s = t % 4 (elements 128c + 32s .. + 31)
extern "C" __global__ void quant_dequant_q6_k(const u8* __restrict__ w, T* __restrict__ out, long long runs) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= runs) return;
    const int c = (int)((t >> 2) & 1), s = (int)(t & 3);
    const u8* p = w + (t >> 3) * 210;
    const float d = qg_f16((unsigned)p[208] | ((unsigned)p[209] << 8));
    const u8* lo = p + 64 * c + 32 * (s & 1);
    const u8* hi = p + 128 + 32 * c;
    const int shl = 4 * (s >> 1), shh = 2 * s;
    T* o = out + t * 32;
    for (int half = 0; half < 2; half++) {
        const float dl = qd_mul(d, (float)(signed char)p[192 + 8 * c + 2 * s + half]);
        for (int l = 16 * half; l < 16 * half + 16; l++) {
            const int q = ((lo[l] >> shl) & 15) | (((hi[l] >> shh) & 3) << 4);
            o[l] = Ty<T>::st(qd_mul(dl, (float)(q - 32)));
        }
    }
}

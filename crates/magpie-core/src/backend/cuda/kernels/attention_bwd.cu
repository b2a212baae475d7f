// Flash attention backward (after the preamble, kcommon.cuh and attention_common.cuh; T is the
// element type, one module per dtype). FlashAttention-2's split, with nothing of size
// q_len x kv_len in memory: the forward saved the log2-sum-exp of each query row (`lse`), so
// P = exp2(s * scale_log2 - lse) is recomputed tile by tile.
//   flash_bwd_delta                         delta_i = sum_d dO[i,d] O[i,d] (f32, per query row)
//   flash_bwd_delta_d64 / _d128             the same with 16-byte loads (the tensor-core path)
//   flash_bwd_kv_tc_d64 / _d128             dK, dV: a block per key tile of one kv head; it walks
//                                           every query tile of every query head of its group, so
//                                           GQA needs no reduction afterwards (T = bf16_t / half_t)
//   flash_bwd_q_tc_d64 / _d128              dQ: a block per query tile, walking the key tiles
//   flash_bwd_kv_generic / flash_bwd_q_generic   the same two passes in f32 scalar math, any
//                                           head_dim <= 256 and any of f32 / f16 / bf16
// With dS = P * (dP - delta), dP = dO V^T:  dV = P^T dO,  dK = scale dS^T Q,  dQ = scale dS K.
// Two passes instead of atomics on dQ: deterministic, and no f32 dQ buffer.
// The tensor-core kernels take their blocks longest first (fb_block): under a causal mask the
// work of a block is its tile's share of the triangle, and a long block started last sets the
// kernel's end while the other SMs idle.

struct FbParams {
    int batch, n_heads, n_kv_heads, head_dim;
    int q_len, kv_len;
    int causal;  // 0 none, 1 top-left, 2 bottom-right
    float scale_log2;
    FaOpnd q, k, v, o, dout, dq, dk, dv;
    u64 lse;    // f32[batch * n_heads * q_len], log2 domain (+inf: the row saw no key)
    u64 delta;  // f32[batch * n_heads * q_len]
    float scale;
    int pad;
};

// delta_i = dO_i . O_i: a warp per query row.
extern "C" __global__ void __launch_bounds__(256) flash_bwd_delta(const FbParams p) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const i64 row = (i64)blockIdx.x * 8 + warp;
    const i64 rows = (i64)p.batch * p.n_heads * p.q_len;
    if (row >= rows) return;
    const int i = (int)(row % p.q_len);
    const int h = (int)((row / p.q_len) % p.n_heads);
    const int b = (int)(row / ((i64)p.q_len * p.n_heads));
    const T* O = (const T*)p.o.ptr + (i64)b * p.o.sb + (i64)h * p.o.sh + (i64)i * p.o.ss;
    const T* G = (const T*)p.dout.ptr + (i64)b * p.dout.sb + (i64)h * p.dout.sh + (i64)i * p.dout.ss;
    float a = 0.f;
    for (int d = lane; d < p.head_dim; d += 32) a = fmaf(Ty<T>::ld(O[d]), Ty<T>::ld(G[d]), a);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
    if (lane == 0) ((float*)p.delta)[row] = a;
}

// delta with 16-byte loads: D / 8 threads a row (head_dim 64 or 128, 16-byte aligned rows).
template <int D>
__device__ __forceinline__ void flash_bwd_delta_v8(const FbParams& p) {
    constexpr int TPR = D / 8;
    const i64 rows = (i64)p.batch * p.n_heads * p.q_len;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int c = (threadIdx.x % TPR) * 8;
    float a = 0.f;
    if (row < rows) {
        const int i = (int)(row % p.q_len);
        const int h = (int)((row / p.q_len) % p.n_heads);
        const int b = (int)(row / ((i64)p.q_len * p.n_heads));
        const uint4 ov = *(const uint4*)((const T*)p.o.ptr + (i64)b * p.o.sb + (i64)h * p.o.sh + (i64)i * p.o.ss + c);
        const uint4 gv = *(const uint4*)((const T*)p.dout.ptr + (i64)b * p.dout.sb + (i64)h * p.dout.sh + (i64)i * p.dout.ss + c);
        const T* o8 = (const T*)&ov;
        const T* g8 = (const T*)&gv;
#pragma unroll
        for (int j = 0; j < 8; j++) a = fmaf(Ty<T>::ld(o8[j]), Ty<T>::ld(g8[j]), a);
    }
    // the TPR threads of a row are consecutive lanes of one warp
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
    if (c == 0 && row < rows) ((float*)p.delta)[row] = a;
}
extern "C" __global__ void __launch_bounds__(256) flash_bwd_delta_d64(const FbParams p) { flash_bwd_delta_v8<64>(p); }
extern "C" __global__ void __launch_bounds__(256) flash_bwd_delta_d128(const FbParams p) { flash_bwd_delta_v8<128>(p); }

// Block (tile, head, batch) of a tensor-core kernel whose grid is (tiles, heads, batch): the
// linear block index walks tiles slowest, so every head's first tile starts before any second
// tile; `tile` counts from the longest (the caller maps it to its tile order).
struct FbBlock { int tile, head, b; };
__device__ __forceinline__ FbBlock fb_block() {
    const i64 nhb = (i64)gridDim.y * gridDim.z;
    const i64 lin = blockIdx.x + (i64)gridDim.x * (blockIdx.y + (i64)gridDim.y * blockIdx.z);
    const i64 rem = lin % nhb;
    return FbBlock{(int)(lin / nhb), (int)(rem % gridDim.y), (int)(rem / gridDim.y)};
}

// The first query tile start that can see keys from key0 on (the backward has no per-sequence key counts).
__device__ __forceinline__ int fb_first_query(const FbParams& p, int key0) {
    // the first query row that sees key key0: i + off >= key0
    if (!p.causal) return 0;
    const int off = p.causal == 2 ? p.kv_len - p.q_len : 0;
    return max(0, key0 - off);
}

// ---------------------------------------------------------------------------------------------
// Tensor cores. Both kernels keep their resident tile (K and V, or Q and dO) in shared memory and
// stream the other operand pair through a double buffer (cp.async); every product is an
// mma.m16n8k16 whose operands come from ldmatrix (rows XOR-swizzled in 16-byte chunks, as in the
// forward). Each of the 4 warps owns 16 rows of the resident tile.
// ---------------------------------------------------------------------------------------------

// Rows [r0, r0 + n) of a [.., D] operand into swizzled shared memory (zeros past `valid`).
template <int D>
__device__ __forceinline__ void fb_load_tile(unsigned short* dst, const unsigned short* src, i64 ss, int r0, int n, int valid, int tid, int nt) {
    constexpr int CH = D / 8;
    for (int c = tid; c < n * CH; c += nt) {
        int r = c / CH, ch = c % CH;
        bool ok = r0 + r < valid;
        fa_cp16(dst + r * D + ((ch ^ (r & 7)) * 8), ok ? (const void*)(src + (i64)(r0 + r) * ss + ch * 8) : (const void*)src, ok ? 16 : 0);
    }
}

// acc[16 x N] (N = 8 * NB) += A[16 rows of sa at row a0] * B^T where B's rows are [b0, b0 + N) of sb
// (both [.., D] swizzled): the "S = Q K^T" shape.
template <int D, int NB, bool BF>
__device__ __forceinline__ void fb_mma_abt(float (*acc)[4], const unsigned short* sa, int a0, const unsigned short* sb, int b0, int lane) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        unsigned af[4];
        {
            int r = a0 + (lane & 15), ch = ks * 2 + (lane >> 4);
            fa_ldsm4(af, sa + r * D + ((ch ^ (r & 7)) * 8));
        }
#pragma unroll
        for (int np = 0; np < NB / 2; np++) {
            unsigned kb[4];
            int r = b0 + np * 16 + ((lane >> 4) << 3) + (lane & 7), ch = ks * 2 + ((lane >> 3) & 1);
            fa_ldsm4(kb, sb + r * D + ((ch ^ (r & 7)) * 8));
            fa_mma<BF>(acc[2 * np], af, kb[0], kb[1]);
            fa_mma<BF>(acc[2 * np + 1], af, kb[2], kb[3]);
        }
    }
}

// fb_mma_abt with the A fragments (16 rows x D) already in registers (af[ks], ks < D / 16).
template <int D, int NB, bool BF>
__device__ __forceinline__ void fb_mma_abt_r(float (*acc)[4], const unsigned (*af)[4], const unsigned short* sb, int b0, int lane) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
#pragma unroll
        for (int np = 0; np < NB / 2; np++) {
            unsigned kb[4];
            int r = b0 + np * 16 + ((lane >> 4) << 3) + (lane & 7), ch = ks * 2 + ((lane >> 3) & 1);
            fa_ldsm4(kb, sb + r * D + ((ch ^ (r & 7)) * 8));
            fa_mma<BF>(acc[2 * np], af[ks], kb[0], kb[1]);
            fa_mma<BF>(acc[2 * np + 1], af[ks], kb[2], kb[3]);
        }
    }
}

// The A fragments of rows [a0, a0 + 16) of a [.., D] swizzled tile, as fb_mma_abt loads them.
template <int D>
__device__ __forceinline__ void fb_load_a(unsigned (*af)[4], const unsigned short* sa, int a0, int lane) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
        int r = a0 + (lane & 15), ch = ks * 2 + (lane >> 4);
        fa_ldsm4(af[ks], sa + r * D + ((ch ^ (r & 7)) * 8));
    }
}

// acc[16 x D] += X[16 x 16*KK] (accumulator fragments x, packed to 16-bit here) * sb rows
// [0, 16*KK) ([.., D] swizzled): the "O += P V" shape.
template <int D, int KK, bool BF>
__device__ __forceinline__ void fb_mma_xb(float (*acc)[4], const float (*x)[4], const unsigned short* sb, int lane) {
#pragma unroll
    for (int kk = 0; kk < KK; kk++) {
        unsigned pk[4];
        pk[0] = fa_pack<BF>(x[2 * kk][0], x[2 * kk][1]);
        pk[1] = fa_pack<BF>(x[2 * kk][2], x[2 * kk][3]);
        pk[2] = fa_pack<BF>(x[2 * kk + 1][0], x[2 * kk + 1][1]);
        pk[3] = fa_pack<BF>(x[2 * kk + 1][2], x[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            unsigned vb[4];
            int r = kk * 16 + (lane & 15), ch = dp * 2 + (lane >> 4);
            fa_ldsm4t(vb, sb + r * D + ((ch ^ (r & 7)) * 8));
            fa_mma<BF>(acc[2 * dp], pk, vb[0], vb[1]);
            fa_mma<BF>(acc[2 * dp + 1], pk, vb[2], vb[3]);
        }
    }
}

// Writes a warp's [16 x D] accumulator (times `mul`) to rows r0 + g, r0 + g + 8 of X (rows < n).
template <int D, bool BF>
__device__ __forceinline__ void fb_store(unsigned short* X, i64 ss, int r0, int n, const float (*acc)[4], float mul, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const int row0 = r0 + g, row1 = row0 + 8;
#pragma unroll
    for (int db = 0; db < D / 8; db++) {
        int d = db * 8 + 2 * t;
        if (row0 < n) *(unsigned*)(X + (i64)row0 * ss + d) = fa_pack<BF>(acc[db][0] * mul, acc[db][1] * mul);
        if (row1 < n) *(unsigned*)(X + (i64)row1 * ss + d) = fa_pack<BF>(acc[db][2] * mul, acc[db][3] * mul);
    }
}

// dK, dV for 64 keys of one kv head (4 warps x 16 keys); query tiles of BM rows of every query head
// of the group stream through. In the warp's fragments rows are keys and columns are queries
// (S^T = K Q^T, dP^T = V dO^T), so P^T and dS^T feed dV += P^T dO and dK += dS^T Q directly.
template <int D, int BM, bool BF>
__device__ __forceinline__ void flash_bwd_kv_tc(const FbParams& p) {
    constexpr int BN = 64, NT = 128;
    typedef unsigned short u16;
    u16* sK = (u16*)fa_smem;
    u16* sV = sK + BN * D;
    u16* sQ = sV + BN * D;      // [2][BM * D]
    u16* sG = sQ + 2 * BM * D;  // [2][BM * D]
    float* sL = (float*)(sG + 2 * BM * D);  // [2][BM] lse
    float* sD = sL + 2 * BM;                // [2][BM] delta

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const FbBlock blk = fb_block();  // key tile 0 sees the most queries under a causal mask
    const int kvh = blk.head, b = blk.b;
    const int group = p.n_heads / p.n_kv_heads;
    const int k0 = blk.tile * BN;
    const int off = p.causal == 2 ? p.kv_len - p.q_len : 0;
    const int qstart = (fb_first_query(p, k0) / BM) * BM;
    const int qtiles = qstart < p.q_len ? (p.q_len - qstart + BM - 1) / BM : 0;
    const int steps = group * qtiles;

    const u16* K = (const u16*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
    const u16* V = (const u16*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;
    fb_load_tile<D>(sK, K, p.k.ss, k0, BN, p.kv_len, tid, NT);
    fb_load_tile<D>(sV, V, p.v.ss, k0, BN, p.kv_len, tid, NT);
    fa_cp_commit();  // K and V: their own group, waited for before the first query tile's

    auto load_step = [&](int st, int buf) {
        const int h = kvh * group + st / qtiles;
        const int i0 = qstart + (st % qtiles) * BM;
        const u16* Q = (const u16*)p.q.ptr + (i64)b * p.q.sb + (i64)h * p.q.sh;
        const u16* G = (const u16*)p.dout.ptr + (i64)b * p.dout.sb + (i64)h * p.dout.sh;
        fb_load_tile<D>(sQ + buf * BM * D, Q, p.q.ss, i0, BM, p.q_len, tid, NT);
        fb_load_tile<D>(sG + buf * BM * D, G, p.dout.ss, i0, BM, p.q_len, tid, NT);
        const i64 rb = ((i64)b * p.n_heads + h) * p.q_len;
        for (int r = tid; r < BM; r += NT) {
            bool ok = i0 + r < p.q_len;
            sL[buf * BM + r] = ok ? ((const float*)p.lse)[rb + i0 + r] : FA_POS_INF;
            sD[buf * BM + r] = ok ? ((const float*)p.delta)[rb + i0 + r] : 0.f;
        }
    };
    if (steps > 0) load_step(0, 0);
    fa_cp_commit();

    // at d64 the warp's 16 rows of K and V stay in registers as the A operands of S^T and dP^T
    // (at d128 they would not fit: 255 registers and spills)
    constexpr bool AREG = D == 64;
    unsigned kfr[AREG ? D / 16 : 1][4], vfr[AREG ? D / 16 : 1][4];
    fa_cp_wait<1>();
    __syncthreads();
    if constexpr (AREG) {
        fb_load_a<D>(kfr, sK, warp * 16, lane);
        fb_load_a<D>(vfr, sV, warp * 16, lane);
    }

    const int g = lane >> 2, t = lane & 3;
    const int key0 = k0 + warp * 16 + g, key1 = key0 + 8;
    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.f;

    for (int st = 0; st < steps; st++) {
        if (st + 1 < steps) {
            load_step(st + 1, (st + 1) & 1);
            fa_cp_commit();
            fa_cp_wait<1>();
        } else {
            fa_cp_wait<0>();
        }
        __syncthreads();
        const int buf = st & 1;
        const int i0 = qstart + (st % qtiles) * BM;
        const u16* tq = sQ + buf * BM * D;
        const u16* tg = sG + buf * BM * D;
        float s[BM / 8][4], dp[BM / 8][4];
#pragma unroll
        for (int i = 0; i < BM / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
        if constexpr (AREG) {
            fb_mma_abt_r<D, BM / 8, BF>(s, kfr, tq, 0, lane);
            fb_mma_abt_r<D, BM / 8, BF>(dp, vfr, tg, 0, lane);
        } else {
            fb_mma_abt<D, BM / 8, BF>(s, sK, warp * 16, tq, 0, lane);
            fb_mma_abt<D, BM / 8, BF>(dp, sV, warp * 16, tg, 0, lane);
        }
#pragma unroll
        for (int nb = 0; nb < BM / 8; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int c = nb * 8 + 2 * t + (e & 1);
                const int qi = i0 + c;
                const int key = (e >> 1) ? key1 : key0;
                // P^T[key, qi]: zero for a key the query does not see (and for padding rows: lse = +inf)
                bool vis = key < p.kv_len && (!p.causal || key <= qi + off);
                float pr = vis ? fa_exp2(s[nb][e] * p.scale_log2 - sL[buf * BM + c]) : 0.f;
                s[nb][e] = pr;
                dp[nb][e] = pr * (dp[nb][e] - sD[buf * BM + c]);
            }
        }
        fb_mma_xb<D, BM / 16, BF>(dv, s, tg, lane);
        fb_mma_xb<D, BM / 16, BF>(dk, dp, tq, lane);
        __syncthreads();
    }
    if (steps == 0) {
        fa_cp_wait<0>();
        __syncthreads();
    }
    u16* DK = (u16*)p.dk.ptr + (i64)b * p.dk.sb + (i64)kvh * p.dk.sh;
    u16* DV = (u16*)p.dv.ptr + (i64)b * p.dv.sb + (i64)kvh * p.dv.sh;
    fb_store<D, BF>(DK, p.dk.ss, k0 + warp * 16, p.kv_len, dk, p.scale, lane);
    fb_store<D, BF>(DV, p.dv.ss, k0 + warp * 16, p.kv_len, dv, 1.f, lane);
}

// dQ for 64 query rows of one head (4 warps x 16 rows); key tiles of BN keys stream through.
template <int D, int BN, bool BF>
__device__ __forceinline__ void flash_bwd_q_tc(const FbParams& p) {
    constexpr int BM = 64, NT = 128;
    typedef unsigned short u16;
    u16* sQ = (u16*)fa_smem;
    u16* sG = sQ + BM * D;
    u16* sK = sG + BM * D;      // [2][BN * D]
    u16* sV = sK + 2 * BN * D;  // [2][BN * D]

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const FbBlock blk = fb_block();
    const int mblk = gridDim.x - 1 - blk.tile;  // the last query tile sees the most keys
    const int h = blk.head, b = blk.b;
    const int kvh = h / (p.n_heads / p.n_kv_heads);
    const int m0 = mblk * BM;
    const int off = p.causal == 2 ? p.kv_len - p.q_len : 0;
    const int last = min(m0 + BM, p.q_len) - 1;
    const int kend = p.causal ? max(0, min(p.kv_len, last + off + 1)) : p.kv_len;
    const int ntiles = (kend + BN - 1) / BN;

    const u16* Q = (const u16*)p.q.ptr + (i64)b * p.q.sb + (i64)h * p.q.sh;
    const u16* G = (const u16*)p.dout.ptr + (i64)b * p.dout.sb + (i64)h * p.dout.sh;
    const u16* K = (const u16*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
    const u16* V = (const u16*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;
    fb_load_tile<D>(sQ, Q, p.q.ss, m0, BM, p.q_len, tid, NT);
    fb_load_tile<D>(sG, G, p.dout.ss, m0, BM, p.q_len, tid, NT);
    auto load_kv = [&](int j, int buf) {
        fb_load_tile<D>(sK + buf * BN * D, K, p.k.ss, j * BN, BN, p.kv_len, tid, NT);
        fb_load_tile<D>(sV + buf * BN * D, V, p.v.ss, j * BN, BN, p.kv_len, tid, NT);
    };
    if (ntiles > 0) load_kv(0, 0);
    fa_cp_commit();

    const int g = lane >> 2, t = lane & 3;
    const int row0 = m0 + warp * 16 + g, row1 = row0 + 8;
    const i64 rb = ((i64)b * p.n_heads + h) * p.q_len;
    const float l0 = row0 < p.q_len ? ((const float*)p.lse)[rb + row0] : FA_POS_INF;
    const float l1 = row1 < p.q_len ? ((const float*)p.lse)[rb + row1] : FA_POS_INF;
    const float d0 = row0 < p.q_len ? ((const float*)p.delta)[rb + row0] : 0.f;
    const float d1 = row1 < p.q_len ? ((const float*)p.delta)[rb + row1] : 0.f;
    const int lim0 = p.causal ? min(p.kv_len, row0 + off + 1) : p.kv_len;
    const int lim1 = p.causal ? min(p.kv_len, row1 + off + 1) : p.kv_len;

    float dq[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
    for (int j = 0; j < ntiles; j++) {
        if (j + 1 < ntiles) {
            load_kv(j + 1, (j + 1) & 1);
            fa_cp_commit();
            fa_cp_wait<1>();
        } else {
            fa_cp_wait<0>();
        }
        __syncthreads();
        const u16* tk = sK + (j & 1) * BN * D;
        const u16* tv = sV + (j & 1) * BN * D;
        const int j0 = j * BN;
        float s[BN / 8][4], dp[BN / 8][4];
#pragma unroll
        for (int i = 0; i < BN / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
        fb_mma_abt<D, BN / 8, BF>(s, sQ, warp * 16, tk, 0, lane);
        fb_mma_abt<D, BN / 8, BF>(dp, sG, warp * 16, tv, 0, lane);
#pragma unroll
        for (int nb = 0; nb < BN / 8; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = j0 + nb * 8 + 2 * t + (e & 1);
                const bool hi = e >> 1;
                float pr = key < (hi ? lim1 : lim0) ? fa_exp2(s[nb][e] * p.scale_log2 - (hi ? l1 : l0)) : 0.f;
                dp[nb][e] = pr * (dp[nb][e] - (hi ? d1 : d0));
            }
        }
        fb_mma_xb<D, BN / 16, BF>(dq, dp, tk, lane);
        __syncthreads();
    }
    if (ntiles == 0) {
        fa_cp_wait<0>();
        __syncthreads();
    }
    u16* DQ = (u16*)p.dq.ptr + (i64)b * p.dq.sb + (i64)h * p.dq.sh;
    fb_store<D, BF>(DQ, p.dq.ss, m0 + warp * 16, p.q_len, dq, p.scale, lane);
}

extern "C" __global__ void __launch_bounds__(128) flash_bwd_kv_tc_d64(const FbParams p) { flash_bwd_kv_tc<64, 64, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_bwd_kv_tc_d128(const FbParams p) { flash_bwd_kv_tc<128, 32, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) flash_bwd_q_tc_d64(const FbParams p) { flash_bwd_q_tc<64, 64, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_bwd_q_tc_d128(const FbParams p) { flash_bwd_q_tc<128, 32, FaIsBf<T>::v>(p); }

// ---------------------------------------------------------------------------------------------
// Scalar f32 math (any head_dim <= 256, any dtype): 8 warps; the staged tile holds 32 rows as f32
// (rows padded by one against bank conflicts), lane j scores row j of the tile against the warp's
// own row, then every lane accumulates its dims (d = lane + 32 r) through shuffles.
// ---------------------------------------------------------------------------------------------
#define FB_WARPS 8
#define FB_TILE 32

// Stages rows [r0, r0 + 32) of A and B (zeros past `valid`) as f32 into sa, sb ([32][D + 1]).
__device__ __forceinline__ void fb_stage(float* sa, float* sb, const T* A, i64 sas, const T* B, i64 sbs, int r0, int valid, int D) {
    for (int e = threadIdx.x; e < FB_TILE * D; e += 32 * FB_WARPS) {
        int r = e / D, d = e - r * D;
        bool ok = r0 + r < valid;
        sa[r * (D + 1) + d] = ok ? Ty<T>::ld(A[(i64)(r0 + r) * sas + d]) : 0.f;
        sb[r * (D + 1) + d] = ok ? Ty<T>::ld(B[(i64)(r0 + r) * sbs + d]) : 0.f;
    }
}

// dK, dV: a warp per key; query tiles of every query head of the group.
extern "C" __global__ void __launch_bounds__(256) flash_bwd_kv_generic(const FbParams p) {
    const int D = p.head_dim, KP = D + 1;
    float* sQ = (float*)fa_smem;       // [32][D + 1]
    float* sG = sQ + FB_TILE * KP;     // [32][D + 1]
    float* sK = sG + FB_TILE * KP;     // [8][D]
    float* sV = sK + FB_WARPS * D;     // [8][D]
    float* sL = sV + FB_WARPS * D;     // [32]
    float* sD = sL + FB_TILE;          // [32]
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int kvh = blockIdx.y, b = blockIdx.z;
    const int group = p.n_heads / p.n_kv_heads;
    const int k0 = blockIdx.x * FB_WARPS;
    const int key = k0 + warp;
    const int off = p.causal == 2 ? p.kv_len - p.q_len : 0;
    const T* K = (const T*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
    const T* V = (const T*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;
    for (int d = lane; d < D; d += 32) {
        bool ok = key < p.kv_len;
        sK[warp * D + d] = ok ? Ty<T>::ld(K[(i64)key * p.k.ss + d]) : 0.f;
        sV[warp * D + d] = ok ? Ty<T>::ld(V[(i64)key * p.v.ss + d]) : 0.f;
    }
    float dk[8], dv[8];
#pragma unroll
    for (int r = 0; r < 8; r++) dk[r] = dv[r] = 0.f;
    const int qstart = (fb_first_query(p, k0) / FB_TILE) * FB_TILE;
    for (int hh = 0; hh < group; hh++) {
        const int h = kvh * group + hh;
        const T* Q = (const T*)p.q.ptr + (i64)b * p.q.sb + (i64)h * p.q.sh;
        const T* G = (const T*)p.dout.ptr + (i64)b * p.dout.sb + (i64)h * p.dout.sh;
        const i64 rb = ((i64)b * p.n_heads + h) * p.q_len;
        for (int i0 = qstart; i0 < p.q_len; i0 += FB_TILE) {
            __syncthreads();
            fb_stage(sQ, sG, Q, p.q.ss, G, p.dout.ss, i0, p.q_len, D);
            if (tid < FB_TILE) {
                bool ok = i0 + tid < p.q_len;
                sL[tid] = ok ? ((const float*)p.lse)[rb + i0 + tid] : FA_POS_INF;
                sD[tid] = ok ? ((const float*)p.delta)[rb + i0 + tid] : 0.f;
            }
            __syncthreads();
            if (key >= p.kv_len) continue;  // warp-uniform
            const int qi = i0 + lane;
            float pr = 0.f, ds = 0.f;
            if (qi < p.q_len && (!p.causal || key <= qi + off)) {
                float a = 0.f, c = 0.f;
                const float* qr = sQ + lane * KP;
                const float* gr = sG + lane * KP;
                for (int d = 0; d < D; d++) {
                    a = fmaf(qr[d], sK[warp * D + d], a);
                    c = fmaf(gr[d], sV[warp * D + d], c);
                }
                pr = fa_exp2(a * p.scale_log2 - sL[lane]);
                ds = pr * (c - sD[lane]);
            }
            for (int jj = 0; jj < FB_TILE; jj++) {
                const float pj = __shfl_sync(0xffffffffu, pr, jj);
                const float sj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
                for (int r = 0; r < 8; r++) {
                    int d = lane + 32 * r;
                    if (d < D) {
                        dv[r] = fmaf(pj, sG[jj * KP + d], dv[r]);
                        dk[r] = fmaf(sj, sQ[jj * KP + d], dk[r]);
                    }
                }
            }
        }
    }
    if (key < p.kv_len) {
        T* DK = (T*)p.dk.ptr + (i64)b * p.dk.sb + (i64)kvh * p.dk.sh + (i64)key * p.dk.ss;
        T* DV = (T*)p.dv.ptr + (i64)b * p.dv.sb + (i64)kvh * p.dv.sh + (i64)key * p.dv.ss;
#pragma unroll
        for (int r = 0; r < 8; r++) {
            int d = lane + 32 * r;
            if (d < D) {
                DK[d] = Ty<T>::st(dk[r] * p.scale);
                DV[d] = Ty<T>::st(dv[r]);
            }
        }
    }
}

// dQ: a warp per query row; key tiles of 32 keys.
extern "C" __global__ void __launch_bounds__(256) flash_bwd_q_generic(const FbParams p) {
    const int D = p.head_dim, KP = D + 1;
    float* sK = (float*)fa_smem;       // [32][D + 1]
    float* sV = sK + FB_TILE * KP;     // [32][D + 1]
    float* sQ = sV + FB_TILE * KP;     // [8][D]
    float* sG = sQ + FB_WARPS * D;     // [8][D]
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (p.n_heads / p.n_kv_heads);
    const int m0 = blockIdx.x * FB_WARPS;
    const int i = m0 + warp;
    const bool active = i < p.q_len;
    const int off = p.causal == 2 ? p.kv_len - p.q_len : 0;
    const int last = min(m0 + FB_WARPS, p.q_len) - 1;
    const int kend = p.causal ? max(0, min(p.kv_len, last + off + 1)) : p.kv_len;
    const int lim = active ? (p.causal ? min(p.kv_len, i + off + 1) : p.kv_len) : 0;
    const T* Q = (const T*)p.q.ptr + (i64)b * p.q.sb + (i64)h * p.q.sh;
    const T* G = (const T*)p.dout.ptr + (i64)b * p.dout.sb + (i64)h * p.dout.sh;
    const T* K = (const T*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
    const T* V = (const T*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;
    for (int d = lane; d < D; d += 32) {
        sQ[warp * D + d] = active ? Ty<T>::ld(Q[(i64)i * p.q.ss + d]) : 0.f;
        sG[warp * D + d] = active ? Ty<T>::ld(G[(i64)i * p.dout.ss + d]) : 0.f;
    }
    const i64 rb = ((i64)b * p.n_heads + h) * p.q_len;
    const float lse = active ? ((const float*)p.lse)[rb + i] : FA_POS_INF;
    const float dl = active ? ((const float*)p.delta)[rb + i] : 0.f;
    float dq[8];
#pragma unroll
    for (int r = 0; r < 8; r++) dq[r] = 0.f;
    for (int j0 = 0; j0 < kend; j0 += FB_TILE) {
        __syncthreads();
        fb_stage(sK, sV, K, p.k.ss, V, p.v.ss, j0, p.kv_len, D);
        __syncthreads();
        if (j0 >= lim) continue;  // warp-uniform
        float ds = 0.f;
        if (j0 + lane < lim) {
            float a = 0.f, c = 0.f;
            const float* kr = sK + lane * KP;
            const float* vr = sV + lane * KP;
            for (int d = 0; d < D; d++) {
                a = fmaf(sQ[warp * D + d], kr[d], a);
                c = fmaf(sG[warp * D + d], vr[d], c);
            }
            const float pr = fa_exp2(a * p.scale_log2 - lse);
            ds = pr * (c - dl);
        }
        const int nk = min(FB_TILE, lim - j0);
        for (int jj = 0; jj < nk; jj++) {
            const float sj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
            for (int r = 0; r < 8; r++) {
                int d = lane + 32 * r;
                if (d < D) dq[r] = fmaf(sj, sK[jj * KP + d], dq[r]);
            }
        }
    }
    if (active) {
        T* DQ = (T*)p.dq.ptr + (i64)b * p.dq.sb + (i64)h * p.dq.sh + (i64)i * p.dq.ss;
#pragma unroll
        for (int r = 0; r < 8; r++) {
            int d = lane + 32 * r;
            if (d < D) DQ[d] = Ty<T>::st(dq[r] * p.scale);
        }
    }
}

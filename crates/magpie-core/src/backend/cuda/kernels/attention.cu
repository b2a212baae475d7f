// Flash attention (after the preamble and kcommon.cuh; the host defines T, one module per dtype):
//   flash_tc_d64_w4 / _w8 / _w4m2[_f/_fq/_fx/_fqx],       tensor-core prefill (T = bf16_t or half_t)
//   flash_tc_d128_w4[_f/_fx] / _w4e
//   flash_generic                                          scalar prefill, any head_dim <= 256
//   decode_split / decode_combine                          split-KV decode ("flash decoding")
// Every path is an online softmax over key tiles: O(q_len + kv_len) memory. Scores are kept in
// the log2 domain (the scale is multiplied by log2(e)), so exponentials are one ex2 each.

// ---------------------------------------------------------------------------------------------
// Tensor-core prefill (FlashAttention-2 layout): NW warps, each owning MT x 16 query rows (MT m-tiles
// share every K/V fragment a warp loads); K/V tiles of 64 keys in shared memory (cp.async, double
// buffered, rows XOR-swizzled in 16-byte chunks so that ldmatrix is free of bank conflicts);
// S = Q K^T and O += P V with mma.m16n8k16; the online softmax runs on the accumulator fragments
// in registers.
// ---------------------------------------------------------------------------------------------
// Options of the tensor-core kernel (bits of OPT):
//   FA_FOLD  scores stay unscaled until the exponential (one FFMA per score: s * scale - max),
//            and a row keeps a stale running max until a tile raises it by more than 2^FA_TAU, so the
//            accumulator rescale (a warp-uniform branch) is skipped on almost every tile. Needs
//            scale > 0 (the host checks).
//   FA_QR    the Q fragments are reloaded from shared memory for every tile (ldmatrix) instead of
//            living in registers: fewer registers, 3 blocks per multiprocessor instead of 2.
//   FA_X2    exponentials two at a time in 16-bit (ex2.approx.{bf16x2,f16x2}: the packed P comes
//            out of the ex2 directly) and the row sums from one more mma with a B of ones; the
//            exponent is rounded to 16 bits, so the running max is kept exact (no stale max).
#define FA_FOLD 1
#define FA_QR 2
#define FA_X2 4
#define FA_TAU 8.f

// 2^x of a packed pair of 16-bit floats.
template <bool BF>
__device__ __forceinline__ unsigned fa_exp2x2(unsigned x) {
    unsigned y;
    if (BF) {
#if __CUDA_ARCH__ >= 900
        asm("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
#else
        // no bf16 ex2 before sm_90 (the host does not pick FA_X2 there; this keeps the module compiling)
        y = fa_pack<true>(fa_exp2(__uint_as_float(x << 16)), fa_exp2(__uint_as_float(x & 0xffff0000u)));
#endif
    } else {
        asm("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
    }
    return y;
}

template <int D, int NW, int MT, bool LATE, bool BF, int OPT = 0>
__device__ __forceinline__ void flash_tc(const FaParams& p) {
    constexpr int BM = 16 * MT * NW, BN = 64, NT = 32 * NW, CH = D / 8;
    constexpr bool FOLD = (OPT & FA_FOLD) != 0, QR = (OPT & FA_QR) != 0, X2 = (OPT & FA_X2) != 0;
    constexpr float TAU = X2 ? 0.f : FA_TAU;
    static_assert(!X2 || FOLD, "FA_X2 needs FA_FOLD");
    typedef unsigned short u16;
    u16* sQ = (u16*)fa_smem;
    u16* sK = sQ + BM * D;
    u16* sV = sK + 2 * BN * D;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int mblk = gridDim.x - 1 - blockIdx.x;  // the longest causal blocks first
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (p.n_heads / p.n_kv_heads);
    const int m0 = mblk * BM;
    const int kvl = fa_kvlen(p, b);
    const int off = p.causal == 2 ? kvl - p.q_len : 0;
    const int last = min(m0 + BM, p.q_len) - 1;
    const int kend = p.causal ? min(kvl, last + off + 1) : kvl;
    const int ntiles = kend > 0 ? (kend + BN - 1) / BN : 0;

    const u16* Q = (const u16*)p.q.ptr + (i64)b * p.q.sb + (i64)h * p.q.sh;
    const u16* K = (const u16*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
    const u16* V = (const u16*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;
    u16* O = (u16*)p.o.ptr + (i64)b * p.o.sb + (i64)h * p.o.sh;

    // the Q tile (zeros past q_len)
    for (int c = tid; c < BM * CH; c += NT) {
        int r = c / CH, ch = c % CH;
        bool ok = m0 + r < p.q_len;
        fa_cp16(sQ + r * D + ((ch ^ (r & 7)) * 8), ok ? (const void*)(Q + (i64)(m0 + r) * p.q.ss + ch * 8) : (const void*)Q, ok ? 16 : 0);
    }
    auto load_kv = [&](int j, int buf) {
        const int j0 = j * BN;
        u16* dk = sK + buf * BN * D;
        u16* dv = sV + buf * BN * D;
        for (int c = tid; c < BN * CH; c += NT) {
            int r = c / CH, ch = c % CH;
            bool ok = j0 + r < kvl;
            int so = r * D + ((ch ^ (r & 7)) * 8);
            fa_cp16(dk + so, ok ? (const void*)(K + (i64)(j0 + r) * p.k.ss + ch * 8) : (const void*)K, ok ? 16 : 0);
            fa_cp16(dv + so, ok ? (const void*)(V + (i64)(j0 + r) * p.v.ss + ch * 8) : (const void*)V, ok ? 16 : 0);
        }
    };
    if (ntiles > 0) load_kv(0, 0);
    fa_cp_commit();

    const int g = lane >> 2, t = lane & 3;
    const float sl2 = p.scale_log2;
    // rows of this thread: (m-tile mt, half hf) -> m0 + warp*16*MT + mt*16 + g + 8*hf
    int lim[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) lim[mt][hf] = fa_limit(p.causal, kvl, off, m0 + warp * 16 * MT + mt * 16 + g + 8 * hf);

    unsigned qf[QR ? 1 : MT][QR ? 1 : D / 16][4];
    float o[MT][D / 8][4];
    // X2: lr[mt] is an mma accumulator (row g in [0], row g+8 in [2]: full row sums); else
    // per-thread partial sums in [0] and [1]
    float mr[MT][2], lr[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int i = 0; i < D / 8; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
        mr[mt][0] = mr[mt][1] = FA_NEG_INF;
        lr[mt][0] = lr[mt][1] = lr[mt][2] = lr[mt][3] = 0.f;
    }
    const unsigned ones = BF ? 0x3f803f80u : 0x3c003c00u;

    if (ntiles == 0) {
        fa_cp_wait<0>();
        __syncthreads();
    }
    for (int j = 0; j < ntiles; j++) {
        if (j + 1 < ntiles) {
            load_kv(j + 1, (j + 1) & 1);
            fa_cp_commit();
            fa_cp_wait<1>();
        } else {
            fa_cp_wait<0>();
        }
        __syncthreads();
        if constexpr (!QR) {
            if (j == 0) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int ks = 0; ks < D / 16; ks++) {
                        int r = warp * 16 * MT + mt * 16 + (lane & 15), ch = ks * 2 + (lane >> 4);
                        fa_ldsm4(qf[mt][ks], sQ + r * D + ((ch ^ (r & 7)) * 8));
                    }
            }
        }
        const u16* tk = sK + (j & 1) * BN * D;
        const u16* tv = sV + (j & 1) * BN * D;
        const int j0 = j * BN;

        float s[MT][BN / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int i = 0; i < BN / 8; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
            unsigned qa[MT][4];
            if constexpr (QR) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    int r = warp * 16 * MT + mt * 16 + (lane & 15), ch = ks * 2 + (lane >> 4);
                    fa_ldsm4(qa[mt], sQ + r * D + ((ch ^ (r & 7)) * 8));
                }
            }
#pragma unroll
            for (int np = 0; np < BN / 16; np++) {
                unsigned kb[4];
                int r = np * 16 + ((lane >> 4) << 3) + (lane & 7), ch = ks * 2 + ((lane >> 3) & 1);
                fa_ldsm4(kb, tk + r * D + ((ch ^ (r & 7)) * 8));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const unsigned* qk = QR ? qa[mt] : qf[QR ? 0 : mt][QR ? 0 : ks];
                    fa_mma<BF>(s[mt][2 * np], qk, kb[0], kb[1]);
                    fa_mma<BF>(s[mt][2 * np + 1], qk, kb[2], kb[3]);
                }
            }
        }
        // mask only where the tile crosses a boundary
        const bool need = (j0 + BN > kvl) || (p.causal && j0 + BN - 1 > m0 + off);
        unsigned pa[MT][BN / 16][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float mx0 = FA_NEG_INF, mx1 = FA_NEG_INF;
#pragma unroll
            for (int nb = 0; nb < BN / 8; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    // FOLD: raw scores (the scale goes into the exponential); else the log2 domain
                    float x = FOLD ? s[mt][nb][e] : s[mt][nb][e] * sl2;
                    if (need) {
                        int key = j0 + nb * 8 + 2 * t + (e & 1);
                        if (key >= lim[mt][e >> 1]) x = FA_NEG_INF;
                    }
                    s[mt][nb][e] = x;
                }
                mx0 = fmaxf(mx0, fmaxf(s[mt][nb][0], s[mt][nb][1]));
                mx1 = fmaxf(mx1, fmaxf(s[mt][nb][2], s[mt][nb][3]));
            }
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
            if constexpr (FOLD) {
                // the tile's max in the log2 domain (scale > 0); the row's max moves only when
                // this exceeds it by more than TAU (the exponentials stay <= 2^TAU)
                mx0 *= sl2;
                mx1 *= sl2;
                const float mn0 = (mr[mt][0] == FA_NEG_INF || mx0 > mr[mt][0] + TAU) ? fmaxf(mr[mt][0], mx0) : mr[mt][0];
                const float mn1 = (mr[mt][1] == FA_NEG_INF || mx1 > mr[mt][1] + TAU) ? fmaxf(mr[mt][1], mx1) : mr[mt][1];
                const float ms0 = mn0 == FA_NEG_INF ? 0.f : mn0, ms1 = mn1 == FA_NEG_INF ? 0.f : mn1;
                if (__any_sync(0xffffffffu, mn0 != mr[mt][0] || mn1 != mr[mt][1])) {
                    const float a0 = fa_exp2(mr[mt][0] - ms0), a1 = fa_exp2(mr[mt][1] - ms1);
#pragma unroll
                    for (int i = 0; i < D / 8; i++) {
                        o[mt][i][0] *= a0;
                        o[mt][i][1] *= a0;
                        o[mt][i][2] *= a1;
                        o[mt][i][3] *= a1;
                    }
                    lr[mt][0] *= a0;
                    lr[mt][1] *= X2 ? a0 : a1;
                    lr[mt][2] *= a1;
                    lr[mt][3] *= a1;
                }
                mr[mt][0] = mn0;
                mr[mt][1] = mn1;
                if constexpr (X2) {
                    // packed: P = 2^(s * scale - max) rounded to 16 bits, straight from the ex2
#pragma unroll
                    for (int kk = 0; kk < BN / 16; kk++) {
                        pa[mt][kk][0] = fa_exp2x2<BF>(fa_pack<BF>(fmaf(s[mt][2 * kk][0], sl2, -ms0), fmaf(s[mt][2 * kk][1], sl2, -ms0)));
                        pa[mt][kk][1] = fa_exp2x2<BF>(fa_pack<BF>(fmaf(s[mt][2 * kk][2], sl2, -ms1), fmaf(s[mt][2 * kk][3], sl2, -ms1)));
                        pa[mt][kk][2] = fa_exp2x2<BF>(fa_pack<BF>(fmaf(s[mt][2 * kk + 1][0], sl2, -ms0), fmaf(s[mt][2 * kk + 1][1], sl2, -ms0)));
                        pa[mt][kk][3] = fa_exp2x2<BF>(fa_pack<BF>(fmaf(s[mt][2 * kk + 1][2], sl2, -ms1), fmaf(s[mt][2 * kk + 1][3], sl2, -ms1)));
                        // the row sums of the same rounded P that multiplies V
                        fa_mma<BF>(lr[mt], pa[mt][kk], ones, ones);
                    }
                } else {
                    float ps0 = 0.f, ps1 = 0.f;
#pragma unroll
                    for (int nb = 0; nb < BN / 8; nb++) {
                        s[mt][nb][0] = fa_exp2(fmaf(s[mt][nb][0], sl2, -ms0));
                        s[mt][nb][1] = fa_exp2(fmaf(s[mt][nb][1], sl2, -ms0));
                        s[mt][nb][2] = fa_exp2(fmaf(s[mt][nb][2], sl2, -ms1));
                        s[mt][nb][3] = fa_exp2(fmaf(s[mt][nb][3], sl2, -ms1));
                        ps0 += s[mt][nb][0] + s[mt][nb][1];
                        ps1 += s[mt][nb][2] + s[mt][nb][3];
                    }
                    lr[mt][0] += ps0;
                    lr[mt][1] += ps1;
                }
            } else {
                const float mn0 = fmaxf(mr[mt][0], mx0), mn1 = fmaxf(mr[mt][1], mx1);
                const float ms0 = mn0 == FA_NEG_INF ? 0.f : mn0, ms1 = mn1 == FA_NEG_INF ? 0.f : mn1;
                const float a0 = fa_exp2(mr[mt][0] - ms0), a1 = fa_exp2(mr[mt][1] - ms1);
                mr[mt][0] = mn0;
                mr[mt][1] = mn1;
                float ps0 = 0.f, ps1 = 0.f;
#pragma unroll
                for (int nb = 0; nb < BN / 8; nb++) {
                    s[mt][nb][0] = fa_exp2(s[mt][nb][0] - ms0);
                    s[mt][nb][1] = fa_exp2(s[mt][nb][1] - ms0);
                    s[mt][nb][2] = fa_exp2(s[mt][nb][2] - ms1);
                    s[mt][nb][3] = fa_exp2(s[mt][nb][3] - ms1);
                    ps0 += s[mt][nb][0] + s[mt][nb][1];
                    ps1 += s[mt][nb][2] + s[mt][nb][3];
                }
                lr[mt][0] = lr[mt][0] * a0 + ps0;
                lr[mt][1] = lr[mt][1] * a1 + ps1;
#pragma unroll
                for (int i = 0; i < D / 8; i++) {
                    o[mt][i][0] *= a0;
                    o[mt][i][1] *= a0;
                    o[mt][i][2] *= a1;
                    o[mt][i][3] *= a1;
                }
            }
            if (!LATE && !X2)
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                pa[mt][kk][0] = fa_pack<BF>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                pa[mt][kk][1] = fa_pack<BF>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                pa[mt][kk][2] = fa_pack<BF>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                pa[mt][kk][3] = fa_pack<BF>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
        }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            // LATE: P packed here, next to its use (the f32 scores stay live instead of the packed pairs)
            unsigned pk[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (LATE && !X2) {
                    pk[mt][0] = fa_pack<BF>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                    pk[mt][1] = fa_pack<BF>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                    pk[mt][2] = fa_pack<BF>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                    pk[mt][3] = fa_pack<BF>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; e++) pk[mt][e] = pa[mt][kk][e];
                }
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                unsigned vb[4];
                int r = kk * 16 + (lane & 15), ch = dp * 2 + (lane >> 4);
                fa_ldsm4t(vb, tv + r * D + ((ch ^ (r & 7)) * 8));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    fa_mma<BF>(o[mt][2 * dp], pk[mt], vb[0], vb[1]);
                    fa_mma<BF>(o[mt][2 * dp + 1], pk[mt], vb[2], vb[3]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float l0, l1;
        if constexpr (X2) {
            // the mma summed over the key columns already
            l0 = lr[mt][0];
            l1 = lr[mt][2];
        } else {
            l0 = lr[mt][0];
            l1 = lr[mt][1];
            l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
            l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
            l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
            l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
        }
        const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
        const int row0 = m0 + warp * 16 * MT + mt * 16 + g, row1 = row0 + 8;
        if (p.lse && t == 0) {
            // log2-sum-exp of the scaled scores, for the backward pass
            float* L = (float*)p.lse + ((i64)b * p.n_heads + h) * p.q_len;
            if (row0 < p.q_len) L[row0] = l0 > 0.f ? mr[mt][0] + log2f(l0) : FA_POS_INF;
            if (row1 < p.q_len) L[row1] = l1 > 0.f ? mr[mt][1] + log2f(l1) : FA_POS_INF;
        }
#pragma unroll
        for (int db = 0; db < D / 8; db++) {
            int d = db * 8 + 2 * t;
            if (row0 < p.q_len) *(unsigned*)(O + (i64)row0 * p.o.ss + d) = fa_pack<BF>(o[mt][db][0] * i0, o[mt][db][1] * i0);
            if (row1 < p.q_len) *(unsigned*)(O + (i64)row1 * p.o.ss + d) = fa_pack<BF>(o[mt][db][2] * i1, o[mt][db][3] * i1);
        }
    }
}


extern "C" __global__ void __launch_bounds__(128) flash_tc_d64_w4(const FaParams p) { flash_tc<64, 4, 1, true, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(256) flash_tc_d64_w8(const FaParams p) { flash_tc<64, 8, 1, true, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_tc_d64_w4m2(const FaParams p) { flash_tc<64, 4, 2, false, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_tc_d128_w4(const FaParams p) { flash_tc<128, 4, 1, true, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_tc_d128_w4e(const FaParams p) { flash_tc<128, 4, 1, false, FaIsBf<T>::v>(p); }
// the FA_* options (scale > 0 only)
extern "C" __global__ void __launch_bounds__(128) flash_tc_d64_w4m2_f(const FaParams p) { flash_tc<64, 4, 2, false, FaIsBf<T>::v, FA_FOLD>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) flash_tc_d64_w4m2_fq(const FaParams p) { flash_tc<64, 4, 2, true, FaIsBf<T>::v, FA_FOLD | FA_QR>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_tc_d64_w4m2_fx(const FaParams p) { flash_tc<64, 4, 2, false, FaIsBf<T>::v, FA_FOLD | FA_X2>(p); }
extern "C" __global__ void __launch_bounds__(128, 3) flash_tc_d64_w4m2_fqx(const FaParams p) { flash_tc<64, 4, 2, false, FaIsBf<T>::v, FA_FOLD | FA_QR | FA_X2>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_tc_d128_w4_f(const FaParams p) { flash_tc<128, 4, 1, true, FaIsBf<T>::v, FA_FOLD>(p); }
extern "C" __global__ void __launch_bounds__(128) flash_tc_d128_w4_fx(const FaParams p) { flash_tc<128, 4, 1, false, FaIsBf<T>::v, FA_FOLD | FA_X2>(p); }

// ---------------------------------------------------------------------------------------------
// Generic prefill: 8 warps, one query row each; tiles of p.bk (<= 32) keys staged in shared
// memory as f32 (K rows padded by one against bank conflicts); lane j scores key j of the tile,
// then every lane accumulates its dims (d = lane + 32 r) of P V.
// ---------------------------------------------------------------------------------------------
#define FG_WARPS 8
extern "C" __global__ void __launch_bounds__(256) flash_generic(const FaParams p) {
    const int D = p.head_dim, BK = p.bk, KP = D + 1;
    float* sK = (float*)fa_smem;
    float* sV = sK + BK * KP;
    float* sQ = sV + BK * D;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (p.n_heads / p.n_kv_heads);
    const int m0 = blockIdx.x * FG_WARPS;
    const int i = m0 + warp;
    const bool active = i < p.q_len;
    const int kvl = fa_kvlen(p, b);
    const int off = p.causal == 2 ? kvl - p.q_len : 0;
    const int last = min(m0 + FG_WARPS, p.q_len) - 1;
    const int kend = p.causal ? min(kvl, last + off + 1) : kvl;
    const int lim = active ? fa_limit(p.causal, kvl, off, i) : 0;

    const T* Q = (const T*)p.q.ptr + (i64)b * p.q.sb + (i64)h * p.q.sh;
    const T* K = (const T*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
    const T* V = (const T*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;
    T* O = (T*)p.o.ptr + (i64)b * p.o.sb + (i64)h * p.o.sh;

    float* q = sQ + warp * D;
    for (int d = lane; d < D; d += 32) q[d] = active ? Ty<T>::ld(Q[(i64)i * p.q.ss + d]) * p.scale_log2 : 0.f;
    float acc[8];
#pragma unroll
    for (int r = 0; r < 8; r++) acc[r] = 0.f;
    float m = FA_NEG_INF, l = 0.f;
    for (int j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads();
        for (int e = tid; e < BK * D; e += 32 * FG_WARPS) {
            int r = e / D, d = e - r * D;
            int key = j0 + r;
            bool ok = key < kvl;
            sK[r * KP + d] = ok ? Ty<T>::ld(K[(i64)key * p.k.ss + d]) : 0.f;
            sV[r * D + d] = ok ? Ty<T>::ld(V[(i64)key * p.v.ss + d]) : 0.f;
        }
        __syncthreads();
        if (j0 >= lim) continue;  // warp-uniform: this row sees no key of the tile or later
        float s = FA_NEG_INF;
        if (lane < BK && j0 + lane < lim) {
            float a = 0.f;
            const float* kr = sK + lane * KP;
            for (int d = 0; d < D; d++) a = fmaf(q[d], kr[d], a);
            s = a;
        }
        float mx = s;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float mn = fmaxf(m, mx);
        const float ms = mn == FA_NEG_INF ? 0.f : mn;
        const float alpha = fa_exp2(m - ms);
        const float pj = fa_exp2(s - ms);
        float ps = pj;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
        l = l * alpha + ps;
        m = mn;
#pragma unroll
        for (int r = 0; r < 8; r++) acc[r] *= alpha;
        const int nk = min(BK, lim - j0);
        for (int jj = 0; jj < nk; jj++) {
            const float pv = __shfl_sync(0xffffffffu, pj, jj);
            const float* vr = sV + jj * D;
#pragma unroll
            for (int r = 0; r < 8; r++) {
                int d = lane + 32 * r;
                if (d < D) acc[r] = fmaf(pv, vr[d], acc[r]);
            }
        }
    }
    if (active) {
        const float inv = l > 0.f ? 1.f / l : 0.f;
        if (p.lse && lane == 0) ((float*)p.lse)[((i64)b * p.n_heads + h) * p.q_len + i] = l > 0.f ? m + log2f(l) : FA_POS_INF;
#pragma unroll
        for (int r = 0; r < 8; r++) {
            int d = lane + 32 * r;
            if (d < D) O[(i64)i * p.o.ss + d] = Ty<T>::st(acc[r] * inv);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decode: one query per (sequence, head). Block (split s, kv head x head group, sequence b)
// covers keys [s*chunk, min((s+1)*chunk, kv_lens[b])) for `gb` query heads of one kv head, so
// each K/V element is read from memory once. Tiles of `tk` keys go to shared memory (16-byte
// cp.async where aligned), scores of all heads x keys are computed there, then each thread
// accumulates its (head, dim) outputs. The partial output (normalised) and its log2-sum-exp go
// to the workspace; decode_combine merges the splits.
// ---------------------------------------------------------------------------------------------
struct DecParams {
    int batch, n_heads, n_kv_heads, head_dim;
    int splits, chunk, tk, gb;    // splits, keys per split, keys per tile, query heads per block
    int hgroups, vec, max_kv_len; // head groups per kv head; 16-byte loads; clamp of kv_lens
    float scale_log2;
    FaOpnd q, k, v, o;
    u64 kv_lens, ws_o, ws_lse;
};

#define DEC_THREADS 128
#define DEC_MAXE 16

extern "C" __global__ void __launch_bounds__(DEC_THREADS) decode_split(const DecParams p) {
    const int D = p.head_dim, TK = p.tk, GB = p.gb;
    const int VE = 16 / (int)sizeof(T);
    const int KP = p.vec ? D + VE : D + 1;  // K row pitch (padded: conflict-free row reads)
    float* sQ = (float*)fa_smem;               // GB x D
    float* sS = sQ + GB * D;                   // GB x TK
    float* sA = sS + GB * TK;                  // GB: rescale factors
    float* sM = sA + GB;                       // GB: running max
    float* sL = sM + GB;                       // GB: running sum
    T* sK = (T*)(sL + GB + ((4 - (3 * GB + GB * (D + TK)) % 4) % 4));  // 16-byte aligned
    T* sV = sK + TK * KP;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int s = blockIdx.x, b = blockIdx.z;
    const int kvh = blockIdx.y / p.hgroups, hg = blockIdx.y % p.hgroups;
    const int G = p.n_heads / p.n_kv_heads;
    const int h0 = kvh * G + hg * GB;
    const int nh = min(GB, G - hg * GB);
    int kvl = ((const int*)p.kv_lens)[b];
    kvl = max(0, min(kvl, p.max_kv_len));
    const int kb = s * p.chunk, ke = min(kb + p.chunk, kvl);

    const T* Q = (const T*)p.q.ptr + (i64)b * p.q.sb;
    const T* K = (const T*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
    const T* V = (const T*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;

    for (int e = tid; e < GB * D; e += DEC_THREADS) {
        int hh = e / D, d = e - hh * D;
        sQ[e] = hh < nh ? Ty<T>::ld(Q[(i64)(h0 + hh) * p.q.sh + d]) * p.scale_log2 : 0.f;
    }
    for (int hh = tid; hh < GB; hh += DEC_THREADS) {
        sM[hh] = FA_NEG_INF;
        sL[hh] = 0.f;
    }
    float acc[DEC_MAXE];
#pragma unroll
    for (int i = 0; i < DEC_MAXE; i++) acc[i] = 0.f;
    const int ne = GB * D;

    for (int t0 = kb; t0 < ke; t0 += TK) {
        const int nk = min(TK, ke - t0);
        __syncthreads();
        if (p.vec) {
            const int CH = D / VE;
            for (int c = tid; c < TK * CH; c += DEC_THREADS) {
                int r = c / CH, ch = c - r * CH;
                bool ok = r < nk;
                fa_cp16(sK + r * KP + ch * VE, ok ? (const void*)(K + (i64)(t0 + r) * p.k.ss + ch * VE) : (const void*)K, ok ? 16 : 0);
                fa_cp16(sV + r * D + ch * VE, ok ? (const void*)(V + (i64)(t0 + r) * p.v.ss + ch * VE) : (const void*)V, ok ? 16 : 0);
            }
            fa_cp_commit();
            fa_cp_wait<0>();
        } else {
            for (int e = tid; e < TK * D; e += DEC_THREADS) {
                int r = e / D, d = e - r * D;
                bool ok = r < nk;
                T z = Ty<T>::st(0.f);
                sK[r * KP + d] = ok ? K[(i64)(t0 + r) * p.k.ss + d] : z;
                sV[r * D + d] = ok ? V[(i64)(t0 + r) * p.v.ss + d] : z;
            }
        }
        __syncthreads();
        // scores of every (head, key) pair of the tile
        for (int pi = tid; pi < GB * TK; pi += DEC_THREADS) {
            int hh = pi / TK, j = pi - hh * TK;
            float a = FA_NEG_INF;
            if (hh < nh && j < nk) {
                const float* q = sQ + hh * D;
                const T* kr = sK + j * KP;
                a = 0.f;
                if (p.vec) {
                    for (int c = 0; c < D; c += VE) {
                        MpVec<T, 16 / sizeof(T)> w;
                        w.raw = *(const uint4*)(kr + c);
#pragma unroll
                        for (int e = 0; e < 16 / (int)sizeof(T); e++) a = fmaf(q[c + e], Ty<T>::ld(w.v[e]), a);
                    }
                } else {
                    for (int d = 0; d < D; d++) a = fmaf(q[d], Ty<T>::ld(kr[d]), a);
                }
            }
            sS[pi] = a;
        }
        __syncthreads();
        // online softmax per head (a warp per head)
        for (int hh = warp; hh < GB; hh += DEC_THREADS / 32) {
            float mx = FA_NEG_INF;
            for (int j = lane; j < TK; j += 32) mx = fmaxf(mx, sS[hh * TK + j]);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float mo = sM[hh];
            const float mn = fmaxf(mo, mx);
            const float ms = mn == FA_NEG_INF ? 0.f : mn;
            float ps = 0.f;
            for (int j = lane; j < TK; j += 32) {
                float e = fa_exp2(sS[hh * TK + j] - ms);
                sS[hh * TK + j] = e;
                ps += e;
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
            if (lane == 0) {
                const float a = fa_exp2(mo - ms);
                sA[hh] = a;
                sL[hh] = sL[hh] * a + ps;
                sM[hh] = mn;
            }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < DEC_MAXE; i++) {
            int e = tid + DEC_THREADS * i;
            if (e < ne) {
                int hh = e / D, d = e - hh * D;
                float a = acc[i] * sA[hh];
                const float* pr = sS + hh * TK;
                for (int j = 0; j < nk; j++) a = fmaf(pr[j], Ty<T>::ld(sV[j * D + d]), a);
                acc[i] = a;
            }
        }
    }
    __syncthreads();
    float* wo = (float*)p.ws_o;
    float* wl = (float*)p.ws_lse;
    const bool any = ke > kb;
#pragma unroll
    for (int i = 0; i < DEC_MAXE; i++) {
        int e = tid + DEC_THREADS * i;
        if (e < ne) {
            int hh = e / D, d = e - hh * D;
            if (hh < nh) {
                float l = any ? sL[hh] : 0.f;
                wo[(((i64)b * p.n_heads + h0 + hh) * p.splits + s) * D + d] = l > 0.f ? acc[i] / l : 0.f;
            }
        }
    }
    for (int hh = tid; hh < nh; hh += DEC_THREADS) {
        float l = any ? sL[hh] : 0.f;
        wl[((i64)b * p.n_heads + h0 + hh) * p.splits + s] = l > 0.f ? sM[hh] + log2f(l) : FA_NEG_INF;
    }
}

// The decode kernel for 16-byte aligned K/V rows with D * sizeof(T) / 16 <= 32 (LK lanes per key):
// K and V go straight from memory to registers (each 16-byte chunk is read by one thread, once),
// every lane keeps its q chunk of the block's GB heads in registers, a key's scores are reduced
// over its LK lanes with shuffles, and each thread accumulates its chunk of P V for its keys;
// the key slots are summed through shared memory at the end.
template <int D, int GB>
__device__ __forceinline__ void decode_vec(const DecParams& p) {
    constexpr int VE = 16 / (int)sizeof(T);
    constexpr int LK0 = D / VE, LK = LK0 > 32 ? 32 : LK0;
    constexpr int KPW = 32 / LK, KPB = KPW * (DEC_THREADS / 32), NI = 4, TK = KPB * NI;
    float* sS = (float*)fa_smem;  // GB x TK
    float* sA = sS + GB * TK;
    float* sM = sA + GB;
    float* sL = sM + GB;
    float* sRed = sL + GB;        // KPB x GB x D
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int ks = warp * KPW + lane / LK, c = lane % LK;
    const int s = blockIdx.x, b = blockIdx.z;
    const int kvh = blockIdx.y / p.hgroups, hg = blockIdx.y % p.hgroups;
    const int G = p.n_heads / p.n_kv_heads;
    const int h0 = kvh * G + hg * GB;
    const int nh = min(GB, G - hg * GB);
    int kvl = ((const int*)p.kv_lens)[b];
    kvl = max(0, min(kvl, p.max_kv_len));
    const int kb = s * p.chunk, ke = min(kb + p.chunk, kvl);
    const T* Q = (const T*)p.q.ptr + (i64)b * p.q.sb;
    const T* K = (const T*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh + c * VE;
    const T* V = (const T*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh + c * VE;

    float qr[GB][VE], acc[GB][VE];
#pragma unroll
    for (int g = 0; g < GB; g++)
#pragma unroll
        for (int e = 0; e < VE; e++) {
            qr[g][e] = g < nh ? Ty<T>::ld(Q[(i64)(h0 + g) * p.q.sh + c * VE + e]) * p.scale_log2 : 0.f;
            acc[g][e] = 0.f;
        }
    if (tid < GB) {
        sM[tid] = FA_NEG_INF;
        sL[tid] = 0.f;
    }
    for (int t0 = kb; t0 < ke; t0 += TK) {
        const int nk = min(TK, ke - t0);
        uint4 kr[NI], vr[NI];
#pragma unroll
        for (int i = 0; i < NI; i++) {
            const int jj = ks + KPB * i;
            if (jj < nk) {
                kr[i] = *(const uint4*)(K + (i64)(t0 + jj) * p.k.ss);
                vr[i] = *(const uint4*)(V + (i64)(t0 + jj) * p.v.ss);
            } else {
                kr[i] = make_uint4(0, 0, 0, 0);
                vr[i] = make_uint4(0, 0, 0, 0);
            }
        }
        __syncthreads();  // the previous tile's readers of sS are done
#pragma unroll
        for (int i = 0; i < NI; i++) {
            MpVec<T, 16 / sizeof(T)> kv;
            kv.raw = kr[i];
            float part[GB];
#pragma unroll
            for (int g = 0; g < GB; g++) {
                float a = 0.f;
#pragma unroll
                for (int e = 0; e < VE; e++) a = fmaf(qr[g][e], Ty<T>::ld(kv.v[e]), a);
                part[g] = a;
            }
#pragma unroll
            for (int o = LK / 2; o > 0; o >>= 1)
#pragma unroll
                for (int g = 0; g < GB; g++) part[g] += __shfl_xor_sync(0xffffffffu, part[g], o);
            if (c == 0) {
                const int jj = ks + KPB * i;
#pragma unroll
                for (int g = 0; g < GB; g++) sS[g * TK + jj] = (jj < nk && g < nh) ? part[g] : FA_NEG_INF;
            }
        }
        __syncthreads();
        for (int g = warp; g < GB; g += DEC_THREADS / 32) {
            float mx = FA_NEG_INF;
            for (int j = lane; j < TK; j += 32) mx = fmaxf(mx, sS[g * TK + j]);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float mo = sM[g];
            const float mn = fmaxf(mo, mx);
            const float ms = mn == FA_NEG_INF ? 0.f : mn;
            float ps = 0.f;
            for (int j = lane; j < TK; j += 32) {
                float e = fa_exp2(sS[g * TK + j] - ms);
                sS[g * TK + j] = e;
                ps += e;
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
            if (lane == 0) {
                const float a = fa_exp2(mo - ms);
                sA[g] = a;
                sL[g] = sL[g] * a + ps;
                sM[g] = mn;
            }
        }
        __syncthreads();
#pragma unroll
        for (int g = 0; g < GB; g++) {
            const float a = sA[g];
#pragma unroll
            for (int e = 0; e < VE; e++) acc[g][e] *= a;
        }
#pragma unroll
        for (int i = 0; i < NI; i++) {
            const int jj = ks + KPB * i;
            if (jj < nk) {
                MpVec<T, 16 / sizeof(T)> vv;
                vv.raw = vr[i];
#pragma unroll
                for (int g = 0; g < GB; g++) {
                    const float pg = sS[g * TK + jj];
#pragma unroll
                    for (int e = 0; e < VE; e++) acc[g][e] = fmaf(pg, Ty<T>::ld(vv.v[e]), acc[g][e]);
                }
            }
        }
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < GB; g++)
#pragma unroll
        for (int e = 0; e < VE; e++) sRed[(ks * GB + g) * D + c * VE + e] = acc[g][e];
    __syncthreads();
    float* wo = (float*)p.ws_o;
    float* wl = (float*)p.ws_lse;
    const bool any = ke > kb;
    for (int idx = tid; idx < nh * D; idx += DEC_THREADS) {
        const int g = idx / D, d = idx - g * D;
        float sum = 0.f;
#pragma unroll
        for (int k2 = 0; k2 < KPB; k2++) sum += sRed[(k2 * GB + g) * D + d];
        const float l = any ? sL[g] : 0.f;
        wo[(((i64)b * p.n_heads + h0 + g) * p.splits + s) * D + d] = l > 0.f ? sum / l : 0.f;
    }
    for (int g = tid; g < nh; g += DEC_THREADS) {
        const float l = any ? sL[g] : 0.f;
        wl[((i64)b * p.n_heads + h0 + g) * p.splits + s] = l > 0.f ? sM[g] + log2f(l) : FA_NEG_INF;
    }
}

#define DEC_VEC(D, G) \
    extern "C" __global__ void __launch_bounds__(DEC_THREADS) decode_vec_d##D##_g##G(const DecParams p) { decode_vec<D, G>(p); }
DEC_VEC(64, 1) DEC_VEC(64, 2) DEC_VEC(64, 4) DEC_VEC(64, 8)
DEC_VEC(128, 1) DEC_VEC(128, 2) DEC_VEC(128, 4) DEC_VEC(128, 8)
DEC_VEC(256, 1) DEC_VEC(256, 2) DEC_VEC(256, 4) DEC_VEC(256, 8)

// Merges the splits of one (sequence, head): weights 2^(lse_s - max) computed once into shared
// memory, then each thread sums one dim over a strided subset of the splits (independent loads,
// unrolled) and the subsets are added through shared memory.
#define DEC_MAXS 256
extern "C" __global__ void __launch_bounds__(DEC_THREADS) decode_combine(const DecParams p) {
    __shared__ float sw[DEC_MAXS];
    __shared__ float sred[DEC_THREADS];
    __shared__ float swarp[DEC_THREADS / 32];
    const int bh = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = bh / p.n_heads, h = bh - b * p.n_heads;
    const int D = p.head_dim, S = p.splits;
    const float* wo = (const float*)p.ws_o + (i64)bh * S * D;
    const float* wl = (const float*)p.ws_lse + (i64)bh * S;
    T* O = (T*)p.o.ptr + (i64)b * p.o.sb + (i64)h * p.o.sh;
    // max of the log-sum-exps
    float mx = FA_NEG_INF;
    for (int s = tid; s < S; s += DEC_THREADS) {
        float v = wl[s];
        sw[s] = v;
        mx = fmaxf(mx, v);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) swarp[warp] = mx;
    __syncthreads();
    mx = swarp[0];
#pragma unroll
    for (int w = 1; w < DEC_THREADS / 32; w++) mx = fmaxf(mx, swarp[w]);
    const float ms = mx == FA_NEG_INF ? 0.f : mx;
    __syncthreads();
    float den = 0.f;
    for (int s = tid; s < S; s += DEC_THREADS) {
        float w = fa_exp2(sw[s] - ms);
        sw[s] = w;
        den += w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
    if (lane == 0) swarp[warp] = den;
    __syncthreads();
    den = 0.f;
#pragma unroll
    for (int w = 0; w < DEC_THREADS / 32; w++) den += swarp[w];
    const float inv = den > 0.f ? 1.f / den : 0.f;
    // dims: groups of D threads each take every nsg-th split (D <= 128), else a loop over dims
    if (D <= DEC_THREADS) {
        const int nsg = DEC_THREADS / D, d = tid % D, sg = tid / D;
        float num = 0.f;
        if (sg < nsg) {
#pragma unroll 8
            for (int s = sg; s < S; s += nsg) num = fmaf(sw[s], wo[(i64)s * D + d], num);
        }
        sred[tid] = num;
        __syncthreads();
        if (tid < D) {
            float t = 0.f;
            for (int k = 0; k < nsg; k++) t += sred[k * D + tid];
            O[tid] = Ty<T>::st(t * inv);
        }
    } else {
        for (int d = tid; d < D; d += DEC_THREADS) {
            float num = 0.f;
#pragma unroll 8
            for (int s = 0; s < S; s++) num = fmaf(sw[s], wo[(i64)s * D + d], num);
            O[d] = Ty<T>::st(num * inv);
        }
    }
}

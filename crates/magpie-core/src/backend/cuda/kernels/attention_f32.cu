// Float32 flash attention, forward and backward, in SIMT FFMA math (no tensor cores: float32
// without TF32, as PyTorch's memory-efficient kernels compute it). Appended to
// attention_common.cuh; compiled for T = float only.
//
// Every kernel runs 256 threads as a 16 x 16 grid (ty, tx). Tiles of the operands sit in shared
// memory, transposed ([d][row]) where a product walks d, so that each thread reads its 4 rows (or
// 2 columns) of a tile as one 16-byte (8-byte) load and keeps a small register tile of scores and
// of its output rows: per shared-memory load pair, 8 to 16 FFMAs. Head dims are padded with zeros
// to DP (32, 64 or 128); a thread owns DP/16 output columns (`fa32_col`).
//
//   fa32_fwd_dDP      O and the per-row log2-sum-exp: a block per 64 query rows, 64-key tiles
//   fa32_bwd_delta    delta_i = dO_i . O_i (a warp per row)
//   fa32_bwd_kv_dDP   dK, dV: a block per 64 keys of one kv head, walking the 32-row query tiles of
//                     every query head of its GQA group (no atomics, no reduction afterwards)
//   fa32_bwd_q_dDP    dQ: a block per 64 query rows, walking 32-key tiles
// With dS = P * (dP - delta), dP = dO V^T:  dV = P^T dO,  dK = scale dS^T Q,  dQ = scale dS K.

struct F32Params {
    int batch, n_heads, n_kv_heads, head_dim;
    int q_len, kv_len;
    int causal;  // 0 none, 1 top-left, 2 bottom-right
    float scale_log2;
    FaOpnd q, k, v, o, dout, dq, dk, dv;
    u64 lse;    // f32[batch * n_heads * q_len], log2 domain (+inf: the row saw no key); 0 in an inference forward
    u64 delta;  // f32[batch * n_heads * q_len]
    float scale;
    int vec;  // every operand 16-byte aligned with head_dim % 4 == 0: float4 global loads
};

// Output column c (0 <= c < DP/16) of thread tx: 16-byte groups of 4 at tx*4 (+64 per group) so
// that a row's columns of the 16 threads are contiguous; pairs at tx*2 when DP is 32.
template <int DP>
__device__ __forceinline__ int fa32_col(int c, int tx) {
    if (DP == 32) return tx * 2 + c;
    return (c >> 2) * 64 + tx * 4 + (c & 3);
}

// A thread's DP/16 values of smem row `row` (columns as fa32_col).
template <int DP>
__device__ __forceinline__ void fa32_ld_cols(float* r, const float* row, int tx) {
    if (DP == 32) {
        float2 v = *(const float2*)(row + tx * 2);
        r[0] = v.x;
        r[1] = v.y;
    } else {
#pragma unroll
        for (int g = 0; g < DP / 64; g++) {
            float4 v = *(const float4*)(row + g * 64 + tx * 4);
            r[4 * g] = v.x;
            r[4 * g + 1] = v.y;
            r[4 * g + 2] = v.z;
            r[4 * g + 3] = v.w;
        }
    }
}

// R rows [r0, r0 + R) of X (row stride ss; rows >= n and dims >= D as zeros) into smem S laid out
// transposed, S[d * R + r] for d < DP. Consecutive threads take consecutive rows, so the smem
// stores are free of bank conflicts.
template <int R, int DP>
__device__ __forceinline__ void fa32_load_t(float* S, const float* X, i64 ss, int r0, int n, int D, bool vec) {
    const int tid = threadIdx.x;
    if (vec) {
        for (int e = tid; e < R * (DP / 4); e += 256) {
            const int r = e % R, d4 = e / R;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r0 + r < n && d4 * 4 < D) v = *(const float4*)(X + (i64)(r0 + r) * ss + d4 * 4);
            S[(d4 * 4) * R + r] = v.x;
            S[(d4 * 4 + 1) * R + r] = v.y;
            S[(d4 * 4 + 2) * R + r] = v.z;
            S[(d4 * 4 + 3) * R + r] = v.w;
        }
    } else {
        for (int e = tid; e < R * DP; e += 256) {
            const int r = e % R, d = e / R;
            S[d * R + r] = (r0 + r < n && d < D) ? X[(i64)(r0 + r) * ss + d] : 0.f;
        }
    }
}

// R rows [r0, r0 + R) of X into smem S row-major, S[r * DP + d] (zeros as fa32_load_t).
template <int R, int DP>
__device__ __forceinline__ void fa32_load_n(float* S, const float* X, i64 ss, int r0, int n, int D, bool vec) {
    const int tid = threadIdx.x;
    if (vec) {
        for (int e = tid; e < R * (DP / 4); e += 256) {
            const int d4 = e % (DP / 4), r = e / (DP / 4);
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r0 + r < n && d4 * 4 < D) v = *(const float4*)(X + (i64)(r0 + r) * ss + d4 * 4);
            *(float4*)(S + r * DP + d4 * 4) = v;
        }
    } else {
        for (int e = tid; e < R * DP; e += 256) {
            const int d = e % DP, r = e / DP;
            S[r * DP + d] = (r0 + r < n && d < D) ? X[(i64)(r0 + r) * ss + d] : 0.f;
        }
    }
}

// Writes a thread's [4 rows x DP/16 cols] tile (times mul) to rows r0 + ty*4 + i of X (rows < n, cols < D).
template <int DP>
__device__ __forceinline__ void fa32_store(float* X, i64 ss, int r0, int n, int D, const float (*acc)[DP / 16], float mul, int tx, int ty) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = r0 + ty * 4 + i;
        if (r >= n) continue;
#pragma unroll
        for (int c = 0; c < DP / 16; c++) {
            const int d = fa32_col<DP>(c, tx);
            if (d < D) X[(i64)r * ss + d] = acc[i][c] * mul;
        }
    }
}

__device__ __forceinline__ const float* fa32_at(const FaOpnd& o, int b, int h) { return (const float*)o.ptr + (i64)b * o.sb + (i64)h * o.sh; }
__device__ __forceinline__ float* fa32_at_mut(const FaOpnd& o, int b, int h) { return (float*)o.ptr + (i64)b * o.sb + (i64)h * o.sh; }

// The forward: query tile of 64 rows x keys in tiles of 64; thread (ty, tx) holds scores of rows
// ty*4 + i and keys tx*4 + j, and output rows ty*4 + i at its fa32_col columns. Online softmax in
// the log2 domain; each thread keeps a partial row sum over its own keys (the running maximum is
// the same for the 16 threads of a row), summed over them at the end.
template <int DP>
__device__ __forceinline__ void fa32_fwd(const F32Params& p) {
    constexpr int BM = 64, BN = 64, C = DP / 16;
    float* Qt = (float*)fa_smem;  // [DP][BM]
    float* Kt = Qt + DP * BM;     // [DP][BN]
    float* Vs = Kt + DP * BN;     // [BN][DP]
    float* Pt = Vs + BN * DP;     // [BN][BM + 4] (padded against bank conflicts of the transposed stores)
    constexpr int PS = BM + 4;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (p.n_heads / p.n_kv_heads);
    const int D = p.head_dim, L = p.q_len, S = p.kv_len;
    const int off = p.causal == 2 ? S - L : 0;
    const bool vec = p.vec != 0;
    const float* Q = fa32_at(p.q, b, h);
    const float* K = fa32_at(p.k, b, hk);
    const float* V = fa32_at(p.v, b, hk);
    fa32_load_t<BM, DP>(Qt, Q, p.q.ss, q0, L, D, vec);
    float acc[4][C], m[4], l[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = FA_NEG_INF;
        l[i] = 0.f;
#pragma unroll
        for (int c = 0; c < C; c++) acc[i][c] = 0.f;
    }
    int kend = S;
    if (p.causal) kend = max(0, min(S, q0 + BM + off));
    for (int n0 = 0; n0 < kend; n0 += BN) {
        __syncthreads();  // the previous tile's Kt, Vs, Pt are read
        fa32_load_t<BN, DP>(Kt, K, p.k.ss, n0, S, D, vec);
        fa32_load_n<BN, DP>(Vs, V, p.v.ss, n0, S, D, vec);
        __syncthreads();
        float s[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) s[i][j] = 0.f;
#pragma unroll 8
        for (int d = 0; d < DP; d++) {
            const float4 a = *(const float4*)(Qt + d * BM + ty * 4);
            const float4 k = *(const float4*)(Kt + d * BN + tx * 4);
            const float av[4] = {a.x, a.y, a.z, a.w}, kv[4] = {k.x, k.y, k.z, k.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) s[i][j] = fmaf(av[i], kv[j], s[i][j]);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = q0 + ty * 4 + i;
            float mx = FA_NEG_INF;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int col = n0 + tx * 4 + j;
                float x = s[i][j] * p.scale_log2;
                if (col >= S || (p.causal && col > row + off)) x = FA_NEG_INF;
                s[i][j] = x;
                mx = fmaxf(mx, x);
            }
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float mn = fmaxf(m[i], mx);
            const float mu = mn == FA_NEG_INF ? 0.f : mn;
            const float alpha = fa_exp2(m[i] - mu);
            m[i] = mn;
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = fa_exp2(s[i][j] - mu);
                sum += s[i][j];
            }
            l[i] = l[i] * alpha + sum;
#pragma unroll
            for (int c = 0; c < C; c++) acc[i][c] *= alpha;
        }
#pragma unroll
        for (int j = 0; j < 4; j++) *(float4*)(Pt + (tx * 4 + j) * PS + ty * 4) = make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
        __syncthreads();
#pragma unroll 4
        for (int n = 0; n < BN; n++) {
            const float4 a = *(const float4*)(Pt + n * PS + ty * 4);
            float vv[C];
            fa32_ld_cols<DP>(vv, Vs + n * DP, tx);
            const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int c = 0; c < C; c++) acc[i][c] = fmaf(av[i], vv[c], acc[i][c]);
        }
    }
    float inv[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float t = l[i];
#pragma unroll
        for (int o = 1; o < 16; o <<= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
        l[i] = t;
        inv[i] = t > 0.f ? 1.f / t : 0.f;
#pragma unroll
        for (int c = 0; c < C; c++) acc[i][c] *= inv[i];
    }
    fa32_store<DP>(fa32_at_mut(p.o, b, h), p.o.ss, q0, L, D, acc, 1.f, tx, ty);
    if (p.lse && tx == 0) {
        float* Lr = (float*)p.lse + ((i64)b * p.n_heads + h) * L;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = q0 + ty * 4 + i;
            if (r < L) Lr[r] = l[i] > 0.f ? m[i] + log2f(l[i]) : FA_POS_INF;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) fa32_fwd_d32(const F32Params p) { fa32_fwd<32>(p); }
extern "C" __global__ void __launch_bounds__(256, 3) fa32_fwd_d64(const F32Params p) { fa32_fwd<64>(p); }
extern "C" __global__ void __launch_bounds__(256) fa32_fwd_d128(const F32Params p) { fa32_fwd<128>(p); }

// delta_i = dO_i . O_i: a warp per query row.
extern "C" __global__ void __launch_bounds__(256) fa32_bwd_delta(const F32Params p) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const i64 row = (i64)blockIdx.x * 8 + warp;
    const i64 rows = (i64)p.batch * p.n_heads * p.q_len;
    if (row >= rows) return;
    const int i = (int)(row % p.q_len);
    const int h = (int)((row / p.q_len) % p.n_heads);
    const int b = (int)(row / ((i64)p.q_len * p.n_heads));
    const float* O = fa32_at(p.o, b, h) + (i64)i * p.o.ss;
    const float* G = fa32_at(p.dout, b, h) + (i64)i * p.dout.ss;
    float a = 0.f;
    for (int d = lane; d < p.head_dim; d += 32) a = fmaf(O[d], G[d], a);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
    if (lane == 0) ((float*)p.delta)[row] = a;
}

// dK, dV for 64 keys of kv head hk: thread (ty, tx) holds the scores of keys ty*4 + i against
// queries tx*2 + j of each 32-row query tile, and dK/dV rows ty*4 + i at its fa32_col columns.
template <int DP>
__device__ __forceinline__ void fa32_bwd_kv(const F32Params& p) {
    constexpr int BN = 64, BM = 32, C = DP / 16;
    float* Kt = (float*)fa_smem;  // [DP][BN]
    float* Vt = Kt + DP * BN;     // [DP][BN]
    float* Qt = Vt + DP * BN;     // [DP][BM]
    float* Qs = Qt + DP * BM;     // [BM][DP]
    float* Gt = Qs + BM * DP;     // dO [DP][BM]
    float* Gs = Gt + DP * BM;     // dO [BM][DP]
    constexpr int PS = BN + 4;    // padded rows of Ps, Ds
    float* Ps = Gs + BM * DP;     // [BM][PS]
    float* Ds = Ps + BM * PS;     // dS [BM][PS]
    float* Ls = Ds + BM * PS;     // lse [BM]
    float* Es = Ls + BM;          // delta [BM]
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int n0 = blockIdx.x * BN, hk = blockIdx.y, b = blockIdx.z;
    const int group = p.n_heads / p.n_kv_heads;
    const int D = p.head_dim, L = p.q_len, S = p.kv_len;
    const int off = p.causal == 2 ? S - L : 0;
    const bool vec = p.vec != 0;
    fa32_load_t<BN, DP>(Kt, fa32_at(p.k, b, hk), p.k.ss, n0, S, D, vec);
    fa32_load_t<BN, DP>(Vt, fa32_at(p.v, b, hk), p.v.ss, n0, S, D, vec);
    float dk[4][C], dv[4][C];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int c = 0; c < C; c++) dk[i][c] = dv[i][c] = 0.f;
    // the first query that sees key n0: i + off >= n0
    const int mstart = p.causal ? max(0, n0 - off) / BM * BM : 0;
    for (int g = 0; g < group; g++) {
        const int h = hk * group + g;
        const float* Q = fa32_at(p.q, b, h);
        const float* G = fa32_at(p.dout, b, h);
        const float* LS = (const float*)p.lse + ((i64)b * p.n_heads + h) * L;
        const float* DE = (const float*)p.delta + ((i64)b * p.n_heads + h) * L;
        for (int m0 = mstart; m0 < L; m0 += BM) {
            __syncthreads();  // the previous tile is read
            fa32_load_t<BM, DP>(Qt, Q, p.q.ss, m0, L, D, vec);
            fa32_load_n<BM, DP>(Qs, Q, p.q.ss, m0, L, D, vec);
            fa32_load_t<BM, DP>(Gt, G, p.dout.ss, m0, L, D, vec);
            fa32_load_n<BM, DP>(Gs, G, p.dout.ss, m0, L, D, vec);
            if (tid < BM) {
                const bool in = m0 + tid < L;
                Ls[tid] = in ? LS[m0 + tid] : FA_POS_INF;
                Es[tid] = in ? DE[m0 + tid] : 0.f;
            }
            __syncthreads();
            float s[4][2], dp[4][2];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) s[i][j] = dp[i][j] = 0.f;
#pragma unroll 8
            for (int d = 0; d < DP; d++) {
                const float4 k = *(const float4*)(Kt + d * BN + ty * 4);
                const float4 v = *(const float4*)(Vt + d * BN + ty * 4);
                const float2 q = *(const float2*)(Qt + d * BM + tx * 2);
                const float2 o = *(const float2*)(Gt + d * BM + tx * 2);
                const float kv[4] = {k.x, k.y, k.z, k.w}, vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    s[i][0] = fmaf(kv[i], q.x, s[i][0]);
                    s[i][1] = fmaf(kv[i], q.y, s[i][1]);
                    dp[i][0] = fmaf(vv[i], o.x, dp[i][0]);
                    dp[i][1] = fmaf(vv[i], o.y, dp[i][1]);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int mq = tx * 2 + j, row = m0 + mq;
                const float lse = Ls[mq], de = Es[mq];
                float pv[4], ds[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int col = n0 + ty * 4 + i;
                    float pr = fa_exp2(s[i][j] * p.scale_log2 - lse);
                    if (col >= S || (p.causal && col > row + off)) pr = 0.f;
                    pv[i] = pr;
                    ds[i] = pr * (dp[i][j] - de);
                }
                *(float4*)(Ps + mq * PS + ty * 4) = make_float4(pv[0], pv[1], pv[2], pv[3]);
                *(float4*)(Ds + mq * PS + ty * 4) = make_float4(ds[0], ds[1], ds[2], ds[3]);
            }
            __syncthreads();
#pragma unroll 4
            for (int mq = 0; mq < BM; mq++) {
                const float4 a = *(const float4*)(Ps + mq * PS + ty * 4);
                const float4 e = *(const float4*)(Ds + mq * PS + ty * 4);
                float go[C], qq[C];
                fa32_ld_cols<DP>(go, Gs + mq * DP, tx);
                fa32_ld_cols<DP>(qq, Qs + mq * DP, tx);
                const float av[4] = {a.x, a.y, a.z, a.w}, ev[4] = {e.x, e.y, e.z, e.w};
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int c = 0; c < C; c++) {
                        dv[i][c] = fmaf(av[i], go[c], dv[i][c]);
                        dk[i][c] = fmaf(ev[i], qq[c], dk[i][c]);
                    }
            }
        }
    }
    fa32_store<DP>(fa32_at_mut(p.dk, b, hk), p.dk.ss, n0, S, D, dk, p.scale, tx, ty);
    fa32_store<DP>(fa32_at_mut(p.dv, b, hk), p.dv.ss, n0, S, D, dv, 1.f, tx, ty);
}

extern "C" __global__ void __launch_bounds__(256) fa32_bwd_kv_d32(const F32Params p) { fa32_bwd_kv<32>(p); }
extern "C" __global__ void __launch_bounds__(256) fa32_bwd_kv_d64(const F32Params p) { fa32_bwd_kv<64>(p); }
extern "C" __global__ void __launch_bounds__(256) fa32_bwd_kv_d128(const F32Params p) { fa32_bwd_kv<128>(p); }

// dQ for 64 query rows of head h: thread (ty, tx) holds the scores of rows ty*4 + i against keys
// tx*2 + j of each 32-key tile, and dQ rows ty*4 + i at its fa32_col columns.
template <int DP>
__device__ __forceinline__ void fa32_bwd_q(const F32Params& p) {
    constexpr int BM = 64, BN = 32, C = DP / 16;
    float* Qt = (float*)fa_smem;  // [DP][BM]
    float* Gt = Qt + DP * BM;     // dO [DP][BM]
    float* Kt = Gt + DP * BM;     // [DP][BN]
    float* Vt = Kt + DP * BN;     // [DP][BN]
    float* Ks = Vt + DP * BN;     // [BN][DP]
    float* Dt = Ks + BN * DP;     // dS [BN][BM + 4]
    constexpr int PS = BM + 4;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (p.n_heads / p.n_kv_heads);
    const int D = p.head_dim, L = p.q_len, S = p.kv_len;
    const int off = p.causal == 2 ? S - L : 0;
    const bool vec = p.vec != 0;
    const float* K = fa32_at(p.k, b, hk);
    const float* V = fa32_at(p.v, b, hk);
    fa32_load_t<BM, DP>(Qt, fa32_at(p.q, b, h), p.q.ss, q0, L, D, vec);
    fa32_load_t<BM, DP>(Gt, fa32_at(p.dout, b, h), p.dout.ss, q0, L, D, vec);
    float lse[4], de[4], dq[4][C];
    const float* LS = (const float*)p.lse + ((i64)b * p.n_heads + h) * L;
    const float* DE = (const float*)p.delta + ((i64)b * p.n_heads + h) * L;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = q0 + ty * 4 + i;
        lse[i] = r < L ? LS[r] : FA_POS_INF;
        de[i] = r < L ? DE[r] : 0.f;
#pragma unroll
        for (int c = 0; c < C; c++) dq[i][c] = 0.f;
    }
    int kend = S;
    if (p.causal) kend = max(0, min(S, q0 + BM + off));
    for (int n0 = 0; n0 < kend; n0 += BN) {
        __syncthreads();
        fa32_load_t<BN, DP>(Kt, K, p.k.ss, n0, S, D, vec);
        fa32_load_t<BN, DP>(Vt, V, p.v.ss, n0, S, D, vec);
        fa32_load_n<BN, DP>(Ks, K, p.k.ss, n0, S, D, vec);
        __syncthreads();
        float s[4][2], dp[4][2];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 2; j++) s[i][j] = dp[i][j] = 0.f;
#pragma unroll 8
        for (int d = 0; d < DP; d++) {
            const float4 q = *(const float4*)(Qt + d * BM + ty * 4);
            const float4 o = *(const float4*)(Gt + d * BM + ty * 4);
            const float2 k = *(const float2*)(Kt + d * BN + tx * 2);
            const float2 v = *(const float2*)(Vt + d * BN + tx * 2);
            const float qv[4] = {q.x, q.y, q.z, q.w}, ov[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                s[i][0] = fmaf(qv[i], k.x, s[i][0]);
                s[i][1] = fmaf(qv[i], k.y, s[i][1]);
                dp[i][0] = fmaf(ov[i], v.x, dp[i][0]);
                dp[i][1] = fmaf(ov[i], v.y, dp[i][1]);
            }
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int nk = tx * 2 + j, col = n0 + nk;
            float ds[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = q0 + ty * 4 + i;
                float pr = fa_exp2(s[i][j] * p.scale_log2 - lse[i]);
                if (col >= S || (p.causal && col > row + off)) pr = 0.f;
                ds[i] = pr * (dp[i][j] - de[i]);
            }
            *(float4*)(Dt + nk * PS + ty * 4) = make_float4(ds[0], ds[1], ds[2], ds[3]);
        }
        __syncthreads();
#pragma unroll 4
        for (int n = 0; n < BN; n++) {
            const float4 a = *(const float4*)(Dt + n * PS + ty * 4);
            float kk[C];
            fa32_ld_cols<DP>(kk, Ks + n * DP, tx);
            const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int c = 0; c < C; c++) dq[i][c] = fmaf(av[i], kk[c], dq[i][c]);
        }
    }
    fa32_store<DP>(fa32_at_mut(p.dq, b, h), p.dq.ss, q0, L, D, dq, p.scale, tx, ty);
}

extern "C" __global__ void __launch_bounds__(256) fa32_bwd_q_d32(const F32Params p) { fa32_bwd_q<32>(p); }
extern "C" __global__ void __launch_bounds__(256) fa32_bwd_q_d64(const F32Params p) { fa32_bwd_q<64>(p); }
extern "C" __global__ void __launch_bounds__(256) fa32_bwd_q_d128(const F32Params p) { fa32_bwd_q<128>(p); }

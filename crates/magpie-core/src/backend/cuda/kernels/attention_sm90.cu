// Flash attention forward for Hopper (sm_90a), head_dim 64, f16/bf16 with f32 accumulation (after
// the preamble and attention_common.cuh; T is the element type). The module is compiled for
// sm_90a only: wgmma needs the arch-specific target. The host (attention_sm90.rs) uses it on
// sm_90 devices; every other GPU keeps the kernels of attention.cu.
//
// One block: NWG consumer warpgroups, each owning 64 query rows, plus one producer warp.
//   producer  loads the Q tile once, then K/V tiles of 128 keys into a ring of NS stages
//             (cp.async, rows XOR-swizzled in 16-byte chunks: the 128-byte swizzle wgmma's
//             descriptors read; keys past the sequence's length are zero-filled). Each lane's
//             copies complete on the stage's `full` mbarrier (cp.async.mbarrier.arrive.noinc).
//   consumer  per tile: S = Q K^T by wgmma (m64n128k16, both operands from shared memory), the
//             online softmax on the accumulators in registers (the FA_FOLD rules of attention.cu:
//             scale folded into the exponential, stale row max within 2^8), P packed to 16 bits
//             in registers, O += P V by wgmma (m64n64k16, A from registers, V MN-major), then each
//             warp arrives on the stage's `empty` mbarrier so the producer can refill it.
// The warpgroups run unsynchronized (no block barrier in the loop), so one's softmax overlaps the
// other's matrix products. DEFER: O += P V of tile j is left in flight while S of tile j+1 issues
// (waited for together), so the tensor cores get the next product without a gap.

#define S9_BN 128
#define S9_D 64

__device__ __forceinline__ void s9_fence_acc() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void s9_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void s9_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving accesses of r across the asynchronous products (and from reusing
// an A fragment's registers before the product that reads it has been waited for).
template <int N> __device__ __forceinline__ void s9_keep(float* r) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void s9_keep_u(unsigned* r) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}
// The generic-proxy writes (cp.async) this thread has seen become visible to the tensor cores.
__device__ __forceinline__ void s9_fence_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void s9_bar_init(unsigned addr, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void s9_bar_wait(unsigned addr, unsigned parity) {
    asm volatile(
        "{\n.reg .pred p;\nS9_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra S9_WAIT;\n}\n" ::"r"(addr),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ void s9_bar_arrive(unsigned addr) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(addr) : "memory");
}
// Arrives on the mbarrier once every cp.async this thread issued so far has landed.
__device__ __forceinline__ void s9_cp_arrive(unsigned addr) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(addr) : "memory");
}

// A shared-memory matrix descriptor: 128-byte swizzle, 8-row groups 1024 bytes apart (SBO); the
// leading offset is unused by both layouts here (K-major, and MN-major with N = 64 = one atom).
__device__ __forceinline__ u64 s9_desc(unsigned saddr) {
    return (u64)((saddr & 0x3ffffu) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

// d[0..64) += A B for m64n128k16, A and B from shared memory (descriptors; K-major);
// acc = 0 overwrites d instead.
template <bool BF>
__device__ __forceinline__ void s9_ss_n128(float* d, u64 da, u64 db, int acc) {
    if (BF) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
    } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
    }
}
// d[0..32) += A B for m64n64k16, A from registers (the m16n8k16 A fragment of each warp),
// B from shared memory MN-major (transposed).
template <bool BF>
__device__ __forceinline__ void s9_rs_n64(float* d, const unsigned* a, u64 db) {
    if (BF) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
}


// The online softmax of one tile's scores sc (m64n128 accumulator fragment: rows row0 and row0 + 8
// of this thread, keys j0 + 8 nb + 2 t + {0, 1}), the FA_FOLD rules of attention.cu: raw scores
// masked to -inf where key >= the row's limit (only when `need`), the row max in the log2 domain
// kept stale until a tile exceeds it by more than 2^8, O and the row sums rescaled when it moves;
// P = 2^(s scale - max) packed to 16 bits as the A fragments of O += P V.
template <bool BF>
__device__ __forceinline__ void s9_softmax(float* sc, float* o, unsigned (*pa)[4], int j0, bool need, int lim0, int lim1, int t, float sl2, float& mr0, float& mr1, float& l0, float& l1) {
    constexpr float TAU = 8.f;  // FA_TAU of attention.cu
    float mx0 = FA_NEG_INF, mx1 = FA_NEG_INF;
#pragma unroll
    for (int nb = 0; nb < S9_BN / 8; nb++) {
        if (need) {
            const int key = j0 + nb * 8 + 2 * t;
            if (key >= lim0) sc[nb * 4 + 0] = FA_NEG_INF;
            if (key + 1 >= lim0) sc[nb * 4 + 1] = FA_NEG_INF;
            if (key >= lim1) sc[nb * 4 + 2] = FA_NEG_INF;
            if (key + 1 >= lim1) sc[nb * 4 + 3] = FA_NEG_INF;
        }
        mx0 = fmaxf(mx0, fmaxf(sc[nb * 4 + 0], sc[nb * 4 + 1]));
        mx1 = fmaxf(mx1, fmaxf(sc[nb * 4 + 2], sc[nb * 4 + 3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // the tile's max in the log2 domain (scale > 0); a row's max moves only when this exceeds it
    // by more than TAU (the exponentials stay <= 2^TAU)
    mx0 *= sl2;
    mx1 *= sl2;
    const float mn0 = (mr0 == FA_NEG_INF || mx0 > mr0 + TAU) ? fmaxf(mr0, mx0) : mr0;
    const float mn1 = (mr1 == FA_NEG_INF || mx1 > mr1 + TAU) ? fmaxf(mr1, mx1) : mr1;
    const float ms0 = mn0 == FA_NEG_INF ? 0.f : mn0, ms1 = mn1 == FA_NEG_INF ? 0.f : mn1;
    if (__any_sync(0xffffffffu, mn0 != mr0 || mn1 != mr1)) {
        const float a0 = fa_exp2(mr0 - ms0), a1 = fa_exp2(mr1 - ms1);
#pragma unroll
        for (int i = 0; i < S9_D / 8; i++) {
            o[i * 4 + 0] *= a0;
            o[i * 4 + 1] *= a0;
            o[i * 4 + 2] *= a1;
            o[i * 4 + 3] *= a1;
        }
        l0 *= a0;
        l1 *= a1;
    }
    mr0 = mn0;
    mr1 = mn1;
    float ps0 = 0.f, ps1 = 0.f;
#pragma unroll
    for (int nb = 0; nb < S9_BN / 8; nb++) {
        sc[nb * 4 + 0] = fa_exp2(fmaf(sc[nb * 4 + 0], sl2, -ms0));
        sc[nb * 4 + 1] = fa_exp2(fmaf(sc[nb * 4 + 1], sl2, -ms0));
        sc[nb * 4 + 2] = fa_exp2(fmaf(sc[nb * 4 + 2], sl2, -ms1));
        sc[nb * 4 + 3] = fa_exp2(fmaf(sc[nb * 4 + 3], sl2, -ms1));
        ps0 += sc[nb * 4 + 0] + sc[nb * 4 + 1];
        ps1 += sc[nb * 4 + 2] + sc[nb * 4 + 3];
    }
    l0 += ps0;
    l1 += ps1;
#pragma unroll
    for (int kk = 0; kk < S9_BN / 16; kk++) {
        pa[kk][0] = fa_pack<BF>(sc[8 * kk + 0], sc[8 * kk + 1]);
        pa[kk][1] = fa_pack<BF>(sc[8 * kk + 2], sc[8 * kk + 3]);
        pa[kk][2] = fa_pack<BF>(sc[8 * kk + 4], sc[8 * kk + 5]);
        pa[kk][3] = fa_pack<BF>(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
}

// S = Q K^T of one tile: 4 k-steps of 16 dims (32 bytes along the swizzled 128-byte rows).
template <bool BF>
__device__ __forceinline__ void s9_qk(float* sc, unsigned qaddr, unsigned kaddr) {
    s9_fence_acc();
#pragma unroll
    for (int ks = 0; ks < S9_D / 16; ks++) s9_ss_n128<BF>(sc, s9_desc(qaddr + ks * 32), s9_desc(kaddr + ks * 32), ks);
    s9_commit();
}

// O += P V of one tile: 8 k-steps of 16 keys (16 rows of 128 bytes of V each).
template <bool BF>
__device__ __forceinline__ void s9_pv(float* o, unsigned (*pa)[4], unsigned vaddr) {
    s9_fence_acc();
#pragma unroll
    for (int kk = 0; kk < S9_BN / 16; kk++) s9_rs_n64<BF>(o, pa[kk], s9_desc(vaddr + kk * 16 * 128));
    s9_commit();
}

// Modes of the consumer loop:
//   0  S, wait, softmax, P V, wait: one product in flight per warpgroup at a time
//   1  (DEFER) P V of tile j left in flight while S of tile j+1 issues; both waited for together
//   2  (OVERLAP) S of tile j+1 issued before the softmax of tile j (two score buffers): the
//      tensor cores work while this warpgroup's softmax runs; then P V of tile j, and a wait for
//      both.
template <bool B> struct S9Bool { static constexpr bool value = B; };

template <int NWG, int PW, int NS, int MODE, bool BF>
__device__ __forceinline__ void s9_consumer(const FaParams& p, unsigned short* sQ, unsigned short* sKV, unsigned qbar, unsigned full0, unsigned empty0, int m0, int kvl, int off, int ntiles, int warp, int lane) {
    constexpr int BN = S9_BN, D = S9_D;
    typedef unsigned short u16;
    const int h = blockIdx.y, b = blockIdx.z;
    if (PW == 4) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int wg = warp >> 2, wi = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const float sl2 = p.scale_log2;
    const int wrow = m0 + wg * 64;                         // first query row of this warpgroup
    const int row0 = wrow + wi * 16 + g, row1 = row0 + 8;  // this thread's two rows
    const int lim0 = fa_limit(p.causal, kvl, off, row0), lim1 = fa_limit(p.causal, kvl, off, row1);
    const int wlast = min(wrow + 63, p.q_len - 1);
    const int wkend = wrow >= p.q_len ? 0 : (p.causal ? min(kvl, wlast + off + 1) : kvl);
    const int wtiles = wkend > 0 ? (wkend + BN - 1) / BN : 0;  // tiles this warpgroup computes (<= ntiles)
    const unsigned qaddr = fa_smem_addr(sQ + wg * 64 * D);
    const unsigned kv0 = fa_smem_addr(sKV);
    auto kaddr = [&](int s) { return kv0 + s * 2 * BN * D * 2; };
    auto vaddr = [&](int s) { return kv0 + s * 2 * BN * D * 2 + BN * D * 2; };
    // mask only where the tile crosses a boundary (warpgroup-uniform)
    auto need = [&](int j0) { return (j0 + BN > kvl) || (p.causal && j0 + BN - 1 > wrow + off); };

    float o[32];
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = 0.f;
    float mr0 = FA_NEG_INF, mr1 = FA_NEG_INF, l0 = 0.f, l1 = 0.f;
    unsigned pa[8][4];
    s9_bar_wait(qbar, 0);

    if constexpr (MODE == 2) {
        float sa[64], sb[64];
        // one tile: S of tile j+1 goes into `nx` while the softmax of tile j (scores in `cu`,
        // complete) runs; then O += P V of tile j, and both products are waited for before the
        // next tile, so that no product stays in flight across the loop's back edge. LAST: no
        // tile j+1 (peeled, so that the groups in flight at each wait are known when compiling).
        auto tile = [&](int j, float* cu, float* nx, auto last) {
            if constexpr (!decltype(last)::value) {
                const int s1 = (j + 1) % NS;
                s9_bar_wait(full0 + 8 * s1, ((j + 1) / NS) & 1);
                s9_fence_proxy();
                s9_qk<BF>(nx, qaddr, kaddr(s1));
            }
            s9_softmax<BF>(cu, o, pa, j * BN, need(j * BN), lim0, lim1, t, sl2, mr0, mr1, l0, l1);
            s9_pv<BF>(o, pa, vaddr(j % NS));
            s9_wait<0>();
            if constexpr (!decltype(last)::value) s9_keep<64>(nx);
            s9_keep<32>(o);
            s9_keep_u<32>(&pa[0][0]);
            if (lane == 0) s9_bar_arrive(empty0 + 8 * (j % NS));
        };
        if (wtiles > 0) {
            s9_bar_wait(full0, 0);
            s9_fence_proxy();
            s9_qk<BF>(sa, qaddr, kaddr(0));
            s9_wait<0>();
            s9_keep<64>(sa);
        }
        S9Bool<false> more;
        S9Bool<true> last;
        int j = 0;
        for (; j + 2 < wtiles; j += 2) {
            tile(j, sa, sb, more);
            tile(j + 1, sb, sa, more);
        }
        if (j + 1 < wtiles) {
            tile(j, sa, sb, more);
            tile(j + 1, sb, sa, last);
        } else if (j < wtiles) {
            tile(j, sa, sb, last);
        }
        for (int j = wtiles; j < ntiles; j++) {
            // past this warpgroup's diagonal: only release the stages (after they were filled, so
            // that the arrival counts toward this tile's phase)
            s9_bar_wait(full0 + 8 * (j % NS), (j / NS) & 1);
            if (lane == 0) s9_bar_arrive(empty0 + 8 * (j % NS));
        }
    } else {
        int pend = -1;  // DEFER: the stage whose O += P V may still be in flight
        for (int j = 0; j < ntiles; j++) {
            const int s = j % NS;
            s9_bar_wait(full0 + 8 * s, (j / NS) & 1);
            if (j >= wtiles) {
                // past this warpgroup's diagonal: nothing to compute, only release the stage
                if (MODE == 1 && pend >= 0) {
                    s9_wait<0>();
                    s9_keep<32>(o);
                    s9_keep_u<32>(&pa[0][0]);
                    if (lane == 0) s9_bar_arrive(empty0 + 8 * pend);
                    pend = -1;
                }
                if (lane == 0) s9_bar_arrive(empty0 + 8 * s);
                continue;
            }
            s9_fence_proxy();
            float sc[64];
            s9_qk<BF>(sc, qaddr, kaddr(s));
            s9_wait<0>();
            s9_keep<64>(sc);
            if (MODE == 1) {
                s9_keep<32>(o);
                s9_keep_u<32>(&pa[0][0]);
                if (pend >= 0 && lane == 0) s9_bar_arrive(empty0 + 8 * pend);
                pend = -1;
            }
            s9_softmax<BF>(sc, o, pa, j * BN, need(j * BN), lim0, lim1, t, sl2, mr0, mr1, l0, l1);
            s9_pv<BF>(o, pa, vaddr(s));
            if (MODE == 1) {
                pend = s;
            } else {
                s9_wait<0>();
                s9_keep<32>(o);
                s9_keep_u<32>(&pa[0][0]);
                if (lane == 0) s9_bar_arrive(empty0 + 8 * s);
            }
        }
        if (MODE == 1) {
            s9_wait<0>();
            s9_keep<32>(o);
            s9_keep_u<32>(&pa[0][0]);
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
    if (p.lse && t == 0) {
        // log2-sum-exp of the scaled scores, for the backward pass
        float* L = (float*)p.lse + ((i64)b * p.n_heads + h) * p.q_len;
        if (row0 < p.q_len) L[row0] = l0 > 0.f ? mr0 + log2f(l0) : FA_POS_INF;
        if (row1 < p.q_len) L[row1] = l1 > 0.f ? mr1 + log2f(l1) : FA_POS_INF;
    }
    u16* O = (u16*)p.o.ptr + (i64)b * p.o.sb + (i64)h * p.o.sh;
#pragma unroll
    for (int db = 0; db < D / 8; db++) {
        int d = db * 8 + 2 * t;
        if (row0 < p.q_len) *(unsigned*)(O + (i64)row0 * p.o.ss + d) = fa_pack<BF>(o[db * 4 + 0] * i0, o[db * 4 + 1] * i0);
        if (row1 < p.q_len) *(unsigned*)(O + (i64)row1 * p.o.ss + d) = fa_pack<BF>(o[db * 4 + 2] * i1, o[db * 4 + 3] * i1);
    }
}


// PW: producer warps, 1 (a warp beside the consumers: at most 168 registers a thread) or 4 (a
// warpgroup that gives registers to the consumers with setmaxnreg: 40 for it, 232 for them).
template <int NWG, int PW, int NS, int MODE, bool BF>
__device__ __forceinline__ void flash_sm90(const FaParams& p) {
    constexpr int BM = 64 * NWG, BN = S9_BN, D = S9_D;
    typedef unsigned short u16;
    // shared memory: Q [BM][64], then NS stages of K [128][64] and V [128][64], then the
    // mbarriers; every tile 1024-byte aligned (the swizzle atom)
    const unsigned raw = fa_smem_addr(fa_smem);
    unsigned char* base = fa_smem + ((1024u - (raw & 1023u)) & 1023u);
    u16* sQ = (u16*)base;
    u16* sKV = sQ + BM * D;  // stage s: K at sKV + s * 2 * BN * D, V BN * D after it
    u64* bars = (u64*)(sKV + NS * 2 * BN * D);
    const unsigned qbar = fa_smem_addr(bars), full0 = qbar + 8, empty0 = full0 + 8 * NS;

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

    if (tid == 0) {
        s9_bar_init(qbar, 32 * PW);
#pragma unroll
        for (int s = 0; s < NS; s++) {
            s9_bar_init(full0 + 8 * s, 32 * PW);
            s9_bar_init(empty0 + 8 * s, 4 * NWG);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp >= 4 * NWG) {
        // ---- producer warp(s) ----
        if (PW == 4) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        const u16* Q = (const u16*)p.q.ptr + (i64)b * p.q.sb + (i64)h * p.q.sh;
        const u16* K = (const u16*)p.k.ptr + (i64)b * p.k.sb + (i64)kvh * p.k.sh;
        const u16* V = (const u16*)p.v.ptr + (i64)b * p.v.sb + (i64)kvh * p.v.sh;
        // this lane's 16-byte chunk and first row, of every 4 PW rows
        const int ch = lane & 7, r0 = (lane >> 3) + 4 * (warp - 4 * NWG);
        for (int r = r0; r < BM; r += 4 * PW) {
            bool ok = m0 + r < p.q_len;
            fa_cp16(sQ + r * D + ((ch ^ (r & 7)) * 8), ok ? (const void*)(Q + (i64)(m0 + r) * p.q.ss + ch * 8) : (const void*)Q, ok ? 16 : 0);
        }
        s9_cp_arrive(qbar);
        for (int j = 0; j < ntiles; j++) {
            const int s = j % NS;
            if (j >= NS) s9_bar_wait(empty0 + 8 * s, ((j / NS) - 1) & 1);
            u16* dk = sKV + s * 2 * BN * D;
            u16* dv = dk + BN * D;
            const int j0 = j * BN;
#pragma unroll 4
            for (int r = r0; r < BN; r += 4 * PW) {
                bool ok = j0 + r < kvl;
                int so = r * D + ((ch ^ (r & 7)) * 8);
                fa_cp16(dk + so, ok ? (const void*)(K + (i64)(j0 + r) * p.k.ss + ch * 8) : (const void*)K, ok ? 16 : 0);
                fa_cp16(dv + so, ok ? (const void*)(V + (i64)(j0 + r) * p.v.ss + ch * 8) : (const void*)V, ok ? 16 : 0);
            }
            s9_cp_arrive(full0 + 8 * s);
        }
        fa_cp_wait<0>();
    } else {
        // ---- consumer warpgroups (a function of their own: the register budget of setmaxnreg
        // applies to one branch) ----
        s9_consumer<NWG, PW, NS, MODE, BF>(p, sQ, sKV, qbar, full0, empty0, m0, kvl, off, ntiles, warp, lane);
    }
}

// name: flash_sm90_d64_w<consumer warpgroups>[p: a producer warpgroup, else a warp]s<stages>
// [d: DEFER, o: OVERLAP]; 32 (4 NWG + PW) threads
extern "C" __global__ void __launch_bounds__(288, 1) flash_sm90_d64_w2s2(const FaParams p) { flash_sm90<2, 1, 2, 0, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(288, 1) flash_sm90_d64_w2s2d(const FaParams p) { flash_sm90<2, 1, 2, 1, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(416, 1) flash_sm90_d64_w3s2(const FaParams p) { flash_sm90<3, 1, 2, 0, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(384, 1) flash_sm90_d64_w2ps2d(const FaParams p) { flash_sm90<2, 4, 2, 1, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(384, 1) flash_sm90_d64_w2ps3o(const FaParams p) { flash_sm90<2, 4, 3, 2, FaIsBf<T>::v>(p); }
extern "C" __global__ void __launch_bounds__(384, 1) flash_sm90_d64_w2ps2o(const FaParams p) { flash_sm90<2, 4, 2, 2, FaIsBf<T>::v>(p); }

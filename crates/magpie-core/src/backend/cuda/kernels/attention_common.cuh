// Shared by the flash attention kernels (attention.cu, attention_bwd.cu): operands and parameters,
// cp.async / ldmatrix / mma.sync helpers, masking rules.

#define FA_NEG_INF __int_as_float(0xff800000)
#define FA_POS_INF __int_as_float(0x7f800000)

// The dynamic shared memory of every kernel here.
extern __shared__ __align__(128) unsigned char fa_smem[];

// One operand: element (b, h, s, d) at ptr + (b*sb + h*sh + s*ss + d) elements.
struct FaOpnd {
    u64 ptr;
    i64 sb, sh, ss;
};

struct FaParams {
    int batch, n_heads, n_kv_heads, head_dim;
    int q_len, kv_len;
    int causal;  // 0 none, 1 top-left, 2 bottom-right
    float scale_log2;
    FaOpnd q, k, v, o;
    u64 kv_lens;  // device i32[batch], or 0
    u64 lse;      // device f32[batch * n_heads * q_len] (log2 domain, +inf for a row that sees no key), or 0
    int bk;       // keys per tile of the generic kernel
    int pad;
};

__device__ __forceinline__ float fa_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned fa_smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

// 16 bytes global -> shared, asynchronously; `bytes` 0 fills zeros.
__device__ __forceinline__ void fa_cp16(void* smem, const void* g, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(fa_smem_addr(smem)), "l"(g), "r"(bytes) : "memory");
}
__device__ __forceinline__ void fa_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void fa_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void fa_ldsm4(unsigned* r, const void* smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem_addr(smem)));
}
__device__ __forceinline__ void fa_ldsm4t(unsigned* r, const void* smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem_addr(smem)));
}

// c += a * b for one m16n8k16 tile (f32 accumulators).
template <bool BF>
__device__ __forceinline__ void fa_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    if (BF) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// Two floats as a packed pair of 16-bit floats (`lo` in the low half), round to nearest even.
template <bool BF>
__device__ __forceinline__ unsigned fa_pack(float lo, float hi) {
    unsigned r;
    if (BF) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

// The key count of sequence b (clamped to [0, kv_len]).
__device__ __forceinline__ int fa_kvlen(const FaParams& p, int b) {
    int n = p.kv_len;
    if (p.kv_lens) n = min(n, max(0, ((const int*)p.kv_lens)[b]));
    return n;
}

// Keys visible to query row i: [0, limit).
__device__ __forceinline__ int fa_limit(int causal, int kvl, int off, int i) {
    return causal ? min(kvl, i + off + 1) : kvl;
}

// Whether T (the module's element type) is bfloat16: selects the mma and pack instructions.
template <class X> struct FaIsBf { static constexpr bool v = false; };
template <> struct FaIsBf<bf16_t> { static constexpr bool v = true; };

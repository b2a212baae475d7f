// Copies between a GEMM operand and a buffer with aligned (padded) extents and leading dimension,
// so that cuBLAS can take its 16-byte aligned tensor-core kernels on shapes such as a 50257-wide
// vocabulary. T is the raw bit pattern of the element (i16 for f16/bf16, i32 for f32): a copy,
// with zeros (all-zero bits, 0.0 in every float format) where the destination lies past the source.

struct GemmPadParams {
    u64 src;       // element (b, r, c) at src + (b * src_bs + r * src_ld + c) * sizeof(T)
    u64 dst;       // element (b, r, c) at dst + (b * dst_bs + r * dst_ld + c) * sizeof(T)
    i64 src_bs;
    i64 src_ld;
    i64 dst_bs;
    i64 dst_ld;
    int batch;
    int src_rows;  // rows of the source; destination rows at or past it are zeros
    int src_cols;  // columns of the source; destination columns at or past it are zeros
    int dst_rows;
    int dst_cols;
    int segs;      // 256-column segments per destination row
};

// One warp per 256-column segment of a destination row; lane l handles columns l, l + 32, ...,
// so every load and store instruction of the warp touches 32 consecutive elements.
extern "C" __global__ void gemm_pad_copy(GemmPadParams p) {
    const T* __restrict__ src = (const T*)p.src;
    T* __restrict__ dst = (T*)p.dst;
    const int lane = threadIdx.x & 31;
    const i64 nseg = (i64)p.batch * p.dst_rows * p.segs;
    const i64 wstep = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < nseg; w += wstep) {
        const i64 row = w / p.segs;
        const int seg = (int)(w - row * p.segs);
        const i64 b = row / p.dst_rows;
        const int r = (int)(row - b * p.dst_rows);
        const T* s = src + b * p.src_bs + (i64)r * p.src_ld;
        T* d = dst + b * p.dst_bs + (i64)r * p.dst_ld;
        const bool rin = r < p.src_rows;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int c = seg * 256 + j * 32 + lane;
            if (c < p.dst_cols) d[c] = (rin && c < p.src_cols) ? s[c] : (T)0;
        }
    }
}

// scatter_add / index_add: atomic accumulation into a contiguous output (f32, f64, f16, bf16,
// i64, i32; the 16-bit floats by compare-and-swap on their 32-bit word). Summation order is not
// fixed, as in PyTorch. Out-of-range indices set *bad (read back by the host).

typedef Ty<T>::acc A;

// ---- atomic accumulation into storage of type T ----
__device__ __forceinline__ void atomic_add16(T* p, float v) {
    unsigned* base = (unsigned*)((u64)p & ~(u64)3);
    unsigned shift = ((u64)p & 2) ? 16 : 0;
    unsigned old = *base, assumed;
    do {
        assumed = old;
        T h;
        unsigned short bits = (unsigned short)((assumed >> shift) & 0xffffu);
        *reinterpret_cast<unsigned short*>(&h) = bits;
        T nh = Ty<T>::st(Ty<T>::ld(h) + v);
        unsigned nb = *reinterpret_cast<unsigned short*>(&nh);
        unsigned nw = (assumed & ~(0xffffu << shift)) | (nb << shift);
        old = atomicCAS(base, assumed, nw);
    } while (assumed != old);
}
__device__ __forceinline__ void atomic_acc(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_acc(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_acc(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }
__device__ __forceinline__ void atomic_acc(i32* p, i64 v) { atomicAdd((int*)p, (int)v); }
__device__ __forceinline__ void atomic_acc(half_t* p, float v) { atomic_add16((T*)p, v); }
__device__ __forceinline__ void atomic_acc(bf16_t* p, float v) { atomic_add16((T*)p, v); }

// out[base_out(i) + idx[i] * dstride] += alpha * src[base_src(i)] over the iteration space:
// scatter_add (space = index's shape) and index_add (space = source's shape, idx strides 0
// except along dim).
extern "C" __global__ void scatter_add_k(T* out, const T* __restrict__ src, const i64* __restrict__ idx, IdxIter it,
                                         i64 total, double alpha, int* bad) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        i64 oi, os, oo;
        iter_offsets(it, i, oi, os, oo);
        i64 k = idx[oi];
        if (k < 0 || k >= it.lim) {
            *bad = 1;
            continue;
        }
        A v = Ty<T>::ld(src[os]);
        if (alpha != 1.0) v = (A)(v * alpha);
        atomic_acc(out + oo + k * it.dstride, v);
    }
}

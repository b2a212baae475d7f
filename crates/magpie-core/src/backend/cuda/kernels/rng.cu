// Philox 4x32-10 random numbers, the same streams as the CPU Generator (ops/random.rs): block b
// of a (seed, offset) generator is philox([offset + b, 0, 0], key = seed). Uniform j takes
// the words 2j and 2j+1 (53 bits, as f64), normal pairs take one block each (Box-Muller).
// Dropout regenerates its mask from (seed, offset) in the backward instead of storing it.

typedef Ty<T>::acc A;

__device__ __forceinline__ uint4 philox(u64 ctr, u64 seed) {
    unsigned c0 = (unsigned)ctr, c1 = (unsigned)(ctr >> 32), c2 = 0, c3 = 0;
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        u64 p0 = 0xD2511F53ULL * (u64)c0;
        u64 p1 = 0xCD9E8D57ULL * (u64)c2;
        unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0;
        unsigned n1 = (unsigned)p1;
        unsigned n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
        unsigned n3 = (unsigned)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(c0, c1, c2, c3);
}
__device__ __forceinline__ double u53(unsigned a, unsigned b) {
    return (double)((((u64)a) << 21) ^ (((u64)b) >> 11)) * (1.0 / 9007199254740992.0);
}
// Uniform j of the stream starting at block `offset`.
__device__ __forceinline__ double uniform_at(u64 seed, u64 offset, i64 j) {
    uint4 r = philox(offset + (u64)(j >> 1), seed);
    return (j & 1) ? u53(r.z, r.w) : u53(r.x, r.y);
}

// out[j] = lo + (hi - lo) * u_j
extern "C" __global__ void rng_uniform(T* out, i64 n, u64 seed, u64 offset, double lo, double hi) {
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; 2 * k < n; k += (i64)gridDim.x * blockDim.x) {
        uint4 r = philox(offset + (u64)k, seed);
        out[2 * k] = Ty<T>::st((A)(lo + (hi - lo) * u53(r.x, r.y)));
        if (2 * k + 1 < n) out[2 * k + 1] = Ty<T>::st((A)(lo + (hi - lo) * u53(r.z, r.w)));
    }
}

// out[j] = mean + std * z_j, z from Box-Muller on uniform pairs (one Philox block per pair).
extern "C" __global__ void rng_normal(T* out, i64 n, u64 seed, u64 offset, double mean, double std) {
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; 2 * k < n; k += (i64)gridDim.x * blockDim.x) {
        uint4 r = philox(offset + (u64)k, seed);
        double u0 = u53(r.x, r.y), u1 = u53(r.z, r.w);
        double rad = sqrt(-2.0 * log(1.0 - u0)), th = 6.283185307179586 * u1;
        double s, c;
        sincos(th, &s, &c);
        out[2 * k] = Ty<T>::st((A)(mean + std * rad * c));
        if (2 * k + 1 < n) out[2 * k + 1] = Ty<T>::st((A)(mean + std * rad * s));
    }
}

// out[j] = u_j < p[j] (as T), p strided by `ps` (0 for a scalar p given in `pscalar`).
extern "C" __global__ void rng_bernoulli(T* out, i64 n, u64 seed, u64 offset, const double* p, double pscalar) {
    for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (i64)gridDim.x * blockDim.x) {
        double pj = p ? p[j] : pscalar;
        out[j] = Ty<T>::st((A)(uniform_at(seed, offset, j) < pj ? 1 : 0));
    }
}

// Dropout of a contiguous x: out[j] = u_j >= p ? x[j] * scale : 0. The backward calls it on
// the gradient with the same (seed, offset), which reproduces the mask.
extern "C" __global__ void rng_dropout(const T* __restrict__ x, T* __restrict__ out, i64 n, u64 seed, u64 offset, double p,
                                       double scale) {
    for (i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x; 2 * k < n; k += (i64)gridDim.x * blockDim.x) {
        uint4 r = philox(offset + (u64)k, seed);
        A s = (A)scale;
        out[2 * k] = u53(r.x, r.y) >= p ? Ty<T>::st(Ty<T>::ld(x[2 * k]) * s) : Ty<T>::st((A)0);
        if (2 * k + 1 < n) out[2 * k + 1] = u53(r.z, r.w) >= p ? Ty<T>::st(Ty<T>::ld(x[2 * k + 1]) * s) : Ty<T>::st((A)0);
    }
}

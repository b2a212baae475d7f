// cross_entropy with class-index targets over [rows, c] logits of dtype T (row r at x + r * ld,
// its classes contiguous) and i64 targets [rows]; arithmetic in Ty<T>::acc. The backward writes
// rows of `old` >= c elements (zeros after the c classes: a GEMM on the gradient can then run on
// a padded aligned row length without copying it). Nothing here synchronizes the host: a target
// outside [0, c) (other than ignore_index) gives a NaN loss for its row instead of an error.

typedef Ty<T>::acc A;

// A block per row: loss[r] = logsumexp(x[r]) - x[r, t[r]] (0 when ignored), lse[r], and
// valid[r] = 1 for rows that count (0 for ignored ones; their sum is the mean's divisor).
extern "C" __global__ void __launch_bounds__(1024) ce_fwd(const T* __restrict__ x, const i64* __restrict__ t, T* __restrict__ loss,
                                                          T* __restrict__ lse_out, T* __restrict__ valid, i64 c, i64 ld, i64 ignore_index) {
    __shared__ A sm[32];
    const i64 r = blockIdx.x;
    const T* xr = x + r * ld;
    A mx = lowest_of<A>();
    for (i64 i = threadIdx.x; i < c; i += blockDim.x) mx = OpMax<A>::comb(mx, Ty<T>::ld(xr[i]));
    mx = block_reduce<OpMax<A> >(mx, sm);
    // all -inf (or +inf) rows: shift by 0 so that the sum is exp(-inf) = 0 / inf, not NaN
    const A sh = (mx == lowest_of<A>() || mx == highest_of<A>()) ? (A)0 : mx;
    A s = 0;
    for (i64 i = threadIdx.x; i < c; i += blockDim.x) s += m_exp(Ty<T>::ld(xr[i]) - sh);
    s = block_reduce<OpSum<A> >(s, sm);
    if (threadIdx.x == 0) {
        const A lse = sh + m_log(s);
        const i64 ti = t[r];
        A l, v;
        if (ti == ignore_index) {
            l = 0;
            v = 0;
        } else if (ti < 0 || ti >= c) {
            l = m_sqrt((A)-1);  // NaN: out-of-range target
            v = 1;
        } else {
            l = lse - Ty<T>::ld(xr[ti]);
            v = 1;
        }
        loss[r] = Ty<T>::st(l);
        lse_out[r] = Ty<T>::st(lse);
        valid[r] = Ty<T>::st(v);
    }
}

// dx[r, j] = (exp(x[r, j] - lse[r]) - (j == t[r])) * g[r * gstride] / count[0] (no division when
// count is null; gstride 0 for a 0-d upstream gradient); 0 on ignored rows and for c <= j < old.
// Grid-stride over dx's rows * old elements.
extern "C" __global__ void ce_bwd(const T* __restrict__ x, const i64* __restrict__ t, const T* __restrict__ lse, const T* __restrict__ g,
                                  i64 gstride, const T* __restrict__ count, T* __restrict__ dx, i64 rows, i64 c, i64 ld, i64 old,
                                  i64 ignore_index) {
    const i64 total = rows * old;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
        const i64 r = i / old, j = i - r * old;
        const i64 ti = t[r];
        if (ti == ignore_index || j >= c) {
            dx[i] = Ty<T>::st((A)0);
            continue;
        }
        A sc = Ty<T>::ld(g[r * gstride]);
        if (count) sc = sc / Ty<T>::ld(count[0]);
        const A p = m_exp(Ty<T>::ld(x[r * ld + j]) - Ty<T>::ld(lse[r]));
        dx[i] = Ty<T>::st((p - (j == ti ? (A)1 : (A)0)) * sc);
    }
}

// One value into a running maximum m and the sum s of exponentials relative to it.
__device__ __forceinline__ void ce_online(float v, float& m, float& s, float ninf) {
    if (v > m) {
        s = (m == ninf ? 0.0f : s * m_exp(m - v)) + 1.0f;
        m = v;
    } else if (v == m) {
        if (m != ninf) s += 1.0f;
    } else {
        s += m_exp(v - m);
    }
}

// ce_fwd for 16-bit logits under autocast, whose loss PyTorch computes in float32 from the
// logits cast up (exact): the same loss reading T directly, with float outputs, in one pass over
// the row (each thread keeps a running maximum and its rescaled sum of exponentials; the block
// then rescales the threads' sums to the row's maximum). `vec`: rows start 16-byte aligned (x
// aligned, ld a multiple of 8), read 8 values per load.
extern "C" __global__ void __launch_bounds__(1024) ce_fwd_f32(const T* __restrict__ x, const i64* __restrict__ t, float* __restrict__ loss,
                                                              float* __restrict__ lse_out, float* __restrict__ valid, i64 c, i64 ld, i64 ignore_index,
                                                              int vec) {
    __shared__ float sm[32];
    const i64 r = blockIdx.x;
    const T* xr = x + r * ld;
    const float ninf = lowest_of<float>(), pinf = highest_of<float>();
    float m = ninf, s = 0;
    i64 done = 0;
    if (vec) {
        // two loads in flight a thread; each group of 8 moves the running maximum at most once
        // (one branch a group, not one a value); groups holding no finite value (all -inf, +inf
        // or NaN) take the value-by-value update, which keeps their counting rules
        const i64 groups = c / 8;
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        const i64 step = blockDim.x;
        for (i64 i = threadIdx.x; i < groups; i += 2 * step) {
            uint4 u[2];
            u[0] = xv[i];
            const bool two = i + step < groups;
            if (two) u[1] = xv[i + step];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (h == 1 && !two) break;
                const T* e = reinterpret_cast<const T*>(&u[h]);
                float v[8];
                float gm = ninf;
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    v[q] = (float)Ty<T>::ld(e[q]);
                    gm = fmaxf(gm, v[q]);
                }
                if (gm > ninf && gm < pinf) {
                    if (gm > m) {
                        s = m == ninf ? 0.0f : s * m_exp(m - gm);
                        m = gm;
                    }
#pragma unroll
                    for (int q = 0; q < 8; q++) s += m_exp(v[q] - m);
                } else {
#pragma unroll
                    for (int q = 0; q < 8; q++) ce_online(v[q], m, s, ninf);
                }
            }
        }
        done = groups * 8;
    }
    for (i64 i = done + threadIdx.x; i < c; i += blockDim.x) ce_online((float)Ty<T>::ld(xr[i]), m, s, ninf);
    const float mx = block_reduce<OpMax<float> >(m, sm);
    // this thread's sum at the row's maximum (an infinite maximum counts its infinite terms only)
    float part;
    if (m == ninf) part = 0;
    else if (mx == pinf) part = m == pinf ? s : 0.0f;
    else part = s * m_exp(m - mx);
    __syncthreads();
    const float tot = block_reduce<OpSum<float> >(part, sm);
    if (threadIdx.x == 0) {
        const float lse = mx == ninf ? ninf : (mx == pinf ? pinf : mx + m_log(tot));
        const i64 ti = t[r];
        float l, v;
        if (ti == ignore_index) {
            l = 0;
            v = 0;
        } else if (ti < 0 || ti >= c) {
            l = m_sqrt(-1.0f);
            v = 1;
        } else {
            l = lse - (float)Ty<T>::ld(xr[ti]);
            v = 1;
        }
        loss[r] = l;
        lse_out[r] = lse;
        valid[r] = v;
    }
}

// ce_bwd for 16-bit logits with the float32 lse, upstream gradient and count of ce_fwd_f32: the
// float gradient rounded once to T (what the float32 gradient cast back to the logits' dtype
// gives). A 2-d grid (rows by column chunks) so that no thread divides by c. `vec`: x and dx
// rows start 16-byte aligned and ld >= old (both multiples of 8): 8 values per load and store
// (the columns from c to old of x are read, not used).
// Eight gradients of ce_bwd_f32 from eight logits starting at column j0.
__device__ __forceinline__ uint4 ce_bwd8(uint4 u, i64 j0, i64 ti, bool ign, float sc, float l, i64 c) {
    const T* e = reinterpret_cast<const T*>(&u);
    uint4 o;
    T* oe = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int q = 0; q < 8; q++) {
        const i64 j = j0 + q;
        const float p = m_exp((float)Ty<T>::ld(e[q]) - l);
        oe[q] = Ty<T>::st((ign || j >= c) ? 0.0f : (p - (j == ti ? 1.0f : 0.0f)) * sc);
    }
    return o;
}

extern "C" __global__ void ce_bwd_f32(const T* __restrict__ x, const i64* __restrict__ t, const float* __restrict__ lse, const float* __restrict__ g,
                                      i64 gstride, const float* __restrict__ count, T* __restrict__ dx, i64 rows, i64 c, i64 ld, i64 old,
                                      i64 ignore_index, int vec) {
    if (vec) {
        // two rows an iteration, both loads issued before the exponentials
        const float cn = count ? count[0] : 1.0f;
        for (i64 r = blockIdx.y; r < rows; r += 2 * (i64)gridDim.y) {
            const i64 r2 = r + gridDim.y;
            const bool two = r2 < rows;
            const i64 ta = t[r], tb = two ? t[r2] : 0;
            float sa = g[r * gstride], sb = two ? g[r2 * gstride] : 0.0f;
            if (count) {
                sa = sa / cn;
                sb = sb / cn;
            }
            const float la = lse[r], lb = two ? lse[r2] : 0.0f;
            const uint4* xa = reinterpret_cast<const uint4*>(x + r * ld);
            const uint4* xb = reinterpret_cast<const uint4*>(x + r2 * ld);
            uint4* da = reinterpret_cast<uint4*>(dx + r * old);
            uint4* db = reinterpret_cast<uint4*>(dx + r2 * old);
            for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < old / 8; i += (i64)gridDim.x * blockDim.x) {
                const uint4 ua = xa[i];
                uint4 ub;
                if (two) ub = xb[i];
                da[i] = ce_bwd8(ua, i * 8, ta, ta == ignore_index, sa, la, c);
                if (two) db[i] = ce_bwd8(ub, i * 8, tb, tb == ignore_index, sb, lb, c);
            }
        }
        return;
    }
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        const i64 ti = t[r];
        const bool ign = ti == ignore_index;
        float sc = g[r * gstride];
        if (count) sc = sc / count[0];
        const float l = lse[r];
        const T* xr = x + r * ld;
        T* dr = dx + r * old;
        for (i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x; j < old; j += (i64)gridDim.x * blockDim.x) {
            if (j >= c) {
                dr[j] = Ty<T>::st(0.0f);
                continue;
            }
            const float p = m_exp((float)Ty<T>::ld(xr[j]) - l);
            dr[j] = Ty<T>::st(ign ? 0.0f : (p - (j == ti ? 1.0f : 0.0f)) * sc);
        }
    }
}

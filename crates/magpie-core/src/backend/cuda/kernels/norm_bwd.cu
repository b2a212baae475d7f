// layer_norm backward over contiguous [rows, n] tensors of dtype T, from the forward kernel's
// per-row mean and rstd (dtype T, [rows]); arithmetic in Ty<T>::acc (f32, f64 for double):
//   xhat = (x - mean) * rstd, gx = g * w,
//   dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat))            (ln_bwd_dx, a block per row)
//   dw = sum over rows of g * xhat, db = sum over rows of g           (ln_bwd_wb, 32 columns a block)

typedef Ty<T>::acc A;

extern "C" __global__ void __launch_bounds__(1024) ln_bwd_dx(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ mean,
                                                             const T* __restrict__ rstd, const T* __restrict__ w, T* __restrict__ dx, i64 n) {
    __shared__ A sm[32];
    const i64 r = blockIdx.x;
    const T* gr = g + r * n;
    const T* xr = x + r * n;
    T* dr = dx + r * n;
    const A mu = Ty<T>::ld(mean[r]), rs = Ty<T>::ld(rstd[r]);
    A sa = 0, sb = 0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A gx = Ty<T>::ld(gr[i]);
        if (w) gx *= Ty<T>::ld(w[i]);
        A xh = (Ty<T>::ld(xr[i]) - mu) * rs;
        sa += gx;
        sb += gx * xh;
    }
    sa = block_reduce<OpSum<A> >(sa, sm);
    sb = block_reduce<OpSum<A> >(sb, sm);
    const A a = sa / (A)n, b = sb / (A)n;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
        A gx = Ty<T>::ld(gr[i]);
        if (w) gx *= Ty<T>::ld(w[i]);
        A xh = (Ty<T>::ld(xr[i]) - mu) * rs;
        dr[i] = Ty<T>::st(rs * (gx - a - xh * b));
    }
}

// Block (32, 16): thread (tx, ty) sums column blockIdx.x * 32 + tx over rows ty, ty + 16, ...
// of its slice of rows [blockIdx.y * per, (blockIdx.y + 1) * per); the 16 partial sums meet in
// shared memory. With one slice (gridDim.y == 1) the result goes to dw / db directly; else each
// slice writes its row of the [gridDim.y, n] partial buffers pw / pb (dtype A), summed by the
// host with a reduction.
extern "C" __global__ void ln_bwd_wb(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ mean,
                                     const T* __restrict__ rstd, T* dw, T* db, A* pw, A* pb, i64 rows, i64 n, i64 per) {
    __shared__ A sw[16][33];
    __shared__ A sb[16][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const i64 j = (i64)blockIdx.x * 32 + tx;
    const i64 r0 = (i64)blockIdx.y * per;
    i64 r1 = r0 + per;
    if (r1 > rows) r1 = rows;
    A aw = 0, ab = 0;
    if (j < n) {
        for (i64 r = r0 + ty; r < r1; r += 16) {
            A gv = Ty<T>::ld(g[r * n + j]);
            A xh = (Ty<T>::ld(x[r * n + j]) - Ty<T>::ld(mean[r])) * Ty<T>::ld(rstd[r]);
            aw += gv * xh;
            ab += gv;
        }
    }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && j < n) {
        for (int k = 1; k < 16; k++) {
            aw += sw[k][tx];
            ab += sb[k][tx];
        }
        if (gridDim.y == 1) {
            if (dw) dw[j] = Ty<T>::st(aw);
            if (db) db[j] = Ty<T>::st(ab);
        } else {
            pw[(i64)blockIdx.y * n + j] = aw;
            pb[(i64)blockIdx.y * n + j] = ab;
        }
    }
}
